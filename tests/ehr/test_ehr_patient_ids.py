"""Patient IDs at the record: the 'ehr' server accepts any FHIR resource id
(common/patient_ids.py), answers "patient_not_found" for one it does not hold and "invalid_args"
for a malformed one, writes nothing in either case; the FHIR importer refuses a patient whose
id no one could name."""

from __future__ import annotations

import json

import pytest
from ehr_helpers import call, row_counts
from fastmcp.exceptions import ToolError

from ehr_db.fhir_import import import_fhir_bundle
from ehr_db.repository import EhrRepository
from mcp_servers.contracts import parse_tool_error

ALLERGY = {"substance": "penicillin", "reaction": "hives", "severity": None}
CASES = [
    # (patient ID, the chart read's error type or None, the write's)
    ("abc-123", None, None),
    (" abc-123 ", None, None),
    ("pat-78234", "patient_not_found", "patient_not_found"),
    ("pat-44201", "patient_not_found", "patient_not_found"),
    ("88123456", "patient_not_found", "patient_not_found"),
    ("7c9e6679-7425-40de-944b-e07fc1f90ae7", "patient_not_found", "patient_not_found"),
    ("pat 7", "invalid_args", "invalid_args"),
    ("pat/7", "invalid_args", "invalid_args"),
    ("x" * 65, "invalid_args", "invalid_args"),
]


@pytest.mark.parametrize("pid,read_error,write_error", CASES, ids=[c[0][:20] for c in CASES])
def test_the_record_answers_for_each_id(server, ehr_path, pid, read_error, write_error):
    before = row_counts(ehr_path)
    for tool, args, expected in (("get_patient_chart", {}, read_error), ("add_allergy", ALLERGY, write_error)):
        if expected is None:
            result = call(server, tool, {"patient_id": pid, **args})
            assert (result.get("patient") or result)["patient_id"] == "abc-123"  # the chart, or the write
            continue
        with pytest.raises(ToolError) as exc:
            call(server, tool, {"patient_id": pid, **args})
        error_type, text = parse_tool_error(str(exc.value))
        assert error_type == expected, text
        assert "patient_id" in text or "No patient with ID" in text
    written = 1 if write_error is None else 0
    after = row_counts(ehr_path)
    assert after["allergy_intolerances"] == before["allergy_intolerances"] + written
    assert after["audit_log"] == before["audit_log"] + written


def test_an_imported_patient_needs_an_id_the_agent_can_name(tmp_path):
    def patient(pid):
        return {"resource": {"resourceType": "Patient", "id": pid, "name": [{"family": "Novak", "given": ["Anna"]}]}}

    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"resourceType": "Bundle", "type": "collection",
                                  "entry": [patient("kln-5521"), patient("kln 5522"), patient("x" * 65)]}))
    db = tmp_path / "import.sqlite"
    report = import_fhir_bundle(db, bundle)
    assert report.created["patients"] == 1
    assert sorted(s.resource_id for s in report.skipped) == sorted(["kln 5522", "x" * 65])
    assert all("FHIR resource id" in s.reason for s in report.skipped)
    assert EhrRepository(db).search_patient("Novak")["matches"][0]["patient_id"] == "kln-5521"
