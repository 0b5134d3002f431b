"""The medication safety gate: ``check_prescription(drug, chart, knowledge) -> SafetyReport``.

Runs before a prescription reaches the approval dialog, the line session's prompt, or a
headless run. Code checks the chart against the drug: allergies (ingredient, class and name;
class cross-reactivity), interactions with every active medication (the local interaction data,
then curated class-level rules for pairs it could not judge), duplicate therapy, and pregnancy,
renal function and age against the drug's safety data and the curated tables.

Invariants:
- Pure over its inputs apart from the ``knowledge`` calls: one ``drug_safety`` call (plus one
  per recognised ingredient, at most four, when the data does not know the name as a whole),
  and one ``interactions`` call per five active medications per generic the data knows.
- A drug the local data does not know is reported as such (``unknown_drug``, "not checked:
  unknown to the local drug data"); one it cannot resolve (ambiguous) or a knowledge service
  that fails likewise becomes a finding. The report is never an empty "no conflicts" for them.
- Allergy, duplicate and chart checks still run for an unknown drug, from the curated class
  table and the name, so a known class conflict is never lost because the data lacks the drug.
- No logging: the chart is patient data.
"""

from __future__ import annotations

from appliance.safety import chart as charts
from appliance.safety.chart import ChartMedication
from appliance.safety.checks import (
    DATA, Prescribed, age_findings, allergy_findings, class_interaction_findings, duplicate_findings,
    pregnancy_findings, renal_findings,
)
from appliance.safety.classes import HIGH, INFO, LOW, MODERATE, classes_of, fold, ingredients_in
from appliance.safety.knowledge import (
    MAX_INTERACTION_NAMES, MAX_NAME, AmbiguousDrug, KnowledgeLookup, KnowledgeUnavailable,
)
from appliance.safety.report import CHECKS, UNKNOWN_DRUG_TEXT, Finding, SafetyReport, sort_findings

# The interaction data's severities on the gate's scale.
INTERACTION_SEVERITY = {"contraindicated": HIGH, "major": HIGH, "moderate": MODERATE, "minor": LOW}
MEDS_PER_CALL = MAX_INTERACTION_NAMES - 1
MAX_INGREDIENT_LOOKUPS = 4  # a combination product's ingredients looked up one by one
# Chart-based checks whose input may be missing, with the words a finding uses for them.
CHART_CHECKS = (("allergies", "allergies"), ("duplicates", "medications"), ("pregnancy", "problems"),
                ("age", "age"))


def _safety(name: str, knowledge: KnowledgeLookup) -> tuple[dict | None, Finding | None]:
    """One lookup: (the safety summary or None when unknown, or a finding when it failed)."""
    try:
        return knowledge.drug_safety(name), None
    except AmbiguousDrug as exc:
        which = f" ({', '.join(exc.candidates)})" if exc.candidates else ""
        text = f"'{name}' matches several drugs in the local drug data{which}: not checked; name the generic"
        return None, Finding("unknown_drug", MODERATE, text, {"candidates": exc.candidates}, DATA)
    except KnowledgeUnavailable as exc:
        text = "label warnings and interactions not checked: the drug knowledge service did not answer"
        return None, Finding("not_checked", MODERATE, text, {"error_type": str(exc)}, DATA)


def _identify(name: str, knowledge: KnowledgeLookup) -> tuple[Prescribed, list[Finding]]:
    """The drug as the local data and the curated tables know it. A name the data does not know
    as a whole is looked up ingredient by ingredient ("amoxicillin-clavulanate"), so a known
    ingredient is still checked; what stays unknown becomes a finding."""
    ingredients = set(ingredients_in(name))
    safety, problem = _safety(name, knowledge)
    if problem is not None:
        return Prescribed(name, (), frozenset(ingredients), classes_of(frozenset(ingredients)), False), [problem]
    if safety is not None:
        ingredients |= ingredients_in(safety["drug"]) or {safety["drug"]}
        found = frozenset(ingredients)
        return Prescribed(name, (safety,), found, classes_of(found), True), []
    safeties, unknown, problems = [], [], []
    for ingredient in sorted(ingredients - {fold(name)})[:MAX_INGREDIENT_LOOKUPS]:
        part, problem = _safety(ingredient, knowledge)
        if problem is not None:
            problems.append(problem)
        elif part is None:
            unknown.append(ingredient)
        else:
            safeties.append(part)
            ingredients.add(part["drug"])
    found = frozenset(ingredients)
    drug = Prescribed(name, tuple(safeties), found, classes_of(found), False)
    if problems:
        return drug, problems[:1]
    unknown += sorted(ingredients & {fold(name)})
    if safeties:
        checked = ", ".join(s["drug"] for s in safeties)
        text = (f"{', '.join(unknown)} in '{name}' {UNKNOWN_DRUG_TEXT} (only {checked} was checked against it)"
                if unknown else f"'{name}' {UNKNOWN_DRUG_TEXT} as a whole; checked as {checked}")
        return drug, [Finding("unknown_drug", MODERATE, text, {"ingredients": sorted(found)}, DATA)]
    return drug, [_unknown(drug)]


def _unknown(drug: Prescribed) -> Finding:
    if drug.classes:
        scope = "allergy, duplicate and chart checks used the curated class table only"
    elif drug.ingredients:
        scope = "allergy and duplicate checks matched its ingredient name only"
    else:
        scope = "allergy and duplicate checks matched its name only"
    text = f"'{drug.name}' {UNKNOWN_DRUG_TEXT} (no label warnings or interaction data); {scope}"
    return Finding("unknown_drug", MODERATE, text, {"ingredients": sorted(drug.ingredients)}, DATA)


