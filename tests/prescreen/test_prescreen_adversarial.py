"""Every demo patient against every trial in the local cache, with a model that answers against
the patient whatever it is asked ("not met", "excluded") and cites a fact that has nothing to do
with the question: no EXCLUDED or NOT_ELIGIBLE verdict may rest on an irrelevant or a
contradicted fact.

What a verdict rests on is its failed criteria. Each must be either a code decision that agrees
with an oracle written here from the raw demo file (ehr_db/demo/patients.json, not the record
code reads), or a model judgement citing only facts that concern it by this file's own,
independent reading."""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from pathlib import Path

import pytest

from appliance.llm.fake import ScriptedModel
from appliance.prescreen.aggregate import aggregate
from appliance.prescreen.facts import build_facts
from appliance.prescreen.run import judge_trial, run_prescreen
from appliance.prescreen.search import PROPOSE_NODE

ROOT = Path(__file__).resolve().parents[2]
DEMO = json.loads((ROOT / "ehr_db" / "demo" / "patients.json").read_text())
PATIENTS = {p["id"]: p for p in DEMO["patients"]}
AS_OF = date.fromisoformat(DEMO["as_of"])
TRIAL_FILES = [ROOT / "mcp_servers" / "knowledge" / "data" / n for n in ("trials_demo.json", "trials_ctgov_sample.json")]
TRIAL_IDS = [t["nct_id"] for f in TRIAL_FILES for t in json.loads(f.read_text())["trials"] if t.get("eligibility_criteria")]
INC, EXC = "CRITERION_INCLUSION", "CRITERION_EXCLUSION"


class Adversary(ScriptedModel):
    """Fails every inclusion and finds every exclusion present, citing ``pick(fact ids)``;
    proposes no further search."""

    def __init__(self, pick):
        super().__init__()
        self.pick = pick

    def generate_constrained(self, node, messages, schema, **kw):
        ids = re.findall(r"(?m)^([A-Z]\d+) ", messages[-1].content)
        cited = self.pick(ids)
        reply = {INC: {"meets_criterion": "no", "cited_facts": cited, "reason": "Excluded."},
                 EXC: {"excluding_condition_present": "yes", "cited_facts": cited, "reason": "Excluded."},
                 PROPOSE_NODE: {"action": "stop", "condition": None, "intervention": None, "eligibility_keywords": None}}
        self.enqueue(node, reply[node])
        return super().generate_constrained(node, messages, schema, **kw)


ADVERSARIES = {
    "first fact": lambda ids: ids[:1],  # the age, whatever the question
    "the allergies": lambda ids: [i for i in ids if i.startswith("A")][:2],  # "... - no active allergies recorded"
}


# -- the oracle: the raw demo file read directly ---------------------------------------------
def active(items):
    return [i for i in items if i.get("status") in (None, "active")]


def has(p, *codes, since=None, before=None):
    return any(c["snomed"] in codes and (since is None or c["onset"] >= since) and (before is None or c["onset"] <= before)
               for c in active(p["conditions"]))


def on(p, pattern, before=None):
    return any(re.search(pattern, m["name"], re.I) and (before is None or m["start"] <= before) for m in active(p["medications"]))


def latest(p, loinc, key="labs"):
    rows = sorted((r for r in p[key] if r[0] == loinc), key=lambda r: r[2])
    return rows[-1] if rows else None


def lab(p, loinc, test, key="labs"):
    row = latest(p, loinc, key)
    return None if row is None or row[2] < (AS_OF - timedelta(days=365)).isoformat() else test(row[1])


def pregnant(p):
    return None if p["sex"] != "male" and not has(p, "77386006") else (p["sex"] != "male" and has(p, "77386006"))


def age(p):
    born = date.fromisoformat(p["birth_date"])
    return AS_OF.year - born.year - ((AS_OF.month, AS_OF.day) < (born.month, born.day))


