"""A write's approval in the write's own audit row: kept with the write in one
transaction, not compared on a retried key, checked for shape and size, shown by ``audit show``."""

from __future__ import annotations

import json
import sqlite3

import pytest
from ehr_helpers import audit_rows, call, row_claim
from fastmcp.exceptions import ToolError

from appliance.cli import main
from ehr_db import validation
from ehr_db.errors import InvalidField
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database
from mcp_servers import contracts
from mcp_servers.contracts import parse_tool_error

RX = dict(patient_id="pat-006", medication_name="amoxicillin", dosage="500 mg", frequency="three times daily",
          notes=None)
ALLERGY_FINDING = {"kind": "allergy", "severity": "high", "text": "Penicillin allergy recorded",
                   "evidence": {"allergy": {"substance": "Penicillin"}}, "source": "chart"}
SAFETY = {"version": 1, "drug": "amoxicillin", "blocking": True, "findings": [ALLERGY_FINDING],
          "override_reason": "tolerated amoxicillin since 2020"}
OVERRIDE = {"decision": "override", "clinician": "dr.b", "safety": SAFETY}


def written(path) -> tuple[int, int, int]:
    """(amoxicillin orders, prescription audit rows, idempotency keys)."""
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("SELECT count(*) FROM medication_requests WHERE medication_name = 'amoxicillin'").fetchone()[0],
                conn.execute("SELECT count(*) FROM audit_log WHERE tool = 'prescribe_medication'").fetchone()[0],
                conn.execute("SELECT count(*) FROM write_keys").fetchone()[0])
    finally:
        conn.close()


def last_result(path) -> dict:
    return json.loads(audit_rows(path)[-1]["result"])


def test_the_approval_is_kept_in_the_writes_own_audit_row(repo, ehr_path):
    new_id = repo.prescribe_medication(**RX, author="dr.b", approval=OVERRIDE)
    row = audit_rows(ehr_path)[-1]
    assert (row["tool"], row["actor"]) == ("prescribe_medication", "dr.b")
    assert json.loads(row["result"]) == {"id": new_id, "approval": OVERRIDE,
                                         "rows": row_claim(ehr_path, "medication_requests", new_id)}
    assert "approval" not in json.loads(row["arguments"])  # the arguments are the write's own
    assert repo.verify_audit().ok
    repo.add_allergy("abc-123", "latex", "rash", None, author="dr.c",
                     approval={"decision": "approval", "clinician": "dr.c", "safety": None})
    assert last_result(ehr_path)["approval"] == {"decision": "approval", "clinician": "dr.c", "safety": None}
    repo.save_clinical_note("abc-123", "progress", "Stable.", author="dr.c")  # other clients may omit it
    assert set(last_result(ehr_path)) == {"id", "rows"}


def test_a_retry_with_the_same_key_is_one_write_whatever_approval_it_carries(repo, ehr_path):
    first = repo.prescribe_medication(**RX, author="dr.b", idempotency_key="key-appr-1", approval=OVERRIDE)
    assert repo.prescribe_medication(**RX, author="dr.b", idempotency_key="key-appr-1", approval=OVERRIDE) == first
    resent = {**OVERRIDE, "safety": {**SAFETY, "override_reason": "a different reason"}}
    assert repo.prescribe_medication(**RX, author="dr.b", idempotency_key="key-appr-1", approval=resent) == first
    assert repo.prescribe_medication(**RX, author="dr.b", idempotency_key="key-appr-1") == first
    assert written(ehr_path) == (1, 1, 1)
    assert last_result(ehr_path)["approval"] == OVERRIDE  # the first write's approval, as it ran
    assert repo.verify_audit().ok


