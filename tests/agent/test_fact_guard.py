"""The fact guard (appliance/agent/fact_guard.py) over the real demo charts: answers with planted
fabrications (an allergen, a drug, a lab value, a condition, another patient's ID) are withheld,
every one; faithful answers built from the same charts are shown, every one."""

from __future__ import annotations

import random

import pytest

from appliance.agent.fact_guard import sources_text, unsupported_facts
from appliance.medication.names import DrugRecogniser
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

PATIENTS = ("abc-123", "pat-001", "pat-003", "pat-005", "pat-006", "pat-008", "pat-010", "pat-012", "pat-015",
            "pat-017", "pat-019", "pat-023")
# Facts no demo chart above holds, one kind each.
FOREIGN_ALLERGENS = ("peanuts", "latex", "shellfish", "sulfa drugs", "bee stings")
FOREIGN_DRUGS = ("clozapine", "digoxin", "phenytoin", "lithium", "tacrolimus")
FOREIGN_CONDITIONS = ("multiple sclerosis", "schizophrenia", "sickle cell disease", "cystic fibrosis", "lupus")


@pytest.fixture(scope="module")
def drugs():
    return DrugRecogniser()


@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    path = tmp_path_factory.mktemp("ehr") / "ehr.sqlite"
    ensure_database(path)
    repo = EhrRepository(path)
    return {pid: repo.get_patient_chart(pid) for pid in PATIENTS}


def faithful(chart: dict) -> list[str]:
    """Answers a careful clinician would accept: only the chart's own facts, in plain words."""
    name = chart["patient"]["name"]
    out = []
    allergies = chart["allergies"]
    if allergies:
        a = allergies[0]
        out.append(f"{name} is allergic to {a['substance']} ({a['reaction']}).")
    else:
        out.append(f"No allergies are recorded for {name}.")
    meds = [m for m in chart["medications"] if m["status"] == "active"]
    if meds:
        out.append("Current medications: " + "; ".join(f"{m['medication_name']} {m['dosage']} {m['frequency']}"
                                                        for m in meds) + ".")
    if chart["active_problems"]:
        out.append("Active problems: " + ", ".join(p["display"] for p in chart["active_problems"]) + ".")
    for lab in chart["labs"][:2]:
        out.append(f"The latest {lab['display']} was {lab['value']} {lab['unit'] or ''} on {lab['effective_at']}.")
    out.append(f"Patient {chart['patient']['patient_id']} was reviewed.")
    return out


def planted(chart: dict, other_id: str, rng: random.Random) -> list[tuple[str, str]]:
    """(answer, kind planted): a faithful sentence with one fabricated fact each."""
    name = chart["patient"]["name"]
    out = [
        (f"{name} is allergic to {rng.choice(FOREIGN_ALLERGENS)}, with an itchy rash.", "allergen"),
        (f"{name} currently takes {rng.choice(FOREIGN_DRUGS)} daily.", "drug"),
        (f"{name} has a history of {rng.choice(FOREIGN_CONDITIONS)}.", "condition"),
        (f"See also patient {other_id} for comparison.", "patient ID"),
    ]
    if chart["labs"]:
        lab = chart["labs"][0]
        wrong = round(float(lab["value"]) * 3 + 1.7, 1)
        out.append((f"The latest {lab['display']} was {wrong} {lab['unit'] or ''}.", "value"))
    meds = [m for m in chart["medications"] if m["status"] == "active"]
    if meds:
        m = meds[0]
        out.append((f"{m['medication_name']} {int(float(m['dosage'].split()[0]) * 10)} mg once daily is charted.",
                    "value"))
    return out


def sources(chart: dict, question: str) -> str:
    return sources_text([question, chart["patient"]["patient_id"]], [chart])


def test_planted_fabrications_are_withheld_every_one(charts, drugs):
    rng = random.Random(7)
    cases = []
    for i, pid in enumerate(PATIENTS):
        other = PATIENTS[(i + 1) % len(PATIENTS)]
        cases += [(pid, answer, kind) for answer, kind in planted(charts[pid], other, rng)]
    assert len(cases) >= 50
    missed = [(pid, answer) for pid, answer, kind in cases
              if not unsupported_facts(answer, sources(charts[pid], "What should I know?"), drugs, patient_data=True)]
    assert missed == []
    print(f"{len(cases)} planted answers, {len(cases) - len(missed)} withheld")


def test_faithful_answers_are_shown_every_one(charts, drugs):
    cases = [(pid, answer) for pid in PATIENTS for answer in faithful(charts[pid])]
    assert len(cases) >= 50
    withheld = [(pid, answer, unsupported_facts(answer, sources(charts[pid], "Review the chart"), drugs,
                                                patient_data=True)) for pid, answer in cases]
    assert [w for w in withheld if w[2]] == []


def test_what_is_withheld_names_the_fact(charts, drugs):
    chart = charts["pat-006"]  # penicillin anaphylaxis; no sulfa allergy
    found = unsupported_facts("This patient is allergic to sulfa drugs. The patient has a rash that is itchy and red",
                              sources(chart, "any allergies?"), drugs, patient_data=True)
    assert {u.kind for u in found} >= {"allergen", "reaction"}
    assert any(u.text.lower() == "sulfa" for u in found)


def test_a_general_question_may_name_drugs_but_never_another_patient(drugs):
    words = "How does metformin work?"
    answer = "Metformin lowers hepatic glucose output; unlike insulin it rarely causes hypoglycaemia."
    assert unsupported_facts(answer, sources_text([words], []), drugs, patient_data=False) == []
    leaked = unsupported_facts("As with pat-004, metformin is first line.", sources_text([words], []), drugs,
                               patient_data=False)
    assert [u.kind for u in leaked] == ["patient ID"]


def test_the_clinicians_words_are_a_source(charts, drugs):
    chart = charts["pat-003"]  # no warfarin on the chart
    question = "Would warfarin 5 mg daily be reasonable for her?"
    answer = "Warfarin 5 mg daily is a usual starting dose; check the INR."
    assert unsupported_facts(answer, sources(chart, question), drugs, patient_data=True) == []