def egfr_sustained(p):
    rows = sorted((r for r in p["labs"] if r[0] == "33914-3"), key=lambda r: r[2])
    if not rows or not 30 <= rows[-1][1] <= 59:
        return False if rows else None
    return True if len(rows) > 1 and 30 <= rows[-2][1] <= 59 and rows[-2][2] <= str(
        date.fromisoformat(rows[-1][2]) - timedelta(days=91)) else None


MONTHS = lambda n: (AS_OF - timedelta(days=round(n * 30.44))).isoformat()  # noqa: E731
ORACLE = {  # criterion -> does its statement hold for the raw patient (None: the file cannot say)
    "Current insulin therapy": lambda p: on(p, r"insulin"),
    "Type 1 or type 2 diabetes": lambda p: has(p, "46635009", "44054006"),
    "Pre-existing type 1 or type 2 diabetes": lambda p: has(p, "46635009", "44054006"),
    "Pregnancy": lambda p: False if p["sex"] == "male" else has(p, "77386006") or None,
    "Pregnancy or breastfeeding": lambda p: False if p["sex"] == "male" else has(p, "77386006") or None,
    "Pregnancy or planning pregnancy": lambda p: False if p["sex"] == "male" else has(p, "77386006") or None,
    "Singleton pregnancy at 11 to 14 weeks of gestation": lambda p: False if not pregnant(p) else None,
    "Singleton pregnancy before 20 weeks of gestation": lambda p: False if not pregnant(p) else None,
    "Type 2 diabetes diagnosed within the last 12 months": lambda p: has(p, "44054006", since=MONTHS(12)),
    "HbA1c 6.5% to 9.0%": lambda p: lab(p, "4548-4", lambda v: 6.5 <= v <= 9.0),
    "eGFR 45 mL/min/1.73 m2 or higher": lambda p: lab(p, "33914-3", lambda v: v >= 45),
    "eGFR below 30 mL/min/1.73 m2": lambda p: lab(p, "33914-3", lambda v: v < 30),
    "eGFR 30 to 59 mL/min/1.73 m2 for at least 3 months": egfr_sustained,
    "Urine albumin-to-creatinine ratio 30 mg/g or higher": lambda p: lab(p, "14959-1", lambda v: v >= 30),
    "Body-mass index 30 kg/m2 or higher": lambda p: lab(p, "39156-5", lambda v: v >= 30, "vitals"),
    "Currently prescribed a direct oral anticoagulant": lambda p: on(p, r"apixaban|rivaroxaban|dabigatran|edoxaban"),
    "Current anticoagulant therapy": lambda p: on(p, r"apixaban|rivaroxaban|dabigatran|edoxaban|warfarin|heparin"),
    "Stable ACE inhibitor or ARB dose for 4 weeks": lambda p: on(p, r"pril$|sartan$", before=str(AS_OF - timedelta(days=28))),
    "Diagnosed essential hypertension": lambda p: has(p, "59621000", "38341003"),
    "Type 2 diabetes or coronary heart disease": lambda p: has(p, "44054006", "53741008"),
    "Bipolar disorder or psychosis": lambda p: has(p, "13746004", "69322001"),
    "Physician-diagnosed asthma for at least 6 months": lambda p: has(p, "195967001", before=MONTHS(6)),
    # the sample trials' free text
    "Female patients: pregnancy or breastfeeding.": lambda p: False if p["sex"] == "male" else has(p, "77386006") or None,
    "At the time of inclusion, above 18 years of age.": lambda p: age(p) >= 18,
    "Age: 18 and over": lambda p: age(p) >= 18,
    "any patient 18 to 99 year old with a diagnosis of pleural effusion and undergoing a diagnostic thoracentesis.":
        lambda p: None if 18 <= age(p) <= 99 else False,
}
def oracle(p, criterion):
    if criterion in ORACLE:
        return ORACLE[criterion](p)
    if criterion.startswith("Sex: "):
        return p["sex"] == criterion.split()[1]
    if re.match(r"Age \d+ (?:Years|Months)|Age up to", criterion):  # the trial's own limits ("Age 6 Months to 17 Years")
        years = [int(n) / (12 if unit == "Months" else 1) for n, unit in re.findall(r"(\d+) (Years|Months)", criterion)]
        low = 0 if "up to" in criterion else years[0]
        high = years[-1] if len(years) == 2 or "up to" in criterion else 999
        return low <= age(p) <= high
    at_least = re.fullmatch(r"age\s*(?:≥|>=|>)\s*(\d+)\s*years\.?", criterion.strip(), re.I)
    if at_least:  # the sample trials' free text ("Age ≥ 18 years.")
        return age(p) >= int(at_least.group(1))
    return "no oracle"


