"""Builds the real parts from settings: the model, the tool box and the agent over them.

Invariants:
- The only place that turns a profile name into a loaded llama.cpp model, so every entry point
  (CLI, smoke, TUI, bench) verifies the file the same way; the models folders are resolved here
  (``common.locations``: installed models first, then the project's) and handed down to ``models``.
- No model file is loaded unless it is its profile's model (``check_model_file``): its sha256
  when one is known (pinned by the profile or the settings, or recorded by ``appliance model
  install``; hashed once per file as it is, ``models.verify`` keeps the stamp), and always its
  own GGUF metadata (architecture, parameter count, name: ``models.gguf_info``, a read of the
  header and tensor table, not the weights). A demo file under a clinical profile is refused in
  one line, whatever the paths or variables say.
- llama.cpp and the MCP client are imported only when something is built, so importing this
  module stays cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from appliance.config import Settings
from appliance.tools.base import Approver, deny_all
from common import environment
from common.locations import installed_models_dir, models_dir
from models.install import installed
from models.profiles import ModelProfile, get_profile

if TYPE_CHECKING:
    from appliance.agent.graph import Agent
    from appliance.llm.base import LanguageModel
    from appliance.tools.mcp_client import MCPToolBox


@dataclass(frozen=True)
class ModelFiles:
    """Which file a profile loads from, the sha256 it must have, and where its projector is."""

    profile: ModelProfile
    path: Path
    sha256: str | None
    folder: Path  # where the profile's vision projector is looked for
    installed: bool  # placed by `appliance model install`


def model_files(settings: Settings) -> ModelFiles:
    """The operator's ``model_path`` when set; else the profile's installed copy
    (``appliance model install``, with the sha256 recorded then); else the file in the
    project's ``models/`` (the embedded default). A sha256 in the settings wins over both."""
    profile = get_profile(settings.model)
    folder = installed_models_dir()
    entry = installed(profile.name, folder) if not settings.model_path else None
    if entry is not None:
        path, sha256 = folder / entry.file, entry.sha256
    else:
        folder = models_dir()
        path, sha256 = profile.path(folder, settings.model_path), profile.sha256
    if settings.model_sha256 is not None:
        sha256 = settings.model_sha256
    return ModelFiles(profile, path, sha256, folder, entry is not None)


def model_path(settings: Settings) -> Path:
    return model_files(settings).path


def check_model_file(files: ModelFiles) -> None:
    """``ModelFileError`` (one line) unless ``files.path`` is ``files.profile``'s model: see the
    module docstring."""
    from models.gguf_info import check_identity
    from models.verify import verify_model_file

    hint = ("`appliance model install PATH` places it, or set APPLIANCE_MODEL_PATH" if files.profile.operator_placed
            else "Run ./build.sh (or `appliance init`) to assemble the default model.")
    verify_model_file(files.path, files.sha256, hint=hint)
    check_identity(files.path, files.profile)


def load_model(settings: Settings) -> LanguageModel:
    """The model in this process, or the clinic host's when ``settings.model_server`` is set
    (its key: this terminal's ``APPLIANCE_MCP_TOKEN``; its certificate: ``APPLIANCE_MCP_CA``)."""
    if settings.model_server:
        from appliance.llm.server import ServerModel
        from appliance.tools.mcp_client import clinic_trust
        from mcp_servers.access import token_digest

        token = environment.read(environment.MCP_TOKEN)
        return ServerModel(settings.model_server, key=token_digest(token) if token else None,
                           context=clinic_trust(os.environ))
    from appliance.llm.llama import LlamaModel

    files = model_files(settings)
    check_model_file(files)
    return LlamaModel(files.profile, files.path, sha256=files.sha256, n_threads=settings.n_threads,
                      models_dir=files.folder)


def build_agent(settings: Settings, script: dict | None = None, approver: Approver = deny_all,
                clinician: str | None = None) -> tuple[Agent, MCPToolBox]:
    """The agent with real tools, and the real model unless a script replaces it; the caller
    enters the returned tool box (it owns the server processes).

    ``clinician`` (a signed-in account's name) becomes the servers' ``APPLIANCE_USER``, which
    the EHR server records as the author of every write; None keeps the operator's.
    """
    from appliance.agent.graph import Agent
    from appliance.tools.mcp_client import MCPToolBox

    env = {environment.USER: clinician} if clinician else None

    if script is not None:
        from appliance.llm.fake import ScriptedModel
        from appliance.tools.scripted import ScriptedToolBox

        model = ScriptedModel({k: v for k, v in script.items() if k not in ("tools", "drug_names")})
        tools = MCPToolBox(env)
        toolbox = ScriptedToolBox(script.get("tools", {}), tools, script.get("drug_names"))
        return Agent(model, toolbox, settings, approver), tools
    model = load_model(settings)  # before the tool client, so a bad model file leaves nothing running
    tools = MCPToolBox(env)
    return Agent(model, tools, settings, approver, accepted=acceptance_status(settings).accepted), tools


def acceptance_status(settings: Settings):
    """This site's acceptance of the model file the settings load (``appliance.acceptance.store``):
    its ``line`` ("accepted on DATE (intent 0.93, ...)", "not accepted: REASONS", "not measured")
    for the status line, the session banner and ``ask --json``, and ``accepted`` for the notice.
    A model on a clinic host is measured there, not here."""
    from appliance.acceptance.store import Status, file_sha256, status_for

    if settings.model_server:
        return Status("not measured", "not measured here: the model runs on the clinic host")
    files = model_files(settings)
    if not files.path.is_file():
        return Status("not measured", f"not measured: no model file at {files.path}")
    return status_for(file_sha256(files.path, files.sha256))
