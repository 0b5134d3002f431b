"""Checks a pharmacist makes, through the gate as the agent runs it (the clinician's words read by
the order parser, then ``check_prescription`` with the dosage, frequency and notes it read), on
the real demo charts and the real local drug data: weight-based doses against the charted
weight, unit slips, age rules from the labels, opioid frequency and morphine equivalents, course
limits, interactions the data may lack a row for, and combination products by convention."""

from __future__ import annotations

import pytest
from safety_helpers import make_chart

from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import parse_order
from appliance.safety import check_prescription


@pytest.fixture(scope="module")
def drugs():
    return DrugRecogniser()


def check(words: str, chart: dict, knowledge, drugs):
    order = parse_order(words, drugs)
    return check_prescription(order.drug_text, chart, knowledge, dosage=order.dosage_text,
                              frequency=order.frequency_text, notes=order.duration_text)


def leading(report, severity: str, kind: str, *words: str):
    return [f for f in report.findings if (f.severity, f.kind) == (severity, kind)
            and all(w.lower() in f.text.lower() for w in words)]


def weighed(chart: dict, kg: float | None, unit: str = "kg") -> dict:
    vitals = [] if kg is None else [{"display": "Body weight", "loinc_code": "29463-7", "value": kg, "unit": unit,
                                     "effective_at": "2026-10-01"}]
    return {**chart, "vitals": vitals}


# -- the cases -----------------------------------------------------------------------
def test_morphine_30_mg_per_kg_every_2_hours_for_an_8_year_old_is_stopped(chart_of, knowledge, drugs):
    report = check("morphine 30 mg/kg every 2 hours", chart_of("pat-007"), knowledge, drugs)
    assert leading(report, "high", "dose", "30 mg/kg a dose", "26.4 kg", "0.5 mg/kg"), report.lines()
    assert leading(report, "high", "dose", "more often than every 3 hours"), report.lines()
    assert report.needs_override


def test_amoxicillin_250_mg_per_kg_every_8_hours_for_a_12_year_old_is_stopped(chart_of, knowledge, drugs):
    report = check("amoxicillin 250 mg/kg every 8 hours", chart_of("pat-022"), knowledge, drugs)
    found = leading(report, "high", "dose", "250 mg/kg a dose", "41.2 kg")
    assert found and "10,300 mg" in found[0].text, report.lines()
    assert "above the maximum single dose" in " ".join(found[0].evidence["other_reasons"])  # the adult limit too


def test_digoxin_a_quarter_microgram_is_a_unit_slip(chart_of, knowledge, drugs):
    report = check("digoxin 0.25 mcg once daily", chart_of("pat-011"), knowledge, drugs)
    assert leading(report, "high", "dose", "far below any usual dose", "unit slip"), report.lines()
    usual = check("digoxin 0.125 mg once daily", chart_of("pat-011"), knowledge, drugs)
    assert not [f for f in usual.findings if f.kind == "dose"], usual.lines()


def test_aspirin_for_a_12_year_old_is_high_for_reyes_syndrome(chart_of, knowledge, drugs):
    report = check("aspirin 325 mg four times daily", chart_of("pat-022"), knowledge, drugs)
    found = leading(report, "high", "age", "reye")
    assert found and "source:" in found[0].text, report.lines()


def test_oxycodone_10_mg_every_2_hours_is_above_90_mme_for_an_opioid_naive_chart(chart_of, knowledge, drugs):
    report = check("oxycodone 10 mg every 2 hours", chart_of("pat-011"), knowledge, drugs)
    assert leading(report, "high", "dose", "120 mg a day", "180 MME", "opioid-naive", "CDC"), report.lines()
    assert report.needs_override


def test_prednisone_60_mg_twice_daily_for_30_days_is_a_long_high_dose_course(chart_of, knowledge, drugs):
    report = check("prednisone 60 mg twice daily for 30 days", chart_of("pat-011"), knowledge, drugs)
    assert leading(report, "high", "dose", "120 mg a day for 30 days", "at most 7 days"), report.lines()
    short = check("prednisone 40 mg once daily for 5 days", chart_of("pat-011"), knowledge, drugs)
    assert not [f for f in short.findings if f.kind == "dose"], short.lines()


@pytest.mark.parametrize("drug", ["metronidazole 500 mg twice daily", "fluconazole 150 mg once"])
def test_an_antimicrobial_with_warfarin_names_the_interaction(drug, chart_of, knowledge, drugs):
    report = check(drug, chart_of("pat-005"), knowledge, drugs)  # on warfarin
    found = leading(report, "high", "interaction", "warfarin")
    assert found and "INR" in found[0].text, report.lines()


