"""The prescriptions seen written headless with no finding a pharmacist would accept,
through the gate as the agent runs it (drug, dosage and frequency as the order parser reads
them from the clinician's words), on the real demo charts and the real local drug data: each
is refused headless, with the finding a pharmacist would give."""

from __future__ import annotations

import pytest

from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import parse_order
from appliance.safety import check_prescription
from appliance.safety.headless import HeadlessApprover

# (patient, the clinician's words, the finding that must lead: severity, kind, words in its text)
ORDERS = [
    ("pat-006", "Zosyn 4.5 g every 8 hours", ("high", "allergy", "piperacillin")),
    ("pat-012", "Excedrin 2 tablets every 6 hours", ("high", "allergy", "aspirin")),
    ("pat-017", "MS Contin 15 mg twice daily", ("high", "allergy", "morphine")),
    ("pat-010", "Azulfidine 500 mg twice daily", ("high", "allergy", "sulfasalazine")),
    ("pat-015", "Janumet 50/1000 mg twice daily", ("high", "renal", "eGFR 24")),
    ("pat-008", "Accutane 40 mg once daily", ("high", "pregnancy", "isotretinoin")),
    ("pat-003", "warfarin 50 mg once daily", ("high", "dose", "50 mg")),
    ("pat-010", "methotrexate 15 mg once daily", ("high", "dose", "once weekly")),
]


@pytest.fixture(scope="module")
def drugs():
    return DrugRecogniser()


def check(words: str, chart: dict, knowledge, drugs):
    order = parse_order(words, drugs)
    return check_prescription(order.drug_text, chart, knowledge, dosage=order.dosage_text,
                              frequency=order.frequency_text)


@pytest.mark.parametrize("patient, words, expected", ORDERS, ids=[f"{p}:{w}" for p, w, _ in ORDERS])
def test_each_is_refused_headless_with_the_pharmacists_finding(patient, words, expected, chart_of, knowledge, drugs):
    report = check(words, chart_of(patient), knowledge, drugs)
    severity, kind, said = expected
    found = [f for f in report.findings if (f.severity, f.kind) == (severity, kind) and said.lower() in f.text.lower()]
    assert found, report.lines()
    decision = HeadlessApprover()("prescribe_medication", {}, report)
    assert not decision.approved and "--override-safety" in decision.reason


def test_a_weekly_drug_given_daily_is_also_a_double_dose_of_the_charted_one(chart_of, knowledge, drugs):
    report = check("methotrexate 15 mg once daily", chart_of("pat-010"), knowledge, drugs)
    kinds = {(f.severity, f.kind) for f in report.findings}
    assert {("high", "dose"), ("high", "duplicate")} <= kinds


def test_a_usual_dose_of_the_same_drugs_raises_no_dose_finding(chart_of, knowledge, drugs):
    report = check("warfarin 5 mg once daily", chart_of("pat-003"), knowledge, drugs)
    assert report.checked["dose"] and not [f for f in report.findings if f.kind == "dose"], report.lines()