# -- this file's own reading of which facts concern a criterion ------------------------------
AGE_WORDS = re.compile(r"\bage|years? old|year-old|\d+\s*(?:years|yrs)|\badults?\b|\bchild|elderly|older|younger|infant",
                       re.I)
SEX_WORDS = re.compile(r"\bm[ae]n\b|wom[ae]n|\bmales?\b|females?|\bsex\b|gender|pregnan|breast|lactat|childbearing|"
                       r"child-bearing|contracept|menopaus|sperm|condom", re.I)
ALLERGY_WORDS = re.compile(r"allerg|hypersensitiv|intoleran", re.I)
NAMED_ALLERGENS = re.compile(r"\b(aspirin|penicillin|sulfa\w*|codeine|shellfish|latex|peanut|egg|ibuprofen|morphine|"
                             r"contrast|iodin\w*|nsaids?|carbamazepine|naproxen|lisinopril|amiodarone)\b", re.I)


NEGATION = re.compile(r"\b(?:no|not|without|never|none)\b|\bnon-", re.I)


def fact_concerns(fact, criterion: str, criterion_type: str) -> bool:
    """Whether the fact can show what the adversary claims: an inclusion not met, an exclusion present."""
    claims_present = criterion_type == "exclusion"  # the criterion's statement holds
    if fact.id == "D1":
        span = re.search(r"(\d+)\s*(?:to|-)\s*(\d+)\s*(?:years?|year old)", criterion)
        if span and criterion_type == "inclusion":  # "not met" because of an age inside the range is contradicted
            return not int(span.group(1)) <= (fact.data or {}).get("age", -1) <= int(span.group(2))
        return bool(AGE_WORDS.search(criterion)) and bool(re.search(r"\d", criterion))
    if fact.id == "D2":
        return bool(SEX_WORDS.search(criterion))
    if fact.kind == "allergy":
        if not ALLERGY_WORDS.search(criterion):
            return False
        says_present = fact.data is not None  # "no allergies recorded" shows an absence
        if says_present != (claims_present != bool(NEGATION.search(criterion))):
            return False
        named = {m.lower() for m in NAMED_ALLERGENS.findall(criterion)}
        return fact.data is None or not named or any(n[:5] in fact.text.lower() for n in named)
    return False  # the adversaries cite nothing else


def check(pid: str, facts, trial: str, judgements, adversary: str) -> list[str]:
    """What is wrong with the verdict's failed criteria, in words (empty: nothing)."""
    verdict = aggregate(judgements)
    problems = []
    for i in verdict.failed_inclusions + verdict.exclusions_present:
        j = judgements[i]
        where = f"{pid} {trial} [{adversary}] {j.criterion_type} {j.criterion!r}"
        if j.judged_by == "code":
            truth = oracle(PATIENTS[pid], j.criterion)
            wanted = j.criterion_type == "exclusion"  # a failed inclusion's statement is false; a present exclusion's true
            if truth != "no oracle" and truth is not wanted:
                problems.append(f"{where}: code says {j.verdict}, the demo file says {truth} ({j.reason})")
            if not j.cited:
                problems.append(f"{where}: a code decision that cites nothing")
        else:
            by_id = {f.id: f for f in facts.facts}
            bad = [c for c in j.cited if not fact_concerns(by_id[c], j.criterion, j.criterion_type)]
            if not j.cited or bad:
                problems.append(f"{where}: the model's judgement rests on {j.cited} ({bad} do not concern it)")
    return problems


