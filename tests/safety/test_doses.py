"""The safety gate's dose checks (appliance/safety/doses.py) and the curated dose table, on
orders built by hand (never through the parser), so these tests pin the rules alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import Amount, Order
from appliance.safety.chart import ChartMedication
from appliance.safety.classes import KNOWN_INGREDIENTS, fold, ingredients_in
from appliance.safety.doses import (
    COLUMNS,
    ROUTES,
    DoseTableError,
    dose_findings,
    dose_table,
    limit_for,
    parse_table,
)

DEMO = Path(__file__).resolve().parents[2] / "ehr_db" / "demo" / "patients.json"
WEEK = 1 / 7


def amount(text: str | None, parts: tuple[float, ...] = ()) -> Amount | None:
    """ "50 mg" -> Amount; "5/325 mg" -> a combination strength with its parts."""
    if text is None:
        return None
    number, unit = text.rsplit(" ", 1)
    values = parts or (float(number),)
    return Amount(text, max(values), None, "tablet" if unit.startswith("tablet") else unit, parts)


def order(drug: str, dose: str | None, frequency: str | None = None, per_day: float | None = None, *,
          strength: Amount | None = None, route: str | None = None, as_needed: bool = False,
          one_time: bool = False, generic: str | None = None) -> Order:
    text = " ".join(x for x in (drug, strength.text if strength else None, dose, frequency) if x)
    return Order(text=text, drug_text=drug, generic=generic or drug.lower(), strength=strength, dose=amount(dose),
                 route=route, route_text=route, frequency_text=frequency, per_day=per_day, as_needed=as_needed,
                 max_per_day=None, duration_text=None, duration_days=None, one_time=one_time)


def charted(name: str, dosage: str, frequency: str, per_day: float, route: str | None = None
            ) -> tuple[ChartMedication, Order]:
    """An active chart row as ``chart.active_medications`` reads it, with its order."""
    row = {"medication_name": name, "rxnorm_code": None, "dosage": dosage, "frequency": frequency, "status": "active"}
    return ChartMedication(row, name, ingredients_in(name)), order(name, dosage, frequency, per_day, route=route)


def check(o: Order | None, chart=(), route: str | None = None):
    drug = o.drug_text if o else ""
    return dose_findings(o, ingredients_in(drug) or frozenset({fold(drug)}), list(chart), route=route)


# -- the rules -------------------------------------------------------------------------------
def test_warfarin_tenfold_dose_is_high_and_reads_as_a_10x_error():
    findings, checked = check(order("warfarin", "50 mg", "once daily", 1))
    assert checked and len(findings) == 1
    (f,) = findings
    assert (f.kind, f.severity) == ("dose", "high")
    assert f.text.startswith("warfarin 50 mg per dose is above the maximum single dose of 20 mg")
    assert "likely 10x error" in f.text and "(source: Coumadin label" in f.text
    assert f.evidence["ordered"]["mg_per_dose"] == 50 and f.evidence["limit"]["max_single_mg"] == 20
    assert "curator's ceiling" in f.evidence["limit"]["source"]
    assert f.evidence["other_reasons"] == [
        "warfarin 50 mg once daily is 50 mg a day: above the maximum of 20 mg a day (source: Coumadin label "
        "(DailyMed) 2)"]  # one finding per ingredient: the daily total is kept as evidence


def test_usual_warfarin_dose_gives_no_finding_and_counts_as_checked():
    assert check(order("warfarin", "5 mg", "once daily", 1)) == ([], True)


def test_daily_methotrexate_is_a_known_fatal_error():
    findings, checked = check(order("methotrexate", "15 mg", "once daily", 1))
    assert checked
    (f,) = findings
    assert (f.kind, f.severity) == ("dose", "high")
    assert f.text.startswith(
        "methotrexate is taken once weekly; ordered once daily (7 doses a week): a known fatal error")


@pytest.mark.parametrize("frequency, per_day", [("once weekly", WEEK), ("twice weekly", 2 * WEEK)])
def test_weekly_methotrexate_gives_no_finding(frequency, per_day):
    assert check(order("methotrexate", "15 mg", frequency, per_day)) == ([], True)


def test_a_one_time_dose_of_a_weekly_drug_is_not_a_daily_regimen():
    assert check(order("methotrexate", "15 mg", "once", 1, one_time=True)) == ([], True)


def test_weekly_drug_with_a_daily_regimen_is_checked_against_the_daily_maximum():
    assert check(order("alendronate", "10 mg", "once daily", 1)) == ([], True)
    (f,), _ = check(order("alendronate", "70 mg", "once daily", 1))
    assert f.severity == "high" and "above the maximum of 40 mg a day on a daily regimen" in f.text
    chart = [charted("Alendronate", "70 mg", "once weekly", WEEK)]  # matched by the order's generic name
    (f,), _ = check(order("alendronate", "70 mg", "once weekly", WEEK), chart)
    assert "140 mg a week: above the maximum of 70 mg a week" in f.text


def test_daily_total_counts_the_same_ingredient_already_charted():
    chart = [charted("Acetaminophen", "650 mg", "every 6 hours", 4), charted("Lisinopril", "10 mg", "once daily", 1)]
    findings, checked = check(order("acetaminophen", "1 g", "every 6 hours", 4), chart)
    assert checked
    (f,) = findings
    assert (f.kind, f.severity) == ("dose", "high")
    assert ("acetaminophen 1 g every 6 hours (4,000 mg a day), with Acetaminophen 650 mg every 6 hours already "
            "charted, 6,600 mg a day: above the maximum of 4,000 mg a day") in f.text
    assert f.evidence["total_mg"] == 6600 and len(f.evidence["charted"]) == 1
    assert check(order("acetaminophen", "1 g", "every 6 hours", 4)) == ([], True)  # 4 g alone is the maximum


def test_a_charted_product_by_a_route_the_row_does_not_cover_is_not_counted():
    gel = charted("Diclofenac gel", "4 g", "four times daily", 4, route="topical")
    assert check(order("diclofenac", "50 mg", "three times daily", 3, route="oral"), [gel]) == ([], True)


def test_mcg_doses_are_compared_in_mg_and_written_in_mcg():
    (f,), _ = check(order("levothyroxine", "750 mcg", "once daily", 1, route="oral"))
    assert f.text.startswith("levothyroxine 750 mcg per dose is above the maximum single dose of 300 mcg")
    assert check(order("levothyroxine", "75 mcg", "once daily", 1, route="oral")) == ([], True)
    # No route given and the limits differ by route: the most permissive row (IV), said so.
    (f,), _ = check(order("levothyroxine", "750 mcg", "once daily", 1))
    assert "maximum single dose of 500 mcg" in f.text and f.evidence["route_note"].startswith("route not given")


@pytest.mark.parametrize("o, why", [
    (order("warfarin", "2 tablets", "daily", 1), "'2 tablets' could not be read as mg of warfarin"),
    (order("warfarin", None, "daily", 1), "the order gives no amount of warfarin"),
    (order("acetaminophen", "15 mg/kg", "every 6 hours", 4, route="IV"), "'15 mg/kg' is a weight-based dose"),
    (order("warfarin", "5 mg", "whenever", None), "the frequency 'whenever' could not be read, so the daily total"),
    (order("acetaminophen", "500 mg", None, None, as_needed=True), "an as-needed order with no frequency"),
    (order("methotrexate", "15 mg", None, None), "the order gives no frequency, so the weekly schedule and total"),
    (order("tiotropium", "18 mcg", "once daily", 1), "tiotropium has no row in the dose table"),
    (order("diclofenac", "4 g", "four times daily", 4, route="topical"), "diclofenac has no row for the topical route"),
    (order("Augmentin", "1000 mg", "twice daily", 2, generic="amoxicillin-clavulanate"),  # no such tablet
     "amoxicillin-clavulanate is a combination (amoxicillin, clavulanate) and the order's amount is not written "
     "per ingredient"),
])
def test_what_code_cannot_compare_is_reported_never_silent(o, why):
    ingredients = ingredients_in(o.drug_text) or frozenset({fold(o.drug_text)})
    findings, checked = dose_findings(o, ingredients, [])
    assert not checked
    (f,) = findings
    assert (f.kind, f.severity) == ("not_checked", "moderate")
    assert f.text.startswith("dose not checked: ") and why in f.text


def test_a_high_finding_keeps_what_was_not_compared_and_checked_is_false():
    findings, checked = check(order("warfarin", "50 mg", "whenever", None))
    (f,) = findings
    assert f.severity == "high" and not checked
    assert any(r.startswith("dose not checked: the frequency 'whenever'") for r in f.evidence["other_reasons"])


def test_an_unreadable_charted_dose_of_the_same_ingredient_is_reported():
    chart = [charted("Acetaminophen", "1 tablet", "every 6 hours", 4)]
    findings, checked = check(order("acetaminophen", "650 mg", "every 6 hours", 4), chart)
    (f,) = findings
    assert not checked and f.kind == "not_checked"
    assert "the day's total with Acetaminophen already charted could not be read" in f.text


def test_no_order_gives_no_finding_and_not_checked():
    assert dose_findings(None, frozenset({"warfarin"}), []) == ([], False)


def test_a_combination_written_per_ingredient_is_split_and_checked_with_the_chart():
    combo = order("hydrocodone/acetaminophen", "2 tablets", "every 4 hours", 6,
                  strength=amount("5/325 mg", (5.0, 325.0)))
    assert check(combo) == ([], True)  # hydrocodone 60 mg and acetaminophen 3,900 mg a day
    findings, checked = check(combo, [charted("Acetaminophen", "500 mg", "twice daily", 2)])
    (f,) = findings
    assert f.evidence["ingredient"] == "acetaminophen" and f.severity == "high"
    assert "4,900 mg a day: above the maximum of 4,000 mg a day" in f.text


def test_a_combination_the_recogniser_named_is_never_checked_as_one_of_its_parts():
    # The caller's ingredients may miss a part the class table does not know (tazobactam): the
    # order's generic adds it, so 4.5 g is not read as 4.5 g of piperacillin.
    zosyn = order("Zosyn", "4.5 g", "every 6 hours", 4, route="IV", generic="piperacillin-tazobactam")
    (f,), checked = dose_findings(zosyn, frozenset({"piperacillin"}), [])
    assert not checked and f.kind == "not_checked" and "piperacillin, tazobactam" in f.text


def test_route_picks_the_row_and_the_callers_route_wins():
    assert limit_for("ciprofloxacin", "IV")[0].max_single_mg == 400
    assert limit_for("ciprofloxacin", "oral")[0].max_single_mg == 750
    assert limit_for("ciprofloxacin", None)[1].startswith("route not given")
    (f,), _ = check(order("ciprofloxacin", "500 mg", "every 12 hours", 2), route="IV")
    assert "above the maximum single dose of 400 mg" in f.text
    assert check(order("ciprofloxacin", "500 mg", "every 12 hours", 2, route="oral")) == ([], True)


# -- the table -------------------------------------------------------------------------------
def test_table_rows_are_sound():
    rows = [limit for limits in dose_table().values() for limit in limits]
    assert len(rows) >= 90
    for limit in rows:
        where = f"line {limit.line} ({limit.ingredient})"
        assert limit.cite and len(limit.source) > len(limit.cite) + 10, where
        numbers = [limit.max_single_mg, limit.usual_single_mg] + ([limit.max_daily_mg] if limit.max_daily_mg else [])
        assert all(n > 0 for n in numbers), where
        assert limit.usual_single_mg <= limit.max_single_mg, where
        if limit.schedule == "daily":
            assert limit.max_daily_mg is not None and limit.max_single_mg <= limit.max_daily_mg, where
        assert limit.routes == ("any",) or set(limit.routes) <= set(ROUTES), where


def test_table_ingredients_are_names_the_gate_recognises():
    recogniser = DrugRecogniser()
    for ingredient in dose_table():
        assert ingredient in KNOWN_INGREDIENTS or recogniser.generic(ingredient) == ingredient, ingredient


def test_table_covers_the_demo_charts_and_the_common_drugs():
    skipped = ("inhaler", "insulin", "carbidopa", "multivitamin", "epinephrine", "nitroglycerin")
    demo = json.loads(DEMO.read_text())
    patients = demo["patients"] if isinstance(demo, dict) else demo
    names = {m["name"] for p in patients for m in p.get("medications", [])}
    recogniser = DrugRecogniser()
    kept = [n for n in names if not any(s in n.lower() for s in skipped)]
    charted_ingredients = {i for n in kept for i in ingredients_in(n) | set(recogniser.find(n))}
    assert len(charted_ingredients) >= 30
    common = ("amoxicillin cephalexin ciprofloxacin levofloxacin doxycycline clarithromycin ibuprofen naproxen "
              "diclofenac meloxicam celecoxib tramadol oxycodone morphine hydrocodone codeine gabapentin pregabalin "
              "sitagliptin glipizide losartan valsartan simvastatin pravastatin spironolactone digoxin colchicine "
              "lithium prednisone methylprednisolone dexamethasone ondansetron metoclopramide diphenhydramine "
              "trimethoprim sulfamethoxazole nitrofurantoin fluconazole isotretinoin piperacillin tazobactam "
              "ceftriaxone methotrexate risedronate").split()
    missing = (charted_ingredients | set(common)) - set(dose_table())
    assert not missing


HEADER = "\t".join(COLUMNS)
GOOD = "warfarin\toral\t20\t20\t5\tdaily\tCoumadin label: curator's ceiling"


def test_a_well_formed_table_parses():
    table = parse_table(f"# comment\n\n{HEADER}\n{GOOD}\nmethotrexate\toral\t30\t-\t15\tweekly\tlabel: weekly\n")
    assert table["warfarin"][0].max_single_mg == 20 and table["warfarin"][0].line == 4
    assert table["methotrexate"][0].max_daily_mg is None


@pytest.mark.parametrize("row, problem", [
    ("warfarin\toral\ttwenty\t20\t5\tdaily\tlabel: x", "max_single_mg 'twenty' is not a positive number"),
    ("warfarin\toral\t20\t20\t5\tdaily", "6 tab-separated fields, expected 7"),
    ("warfarin\tby mouth\t20\t20\t5\tdaily\tlabel: x", "route 'by mouth'"),
    ("Warfarin\toral\t20\t20\t5\tdaily\tlabel: x", "ingredient 'Warfarin'"),
    ("warfarin\toral\t20\t10\t5\tdaily\tlabel: x", "max_single_mg 20 is above max_daily_mg 10"),
    ("warfarin\toral\t20\t-\t5\tdaily\tlabel: x", "max_daily_mg '-' is not a positive number"),
    ("warfarin\toral\t20\t20\t5\tmonthly\tlabel: x", "schedule 'monthly'"),
    ("warfarin\toral\t20\t20\t5\tdaily\t", "source must read 'citation: detail'"),
    ("warfarin\toral\t20\t20\t50\tdaily\tlabel: x", "usual_single_mg 50 is above max_single_mg 20"),
    (GOOD, "warfarin by oral repeats line 2"),
])
def test_a_malformed_row_is_a_clear_error_naming_its_line(row, problem):
    with pytest.raises(DoseTableError) as error:
        parse_table(f"{HEADER}\n{GOOD}\n{row}\n", "limits.tsv")
    assert str(error.value).startswith("limits.tsv line 3: ") and problem in str(error.value)


def test_a_table_without_its_header_is_an_error():
    with pytest.raises(DoseTableError, match="line 1: the header must be"):
        parse_table(f"{GOOD}\n")
