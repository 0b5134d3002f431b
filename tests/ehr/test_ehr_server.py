"""The 'ehr' MCP server in memory through a real fastmcp Client: happy paths, errors (its
input schemas are its records': tests/test_contracts.py)."""

from __future__ import annotations

import logging

import pytest
from ehr_helpers import audit_rows, call, row_counts
from fastmcp.exceptions import ToolError

from mcp_servers.contracts import parse_tool_error
from mcp_servers.ehr import server as ehr


def call_error(server, tool, args) -> tuple[str, str]:
    with pytest.raises(ToolError) as exc:
        call(server, tool, args)
    return parse_tool_error(str(exc.value))


def test_search_patient(server):
    result = call(server, "search_patient", {"name": "Garcia, Maria"})
    assert result["total_matches"] == 1 and result["matches"][0]["patient_id"] == "pat-001"
    assert call(server, "search_patient", {"name": "James Wilson"})["total_matches"] == 3


def test_search_patient_not_found(server):
    kind, text = call_error(server, "search_patient", {"name": "Nobody Atall"})
    assert kind == "not_found" and "Nobody Atall" in text


def test_get_patient_chart(server):
    chart = call(server, "get_patient_chart", {"patient_id": "pat-005"})
    assert chart["patient"]["name"] == "Robert Chen"
    assert any(m["rxnorm_code"] == "11289" for m in chart["medications"])
    inr = next(lab for lab in chart["labs"] if lab["loinc_code"] == "6301-6")
    assert (inr["value"], inr["flag"]) == (3.4, "H")


def test_get_patient_chart_unknown(server):
    kind, text = call_error(server, "get_patient_chart", {"patient_id": "zzz-999"})
    assert kind == "patient_not_found" and "zzz-999" in text


def test_prescribe_medication(server, ehr_path, monkeypatch):
    monkeypatch.setenv("APPLIANCE_USER", "dr.house")
    result = call(server, "prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin",
                                                   "dosage": "500 mg", "frequency": "BID", "notes": None})
    assert result["author"] == "dr.house" and result["status"] == "active"
    chart = call(server, "get_patient_chart", {"patient_id": "abc-123"})
    assert result["id"] in {m["id"] for m in chart["medications"]}
    assert audit_rows(ehr_path)[-1]["actor"] == "dr.house"


def test_default_author_is_the_operator_not_the_program(server, ehr_path, monkeypatch):
    import getpass

    monkeypatch.delenv("APPLIANCE_USER", raising=False)
    result = call(server, "add_allergy", {"patient_id": "pat-001", "substance": "Latex",
                                          "reaction": "Hives", "severity": None})
    assert result["author"] == getpass.getuser() != "appliance"
    assert audit_rows(ehr_path)[-1]["actor"] == getpass.getuser()


def test_save_clinical_note(server):
    result = call(server, "save_clinical_note", {"patient_id": "pat-001", "note_type": "progress",
                                                 "note_text": "Reviewed labs; no changes."})
    chart = call(server, "get_patient_chart", {"patient_id": "pat-001"})
    assert chart["recent_notes"][0]["id"] == result["id"]


BAD_WRITES = [
    ("prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin", "dosage": "lots",
                              "frequency": "BID", "notes": None}, "invalid_args", "dosage"),
    ("prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
                              "frequency": "whenever", "notes": None}, "invalid_args", "frequency"),
    ("prescribe_medication", {"patient_id": "abc-123", "medication_name": "  ", "dosage": "500 mg",
                              "frequency": "BID", "notes": None}, "invalid_args", "medication_name"),
    ("prescribe_medication", {"patient_id": "zzz-999", "medication_name": "Metformin", "dosage": "500 mg",
                              "frequency": "BID", "notes": None}, "patient_not_found", "zzz-999"),
    ("prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
                              "frequency": "BID"}, "missing_required_args", "notes"),
    ("add_allergy", {"patient_id": "abc-123", "substance": "Latex", "reaction": "Hives",
                     "severity": "extreme"}, "invalid_args", "severity"),
    ("add_allergy", {"patient_id": "abc-123", "substance": "Latex", "reaction": " ",
                     "severity": "mild"}, "invalid_args", "reaction"),
    ("add_allergy", {"patient_id": "zzz-999", "substance": "Latex", "reaction": "Hives",
                     "severity": "mild"}, "patient_not_found", "zzz-999"),
    ("save_clinical_note", {"patient_id": "abc-123", "note_type": "diary", "note_text": "x"},
     "invalid_args", "note_type"),
    ("save_clinical_note", {"patient_id": "abc-123", "note_type": "progress", "note_text": ""},
     "missing_required_args", "note_text"),
    ("save_clinical_note", {"patient_id": "abc-123", "note_type": "progress", "note_text": "x" * 1501},
     "invalid_args", "note_text"),
    ("save_clinical_note", {"patient_id": "abc-123", "note_type": "progress", "note_text": "x",
                            "extra": 1}, "invalid_args", "extra"),
]


@pytest.mark.parametrize("tool,args,kind,named", BAD_WRITES)
def test_rejected_writes(server, ehr_path, tool, args, kind, named):
    before = row_counts(ehr_path)
    got_kind, text = call_error(server, tool, args)
    assert got_kind == kind
    assert named in text
    assert row_counts(ehr_path) == before


def test_errors_and_logs_carry_no_patient_data(server, caplog):
    caplog.set_level(logging.DEBUG)
    call(server, "get_patient_chart", {"patient_id": "abc-123"})
    call(server, "search_patient", {"name": "Maria Garcia"})
    _, text = call_error(server, "prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin",
                                                          "dosage": "lots", "frequency": "BID", "notes": "PRIVATE"})
    assert "PRIVATE" not in text and "lots" not in text
    logged = caplog.text
    assert "get_patient_chart: ok" in logged and "rejected field dosage" in logged
    for secret in ("John", "Smith", "Maria", "Garcia", "Metformin", "PRIVATE", "1958-03-14"):
        assert secret not in logged


def test_missing_database_is_a_permanent_failure(tmp_path):
    ehr.configure(tmp_path / "absent.sqlite")
    try:
        kind, text = call_error(ehr.mcp, "search_patient", {"name": "x"})
    finally:
        ehr.configure(None)
    assert kind == "permanent_failure" and "appliance init" in text
    assert not (tmp_path / "absent.sqlite").exists()


def test_the_launcher_defaults_to_the_data_home(appliance_home, monkeypatch):
    from ehr_db.setup import ensure_database

    ensure_database(appliance_home / "ehr.sqlite")
    monkeypatch.setattr(ehr.mcp, "run", lambda **kwargs: None)  # parse and configure, serve nothing
    try:
        assert ehr.main([]) == 0
        assert call(ehr.mcp, "search_patient", {"name": "John Smith"})["matches"][0]["patient_id"] == "abc-123"
    finally:
        ehr.configure(None)


def test_a_server_given_no_database_is_a_permanent_failure():
    ehr.configure(None)
    kind, _ = call_error(ehr.mcp, "search_patient", {"name": "x"})
    assert kind == "permanent_failure"
