"""The agent graph (docs/design.md §2-§3) as a plain loop: nodes are functions, code picks the next.

Invariants:
- Paths: INPUT_ASSEMBLY -> INTENT_CLASSIFY -> (DIRECT) SYNTHESIZE, or -> TOOL_SELECT ->
  TOOL_EXECUTE -> RESULT_CLASSIFY -> DETERMINISTIC_ROUTER -> {TOOL_SELECT | ERROR_HANDLER |
  SYNTHESIZE}; ERROR_HANDLER -> {TOOL_SELECT | SYNTHESIZE}.
- Every node emits one ``TraceEvent`` (clinical label, duration, structured output, tool
  call, router decision and reason) to ``on_event`` as it finishes.
- Dispatch is one table, ``STEPS``, from each ``Node`` to its step: the step runs the node,
  whose ``run`` returns one ``NodeResult``; ``_finish`` merges its update, emits the node's
  trace event under the dispatched name and returns the next ``Node`` the result names, so
  the path, the trace and the dispatch cannot disagree.
- The request is read once, at INPUT_ASSEMBLY (``state.reading``); every later node, the router
  and the knowledge routing read its fields: nothing parses the clinician's words again.
- The loop is bounded: MAX_STEPS tool executions and a hard cap on node visits.
- An empty question (only spaces or invisible characters, and no image) runs no node and no
  model call: the turn returns ``EMPTY_QUESTION`` as a clarification.
- Trace events and logs carry no patient data beyond the tool arguments the clinician sees.
"""

from __future__ import annotations

import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.agent import knowledge_requests
from appliance.agent.nodes import (
    error_handler,
    input_assembly,
    intent_classify,
    result_classify,
    router,
    synthesize,
    tool_execute,
    tool_select,
)
from appliance.agent.state import (
    NODE_LABELS,
    AgentState,
    Node,
    NodeResult,
    TraceEvent,
)
from appliance.agent.write_approval import WriteApproval
from appliance.config import Settings
from appliance.errors import ApplianceError, TurnCancelled
from appliance.llm.base import LanguageModel, TokenCallback
from appliance.medication.names import DrugRecogniser
from appliance.prescreen.tool import PrescreenToolBox
from appliance.safety.chart_gate import ChartSafetyGate
from appliance.tools.base import Approver, ToolBox, deny_all
from mcp_servers.contracts import TOOL_SERVERS
from models.profiles import DEMO_NOTICE, PROFILES

MAX_NODE_VISITS = 60
EMPTY_QUESTION = "Nothing was asked: type a question or an instruction."
VERIFY_WITH_CHART = "This answer used patient data: verify it against the chart before acting on it."


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character that shows (not only spaces, zero-width or control characters)."""
    return any(not (c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Mn", "Me")) for c in text)


def used_patient_data(tool_calls: list[dict]) -> bool:
    """A call to the record that answered: its data may be in the answer."""
    return any(TOOL_SERVERS.get(c.get("tool")) == "ehr" and not c.get("error_type") for c in tool_calls)


def safety_reports(results) -> list[dict]:
    """Every prescription the turn put through the safety gate: what was checked, what was
    found, what was not checked, and whether it was written (for ``ask``, its ``--json`` and
    its exit code, and the line session). Findings keep kind, severity, text and source; their
    chart evidence stays in the audit row and the trace."""
    out = []
    for r in results:
        if r.safety is None:
            continue
        audit = r.safety
        findings = [{k: f.get(k) for k in ("severity", "kind", "text", "source")} for f in audit.get("findings") or []]
        not_checked = [f["text"] for f in findings if f["kind"] in ("unknown_drug", "not_checked")]
        out.append({
            "drug": audit.get("drug"),
            "patient_id": r.args.get("patient_id"),
            "dosage": r.args.get("dosage"),
            "frequency": r.args.get("frequency"),
            "written": r.error_type is None,
            "outcome": r.error_type or "written",
            "blocking": bool(audit.get("blocking")),
            "override_reason": audit.get("override_reason"),
            "findings": findings,
            "not_checked": not_checked,
            "checks_not_run": [c for c, ran in (audit.get("checked") or {}).items() if not ran],
        })
    return out


@dataclass
class TurnResult:
    response: str
    kind: str  # "answer" | "clarification"
    intent: str | None
    path: list[str]
    tool_calls: list[dict]
    router: list[dict]
    timings: list[dict]
    trace: list[TraceEvent]
    state: AgentState
    # Shown with every answer: the loaded model's notice (None for a clinical model), and a
    # reminder to check the chart when the answer used patient data.
    model_notice: str | None = None
    disclaimer: str | None = None

    @property
    def safety(self) -> list[dict]:
        """The turn's prescriptions as the safety gate saw them (``safety_reports``)."""
        return safety_reports(self.state.tool_results)

    def to_json(self) -> dict:
        return {
            "response": self.response,
            "kind": self.kind,
            "safety": self.safety,
            "model_notice": self.model_notice,
            "disclaimer": self.disclaimer,
            "intent": self.intent,
            "path": self.path,
            "tool_calls": self.tool_calls,
            "router": self.router,
            "timings": self.timings,
            "trace": [e.to_dict() for e in self.trace],
        }


