"""Builds the real parts from settings: the model and the tool box.

Invariant: the only place that turns a profile name into a loaded llama.cpp model, so every
entry point (CLI, smoke, TUI, bench) verifies the file the same way.
"""

from __future__ import annotations

from pathlib import Path

from appliance.config import Settings
from appliance.llm.llama import LlamaModel
from models.profiles import get_profile


def model_path(settings: Settings) -> Path:
    return get_profile(settings.model).path(settings.model_path)


def load_model(settings: Settings) -> LlamaModel:
    profile = get_profile(settings.model)
    path = profile.path(settings.model_path)
    return LlamaModel(profile, path, sha256=settings.model_sha256, n_threads=settings.n_threads)
