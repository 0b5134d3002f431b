"""``prescreen_for_trials`` as an agent tool: the prescreen pipeline run in the agent process.

Why a tool of its own rather than the agent chaining ``find_clinical_trials`` and
``get_trial_details``: a prescreen judges every criterion of several trials against the chart,
tens of model calls under a code-bounded loop, where the agent's loop has four tool steps and
a 1,500-character view of each result. So the agent decides *that* a prescreen is wanted (the
task pattern "eligible for any trials?", docs/design.md §11) and code runs it, as it does
``analyze_medical_image``.

Invariants:
- ``PrescreenToolBox`` answers ``prescreen_for_trials`` itself and passes every other call (and
  every audit event) to the tool box it wraps, unchanged; the pipeline's own calls (chart,
  searches, details) go to that wrapped tool box, so they are the same servers, scripts and
  deadlines as the agent's.
- The agent's prescreen looks at ``AGENT_MAX_TRIALS`` trials (the CLI takes more); its result
  is compact (verdict, explanation and questions per trial) because the agent shows the model
  at most 1,500 characters of a result.
- Failures become ``ToolOutcome`` error types (an unknown patient is ``patient_not_found``); a
  cancelled turn's ``GenerationCancelled`` is raised on, as from any model call.
"""

from __future__ import annotations

from appliance.errors import GenerationCancelled, GenerationError
from appliance.llm.base import LanguageModel
from appliance.prescreen.run import (
    DISCLAIMER,
    PrescreenBadArguments,
    PrescreenError,
    PrescreenPatientNotFound,
    PrescreenResult,
    run_prescreen,
)
from appliance.tools.base import ToolBox, ToolOutcome

PRESCREEN_TOOL = "prescreen_for_trials"
AGENT_MAX_TRIALS = 3
MAX_QUESTIONS = 3


def agent_result(result: PrescreenResult) -> dict:
    """The compact result the agent's model reads (the CLI and terminal show the full one)."""
    return {
        "patient_id": result.facts.patient_id,
        "condition_searched": result.condition or ", ".join(c.args["condition"] for c in result.search.calls),
        "trials": [
            {"nct_id": t.nct_id, "title": t.title, "verdict": t.verdict.verdict.replace("_", " "),
             "explanation": t.verdict.explanation, "questions": list(t.verdict.questions[:MAX_QUESTIONS])}
            for t in result.trials
        ],
        "facts_used": len(result.facts.facts),
        "note": DISCLAIMER if result.trials else "No candidate trials were found in the local trial cache. " + DISCLAIMER,
    }


def prescreen_outcome(model: LanguageModel, tools: ToolBox, args: dict, deadline: float) -> ToolOutcome:
    try:
        # The turn's model carries its cancel event into every call (graph._CancellableModel).
        result = run_prescreen(model, tools, str(args.get("patient_id") or ""), condition=args.get("condition"),
                               max_trials=AGENT_MAX_TRIALS, deadline=deadline)
    except GenerationCancelled:
        raise
    except PrescreenPatientNotFound as exc:
        return ToolOutcome(error_type="patient_not_found", message=str(exc))
    except PrescreenBadArguments as exc:
        return ToolOutcome(error_type="invalid_args", message=str(exc))
    except PrescreenError as exc:
        return ToolOutcome(error_type="server_error", message=str(exc))
    except GenerationError as exc:
        return ToolOutcome(error_type="server_error", message=f"the prescreen's model call failed ({type(exc).__name__})")
    return ToolOutcome(result=agent_result(result))


class PrescreenToolBox:
    """``tools`` with ``prescreen_for_trials`` answered here, by ``model``."""

    def __init__(self, tools: ToolBox, model: LanguageModel):
        self._tools, self._model = tools, model

    def call(self, tool: str, args: dict, deadline: float, *, idempotency_key: str | None = None,
             approval: dict | None = None) -> ToolOutcome:
        if tool == PRESCREEN_TOOL:
            return prescreen_outcome(self._model, self._tools, args, deadline)
        if idempotency_key is None and approval is None:
            return self._tools.call(tool, args, deadline)
        return self._tools.call(tool, args, deadline, idempotency_key=idempotency_key, approval=approval)

    def record_event(self, kind: str, patient_id: str | None, details: dict, deadline: float) -> ToolOutcome:
        return self._tools.record_event(kind, patient_id, details, deadline)

    def drug_names(self) -> list[str]:
        return self._tools.drug_names()


__all__ = ["AGENT_MAX_TRIALS", "PRESCREEN_TOOL", "PrescreenToolBox", "agent_result", "prescreen_outcome"]
