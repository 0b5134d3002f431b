"""``appliance smoke``: docs/design.md §15 integration scenarios on the real model and real servers.

Invariants:
- Runs against a private, freshly initialised data home, so smoke writes never touch the
  clinic's record.
- "real" rows leave every decision to the model and check structure: the turn completes (every
  constrained output validated), the path is a walk of the graph, the answer is non-empty and
  names no tool. "hybrid" rows script the decisions that set up a scenario (intent and tool
  choice, a tool fault) and leave the rest to the real model; they also check the path shape
  the scenario must produce.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.agent.graph import Agent, TurnResult
from appliance.agent.nodes.input_assembly import IMAGE_UNAVAILABLE
from appliance.config import Settings
from appliance.errors import ApplianceError, ScriptError
from appliance.llm.base import LanguageModel
from appliance.tools.base import approve_all
from appliance.tools.scripted import ScriptedToolBox
from common.locations import scratch_home
from mcp_servers.contracts import TOOL_LABELS

EDGES = {
    "INPUT_ASSEMBLY": {"INTENT_CLASSIFY"},
    "INTENT_CLASSIFY": {"TOOL_SELECT", "SYNTHESIZE"},
    "TOOL_SELECT": {"TOOL_EXECUTE", "DETERMINISTIC_ROUTER"},
    "TOOL_EXECUTE": {"RESULT_CLASSIFY"},
    "RESULT_CLASSIFY": {"DETERMINISTIC_ROUTER"},
    "DETERMINISTIC_ROUTER": {"TOOL_SELECT", "ERROR_HANDLER", "SYNTHESIZE"},
    "ERROR_HANDLER": {"TOOL_SELECT", "SYNTHESIZE"},
}


def is_graph_walk(path: list[str]) -> bool:
    if path[:2] != ["INPUT_ASSEMBLY", "INTENT_CLASSIFY"] or path[-1] != "SYNTHESIZE":
        return False
    return all(b in EDGES.get(a, ()) for a, b in zip(path, path[1:]))


class HybridModel:
    """Answers scripted nodes from a queue and hands every other call to the real model."""

    def __init__(self, real: LanguageModel, script: dict[str, list]):
        from appliance.llm.fake import ScriptedModel

        self.real, self.scripted = real, ScriptedModel(script)
        self.profile_name = real.profile_name
        self.last_stats = None

    def _pick(self, node):
        return self.scripted if self.scripted.pending().get(node) else self.real

    def generate_constrained(self, node, messages, schema, **kw):
        target = self._pick(node)
        out = target.generate_constrained(node, messages, schema, **kw)
        self.last_stats = target.last_stats
        return out

    def generate_free(self, node, messages, **kw):
        target = self._pick(node)
        out = target.generate_free(node, messages, **kw)
        self.last_stats = target.last_stats
        return out


def _intent(tool):
    return {"intent": "TOOL_NEEDED", "task_summary": "Clinician request needing a lookup.", "suggested_tool": tool}


@dataclass
class Scenario:
    name: str
    query: str
    kind: str = "real"  # "real" | "hybrid"
    script: dict = field(default_factory=dict)
    tools: dict = field(default_factory=dict)
    image: bool = False
    check: Callable[[TurnResult], str | None] | None = None  # returns a failure or None


def _path_has(*nodes: str, kind: str | None = None, min_executes: int = 1):
    def check(r: TurnResult) -> str | None:
        missing = [n for n in nodes if n not in r.path]
        if missing:
            return f"path lacks {missing}"
        if r.path.count("TOOL_EXECUTE") < min_executes:
            return f"expected at least {min_executes} tool executions"
        if kind and r.kind != kind:
            return f"expected a {kind}, got {r.kind}"
        return None
    return check


IA, IC, TS, TE, RC, DR, EH, SY = ("INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
                                  "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE")
LOOP = [TS, TE, RC, DR]


def _exact_path(*path: str, kind: str = "answer", says: str = ""):
    def check(r: TurnResult) -> str | None:
        if r.path != list(path):
            return f"expected {' '.join(path)}"
        if r.kind != kind:
            return f"expected a {kind}, got {r.kind}"
        return None if says in r.response else f"the {kind} does not mention {says!r}"
    return check


SCENARIOS = [
    Scenario("greeting", "Hello, how are you?"),
    Scenario("definition", "What is hypertension?"),
    Scenario("drug safety", "Check FDA warnings for dofetilide"),
    Scenario("patient + chart", "Find patient Maria Garcia and check her chart"),
    Scenario("3-drug interactions", "Check interactions between warfarin, aspirin, and ibuprofen"),
    Scenario("prescribe (write)", "Prescribe metformin 500mg twice daily for abc-123"),
    Scenario("image, no vision", "What do you see?", image=True,
             check=lambda r: None if IMAGE_UNAVAILABLE in r.state.error_messages else "no image notice reached synthesis"),
    Scenario("timeout then retry", "Check FDA warnings for amiodarone", kind="hybrid",
             script={"INTENT_CLASSIFY": [_intent("check_drug_safety")],
                     "TOOL_SELECT": [{"tool_name": "check_drug_safety"}, {"drug_name": "amiodarone"}]},
             tools={"check_drug_safety": [{"error_type": "timeout", "message": "scripted timeout"}]},
             check=_path_has("ERROR_HANDLER", min_executes=2)),
    Scenario("3 matches -> ask user", "Search for patient James Wilson", kind="hybrid",
             script={"INTENT_CLASSIFY": [_intent("search_patient")],
                     "TOOL_SELECT": [{"tool_name": "search_patient"}, {"name": "James Wilson"}]},
             check=_exact_path(IA, IC, *LOOP, SY, kind="clarification", says="James Wilson")),
    # Hybrid rows script only the branching choices (intent, tool, arguments); the real model
    # classifies results and writes the answer, and the path must be exactly docs/design.md §2's.
    Scenario("path: direct", "What is hypertension?", kind="hybrid",
             script={"INTENT_CLASSIFY": [{"intent": "DIRECT", "task_summary": "Definition of hypertension.",
                                          "suggested_tool": None}]},
             check=_exact_path(IA, IC, SY)),
    Scenario("path: single tool", "Check FDA warnings for dofetilide", kind="hybrid",
             script={"INTENT_CLASSIFY": [_intent("check_drug_safety")],
                     "TOOL_SELECT": [{"tool_name": "check_drug_safety"}, {"drug_name": "dofetilide"}]},
             check=_exact_path(IA, IC, *LOOP, SY)),
    Scenario("path: error skip", "Check FDA warnings for zorblatin", kind="hybrid",
             script={"INTENT_CLASSIFY": [_intent("check_drug_safety")],
                     "TOOL_SELECT": [{"tool_name": "check_drug_safety"}, {"drug_name": "zorblatin"}]},
             check=_exact_path(IA, IC, *LOOP, EH, SY)),
    Scenario("path: three tools", "Find patient John Smith, check his chart, and verify metformin safety", kind="hybrid",
             script={"INTENT_CLASSIFY": [_intent("search_patient")],
                     "TOOL_SELECT": [{"tool_name": "search_patient"}, {"name": "John Smith"},
                                     {"tool_name": "get_patient_chart"}, {"patient_id": "abc-123"},
                                     {"tool_name": "check_drug_safety"}, {"drug_name": "metformin"}]},
             check=_exact_path(IA, IC, *LOOP * 3, SY)),
    Scenario("multi-tool chart", "Find patient Maria Garcia and check her chart", kind="hybrid",
             script={"INTENT_CLASSIFY": [_intent("search_patient")],
                     "TOOL_SELECT": [{"tool_name": "search_patient"}, {"name": "Maria Garcia"}]},
             check=_path_has("DETERMINISTIC_ROUTER", min_executes=2)),
]


def run_scenario(sc: Scenario, model: LanguageModel, tools, settings: Settings, image_path: str) -> dict:
    started = time.perf_counter()
    row = {"scenario": sc.name, "kind": sc.kind, "ok": False, "path": [], "problem": None}
    used_model = HybridModel(model, sc.script) if sc.kind == "hybrid" else model
    toolbox = ScriptedToolBox(sc.tools, tools) if sc.tools else tools
    agent = Agent(used_model, toolbox, settings, approve_all, drugs=None)
    try:
        r = agent.run_turn(sc.query, image_path=image_path if sc.image else None)
    except (ApplianceError, ScriptError) as exc:
        row["problem"] = f"{type(exc).__name__}: {exc}"
        row["seconds"] = round(time.perf_counter() - started, 2)
        return row
    problems = []
    if not is_graph_walk(r.path):
        problems.append("path is not a walk of the graph")
    if not r.response.strip():
        problems.append("empty answer")
    leaked = [name for name in TOOL_LABELS if name in r.response]
    if leaked:
        problems.append(f"tool names leaked: {leaked}")
    if sc.check and (failure := sc.check(r)):
        problems.append(failure)
    row.update(ok=not problems, path=r.path, problem="; ".join(problems) or None, intent=r.intent,
               tools=[c["tool"] for c in r.tool_calls], answer_chars=len(r.response),
               seconds=round(time.perf_counter() - started, 2))
    return row


def run_smoke(settings: Settings, as_json: bool = False) -> int:
    from appliance.runtime import load_model
    from appliance.setup.home import init_home
    from appliance.tools.mcp_client import MCPToolBox

    with scratch_home("appliance-smoke-") as home_path:
        home = str(home_path)
        init_home(progress=lambda _msg: None, with_model=False)
        image = home_path / "chest.png"
        image.write_bytes(bytes.fromhex("89504e470d0a1a0a"))  # PNG signature: the image is never decoded
        model = load_model(settings)
        rows = []
        with MCPToolBox(env={"APPLIANCE_HOME": home}) as tools:
            for sc in SCENARIOS:
                rows.append(run_scenario(sc, model, tools, settings, str(image)))
    failed = [r for r in rows if not r["ok"]]
    if as_json:
        print(json.dumps({"model": settings.model, "passed": len(rows) - len(failed), "failed": len(failed), "rows": rows}, indent=2))
    else:
        print(f"{'scenario':24} {'kind':7} {'ok':4} {'secs':>6}  path / problem")
        for r in rows:
            path = " ".join("".join(w[0] for w in n.split("_")) for n in r["path"])  # IA IC TS TE RC DR EH SY
            print(f"{r['scenario']:24} {r['kind']:7} {'yes' if r['ok'] else 'NO':4} {r.get('seconds', 0):6.1f}  {r['problem'] or path}")
        print(f"smoke: {len(rows) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0
