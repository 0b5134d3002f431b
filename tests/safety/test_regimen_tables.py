"""The curated tables behind the weight, course and combination checks: validated as read, each
row sourced, every per-kg row backed by an absolute adult row; and the combination conventions
split orders the way the labels name their strengths."""

from __future__ import annotations

import pytest

from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import parse_order
from appliance.safety import regimen, weight
from appliance.safety.combinations import by_convention
from appliance.safety.doses import DoseTableError, dose_table

PAEDIATRIC_HEADER = "\t".join(weight.COLUMNS)
COURSE_HEADER = "\t".join(regimen.COLUMNS)


def test_the_shipped_tables_read_and_cite_a_source():
    assert len(weight.per_kg_table()) >= 20 and len(regimen.course_table()) >= 5
    for rows in [*weight.per_kg_table().values(), *regimen.course_table().values()]:
        for row in rows:
            assert row.cite and ":" in row.source


def test_every_per_kg_row_has_an_absolute_adult_limit():
    adult = dose_table()
    assert sorted(i for i in weight.per_kg_table() if i not in adult) == []


@pytest.mark.parametrize("row, error", [
    ("amoxicillin\toral\t50\tx\tLabel: detail", "max_mg_per_kg_day 'x' is not a positive number"),
    ("amoxicillin\toral\t60\t50\tLabel: detail", "above max_mg_per_kg_day"),
    ("Amoxicillin\toral\t50\t100\tLabel: detail", "lower-case"),
    ("amoxicillin\tbuccal\t50\t100\tLabel: detail", "route 'buccal'"),
    ("amoxicillin\toral\t50\t100\tno citation", "citation: detail"),
    ("amoxicillin\toral\t50\t100", "4 tab-separated fields"),
])
def test_a_bad_per_kg_row_names_its_line(row, error):
    with pytest.raises(DoseTableError, match=error) as caught:
        weight.parse_table(f"# comment\n{PAEDIATRIC_HEADER}\n{row}\n")
    assert "line 3" in str(caught.value)


@pytest.mark.parametrize("row, error", [
    ("ketorolac\tany\t0\t0\thigh\tLabel: detail", "max_days above 0"),
    ("ketorolac\tany\t0\t5\tlow\tLabel: detail", "severity 'low'"),
    ("ketorolac\tany\t0\t5\thigh\tLabel", "citation: detail"),
])
def test_a_bad_course_row_names_its_line(row, error):
    with pytest.raises(DoseTableError, match=error) as caught:
        regimen.parse_table(f"{COURSE_HEADER}\n{row}\n")
    assert "line 2" in str(caught.value)


@pytest.fixture(scope="module")
def drugs():
    return DrugRecogniser()


def mg(parts) -> dict:
    return {name: order.mg_per_dose() for name, order in parts.items()}


@pytest.mark.parametrize("words, names, expected", [
    ("Augmentin 875 mg twice daily", ["amoxicillin", "clavulanate"], {"amoxicillin": 875, "clavulanate": 125}),
    ("Augmentin 500 mg three times daily", ["amoxicillin", "clavulanate"], {"amoxicillin": 500, "clavulanate": 125}),
    ("Percocet 5/325 mg 2 tablets every 6 hours", ["acetaminophen", "oxycodone"],
     {"oxycodone": 10, "acetaminophen": 650}),
    ("Norco 10/325 mg every 6 hours", ["acetaminophen", "hydrocodone"], {"hydrocodone": 10, "acetaminophen": 325}),
    ("Janumet 50/1000 mg 1 tablet twice daily", ["metformin", "sitagliptin"], {"sitagliptin": 50, "metformin": 1000}),
    # Sulfamethoxazole is always the larger part, whichever order the name lists them in.
    ("trimethoprim-sulfamethoxazole 160/800 mg twice daily", ["sulfamethoxazole", "trimethoprim"],
     {"sulfamethoxazole": 800, "trimethoprim": 160}),
    ("Bactrim DS 1 tablet twice daily", ["sulfamethoxazole", "trimethoprim"],
     {"sulfamethoxazole": 800, "trimethoprim": 160}),
])
def test_a_combination_is_split_by_its_convention(words, names, expected, drugs):
    parts = by_convention(parse_order(words, drugs), names)
    assert parts is not None and mg(parts) == pytest.approx(expected)


def test_a_suspension_and_a_dose_per_kg_name_the_amoxicillin(drugs):
    names = ["amoxicillin", "clavulanate"]
    parts = by_convention(parse_order("Augmentin 400 mg/5 mL 5 mL twice daily", drugs), names)
    assert mg(parts) == pytest.approx({"amoxicillin": 400, "clavulanate": 57})
    parts = by_convention(parse_order("Augmentin 45 mg/kg/day divided twice daily", drugs), names)
    assert parts["amoxicillin"].dose.unit == "mg/kg/day" and parts["amoxicillin"].dose.value == 45
    assert parts["clavulanate"].dose is None  # the formulation decides it: not checked, never guessed


@pytest.mark.parametrize("words, names", [
    ("Augmentin 1000 mg twice daily", ["amoxicillin", "clavulanate"]),  # no such single tablet
    ("Augmentin 2 tablets twice daily", ["amoxicillin", "clavulanate"]),  # no strength written
    ("Percocet 5/325/10 mg every 6 hours", ["acetaminophen", "oxycodone"]),  # three parts for two drugs
    ("Zosyn 4.5 g every 8 hours", ["piperacillin", "tazobactam"]),  # no convention listed
])
def test_what_no_convention_reads_is_not_split(words, names, drugs):
    assert by_convention(parse_order(words, drugs), names) is None