def test_augmentin_875_mg_twice_daily_passes_clean(chart_of, knowledge, drugs):
    report = check("Augmentin 875 mg twice daily", chart_of("pat-011"), knowledge, drugs)
    assert not report.needs_override and report.checked["dose"], report.lines()
    assert not [f for f in report.findings if f.severity in ("high", "moderate")], report.lines()


# -- weight-based doses ----------------------------------------------------------------------
def test_a_weight_based_dose_with_no_charted_weight_is_not_checked_and_needs_an_override(knowledge, drugs):
    report = check("amoxicillin 45 mg/kg/day divided every 12 hours", weighed(make_chart(6), None), knowledge, drugs)
    assert any("no weight is charted" in line for line in report.unchecked), report.lines()
    assert report.needs_override and not report.checked["dose"]


def test_a_usual_weight_based_dose_passes(knowledge, drugs):
    chart = weighed(make_chart(6), 20)
    for words in ("amoxicillin 45 mg/kg/day divided every 12 hours", "acetaminophen 15 mg/kg every 6 hours",
                  "ibuprofen 10 mg/kg every 8 hours"):
        report = check(words, chart, knowledge, drugs)
        assert report.checked["dose"] and not [f for f in report.findings if f.kind in ("dose", "not_checked")
                                               and f.severity != "info"], (words, report.lines())


def test_a_childs_plain_mg_dose_is_checked_per_kg(knowledge, drugs):
    chart = weighed(make_chart(8), 26.4)
    report = check("acetaminophen 650 mg every 6 hours", chart, knowledge, drugs)  # 24.6 mg/kg a dose
    assert leading(report, "high", "dose", "mg/kg a dose", "15 mg/kg"), report.lines()
    fine = check("acetaminophen 325 mg every 6 hours", chart, knowledge, drugs)  # 12.3 mg/kg
    assert fine.checked["dose"] and not [f for f in fine.findings if f.kind == "dose"], fine.lines()
    unweighed = check("acetaminophen 325 mg every 6 hours", weighed(make_chart(8), None), knowledge, drugs)
    assert any("no weight is charted" in line for line in unweighed.unchecked), unweighed.lines()


def test_a_child_of_40_kg_or_more_takes_adult_doses(knowledge, drugs):
    report = check("acetaminophen 1000 mg every 6 hours", weighed(make_chart(14), 45), knowledge, drugs)
    assert report.checked["dose"] and not [f for f in report.findings if f.kind == "dose"], report.lines()
    small = check("acetaminophen 1000 mg every 6 hours", weighed(make_chart(14), 30), knowledge, drugs)
    assert leading(small, "high", "dose", "mg/kg a dose"), small.lines()


def test_a_weight_in_pounds_is_converted(knowledge, drugs):
    report = check("ibuprofen 10 mg/kg every 8 hours", weighed(make_chart(8), 44, "[lb_av]"), knowledge, drugs)
    assert report.checked["dose"], report.lines()
    over = check("ibuprofen 400 mg every 8 hours", weighed(make_chart(8), 44, "lb"), knowledge, drugs)  # 20 mg/kg
    assert leading(over, "high", "dose", "mg/kg a dose"), over.lines()


def test_an_adult_dose_per_kg_is_held_to_the_absolute_adult_limit(knowledge, drugs):
    report = check("acetaminophen 15 mg/kg every 4 hours", weighed(make_chart(40), 120), knowledge, drugs)
    found = leading(report, "high", "dose", "acetaminophen")
    reasons = " ".join([found[0].text, *found[0].evidence.get("other_reasons", [])]) if found else ""
    assert "1,800 mg per dose is above the maximum single dose of 1,000 mg" in reasons, report.lines()


# -- age rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("age, drug, severity", [
    (11, "codeine", "high"), (11, "tramadol", "high"), (15, "aspirin", "high"), (1, "loperamide", "high"),
    (7, "doxycycline", "moderate"), (13, "ciprofloxacin", "moderate"),
])
def test_age_rules_from_the_labels_cite_their_source(age, drug, severity, knowledge):
    report = check_prescription(drug, make_chart(age), knowledge)
    found = [f for f in report.findings if f.kind == "age" and f.severity == severity]
    assert found and "(source:" in found[0].text, report.lines()


