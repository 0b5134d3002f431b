"""How the terminal obtains its model and tools: the real ones from settings, or a scripted
model (``appliance tui --script FILE``, same file format as ``ask --script``).

Invariant: these factories run inside worker threads; they never touch widgets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from appliance.config import Settings
from appliance.tools.base import ToolOutcome
from appliance.tools.scripted import ScriptedToolBox

log = logging.getLogger(__name__)
SERVERS = ("ehr", "knowledge", "umls")
# Model load stages, shown in the status line.
VERIFYING, HASHING, LOADING = "verifying file", "hashing", "loading into llama.cpp"
# Called by a model loader with a stage and, while hashing, the fraction done (else None).
LoadProgress = Callable[[str, float | None], None]
ModelLoader = Callable[[Settings, LoadProgress], object]
# Makes the tool box: called with the signed-in clinician's account name, which the servers
# record as the author of writes, or with no argument when there are no accounts (the operator).
ToolsFactory = Callable[..., object]


def real_model_loader(settings: Settings, progress: LoadProgress):
    """Verify the model file with hashing progress, then load it (``appliance.runtime``).

    The load verifies again, the same way as every other entry point; the sha256 done here
    is remembered beside the file, so that second check does not hash again. A file that
    fails here is left to the load, which raises the error with its guidance for the profile.
    """
    from appliance.errors import ModelFileError
    from appliance.runtime import load_model, model_files
    from models.verify import verify_model_file

    files = model_files(settings)
    progress(VERIFYING, None)
    try:
        verify_model_file(files.path, files.sha256,
                          progress=lambda done, total: progress(HASHING, done / total if total else 1.0))
    except ModelFileError:
        pass
    progress(LOADING, None)
    return load_model(settings)


def real_tools_factory(user: str | None = None):
    from appliance.tools.mcp_client import MCPToolBox

    return MCPToolBox({"APPLIANCE_USER": user} if user else None)


class ScriptedWithRealTools(ScriptedToolBox):
    """Scripted outcomes first, then the real servers; health and shutdown go to the real ones."""

    def __init__(self, scripted: dict, real, drug_names: list[str] | None = None):
        super().__init__(scripted, real, drug_names)
        self.real = real

    def ping(self, server: str) -> bool:
        return self.real.ping(server)

    def close(self) -> None:
        self.real.close()


def scripted_backend(script: dict) -> tuple[ModelLoader, ToolsFactory]:
    from appliance.llm.fake import ScriptedModel

    replies = {k: v for k, v in script.items() if k not in ("tools", "drug_names")}

    def loader(settings: Settings, progress: LoadProgress):
        return ScriptedModel(replies)

    def tools(user: str | None = None):
        return ScriptedWithRealTools(script.get("tools", {}), real_tools_factory(user), script.get("drug_names"))

    return loader, tools


def call_tool(tools, tool: str, args: dict, deadline: float) -> ToolOutcome:
    """A direct tool call from the terminal (patient search, chart); never raises."""
    if tools is None:
        return ToolOutcome(error_type="service_unavailable", message="the record service is still starting")
    try:
        return tools.call(tool, args, deadline)
    except Exception as exc:  # noqa: BLE001 - becomes a notice
        return ToolOutcome(error_type="server_error", message=f"the {tool} call failed ({type(exc).__name__})")


def ping_all(tools) -> dict[str, bool | None]:
    """Health of each MCP server: up, down, or unknown (a tool box without ``ping``)."""
    ping = getattr(tools, "ping", None)
    if ping is None:
        return {s: None for s in SERVERS}
    health: dict[str, bool | None] = {}
    for server in SERVERS:
        try:
            health[server] = bool(ping(server))
        except Exception:  # noqa: BLE001 - any failure means down
            health[server] = False
    return health


def close_quietly(tools) -> None:
    close = getattr(tools, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - shutdown must finish
            log.debug("closing the tools failed", exc_info=True)
