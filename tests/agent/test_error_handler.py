"""ERROR_HANDLER's deterministic rules as a table (docs/design.md §9.2 ask and skip rows, §15)."""

from __future__ import annotations

import pytest

from appliance.agent.nodes.error_handler import decide, run
from appliance.agent.nodes.router import Limits
from appliance.llm.fake import ScriptedModel
from tests.agent.helpers import err, state

CASES = [
    ("multiple matches -> ask_user", "multiple_patient_matches", (), 0, 0, "ask_user", "Which patient"),
    ("missing patient id -> ask_user", "missing_required_args", ("patient_id",), 0, 0, "ask_user", "patient ID"),
    ("missing fields -> ask_user", "missing_required_args", ("dosage", "frequency"), 0, 0, "ask_user", "dosage, frequency"),
    ("ambiguous drug -> ask_user", "ambiguous_drug_name", (), 0, 0, "ask_user", "ambiguous"),
    ("max retries -> skip", "timeout", (), 2, 2, "skip", "after multiple attempts"),
    ("turn retry budget -> skip", "timeout", (), 0, 4, "skip", "after multiple attempts"),
    ("drug not in database -> skip (§15)", "drug_not_in_database", (), 0, 0, "skip", "failed"),
    ("service unavailable after 1 retry -> skip", "service_unavailable", (), 1, 1, "skip", "currently unavailable"),
    ("service unavailable first time -> model", "service_unavailable", (), 0, 0, "llm_retry", None),
    ("timeout, retry_count=0 -> model (§15)", "timeout", (), 0, 0, "llm_retry", None),
    ("not found -> model", "not_found", (), 0, 0, "llm_retry", None),
    ("rejected write -> skip, never retried", "rejected_by_user", (), 0, 0, "skip", "failed"),
    ("permanent failure -> skip, never retried", "permanent_failure", (), 0, 0, "skip", "failed"),
]


@pytest.mark.parametrize("case_id,etype,missing,retries,total,action,words", CASES, ids=[c[0] for c in CASES])
def test_decide_table(case_id, etype, missing, retries, total, action, words):
    st = state("Check something", [err("check_drug_safety", etype, missing, drug_name="x")],
               quality="error_fatal", retry_count=retries, total_retries=total)
    decision = decide(st, Limits())
    assert decision.action == action
    if words:
        assert words in decision.message


def test_timeout_first_time_asks_model_and_retries_same():
    model = ScriptedModel({"ERROR_HANDLER": [{"strategy": "retry_same", "reasoning": "temporary"}]})
    st = state("Check FDA warnings for amiodarone", [err("check_drug_safety", "timeout", drug_name="amiodarone")],
               quality="error_retryable")
    done = run(st, model, Limits())
    update, nxt = done.update, done.next
    assert (nxt, update["retry_mode"], update["retry_count"]) == ("TOOL_SELECT", "retry_same", 1)
    assert model.history[0].schema == "RetryStrategy" and model.history[0].temperature == 0.0


def test_skip_continues_when_the_task_still_needs_tools():
    st = state("Check interactions of foo and aspirin and find studies on aspirin",
               [err("check_drug_interactions", "drug_not_in_database", drug_names=["foo", "aspirin"])],
               quality="error_fatal")
    done = run(st, ScriptedModel(), Limits())
    update, nxt, reason = done.update, done.next, done.reason
    assert nxt == "TOOL_SELECT" and "search_medical_literature" in reason
    assert update["skipped_tools"] == ("check_drug_interactions",)


def test_the_step_limit_holds_on_the_error_path():
    # MAX_STEPS caps tool executions even when the last one failed: no model retry after it.
    st = state("Check FDA warnings for amiodarone", [err("check_drug_safety", "timeout", drug_name="amiodarone")],
               quality="error_retryable", step_count=4)
    decision = decide(st, Limits())
    assert decision.action == "skip" and "step limit" in decision.reason
    model = ScriptedModel()
    done = run(st, model, Limits())
    nxt = done.next
    assert nxt == "SYNTHESIZE" and model.history == []


# -- writes are never retried automatically ----------------------------------------------------
WRITE_ARGS = {"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg",
              "frequency": "twice daily", "notes": None}


@pytest.mark.parametrize("etype", ["timeout", "service_unavailable", "server_error", "rate_limit", "not_found",
                                   "invalid_response"])
def test_a_failed_write_is_skipped_never_retried(etype):
    from dataclasses import replace

    unknown = etype in ("timeout", "invalid_response")
    result = replace(err("prescribe_medication", etype, **WRITE_ARGS), outcome_unknown=unknown)
    st = state("Prescribe metformin 500mg twice daily for abc-123", [result], quality="error_retryable")
    decision = decide(st, Limits())
    assert decision.action == "skip" and "never retried" in decision.reason
    model = ScriptedModel()  # no retry choice is asked for
    done = run(st, model, Limits())
    update, output = done.update, done.output
    assert output == {"action": "skip"} and model.history == [] and update["skipped_tools"] == ("prescribe_medication",)
    assert "retry_mode" not in update


def test_asking_the_clinician_still_comes_first_for_a_write():
    st = state("Prescribe metformin for abc-123", [err("prescribe_medication", "missing_required_args", ("frequency",))])
    assert decide(st, Limits()).action == "ask_user"