@pytest.mark.parametrize("approval,field", [
    (["approval"], "approval"),
    ({"decision": "approval", "clinician": "dr"}, "approval"),
    ({**OVERRIDE, "extra": 1}, "approval"),
    ({**OVERRIDE, "decision": "yes"}, "approval.decision"),
    ({**OVERRIDE, "clinician": " \u200b"}, "approval.clinician"),
    ({**OVERRIDE, "clinician": "dr\x00b"}, "approval.clinician"),
    ({**OVERRIDE, "clinician": "d" * 201}, "approval.clinician"),
    ({**OVERRIDE, "clinician": 7}, "approval.clinician"),
    ({**OVERRIDE, "safety": ["high"]}, "approval.safety"),
    ({**OVERRIDE, "safety": None}, "approval.safety"),  # an override of nothing
    ({**OVERRIDE, "safety": {"findings": [{"text": "x" * validation.MAX_AUDIT_JSON_CHARS}]}}, "approval"),
    ({**OVERRIDE, "safety": {"findings": [object()]}}, "approval"),
])
def test_a_malformed_approval_is_refused_and_nothing_is_written(repo, ehr_path, approval, field):
    rows = len(audit_rows(ehr_path))
    with pytest.raises(InvalidField) as exc:
        repo.prescribe_medication(**RX, author="dr.b", idempotency_key="key-appr-2", approval=approval)
    assert exc.value.field == field
    assert written(ehr_path) == (0, 0, 0) and len(audit_rows(ehr_path)) == rows


def test_the_record_and_the_contract_share_one_bound():
    assert contracts.MAX_AUDIT_JSON_CHARS == validation.MAX_AUDIT_JSON_CHARS


def test_the_server_keeps_the_approval_and_refuses_a_malformed_one_clearly(server, ehr_path):
    result = call(server, "prescribe_medication", {**RX, "idempotency_key": "srv-appr-1", "approval": OVERRIDE})
    assert "approval" not in result  # the answer the model reads is the write's, as before
    assert last_result(ehr_path) == {"id": result["id"], "approval": OVERRIDE,
                                     "rows": row_claim(ehr_path, "medication_requests", result["id"])}
    again = call(server, "prescribe_medication", {**RX, "idempotency_key": "srv-appr-1", "approval": OVERRIDE})
    assert again["id"] == result["id"] and written(ehr_path) == (1, 1, 1)
    for bad, words in (({**OVERRIDE, "decision": "maybe"}, "check approval"),  # the published schema
                       ({**OVERRIDE, "safety": None}, "approval.safety must hold the safety report"),  # the record
                       ({**OVERRIDE, "safety": {"x": "y" * 30000}}, "approval must be at most 20000 characters")):
        with pytest.raises(ToolError) as exc:
            call(server, "add_allergy", {"patient_id": "abc-123", "substance": "latex", "reaction": "rash",
                                         "severity": None, "approval": bad})
        kind, text = parse_tool_error(str(exc.value))
        assert kind == "invalid_args" and words in text
    assert written(ehr_path) == (1, 1, 1) and EhrRepository(ehr_path).verify_audit().ok


def test_audit_show_gives_approvals_overrides_and_findings_in_a_few_words(appliance_home, capsys):
    path = appliance_home / "ehr.sqlite"
    ensure_database(path)
    repo = EhrRepository(path)
    moderate = {**ALLERGY_FINDING, "kind": "renal", "severity": "moderate", "text": "eGFR 42"}
    repo.prescribe_medication(**RX, author="dr.b", approval={**OVERRIDE, "safety": {
        **SAFETY, "findings": [ALLERGY_FINDING, moderate]}})
    repo.add_allergy("pat-006", "latex", "rash", None, author="dr.c",
                     approval={"decision": "approval", "clinician": "dr.c", "safety": None})
    repo.record_event("rejection", "pat-006", "dr.c", {
        "tool": "prescribe_medication", "clinician": "dr.c", "reason": "wrong drug",
        "safety": {**SAFETY, "override_reason": None}})
    assert main(["audit", "show", "--patient", "pat-006"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "audit trail of patient pat-006: 3 row(s) (chain verified)"
    assert [line.split()[3] for line in out[1:]] == ["prescribe_medication", "add_allergy", "rejection"]
    assert out[1].endswith('OVERRIDE by dr.b; safety: 1 high (allergy), 1 moderate; '
                           'override reason: "tolerated amoxicillin since 2020"')
    assert out[2].endswith("approved by dr.c")
    assert ('details={"clinician": "dr.c", "reason": "wrong drug", "safety": "1 high (allergy)", '
            '"tool": "prescribe_medication"}') in out[3]  # as stored: keys sorted
    assert "evidence" not in "\n".join(out)  # the chart rows behind a finding stay in --json
    assert main(["audit", "show", "--patient", "pat-006", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert json.loads(rows[0]["result"])["approval"]["safety"]["findings"][0]["evidence"]
