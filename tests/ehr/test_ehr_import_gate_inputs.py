"""An import that changes what the safety gate reads (eGFR, creatinine, potassium, weight, QT,
INR, pregnancy, kidney disease) stops like an allergy change: nothing written, each change
shown old -> new with unit and date; ``accept_changes`` applies it, audited. Real SQLite, the
real importer, the demo record (pat-015: CKD stage 4, eGFR 24; pat-008: pregnant)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from ehr_helpers import audit_rows

from appliance.safety import chart as gate_chart
from ehr_db import gate_inputs
from ehr_db.errors import ImportNeedsAcceptance
from ehr_db.fhir_import import import_fhir_bundle
from ehr_db.repository import EhrRepository

LOINC = "http://loinc.org"
SNOMED = "http://snomed.info/sct"


def observation(rid: str, pid: str, loinc: str, value, unit: str | None, when: str, display: str = "x",
                category: str = "laboratory") -> dict:
    quantity = {"value": value, **({"unit": unit} if unit else {})}
    return {"resourceType": "Observation", "id": rid, "status": "final", "subject": {"reference": f"Patient/{pid}"},
            "category": [{"coding": [{"code": category}]}], "effectiveDateTime": when,
            "code": {"coding": [{"system": LOINC, "code": loinc, "display": display}]}, "valueQuantity": quantity}


def condition(rid: str, pid: str, snomed: str, display: str, status: str, onset: str) -> dict:
    return {"resourceType": "Condition", "id": rid, "subject": {"reference": f"Patient/{pid}"},
            "code": {"coding": [{"system": SNOMED, "code": snomed, "display": display}]},
            "clinicalStatus": {"coding": [{"code": status}]}, "onsetDateTime": onset}


EGFR_95 = observation("pat-015-obs-4", "pat-015", "33914-3", 95, "mL/min/1.73m2", "2026-10-06", "eGFR")
PREGNANCY_RESOLVED = condition("pat-008-cond-1", "pat-008", "77386006", "Pregnancy", "resolved", "2026-04-06")


def bundle(tmp_path, *resources, name: str = "b.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection",
                                "entry": [{"resource": r} for r in resources]}))
    return path


def tables(path) -> tuple:
    conn = sqlite3.connect(path)
    try:
        return tuple(conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
                     for t in ("observations", "conditions", "audit_log"))
    finally:
        conn.close()


def test_egfr_raised_in_place_stops_with_the_change_shown_and_the_gate_still_reads_24(ehr_path, repo, tmp_path):
    before = tables(ehr_path)
    with pytest.raises(ImportNeedsAcceptance, match="a lab or condition the safety gate reads") as stopped:
        import_fhir_bundle(ehr_path, bundle(tmp_path, EGFR_95))
    [change] = stopped.value.differences
    assert (change.patient_id, change.table, change.row_id, change.field) == (
        "pat-015", "observations", "pat-015-obs-4", "latest eGFR")
    assert change.describe() == ("patient pat-015: observations pat-015-obs-4: latest eGFR 24 mL/min/1.73m2 "
                                 "(2026-10-06) -> 95 mL/min/1.73m2 (2026-10-06) (a fact the safety gate reads)")
    assert tables(ehr_path) == before  # nothing written, not even an audit row
    assert gate_chart.renal_status(repo.get_patient_chart("pat-015")).egfr == 24


def test_accepted_gate_change_is_applied_and_audited_with_before_and_after(ehr_path, repo, tmp_path):
    report = import_fhir_bundle(ehr_path, bundle(tmp_path, EGFR_95), accept_changes=True)
    assert dict(report.updated) == {"observations": 1}
    assert "accepted 1 change(s)" in report.summary() and "latest eGFR 24 mL/min/1.73m2" in report.summary()
    row = audit_rows(ehr_path)[-1]
    assert row["tool"] == "fhir_import"
    [accepted] = json.loads(row["arguments"])["accepted_changes"]
    assert accepted == {"table": "observations", "row_id": "pat-015-obs-4", "patient_id": "pat-015",
                        "field": "latest eGFR", "before": "24 mL/min/1.73m2 (2026-10-06)",
                        "after": "95 mL/min/1.73m2 (2026-10-06)", "why": "a fact the safety gate reads"}
    assert gate_chart.renal_status(repo.get_patient_chart("pat-015")).egfr == 95
    assert repo.verify_audit().ok


def test_pregnancy_resolved_stops_and_the_gate_still_sees_the_pregnancy(ehr_path, repo, tmp_path):
    before = tables(ehr_path)
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(ehr_path, bundle(tmp_path, PREGNANCY_RESOLVED))
    [change] = stopped.value.differences
    assert (change.table, change.row_id, change.field) == ("conditions", "pat-008-cond-1", "pregnancy")
    assert (change.before, change.after) == ("Pregnancy (active since 2026-04-06)",
                                             "Pregnancy (resolved since 2026-04-06)")
    assert tables(ehr_path) == before
    assert gate_chart.pregnancy_problem(repo.get_patient_chart("pat-008")) is not None
    import_fhir_bundle(ehr_path, bundle(tmp_path, PREGNANCY_RESOLVED), accept_changes=True)
    assert gate_chart.pregnancy_problem(repo.get_patient_chart("pat-008")) is None
    accepted = json.loads(audit_rows(ehr_path)[-1]["arguments"])["accepted_changes"]
    assert [(c["row_id"], c["field"]) for c in accepted] == [("pat-008-cond-1", "pregnancy")]


@pytest.mark.parametrize("resource,field,old,new", [
    (observation("new-egfr", "pat-015", "33914-3", 95, "mL/min/1.73m2", "2026-11-01"), "latest eGFR",
     "24 mL/min/1.73m2 (2026-10-06)", "95 mL/min/1.73m2 (2026-11-01)"),
    (observation("new-egfr", "pat-015", "62238-1", 61, "mL/min/{1.73_m2}", "2026-11-01"), "latest eGFR",
     "24 mL/min/1.73m2 (2026-10-06)", "61 mL/min/{1.73_m2} (2026-11-01)"),
    (observation("new-crea", "pat-015", "2160-0", 88.42, "umol/L", "2026-11-01"), "latest creatinine",
     "2.6 mg/dL (2026-10-06)", "1 mg/dL (2026-11-01)"),
    (observation("new-k", "pat-015", "2823-3", 3.9, "mmol/L", "2026-11-01"), "latest potassium",
     "5.4 mmol/L (2026-10-06)", "3.9 mmol/L (2026-11-01)"),
    (observation("new-wt", "pat-015", "29463-7", 220, "lb", "2026-11-01", category="vital-signs"),
     "latest body weight", "81 kg (2026-10-06)", "99.79 kg (2026-11-01)"),
    (observation("new-qtc", "pat-015", "8636-3", 430, "ms", "2026-11-01"), "latest QTc interval",
     None, "430 ms (2026-11-01)"),
    (observation("new-inr", "pat-015", "6301-6", 1.1, None, "2026-11-01"), "latest INR", None, "1.1 (2026-11-01)"),
    ({**EGFR_95, "valueQuantity": {"value": 24, "unit": "mL/min/1.73m2"}, "status": "entered-in-error"},
     "latest eGFR", "24 mL/min/1.73m2 (2026-10-06)", "24 mL/min/1.73m2 (2026-10-06, entered-in-error)"),
], ids=["egfr-newer", "egfr-other-code", "creatinine-in-umol", "potassium", "weight-in-lb", "qtc", "inr",
        "egfr-entered-in-error"])
def test_a_change_to_the_latest_value_stops(ehr_path, tmp_path, resource, field, old, new):
    before = tables(ehr_path)
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(ehr_path, bundle(tmp_path, resource))
    assert [(d.field, d.before, d.after) for d in stopped.value.differences] == [(field, old, new)]
    assert tables(ehr_path) == before


@pytest.mark.parametrize("resource", [
    observation("old-egfr", "pat-015", "33914-3", 95, "mL/min/1.73m2", "2020-01-01"),  # older: not the latest
    observation("pat-015-obs-4", "pat-015", "33914-3", 24, "mL/min/1.73m2", "2026-10-06"),  # the same value
    observation("new-hb", "pat-015", "718-7", 11.0, "g/dL", "2026-11-01"),  # not read by the gate
    observation("pat-015-obs-12", "pat-015", "29463-7", 178.574, "lb", "2026-10-06",
                category="vital-signs"),  # 81.0 kg as charted, given in lb
    condition("pat-015-new", "pat-015", "44054006", "Diabetes mellitus type 2", "active", "2026-11-01"),
], ids=["older-value", "same-value", "other-lab", "same-weight-in-lb", "other-condition"])
def test_what_the_gate_does_not_read_imports_quietly(ehr_path, tmp_path, resource):
    report = import_fhir_bundle(ehr_path, bundle(tmp_path, resource))
    assert not report.differences


def test_a_new_patients_own_values_are_not_changes(ehr_path, tmp_path):
    patient = {"resourceType": "Patient", "id": "new-pt-1", "name": [{"family": "Roe", "given": ["Ann"]}],
               "gender": "female", "birthDate": "1990-01-01"}
    report = import_fhir_bundle(ehr_path, bundle(tmp_path, patient,
                                                 observation("n-egfr", "new-pt-1", "33914-3", 80, None, "2026-01-01"),
                                                 condition("n-preg", "new-pt-1", "77386006", "Pregnancy", "active",
                                                           "2026-01-01")))
    assert dict(report.created) == {"patients": 1, "observations": 1, "conditions": 1}
    assert not report.differences


@pytest.mark.parametrize("change,after", [
    (condition("pat-015-cond-1", "pat-015", "431857002", "Chronic kidney disease stage 4", "inactive",
               "2024-06-19"), "Chronic kidney disease stage 4 (inactive since 2024-06-19)"),
    (condition("pat-015-cond-1", "pat-015", "709044004", "Chronic kidney disease", "active", "2024-06-19"),
     "Chronic kidney disease (active since 2024-06-19)"),
    (condition("pat-015-cond-1", "pat-001", "431857002", "Chronic kidney disease stage 4", "active",
               "2024-06-19"), "moved to patient pat-001"),
], ids=["resolved", "restaged", "moved-to-another-patient"])
def test_kidney_disease_resolved_restaged_or_moved_stops(ehr_path, tmp_path, change, after):
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(ehr_path, bundle(tmp_path, change))
    found = {(d.patient_id, d.field, d.after) for d in stopped.value.differences}
    assert ("pat-015", "kidney disease", after) in found


def test_a_pregnancy_added_to_a_known_patient_stops_too(ehr_path, tmp_path):
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(ehr_path, bundle(tmp_path, condition("pat-016-preg", "pat-016", "77386006", "Pregnancy",
                                                                "active", "2026-09-01")))
    assert [(d.field, d.before, d.after) for d in stopped.value.differences] == [
        ("pregnancy", None, "Pregnancy (active since 2026-09-01)")]


def test_the_codes_match_what_the_gate_reads():
    assert gate_inputs.EGFR_LOINC == gate_chart.EGFR_LOINC
    assert gate_inputs.PREGNANCY_SNOMED == gate_chart.PREGNANCY_SNOMED
    assert gate_inputs.CKD_SNOMED == set(gate_chart.CKD_SNOMED)
    if hasattr(gate_chart, "WEIGHT_LOINC"):  # the gate's weight-based dose check
        assert gate_chart.WEIGHT_LOINC <= gate_inputs.WEIGHT_LOINC
    assert gate_inputs.lab_kind(None, "Body Weight") == gate_inputs.lab_kind(None, "weight") == "body weight"
    assert gate_inputs.lab_kind(None, "Weight-for-length percentile") is None
    for display in ("Chronic kidney disease stage 3a", "End stage renal disease", "CKD", "Pregnancy, 12 weeks"):
        chart = {"active_problems": [{"display": display, "snomed_code": None}]}
        gate_reads = gate_chart.pregnancy_problem(chart) is not None or gate_chart.renal_status(chart).ckd_row
        assert bool(gate_reads) == (gate_inputs.condition_kind(None, display) is not None)
    assert gate_inputs.condition_kind(None, "Not pregnant") is None


def test_the_chart_the_gate_reads_is_unchanged_by_a_stopped_import(ehr_path, repo, tmp_path):
    chart = repo.get_patient_chart("pat-015")
    with pytest.raises(ImportNeedsAcceptance):
        import_fhir_bundle(ehr_path, bundle(tmp_path, EGFR_95, PREGNANCY_RESOLVED))
    assert EhrRepository(ehr_path).get_patient_chart("pat-015") == chart


def test_isotretinoin_for_pat_008_stays_a_high_pregnancy_finding_until_the_change_is_accepted(ehr_path, repo,
                                                                                             tmp_path):
    from appliance.safety import StoreKnowledge, check_prescription
    from mcp_servers.knowledge.store import ensure_database as ensure_knowledge

    ensure_knowledge(tmp_path / "knowledge.sqlite")
    knowledge = StoreKnowledge(tmp_path / "knowledge.sqlite")
    try:
        def pregnancy_findings() -> set[str]:
            report = check_prescription("isotretinoin", repo.get_patient_chart("pat-008"), knowledge,
                                        dosage="40 mg", frequency="once daily")
            return {f.severity for f in report.findings if f.kind == "pregnancy"}

        with pytest.raises(ImportNeedsAcceptance):
            import_fhir_bundle(ehr_path, bundle(tmp_path, PREGNANCY_RESOLVED))
        assert "high" in pregnancy_findings()
        import_fhir_bundle(ehr_path, bundle(tmp_path, PREGNANCY_RESOLVED), accept_changes=True)
        assert "high" not in pregnancy_findings()  # what the gate reads changed only once accepted
    finally:
        knowledge.close()
