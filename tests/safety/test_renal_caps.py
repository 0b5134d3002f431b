"""The renal check compares the order's daily dose with the renal cap of the patient's eGFR
band (``rules.RENAL_DAILY_CAPS``): issue 37's "increase metformin to 1000 bid" at eGFR 42 is
judged as 2,000 mg a day. Real knowledge store, hand-made charts."""

from __future__ import annotations

import pytest

from appliance.safety import check_prescription
from appliance.safety.classes import KNOWN_INGREDIENTS
from appliance.safety.rules import RENAL_DAILY_CAPS
from tests.safety.safety_helpers import make_chart

EGFR = "33914-3"


def _renal(knowledge, drug: str, egfr: float, dosage: str | None, frequency: str | None):
    report = check_prescription(drug, make_chart(70, labs=[(EGFR, "eGFR", egfr)]), knowledge,
                                dosage=dosage, frequency=frequency)
    found = [f for f in report.findings if f.kind == "renal"]
    assert len(found) <= 1
    return found[0] if found else None


def test_every_capped_drug_is_a_known_ingredient_with_bands_in_order():
    for ingredient, bands in RENAL_DAILY_CAPS.items():
        assert ingredient in KNOWN_INGREDIENTS, ingredient
        bounds = [b for b, _, _ in bands]
        caps = [c for _, c, _ in sorted(bands)]
        assert bounds == sorted(set(bounds)) and caps == sorted(caps)  # a lower eGFR never allows more


def test_metformin_1000_bid_at_egfr_42_is_high_for_2000_mg_a_day(knowledge):
    finding = _renal(knowledge, "metformin", 42, "1000 mg", "bid")
    assert finding.severity == "high"
    assert "2,000 mg a day" in finding.text and "1,000 mg a day" in finding.text and "eGFR 42" in finding.text
    assert finding.evidence["daily_dose"][0]["mg_per_day"] == 2000


@pytest.mark.parametrize("dosage, frequency, egfr, severity", [
    ("500 mg", "bid", 42, "moderate"),  # 1,000 mg a day: at the cap, the band's own advice only
    ("1000 mg", "daily", 42, "moderate"),
    ("850 mg", "tid", 40, "high"),  # 2,550 mg a day
    ("1000 mg", "bid", 50, "low"),  # above the capped band: monitoring only
    (None, None, 42, "moderate"),  # no dose: nothing to compare
])
def test_metformin_is_compared_with_the_cap_only_in_its_band(knowledge, dosage, frequency, egfr, severity):
    finding = _renal(knowledge, "metformin", egfr, dosage, frequency)
    assert finding.severity == severity
    assert ("mg a day ordered is above" in finding.text) == (severity == "high" and egfr < 45)


def test_below_egfr_30_the_contraindication_leads_and_the_cap_is_kept_as_a_reason(knowledge):
    finding = _renal(knowledge, "metformin", 24, "1000 mg", "bid")
    assert finding.severity == "high" and "contraindicated below eGFR 30" in finding.text
    assert any("2,000 mg a day" in r["text"] for r in finding.evidence["reasons"])


def test_other_capped_drugs(knowledge):
    assert "20 mg a day ordered is above 10 mg a day" in _renal(knowledge, "rosuvastatin", 25, "20 mg", "daily").text
    assert _renal(knowledge, "rosuvastatin", 25, "10 mg", "daily").severity != "high"
    assert "300 mg a day ordered is above 200 mg a day" in _renal(knowledge, "tramadol", 20, "50 mg", "q4h prn pain, max 300 mg/day").text
