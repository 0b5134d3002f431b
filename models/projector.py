"""Checks a vision projector (a profile's mmproj GGUF) before llama.cpp's multimodal library
sees it.

Invariants:
- ``verify_projector_file`` returns only for a file that passes ``verify_model_file``'s checks
  (exists, readable, GGUF magic) and whose metadata says ``general.architecture == "clip"``
  without declaring that it has no vision encoder; otherwise it raises ``ModelFileError``.
  ``mtmd_init_from_file`` may abort inside C on a GGUF that is not a projector, so nothing
  else is ever handed to it.
- The metadata is read by the appliance's one GGUF reader (``models.gguf_info.gguf_metadata``,
  bounded); a truncated or absurd header is a ``ModelFileError`` (``ModelIdentityError``).
"""

from __future__ import annotations

from pathlib import Path

from models.errors import ModelFileError
from models.gguf_info import gguf_metadata
from models.profiles import ModelProfile
from models.verify import verify_model_file

HINT = "Place the profile's mmproj GGUF (the vision projector that matches the model) in models/."


def verify_projector_file(path: Path) -> Path:
    """The path of a readable GGUF vision projector, or ``ModelFileError`` saying why not."""
    verify_model_file(path, None, hint=HINT)
    try:
        metadata = {}
        for key, value in gguf_metadata(path):
            metadata[key] = value
            if key == "general.architecture" and value != "clip":
                break
    except OSError as exc:
        raise ModelFileError(f"projector file unreadable: {path} ({exc.strerror}).") from None
    arch = metadata.get("general.architecture")
    if arch != "clip":
        found = f"architecture {arch!r}" if arch else "no architecture"
        raise ModelFileError(f"not a vision projector ({found}, expected 'clip'): {path}. {HINT}")
    if metadata.get("clip.has_vision_encoder") is False:
        raise ModelFileError(f"the projector has no vision encoder: {path}. {HINT}")
    return path


def projector_problem(profile: ModelProfile, models_dir: Path) -> str | None:
    """Why ``profile`` cannot analyse images with the files in ``models_dir``, or None when it can."""
    mmproj = profile.mmproj_path(models_dir)
    if mmproj is None:
        return f"the model profile {profile.name} has no vision projector"
    try:
        verify_projector_file(mmproj)
    except ModelFileError as exc:
        return str(exc)
    return None