@pytest.fixture
def demo_facts(ehr_db):
    from ehr_db.repository import EhrRepository

    repo = EhrRepository(ehr_db)
    return {pid: build_facts(repo.get_patient_chart(pid, AS_OF)) for pid in PATIENTS}


@pytest.mark.parametrize("adversary", ADVERSARIES)
def test_no_verdict_rests_on_an_irrelevant_or_contradicted_fact(tools, demo_facts, adversary):
    details = {}
    for nct in TRIAL_IDS:
        outcome = tools.call("get_trial_details", {"nct_id": nct}, 10)
        assert outcome.ok, (nct, outcome.error_type)
        details[nct] = outcome.result
    assert len(PATIENTS) == 24 and len(details) == 20
    problems, failed, by_code, by_model, oracle_checked = [], 0, 0, 0, 0
    for pid, facts in demo_facts.items():
        for nct, trial in details.items():
            model = Adversary(ADVERSARIES[adversary])
            judgements, _calls = judge_trial(model, facts, trial, AS_OF)
            problems += check(pid, facts, nct, judgements, adversary)
            verdict = aggregate(judgements)
            for i in verdict.failed_inclusions + verdict.exclusions_present:
                failed += 1
                by_code += judgements[i].judged_by == "code"
                by_model += judgements[i].judged_by == "model"
                oracle_checked += oracle(PATIENTS[pid], judgements[i].criterion) != "no oracle"
    print(f"[{adversary}] {failed} failed criteria behind verdicts: {by_code} by code "
          f"({oracle_checked} checked against the demo file), {by_model} by the model")
    assert problems == []
    assert by_code > 50 and oracle_checked > 50  # the oracle did check something


def test_john_smith_is_excluded_only_for_what_his_chart_says(tools, demo_facts):
    """The afternoon's findings on the shipped model, replayed with the adversary: no exclusion
    for pregnancy, insulin or a new diabetes diagnosis; what fails is his diabetes and his eGFR."""
    facts = demo_facts["abc-123"]
    failing = {}
    for nct in ("NCT-DEMO-0001", "NCT-DEMO-0004"):
        trial = tools.call("get_trial_details", {"nct_id": nct}, 10).result
        judgements, _ = judge_trial(Adversary(ADVERSARIES["the allergies"]), facts, trial, AS_OF)
        verdict = aggregate(judgements)
        failing[nct] = {judgements[i].criterion: judgements[i].judged_by
                        for i in verdict.failed_inclusions + verdict.exclusions_present}
    assert failing == {
        "NCT-DEMO-0001": {"Type 2 diabetes diagnosed within the last 12 months": "code",
                          "eGFR 45 mL/min/1.73 m2 or higher": "code"},
        "NCT-DEMO-0004": {"Type 1 or type 2 diabetes": "code"},
    }


@pytest.mark.parametrize("pid", sorted(PATIENTS))
def test_the_whole_prescreen_of_every_demo_patient_holds_too(tools, pid):
    model = Adversary(ADVERSARIES["the allergies"])
    result = run_prescreen(model, tools, pid, max_trials=5, status="any")
    facts = result.facts
    problems = []
    for trial in result.trials:
        problems += [p for p in check(pid, facts, trial.nct_id, trial.judgements, "the allergies")
                     if "the demo file says" not in p]  # ages on the run's own date, not the demo's
        for j in trial.judgements:
            assert "(code)" not in j.reason and "not_found" not in j.reason
    assert problems == []
