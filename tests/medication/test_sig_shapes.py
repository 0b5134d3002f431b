"""An order's sig in FHIR MedicationRequest shapes (``appliance.medication.sig``), the implied
unit of a bare dose, misspelt drug names, and the chart's orders listed by status."""

from __future__ import annotations

import pytest

from appliance.agent.chart_answers import medication_lines
from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import parse_order
from appliance.medication.sig import (
    dispense_request,
    dosage_instruction,
    sig_record,
    sig_summary,
)
from appliance.medication.spelling import suggestion


@pytest.fixture(scope="module")
def drugs() -> DrugRecogniser:
    return DrugRecogniser()


@pytest.mark.parametrize("text, repeat", [
    ("500 mg bid", {"frequency": 2, "period": 1, "periodUnit": "d"}),
    ("5 mg q4-6h", {"frequency": 1, "period": 4.0, "periodMax": 6.0, "periodUnit": "h"}),
    ("10 mg every 8 hours", {"frequency": 1, "period": 8.0, "periodUnit": "h"}),
    ("70 mg weekly", {"frequency": 1, "period": 1, "periodUnit": "wk"}),
    ("20 mg every other day", {"frequency": 1, "period": 2, "periodUnit": "d"}),
    ("40 mg qHS", {"frequency": 1, "period": 1, "periodUnit": "d", "when": ["HS"]}),
    ("20 mg qAM", {"frequency": 1, "period": 1, "periodUnit": "d", "when": ["MORN"]}),
    ("4 mg IV once", {"count": 1}),
    ("500 mg TID x 7 days", {"frequency": 3, "period": 1, "periodUnit": "d",
                             "boundsDuration": {"value": 7.0, "unit": "d", "system": "http://unitsofmeasure.org",
                                                "code": "d"}}),
])
def test_timing(text, repeat):
    assert dosage_instruction(parse_order(text, None))["timing"]["repeat"] == repeat


def test_as_needed_with_its_reason_and_maximum_and_the_dispense_request():
    order = parse_order("1-2 tabs q6h prn pain, max 8 tabs/day #40 2 refills", None)
    shape = dosage_instruction(order)
    assert shape["asNeededCodeableConcept"] == {"text": "pain"}
    assert shape["doseAndRate"] == [{"doseRange": {"low": {"value": 1.0, "unit": "tablet"},
                                                   "high": {"value": 2.0, "unit": "tablet"}}}]
    assert shape["maxDosePerPeriod"]["numerator"] == {"value": 8.0, "unit": "tablet"}
    assert dispense_request(order) == {"quantity": {"value": 40.0}, "numberOfRepeatsAllowed": 2}
    record = sig_record(order)
    assert (record["as_needed"], record["as_needed_for"], record["max_per_period"], record["quantity"],
            record["refills"]) == (True, "pain", "max 8 tabs/day", "#40", 2)
    assert sig_summary(order) == "1-2 tabs, 4 a day, as needed for pain, max 8 tabs/day, dispense #40, 2 refills"


def test_a_scheduled_order_is_not_as_needed_and_has_no_dispense_request():
    order = parse_order("500 mg bid", None)
    assert dosage_instruction(order)["asNeededBoolean"] is False and dispense_request(order) is None


@pytest.mark.parametrize("text, unit", [
    ("levothyroxine 50 daily", "mcg"), ("lantus 20 qhs", "unit"), ("heparin 5000 q8h", "unit"),
    ("metformin 500 bid", "mg"), ("augmentin 875 bid", "mg"),
])
def test_a_bare_dose_takes_the_drugs_usual_unit_and_is_marked_implied(text, unit, drugs):
    dose = parse_order(text, drugs).dose
    assert dose is not None and dose.unit == unit and dose.implied and dose.text == text.split()[1]


@pytest.mark.parametrize("text", ["metformin 3 times a day", "amoxicillin x 7 days", "warfarin for 2 weeks"])
def test_a_count_or_duration_after_the_drug_is_no_dose(text, drugs):
    assert parse_order(text, drugs).dose is None


@pytest.mark.parametrize("word, meant", [("amoxicilin", "amoxicillin"), ("metforman", "metformin"),
                                         ("lisinoprl", "lisinopril"), ("warfarn", "warfarin"),
                                         ("hello", None), ("twice", None), ("tablets", None), ("metformin", None)])
def test_a_misspelt_drug_suggests_the_drug_meant(word, meant, drugs):
    assert suggestion(word, drugs) == meant


def test_the_chart_lists_orders_by_status():
    chart = {"medications": [{"medication_name": "metformin", "dosage": "1000 mg", "frequency": "bid", "status": "active"},
                             {"medication_name": "lisinopril", "dosage": "10 mg", "frequency": "daily",
                              "status": "on-hold", "status_reason": "before the CT"}],
             "past_medications": [{"medication_name": "warfarin", "dosage": "5 mg", "frequency": "daily",
                                   "status": "stopped", "status_reason": "bleeding"},
                                  {"medication_name": "amoxicillin", "dosage": "500 mg", "frequency": "TID",
                                   "status": "completed"}]}
    assert medication_lines(chart) == [
        "Medications:", "- metformin 1000 mg bid",
        "Held:", "- lisinopril 10 mg daily (before the CT)",
        "Stopped:", "- warfarin 5 mg daily (bleeding)",
        "Completed:", "- amoxicillin 500 mg TID",
    ]
