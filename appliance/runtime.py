"""Builds the real parts from settings: the model, the tool box and the agent over them.

Invariants:
- The only place that turns a profile name into a loaded llama.cpp model, so every entry point
  (CLI, smoke, TUI, bench) verifies the file the same way; the models folder is resolved here
  (``common.locations``) and handed down to ``models``.
- llama.cpp and the MCP client are imported only when something is built, so importing this
  module stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from appliance.config import Settings
from appliance.tools.base import Approver, deny_all
from common.locations import models_dir
from models.profiles import get_profile

if TYPE_CHECKING:
    from appliance.agent.graph import Agent
    from appliance.llm.llama import LlamaModel
    from appliance.tools.mcp_client import MCPToolBox


def model_path(settings: Settings) -> Path:
    return get_profile(settings.model).path(models_dir(), settings.model_path)


def load_model(settings: Settings) -> LlamaModel:
    from appliance.llm.llama import LlamaModel

    return LlamaModel(get_profile(settings.model), model_path(settings), sha256=settings.model_sha256,
                      n_threads=settings.n_threads, models_dir=models_dir())


def build_agent(settings: Settings, script: dict | None = None, approver: Approver = deny_all,
                clinician: str | None = None) -> tuple[Agent, MCPToolBox]:
    """The agent with real tools, and the real model unless a script replaces it; the caller
    enters the returned tool box (it owns the server processes).

    ``clinician`` (a signed-in account's name) becomes the servers' ``APPLIANCE_USER``, which
    the EHR server records as the author of every write; None keeps the operator's.
    """
    from appliance.agent.graph import Agent
    from appliance.tools.mcp_client import MCPToolBox

    env = {"APPLIANCE_USER": clinician} if clinician else None

    if script is not None:
        from appliance.llm.fake import ScriptedModel
        from appliance.tools.scripted import ScriptedToolBox

        model = ScriptedModel({k: v for k, v in script.items() if k not in ("tools", "drug_names")})
        tools = MCPToolBox(env)
        toolbox = ScriptedToolBox(script.get("tools", {}), tools, script.get("drug_names"))
        return Agent(model, toolbox, settings, approver), tools
    model = load_model(settings)  # before the tool client, so a bad model file leaves nothing running
    tools = MCPToolBox(env)
    return Agent(model, tools, settings, approver), tools