def test_codeine_after_tonsillectomy_under_18_is_high(knowledge):
    chart = make_chart(15)
    chart["recent_notes"] = [{"title": "ENT follow-up", "text": "Day 3 after tonsillectomy, eating soft food."}]
    report = check_prescription("codeine", chart, knowledge)
    assert [f for f in report.findings if f.kind == "age" and f.severity == "high"], report.lines()
    assert not [f for f in check_prescription("codeine", make_chart(15), knowledge).findings
                if f.kind == "age" and f.severity == "high"]


# -- opioids and courses -------------------------------------------------------------------------
def test_a_usual_opioid_order_passes_and_one_on_an_opioid_chart_is_counted_with_it(knowledge, drugs):
    usual = check("oxycodone 5 mg every 6 hours as needed", make_chart(40), knowledge, drugs)
    assert not [f for f in usual.findings if f.kind == "dose"], usual.lines()
    on_morphine = make_chart(40, meds=[{"medication_name": "Morphine ER", "rxnorm_code": None, "status": "active",
                                        "dosage": "60 mg", "frequency": "twice daily"}])
    report = check("oxycodone 5 mg every 6 hours as needed", on_morphine, knowledge, drugs)
    found = leading(report, "moderate", "dose", "150 MME a day")  # 30 mg x 1.5 + 120 mg x 1
    assert found, report.lines()


def test_an_opioid_every_3_hours_is_moderate_and_extended_release_every_4_hours_high(knowledge, drugs):
    report = check("hydrocodone 5 mg every 3 hours", make_chart(40), knowledge, drugs)
    assert leading(report, "moderate", "dose", "more often than every 4 hours"), report.lines()
    report = check("MS Contin 15 mg every 4 hours", make_chart(40), knowledge, drugs)
    assert leading(report, "high", "dose", "extended-release"), report.lines()


def test_ketorolac_beyond_5_days_is_high(knowledge, drugs):
    report = check("ketorolac 10 mg every 6 hours for 7 days", make_chart(40), knowledge, drugs)
    assert leading(report, "high", "dose", "for 7 days", "at most 5 days"), report.lines()
    five = check("ketorolac 10 mg every 6 hours for 5 days", make_chart(40), knowledge, drugs)
    assert not [f for f in five.findings if f.kind == "dose"], five.lines()


# -- combinations by convention --------------------------------------------------------------------
@pytest.mark.parametrize("words, ingredient", [
    ("Percocet 5/325 mg 3 tablets every 4 hours", "acetaminophen"),  # 975 mg a dose, 5,850 mg a day
    ("Norco 10/325 mg 2 tablets every 4 hours", "hydrocodone"),  # 120 mg a day of hydrocodone: 120 MME
    ("Janumet 50/1000 mg 2 tablets twice daily", "sitagliptin"),  # 200 mg a day of sitagliptin
    ("Bactrim DS 800/160 mg 3 tablets twice daily", "sulfamethoxazole"),
])
def test_a_combination_is_checked_per_ingredient(words, ingredient, knowledge, drugs):
    report = check(words, make_chart(40), knowledge, drugs)
    assert [f for f in report.findings if f.kind == "dose" and f.severity == "high" and ingredient in f.text], \
        report.lines()


def test_a_strength_named_by_words_stays_with_the_name(knowledge, drugs):
    """"Bactrim DS", "Tylenol #3": the words name the product's strength (and Tylenol #3's codeine)."""
    assert parse_order("Tylenol #3 1 tablet every 6 hours", drugs).drug_text == "Tylenol #3"
    report = check("Bactrim DS 1 tablet twice daily for 3 days", make_chart(40), knowledge, drugs)
    assert report.checked["dose"] and not report.needs_override, report.lines()
    child = check("Tylenol #3 1 tablet every 6 hours as needed", weighed(make_chart(8), 26.4), knowledge, drugs)
    assert leading(child, "high", "age", "under 12") and "codeine" in child.ingredients, child.lines()


def test_a_combination_strength_written_without_a_unit_is_read(knowledge, drugs):
    """"Percocet 5/325" as clinicians write it: the parser keeps "5/325" in the dosage it sends."""
    order = parse_order("Percocet 5/325 1 tablet every 6 hours as needed", drugs)
    assert order.dosage_text == "5/325 1 tablet"
    report = check("Percocet 5/325 1 tablet every 6 hours as needed", make_chart(40), knowledge, drugs)
    assert report.checked["dose"] and not report.needs_override, report.lines()
    over = check("Percocet 5/325 3 tablets every 4 hours", make_chart(40), knowledge, drugs)
    assert leading(over, "high", "dose", "acetaminophen"), over.lines()