def _interaction_text(severity: str, med: ChartMedication, row: dict) -> str:
    mechanism = " ".join(str(row.get("mechanism") or "").split())
    if len(mechanism) > 160:
        mechanism = mechanism[:160].rsplit(" ", 1)[0] + " ..."
    return f"{severity} interaction with {med.name}: {mechanism or 'see the interaction data'}"


def _data_interactions(drug: Prescribed, meds: list[ChartMedication], knowledge: KnowledgeLookup
                       ) -> tuple[list[Finding], list[ChartMedication], set[str], bool]:
    """Interactions from the local data. Returns the findings, the medications with the data's
    generic names added to their ingredients, the medication names the data judged together
    with the drug, and whether every medication was checked."""
    findings: list[Finding] = []
    generics: dict[str, str] = {}
    judged: set[str] = set()
    unrecognised: list[str] = []
    failed = False
    calls = [(g, meds[i:i + MEDS_PER_CALL]) for g in drug.generics for i in range(0, len(meds), MEDS_PER_CALL)]
    for generic, chunk in calls:
        try:
            result = knowledge.interactions([generic] + [m.name[:MAX_NAME] for m in chunk])
        except KnowledgeUnavailable:
            failed = True
            continue
        names = {d.get("name"): d.get("generic_name") for d in result.get("drugs_checked") or []}
        for med in chunk:
            if names.get(med.name[:MAX_NAME]):
                generics[med.name] = names[med.name[:MAX_NAME]]
                judged.add(med.name)
            elif med.name not in unrecognised:
                unrecognised.append(med.name)
        for row in result.get("interactions") or []:
            pair = list(row.get("drugs") or [])
            if generic not in pair:
                continue
            other = pair[1] if pair[0] == generic else pair[0]
            severity = INTERACTION_SEVERITY.get(row.get("severity"), MODERATE)
            for med in chunk:
                if generics.get(med.name) == other:
                    text = _interaction_text(row.get("severity") or severity, med, row)
                    evidence = {"medication": med.evidence, "interaction": row}
                    findings.append(Finding("interaction", severity, text, evidence, "local interaction data"))
        for mention in result.get("label_mentions") or []:
            pair = list(mention.get("drugs") or [])
            if generic not in pair:
                continue
            other = pair[1] if pair[0] == generic else pair[0]
            for med in chunk:
                if generics.get(med.name) == other:
                    text = f"possible interaction with {med.name}: the {mention.get('label_of')} label names it (ungraded)"
                    findings.append(Finding("interaction", MODERATE, text,
                                            {"medication": med.evidence, "label_mention": mention}, "drug label"))
    if failed:
        findings.append(Finding("not_checked", MODERATE, "interactions with the active medications not checked: "
                                "the drug knowledge service did not answer", {}, DATA))
    if unrecognised:
        text = f"interactions with {', '.join(unrecognised)} not checked against the interaction data: not in it"
        findings.append(Finding("not_checked", INFO, text, {"medications": unrecognised}, DATA))
    updated = [
        ChartMedication(m.row, m.name, m.ingredients | ({generics[m.name]} if m.name in generics else set()))
        for m in meds
    ]
    return findings, updated, judged, not failed and not unrecognised


def check_prescription(drug: str, chart: dict, knowledge: KnowledgeLookup) -> SafetyReport:
    """Check one prescription against a chart (``get_patient_chart``'s result); see the module
    docstring. ``drug`` is the medication name as prescribed."""
    name = " ".join(str(drug or "").split())
    chart = chart if isinstance(chart, dict) else {}
    checked = dict.fromkeys(CHECKS, False)
    findings: list[Finding] = []

    prescribed, problems = _identify(name, knowledge)
    findings += problems
    checked["drug_data"] = prescribed.whole

    meds = charts.active_medications(chart)
    judged: set[str] = set()
    if prescribed.generics and meds:
        found, meds, judged, complete = _data_interactions(prescribed, meds, knowledge)
        findings += found
        checked["interactions"] = complete and prescribed.whole
        if not prescribed.whole:  # only some ingredients were judged: class rules fill in, without repeats
            judged = {f.evidence["medication"]["medication_name"] for f in found if "medication" in f.evidence}
    elif prescribed.whole:
        checked["interactions"] = isinstance(chart.get("medications"), list)
    findings += class_interaction_findings(prescribed, meds, judged)

    findings += allergy_findings(prescribed, chart)
    checked["allergies"] = isinstance(chart.get("allergies"), list)
    findings += duplicate_findings(prescribed, meds)
    checked["duplicates"] = isinstance(chart.get("medications"), list)
    findings += pregnancy_findings(prescribed, chart)
    checked["pregnancy"] = isinstance(chart.get("active_problems"), list)
    findings += renal_findings(prescribed, chart)
    checked["renal"] = isinstance(chart.get("labs"), list) or isinstance(chart.get("active_problems"), list)
    findings += age_findings(prescribed, chart)
    checked["age"] = charts.patient_age(chart) is not None
    missing = [words for check, words in CHART_CHECKS if not checked[check]]
    if missing:
        text = f"{', '.join(missing)} not checked: the chart did not include them"
        findings.append(Finding("not_checked", MODERATE, text, {"missing": missing}, "chart"))

    return SafetyReport(
        drug=name,
        resolved=prescribed.generics,
        ingredients=tuple(sorted(prescribed.ingredients)),
        findings=sort_findings(findings),
        checked=checked,
    )


__all__ = ["INTERACTION_SEVERITY", "check_prescription"]
