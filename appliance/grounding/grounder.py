"""The UMLS server's ``ground_text`` hook with a model behind it: the whole grounding loop
(extraction, exact fast path, evaluation) for any MCP client.

``mcp_servers`` sits a floor below ``appliance`` and cannot import the model runtime, so the
server module only offers a hook (``umls.configure_grounder``); ``make_grounder`` builds one
from a loaded model, and the launcher ``appliance.cli.grounding_serve`` installs it.

Invariant: an expected grounding failure reaches the client as the contract's ``ToolError``
(``invalid_args``), never a traceback.
"""

from __future__ import annotations

from pathlib import Path

from fastmcp.exceptions import ToolError

from appliance.errors import ApplianceError
from appliance.grounding.config import GroundingConfig
from appliance.grounding.loop import ground, ground_entities
from appliance.grounding.search import InProcessSearch
from appliance.llm.base import LanguageModel
from mcp_servers.contracts import tool_error_message
from mcp_servers.umls import server as umls


def make_grounder(model: LanguageModel, db_path: Path | str, config: GroundingConfig | None = None) -> umls.Grounder:
    """The ``ground_text`` hook: the full loop on ``model`` with an in-process search of
    ``db_path``; expected failures become the contract's ``ToolError``."""
    search = InProcessSearch(db_path)

    def grounder(text: str, entities: list[dict] | None) -> dict:
        try:
            if entities is None:
                return ground(text, model, search, config).to_json()
            return ground_entities(text, entities, model, search, config).to_json()
        except ApplianceError as exc:
            raise ToolError(tool_error_message("invalid_args", str(exc))) from None

    return grounder
