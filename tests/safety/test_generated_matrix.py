"""The generated safety matrix: every brand and combination name of the bundled
dictionary and the overlay whose ingredients fall in an allergy class or an interaction rule,
against the demo patients with that allergy or medication: no miss, no false clear."""

from __future__ import annotations

import pytest

from appliance.safety.classes import CLASSES
from appliance.safety.generated_matrix import (
    MAX_NAMES_PER_GROUP,
    brand_names,
    expected_allergy,
    run_generated_matrix,
)
from appliance.safety.rules import CLASS_INTERACTIONS
from appliance.selftest.suite import failures, table

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def generated(data_home):
    return run_generated_matrix(data_home / "ehr.sqlite", data_home / "knowledge.sqlite", data_home / "umls.sqlite")


def test_the_generated_matrix_has_no_miss_and_no_false_clear(generated, capsys):
    with capsys.disabled():
        print(f"\ngenerated safety matrix: {generated['cases']} cases, {generated['names']} brand/combination names, "
              f"{generated['patients']} patients, {generated['groups']} rule groups, {generated['seconds']} s; "
              f"missed {generated['missed']}, false clear {generated['false_clear']}")
    assert generated["missed"] == 0 and generated["false_clear"] == 0, generated["problems"][:10]
    assert generated["problems"] == []


def test_the_generated_matrix_covers_every_rule_a_demo_patient_can_meet(generated):
    # Allergy classes with a demo patient: penicillins, sulfonamide antibiotics, NSAIDs, ACE inhibitors,
    # phenanthrene opioids, aromatic anticonvulsants (6); single-ingredient allergies with brands: 10;
    # interaction rule sides with a demo patient on the other side: 16.
    assert generated["groups"] >= 30 and generated["patients"] >= 15
    assert generated["cases"] >= 1000 and generated["names"] >= 300


def test_each_group_is_capped(data_home):
    from appliance.safety import generated_matrix as gm
    from appliance.safety.matrix import AS_OF
    from ehr_db.demo_loader import read_demo_patients
    from ehr_db.repository import EhrRepository

    repo = EhrRepository(data_home / "ehr.sqlite")
    charts = {p["id"]: repo.get_patient_chart(p["id"], today=AS_OF) for p in read_demo_patients()}
    names = brand_names()
    cases = gm._allergy_cases(names, charts) + gm._interaction_cases(names, charts)
    groups: dict[str, set[str]] = {}
    for case, _parts in cases:
        groups.setdefault(case.group, set()).add(case.name)
    assert all(len(v) <= MAX_NAMES_PER_GROUP for v in groups.values())
    # Our overlay's names come first: the brands of the issue are always among them.
    assert {"zosyn", "augmentin", "unasyn"} <= groups["allergy:penicillins"]
    assert {"excedrin"} <= groups["allergy:ingredient:aspirin"] and "ms contin" in groups["allergy:ingredient:morphine"]
    assert "azulfidine" in groups["allergy:ingredient:sulfasalazine"]
    allergy_classes = {g.split(":")[1] for g in groups if g.startswith("allergy:") and ":ingredient:" not in g}
    assert allergy_classes <= {cid for cid, c in CLASSES.items() if c.allergy_cross}
    assert {int(g.split(":")[1]) for g in groups if g.startswith("interaction:")} <= set(range(len(CLASS_INTERACTIONS)))


def test_brand_names_are_brands_and_combinations_only():
    names = brand_names()
    assert names["zosyn"] == {"piperacillin", "tazobactam"} and names["excedrin"] == {"acetaminophen", "aspirin",
                                                                                        "caffeine"}
    assert names["ms contin"] == {"morphine"} and names["janumet"] == {"metformin", "sitagliptin"}
    assert names["amoxicillin-clavulanate"] == {"amoxicillin", "clavulanate"}  # a combination's own name
    assert "metformin" not in names and "metoprolol succinate" not in names  # a generic, a salt of it


@pytest.mark.parametrize("class_id, drug, row, expected", [
    ("penicillins", {"piperacillin", "tazobactam"}, {"substance": "Penicillin", "reaction": "Hives"}, "high"),
    ("nsaids", {"ibuprofen"}, {"substance": "Naproxen", "reaction": "Dyspepsia", "severity": "mild"}, "moderate"),
    ("nsaids", {"ibuprofen"}, {"substance": "Aspirin", "reaction": "Bronchospasm", "severity": "severe"}, "high"),
    ("nsaids", {"celecoxib"}, {"substance": "Ibuprofen", "reaction": "Bronchospasm", "severity": "severe"}, "low"),
    ("nsaids", {"aspirin", "caffeine"}, {"substance": "Aspirin", "reaction": "GI bleeding"}, "high"),  # same
    (None, {"morphine"}, {"substance": "Morphine", "reaction": "Confusion"}, "high"),
])
def test_expected_allergy_severities_follow_the_class_rules(class_id, drug, row, expected):
    assert expected_allergy(class_id, frozenset(drug), row) == expected


def test_the_selftest_reports_and_fails_on_the_generated_matrix():
    passing = {"cases": 1585, "names": 530, "patients": 16, "groups": 32, "missed": 0, "false_clear": 0,
               "blocking": 1000, "problems": []}
    out = {"safety_matrix": {"cases": 299, "missed": 0, "false_clear": 0, "false_alarms": 0, "blocking": 49},
           "generated_matrix": passing, "bad_inputs": None, "injection": None, "audit": None, "durability": None,
           "faults": None, "uncaught_exceptions": 0, "errors": [], "writes_lost": None, "partial_writes": None}
    assert not any("generated" in f for f in failures(out))
    line = next(x for x in table({**out, "ok": True, "failures": []}).splitlines() if x.startswith("generated matrix"))
    assert "1585 cases" in line and "missed 0, false clear 0" in line and line.rstrip().endswith("ok")
    for change, why in (({"missed": 2}, "missed 2 generated"), ({"false_clear": 1}, "1 false clear")):
        assert any(why in f for f in failures({**out, "generated_matrix": {**passing, **change}}))
    assert any("generated safety matrix did not run" in f for f in failures({**out, "generated_matrix": None}))
