"""Whole turns on the acceptance set's ``turn`` subset: the agent as ``appliance ask`` runs it
(the model, the real MCP servers, writes denied), scored on the path and the fact guard.

- Path: the turn's intent is the case's and it called the case's tools in order (a retry of
  the same tool counts once).
- Fact guard (``appliance/agent/fact_guard.py``): of the answers the model wrote, how many
  named a drug, allergen, reaction, condition, value or patient ID no source held (withheld
  from the clinician). Code's own answers (a clarification, a chart section) are not the model's.

Invariant: the tool box is the caller's and reads only (the set's turn cases ask no writes and
the approver denies any), so a turn never changes a record; the caller gives it a scratch home.
"""

from __future__ import annotations

import time

from appliance.acceptance.cases import Case
from appliance.errors import ApplianceError, GenerationCancelled


def tools_called(tool_calls: list[dict]) -> list[str]:
    """The tools in call order, a repeat of the tool just called (a retry) counted once."""
    out: list[str] = []
    for call in tool_calls:
        if not out or out[-1] != call["tool"]:
            out.append(call["tool"])
    return out


def run_turn_case(case: Case, agent) -> dict:
    """One line of ``turns.jsonl``."""
    expected = list(case.turn.get("tools", []))
    started = time.perf_counter()
    try:
        result = agent.run_turn(case.request, patient_id=case.open_patient)
    except GenerationCancelled:
        raise
    except ApplianceError as exc:
        return {"id": case.id, "expected_tools": expected, "tools": None, "intent": None, "path": None,
                "path_correct": False, "model_answer": False, "withheld": [], "fallback": False,
                "error": f"{type(exc).__name__}: {exc}", "seconds": round(time.perf_counter() - started, 3)}
    synth = next((e.output for e in result.trace if e.node == "SYNTHESIZE"), {})
    tools = tools_called(result.tool_calls)
    return {
        "id": case.id, "expected_tools": expected, "tools": tools, "intent": result.intent, "path": result.path,
        "path_correct": tools == expected and (case.intent is None or result.intent == case.intent),
        "model_answer": "fallback_used" in synth, "withheld": synth.get("withheld", []),
        "fallback": bool(synth.get("fallback_used")), "error": None,
        "seconds": round(time.perf_counter() - started, 3),
    }
