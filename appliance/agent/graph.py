"""The v3 graph (seed 002 §2-§3) as a plain loop: nodes are functions, code picks the next.

Invariants:
- Paths: INPUT_ASSEMBLY -> INTENT_CLASSIFY -> (DIRECT) SYNTHESIZE, or -> TOOL_SELECT ->
  TOOL_EXECUTE -> RESULT_CLASSIFY -> DETERMINISTIC_ROUTER -> {TOOL_SELECT | ERROR_HANDLER |
  SYNTHESIZE}; ERROR_HANDLER -> {TOOL_SELECT | SYNTHESIZE}.
- Every node emits one ``TraceEvent`` (clinical label, duration, structured output, tool
  call, router decision and reason) to ``on_event`` as it finishes.
- The loop is bounded: MAX_STEPS tool executions and a hard cap on node visits.
- Trace events and logs carry no patient data beyond the tool arguments the clinician sees.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

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
from appliance.agent.nodes.input_assembly import DrugDictionary
from appliance.agent.state import NODE_LABELS, AgentState, RouterDecision, TraceEvent
from appliance.config import Settings
from appliance.errors import ApplianceError, TurnCancelled
from appliance.llm.base import LanguageModel, TokenCallback
from appliance.tools.base import Approver, ToolBox, deny_all

MAX_NODE_VISITS = 60


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

    def to_json(self) -> dict:
        return {
            "response": self.response,
            "kind": self.kind,
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
    drugs: DrugDictionary | None = None

    def __post_init__(self):
        if self.drugs is None:
            self.drugs = DrugDictionary(self.tools.drug_names())
        self.limits = router.Limits(
            max_steps=self.settings.max_steps,
            max_retries=self.settings.max_retries,
            max_total_retries=self.settings.max_total_retries,
        )

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
    ) -> TurnResult:
        state = AgentState(user_query=query.strip(), selected_patient_id=patient_id, image_path=image_path)
        trace: list[TraceEvent] = []
        tool_calls: list[dict] = []
        kind = "answer"

        def emit(node: str, started: float, output: dict, *, model_call: bool = True, **extra) -> None:
            stats = self.model.last_stats if model_call else None
            model_stats = None
            if stats is not None:
                model_stats = {
                    "prompt_tokens": stats.prompt_tokens,
                    "completion_tokens": stats.completion_tokens,
                    "tokens_per_second": round(stats.tokens_per_second, 1),
                }
            event = TraceEvent(node, NODE_LABELS[node], round(time.perf_counter() - started, 4), output,
                               model_stats=model_stats, **extra)
            trace.append(event)
            if on_event:
                on_event(event)

        llm = _CancellableModel(self.model, cancel) if cancel is not None else self.model
        node = "INPUT_ASSEMBLY"
        for _ in range(MAX_NODE_VISITS):
            if cancel is not None and cancel.is_set() and node != "SYNTHESIZE":
                raise TurnCancelled("the turn was cancelled")
            started = time.perf_counter()
            self.model.last_stats = None  # so a node that makes no model call reports none
            if node == "INPUT_ASSEMBLY":
                update, output = input_assembly.run(state, self.drugs, history or [], self.settings.history_turns,
                                                    model=self.model, cancel=cancel)
                state = state.merge(update)
                emit(node, started, output, model_call=output.get("image_analysis") in ("done", "failed"))
                node = "INTENT_CLASSIFY"
            elif node == "INTENT_CLASSIFY":
                update, output = intent_classify.run(state, llm)
                state = state.merge(update)
                emit(node, started, output)
                node = "SYNTHESIZE" if state.intent == "DIRECT" else "TOOL_SELECT"
            elif node == "TOOL_SELECT":
                update, output = tool_select.run(state, llm)
                state = state.merge(update)
                emit(node, started, output, tool=output.get("tool_name"), args=output.get("args"))
                node = "DETERMINISTIC_ROUTER" if state.current_tool == "none" else "TOOL_EXECUTE"
            elif node == "TOOL_EXECUTE":
                update, result = tool_execute.run(state, self.tools, self.approver, self.settings.tool_deadline_seconds)
                state = state.merge(update)
                summary = result.error or tool_execute.summarize_result(result.result)
                tool_calls.append({
                    "tool": result.tool_name, "label": result.tool_label, "args": result.args,
                    "error_type": result.error_type, "summary": summary, "seconds": round(result.seconds, 4),
                })
                emit(node, started, {"error_type": result.error_type}, model_call=False,
                     tool=result.tool_name, args=result.args, result_summary=summary)
                node = "RESULT_CLASSIFY"
            elif node == "RESULT_CLASSIFY":
                update, output = result_classify.run(state, llm)
                state = state.merge(update)
                tool_calls[-1]["classification"] = output["quality"]
                emit(node, started, output)
                node = "DETERMINISTIC_ROUTER"
            elif node == "DETERMINISTIC_ROUTER":
                decision = router.route(state, self.limits)
                update: dict = {"router_decisions": [RouterDecision(node, decision.next, decision.reason)],
                                "strict_selection": decision.strict_selection}
                if decision.clarification:
                    update["clarification_request"] = decision.clarification
                if decision.next == "TOOL_SELECT" and not decision.strict_selection:
                    update["retry_count"] = 0
                state = state.merge(update)
                emit(node, started, {}, model_call=False, decision=decision.next, reason=decision.reason)
                node = decision.next
            elif node == "ERROR_HANDLER":
                update, output, nxt, reason = error_handler.run(state, llm, self.limits)
                update["router_decisions"] = [RouterDecision(node, nxt, reason)]
                state = state.merge(update)
                emit(node, started, output, decision=nxt, reason=reason)
                node = nxt
            elif node == "SYNTHESIZE":
                update, output = synthesize.run(state, llm, on_token=on_token, cancel=cancel)
                state = state.merge(update)
                kind = output["kind"]
                emit(node, started, output)
                break
        else:
            raise ApplianceError("the agent exceeded its node-visit limit")

        return TurnResult(
            response=state.final_response or "",
            kind=kind,
            intent=state.intent,
            path=[e.node for e in trace],
            tool_calls=tool_calls,
            router=[{"node": d.node, "next": d.next, "reason": d.reason} for d in state.router_decisions],
            timings=[{"node": e.node, "seconds": e.seconds} for e in trace],
            trace=trace,
            state=state,
        )