class _CancellableModel:
    """The turn's model with its cancel event attached to every call, so a cancel stops the
    node being generated at its next token, constrained or free."""

    def __init__(self, model: LanguageModel, cancel: threading.Event):
        self._model, self._cancel = model, cancel

    def generate_constrained(self, *args, **kwargs):
        return self._model.generate_constrained(*args, cancel=self._cancel, **kwargs)

    def generate_free(self, *args, **kwargs):
        kwargs.setdefault("cancel", self._cancel)
        return self._model.generate_free(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


@dataclass
class Agent:
    model: LanguageModel
    tools: ToolBox
    settings: Settings = field(default_factory=Settings)
    approver: Approver = deny_all
    drugs: DrugRecogniser | None = None
    accepted: bool = False  # the model file passed this site's acceptance run (appliance.runtime)

    def __post_init__(self):
        if self.drugs is None:
            self.drugs = DrugRecogniser(self.tools.drug_names())
        self.limits = router.Limits(
            max_steps=self.settings.max_steps,
            max_retries=self.settings.max_retries,
            max_total_retries=self.settings.max_total_retries,
        )
        self.safety_gate = ChartSafetyGate(self.tools, self.settings.tool_deadline_seconds)
        profile = PROFILES.get(self.settings.model)
        # an unknown model is no clinical one; a clinical one not accepted keeps a notice (models.profiles)
        self.model_notice = profile.notice_for(self.accepted) if profile else DEMO_NOTICE

    def run_turn(
        self,
        query: str,
        *,
        history: list[tuple[str, str]] | None = None,
        patient_id: str | None = None,
        image_path: str | None = None,
        on_event: Callable[[TraceEvent], None] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> TurnResult:
        state = AgentState(user_query=query.strip(), selected_patient_id=patient_id, image_path=image_path)
        if not image_path and not has_visible_text(query):  # nothing asked: no node runs, no model call
            return TurnResult(response=EMPTY_QUESTION, kind="clarification", intent=None, path=[], tool_calls=[],
                              router=[], timings=[], trace=[], state=state, model_notice=self.model_notice)
        llm = _CancellableModel(self.model, cancel) if cancel is not None else self.model
        turn = _Turn(self, state, history or [], llm, on_event, on_token, cancel)
        node = Node.INPUT_ASSEMBLY
        self._walk(turn, node, cancel, on_step)
        return self._result(turn)

    def _walk(self, turn: _Turn, node: Node, cancel: threading.Event | None,
              on_step: Callable[[str], None] | None) -> None:
        for _ in range(MAX_NODE_VISITS):
            if cancel is not None and cancel.is_set() and node is not Node.SYNTHESIZE:
                raise TurnCancelled("the turn was cancelled")
            turn.node, turn.started = node, time.perf_counter()
            if on_step is not None:  # the step about to run, in words (front ends' progress line)
                on_step(NODE_LABELS[node])
            self.model.last_stats = None  # so a node that makes no model call reports none
            nxt = STEPS[node](turn)
            if nxt is None:
                break
            node = nxt
        else:
            raise ApplianceError("the agent exceeded its node-visit limit")

    def _result(self, turn: _Turn) -> TurnResult:
        state, trace = turn.state, turn.trace
        return TurnResult(
            response=state.final_response or "",
            kind=turn.kind,
            intent=state.intent,
            path=[e.node for e in trace],
            tool_calls=turn.tool_calls,
            router=[{"node": str(d.node), "next": str(d.next), "reason": d.reason} for d in state.router_decisions],
            timings=[{"node": e.node, "seconds": e.seconds} for e in trace],
            trace=trace,
            state=state,
            model_notice=self.model_notice,
            disclaimer=VERIFY_WITH_CHART if used_patient_data(turn.tool_calls) else None,
        )


class _Turn:
    """One turn in progress: the state the steps replace and what they record. ``node`` and
    ``started`` are set by the loop before each step, so a step's trace event always carries
    the name of the node that was dispatched."""

    def __init__(self, agent: Agent, state: AgentState, history: list[tuple[str, str]], llm: LanguageModel,
                 on_event: Callable[[TraceEvent], None] | None, on_token: TokenCallback | None,
                 cancel: threading.Event | None):
        self.agent, self.state, self.history, self.llm = agent, state, history, llm
        self.on_event, self.on_token, self.cancel = on_event, on_token, cancel
        self.node = Node.INPUT_ASSEMBLY
        self.started = 0.0
        self.trace: list[TraceEvent] = []
        self.tool_calls: list[dict] = []
        self.kind = "answer"  # or "clarification", from SYNTHESIZE

    def emit(self, output: dict, *, model_call: bool = True, **extra) -> None:
        stats = self.agent.model.last_stats if model_call else None
        model_stats = None
        if stats is not None:
            model_stats = {
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.completion_tokens,
                "tokens_per_second": round(stats.tokens_per_second, 1),
            }
            if stats.history_dropped or stats.results_shortened:  # fitted to the context (appliance.llm.fit)
                model_stats["history_dropped"] = stats.history_dropped
                model_stats["results_shortened"] = stats.results_shortened
        event = TraceEvent(self.node.value, NODE_LABELS[self.node], round(time.perf_counter() - self.started, 4),
                           output, model_stats=model_stats, **extra)
        self.trace.append(event)
        if self.on_event:
            self.on_event(event)


# -- the steps: each runs its node and hands its NodeResult to ``_finish`` -----------------------
def _finish(turn: _Turn, result: NodeResult) -> Node | None:
    """Merge the node's update, emit its trace event, and return the node it chose next."""
    turn.state = turn.state.merge(result.update)
    turn.emit(result.output, model_call=result.model_call, tool=result.tool, args=result.args,
              result_summary=result.result_summary, reason=result.reason,
              decision=str(result.next) if result.reason is not None else None)
    return result.next


def _assemble_input(turn: _Turn) -> Node | None:
    agent = turn.agent
    vocabulary, drug_count = knowledge_requests.local_drug_data(agent.tools)  # the typo check's names
    result = input_assembly.run(turn.state, agent.drugs, turn.history, agent.settings.history_turns,
                                model=agent.model, cancel=turn.cancel, vocabulary=vocabulary, drug_count=drug_count)
    return _finish(turn, result)


def _classify_intent(turn: _Turn) -> Node | None:
    return _finish(turn, intent_classify.run(turn.state, turn.llm))


def _select_tool(turn: _Turn) -> Node | None:
    return _finish(turn, tool_select.run(turn.state, turn.llm, turn.agent.drugs))


def _execute_tool(turn: _Turn) -> Node | None:
    agent = turn.agent
    # prescreen_for_trials runs here, with the turn's model (so a cancel reaches it): appliance.prescreen.tool
    tools = PrescreenToolBox(agent.tools, turn.llm)
    deadline = agent.settings.tool_deadline_seconds
    approve = WriteApproval(agent.approver, tools, deadline, agent.safety_gate)  # the front end's approver, then the policy
    result = tool_execute.run(turn.state, tools, approve, deadline, known_drug=lambda name: bool(agent.drugs.find(name)))
    nxt = _finish(turn, result)
    done = turn.state.last_tool_result
    turn.tool_calls.append({
        "tool": done.tool_name, "label": done.tool_label, "args": done.args,
        "error_type": done.error_type, "summary": result.result_summary, "seconds": round(done.seconds, 4),
    })
    return nxt


def _classify_result(turn: _Turn) -> Node | None:
    result = result_classify.run(turn.state, turn.llm)
    turn.tool_calls[-1]["classification"] = result.output["quality"]
    return _finish(turn, result)


def _route(turn: _Turn) -> Node | None:
    return _finish(turn, router.run(turn.state, turn.agent.limits))


def _handle_error(turn: _Turn) -> Node | None:
    return _finish(turn, error_handler.run(turn.state, turn.llm, turn.agent.limits))


def _synthesize(turn: _Turn) -> Node | None:
    result = synthesize.run(turn.state, turn.llm, on_token=turn.on_token, cancel=turn.cancel, drugs=turn.agent.drugs)
    turn.kind = result.output["kind"]
    return _finish(turn, result)  # None: the turn is over


# The one dispatch table: every Node has exactly one step (a test checks).
STEPS: dict[Node, Callable[[_Turn], Node | None]] = {
    Node.INPUT_ASSEMBLY: _assemble_input,
    Node.INTENT_CLASSIFY: _classify_intent,
    Node.TOOL_SELECT: _select_tool,
    Node.TOOL_EXECUTE: _execute_tool,
    Node.RESULT_CLASSIFY: _classify_result,
    Node.DETERMINISTIC_ROUTER: _route,
    Node.ERROR_HANDLER: _handle_error,
    Node.SYNTHESIZE: _synthesize,
}
