"""The medication safety gate: ``check_prescription(drug, chart, knowledge) -> SafetyReport``.

Runs before a prescription reaches the approval dialog, the line session's prompt, or a
headless run. Code checks the chart against the drug: allergies (ingredient, class and name;
class cross-reactivity), interactions with every active medication (the local interaction data,
and the curated class-level rules beside it: the more severe leads), duplicate therapy, pregnancy,
renal function and age against the drug's safety data and the curated tables, and the dose as
written: the adult table, the per-kg table with the charted weight, opioid and course rules.

Names are resolved to ingredients once (``ingredients.ingredients_of``: curated tables, brands,
fixed-dose combinations, salts and spellings, the UMLS subset's synonyms), for the prescribed
drug, the chart's medications and its allergens alike; every ingredient goes through every check.

Invariants:
- Pure over its inputs apart from the ``knowledge`` calls: one ``drug_safety`` call plus one per
  ingredient the answer for the whole name does not cover (at most four; more are reported as
  unchecked), or per ingredient of a combination it knows as a whole (at most four), at most
  one ``drug_synonym`` call (only for a name nothing else resolves), and one
  ``interactions`` call per five looked-up names per generic the data knows (a medication the
  data does not know by name is looked up again by its ingredients).
- A drug the local data does not know, or knows only some ingredients of, is reported as such
  (``unknown_drug``, "not checked: unknown to the local drug data"); one it cannot resolve
  (ambiguous) or a knowledge service that fails likewise becomes a finding. The report is never
  an empty "no conflicts" for them, and ``SafetyReport.unchecked`` names them.
- Allergy, duplicate and chart checks still run for an unknown drug, from the curated class
  table and the name, so a known class conflict is never lost because the data lacks the drug.
- No logging: the chart is patient data.
"""

from __future__ import annotations

from dataclasses import replace

from appliance.medication.orders import parse_order
from appliance.safety import chart as charts
from appliance.safety.chart import ChartMedication
from appliance.safety.checks import (
    DATA,
    Prescribed,
    allergy_findings,
    class_interaction_findings,
    clip_at_clause,
    duplicate_findings,
)
from appliance.safety.classes import HIGH, INFO, LOW, MODERATE, classes_of, fold
from appliance.safety.doses import dose_findings, order_parts
from appliance.safety.ingredients import default_resolver, ingredients_of
from appliance.safety.knowledge import (
    MAX_INTERACTION_NAMES,
    MAX_NAME,
    AmbiguousDrug,
    KnowledgeLookup,
    KnowledgeUnavailable,
)
from appliance.safety.patient_checks import (
    age_findings,
    pregnancy_findings,
    renal_findings,
)
from appliance.safety.regimen import regimen_findings
from appliance.safety.report import (
    CHECKS,
    SEVERITIES,
    UNKNOWN_DRUG_TEXT,
    Finding,
    SafetyReport,
    sort_findings,
)
from appliance.safety.weight import Patient, per_kg_unit, to_mg

# The interaction data's severities on the gate's scale.
INTERACTION_SEVERITY = {"contraindicated": HIGH, "major": HIGH, "moderate": MODERATE, "minor": LOW}
MEDS_PER_CALL = MAX_INTERACTION_NAMES - 1
MAX_INGREDIENT_LOOKUPS = 4  # a combination product's ingredients looked up one by one
# Ingredients given only inside a product with their partner, with no label of their own
# (beta-lactamase and dehydropeptidase inhibitors): the partner's data covers the product.
COMPANIONS = {"clavulanate": "amoxicillin", "tazobactam": "piperacillin", "sulbactam": "ampicillin",
              "avibactam": "ceftazidime", "vaborbactam": "meropenem", "relebactam": "imipenem",
              "cilastatin": "imipenem"}
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
    """The drug as the local data and the curated tables know it. Its ingredients come from the
    one name resolution (``ingredients_of``: curated tables, the recogniser's brands and
    combinations, then the UMLS subset's synonyms when the lookup offers them). Every ingredient
    the data's answer for the whole name does not cover is looked up on its own ("Zosyn" ->
    piperacillin, tazobactam), so each known ingredient is checked; what stays unknown, or
    beyond the lookup bound, becomes a finding."""
    ingredients = set(ingredients_of(name))
    safety, problem = _safety(name, knowledge)
    synonym_of = getattr(knowledge, "drug_synonym", None)
    if not ingredients and safety is None and problem is None and callable(synonym_of):
        ingredients |= ingredients_of(name, synonym_of)  # known to no table: the UMLS subset's synonyms
    if problem is not None:
        found = frozenset(ingredients)
        return Prescribed(name, (), found, classes_of(found), False, found), [problem]
    safeties: list[dict] = []
    covered: set[str] = set()
    if safety is not None:
        safeties.append(safety)
        whole = set(ingredients_of(safety["drug"]))
        covered = whole | {fold(safety["drug"])}
        ingredients |= whole or {fold(safety["drug"])}
        # A combination the data knows as a whole: its ingredients' own entries too, for their
        # interaction rows (the data's rows name single drugs); one it lacks stays covered by the whole.
        for ingredient in sorted(whole)[:MAX_INGREDIENT_LOOKUPS] if len(whole) > 1 else ():
            part, _ = _safety(ingredient, knowledge)
            if part is not None and part["drug"] not in {s["drug"] for s in safeties}:
                safeties.append(part)
    todo = sorted(ingredients - covered - ({fold(name)} if safety is None else set()))
    unknown, problems = todo[MAX_INGREDIENT_LOOKUPS:], []
    for ingredient in todo[:MAX_INGREDIENT_LOOKUPS]:
        part, problem = _safety(ingredient, knowledge)
        if problem is not None:
            problems.append(problem)
        elif part is None:
            unknown.append(ingredient)
        elif part["drug"] not in {s["drug"] for s in safeties}:
            safeties.append(part)
            ingredients.add(part["drug"])
    if safety is None:
        unknown += sorted(ingredients & {fold(name)})
    checked_generics = {s["drug"] for s in safeties}
    riders = sorted(u for u in unknown if COMPANIONS.get(u) in checked_generics)
    unknown = [u for u in unknown if u not in riders]
    found = frozenset(ingredients)
    unchecked = found if problems or not safeties else frozenset(unknown) | frozenset(riders)
    drug = Prescribed(name, tuple(safeties), found, classes_of(found), safety is not None and not unknown, unchecked)
    if problems:
        return drug, problems[:1]
    if not safeties:
        return drug, [_unknown(drug)]
    checked = ", ".join(s["drug"] for s in safeties)
    notes = [Finding("unknown_drug", INFO, f"{rider} in '{name}' is checked with {COMPANIONS[rider]}: it is given only "
                     f"with it and has no label of its own; its dose against the dose table, allergy by class",
                     {"ingredient": rider, "with": COMPANIONS[rider]}, DATA) for rider in riders]
    if unknown:
        text = f"{', '.join(sorted(unknown))} in '{name}' {UNKNOWN_DRUG_TEXT} (only {checked} was checked against it)"
        return drug, [Finding("unknown_drug", MODERATE, text, {"ingredients": sorted(found)}, DATA), *notes]
    if safety is None:  # every ingredient known, the name as a whole not: said, nothing left unchecked
        text = f"'{name}' is not in the local drug data as a whole; checked as {checked}"
        return drug, [Finding("unknown_drug", INFO, text, {"ingredients": sorted(found)}, DATA), *notes]
    return drug, notes


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
    mechanism = clip_at_clause(str(row.get("mechanism") or ""))  # cut only at a clause end
    return f"{severity} interaction with {med.name}: {mechanism or 'see the interaction data'}"


def _ask(drug: Prescribed, entries: list[tuple[ChartMedication, str]], knowledge: KnowledgeLookup
         ) -> tuple[list[Finding], dict[tuple[str, str], str], set[tuple[str, str]], bool]:
    """One round of interaction calls: the drug's generics against ``entries`` (a medication and
    the name it is looked up under). Returns the findings, the data's generic per recognised
    entry, the entries the data answered for, and whether a call failed."""
    findings: list[Finding] = []
    generics: dict[tuple[str, str], str] = {}
    answered: set[tuple[str, str]] = set()
    failed = False
    seen: set[tuple[str, str, str]] = set()
    for generic in drug.generics:
        for i in range(0, len(entries), MEDS_PER_CALL):
            chunk = entries[i:i + MEDS_PER_CALL]
            try:
                result = knowledge.interactions([generic] + [e[:MAX_NAME] for _, e in chunk])
            except KnowledgeUnavailable:
                failed = True
                continue
            names = {d.get("name"): d.get("generic_name") for d in result.get("drugs_checked") or []}
            for med, entry in chunk:
                answered.add((med.name, entry))
                if names.get(entry[:MAX_NAME]):
                    generics[(med.name, entry)] = names[entry[:MAX_NAME]]
            for row in result.get("interactions") or []:
                pair = list(row.get("drugs") or [])
                if generic not in pair:
                    continue
                other = pair[1] if pair[0] == generic else pair[0]
                severity = INTERACTION_SEVERITY.get(row.get("severity"), MODERATE)
                for med, entry in chunk:
                    if names.get(entry[:MAX_NAME]) == other and (med.name, generic, other) not in seen:
                        seen.add((med.name, generic, other))
                        text = _interaction_text(row.get("severity") or severity, med, row)
                        evidence = {"medication": med.evidence, "interaction": row}
                        findings.append(Finding("interaction", severity, text, evidence, "local interaction data"))
            for mention in result.get("label_mentions") or []:
                pair = list(mention.get("drugs") or [])
                if generic not in pair:
                    continue
                other = pair[1] if pair[0] == generic else pair[0]
                for med, entry in chunk:
                    if names.get(entry[:MAX_NAME]) == other and (med.name, generic, f"label:{other}") not in seen:
                        seen.add((med.name, generic, f"label:{other}"))
                        text = (f"possible interaction with {med.name}: the {mention.get('label_of')} label "
                                "names it (ungraded)")
                        findings.append(Finding("interaction", MODERATE, text,
                                                {"medication": med.evidence, "label_mention": mention}, "drug label"))
    return findings, generics, answered, failed


def _data_interactions(drug: Prescribed, meds: list[ChartMedication], knowledge: KnowledgeLookup
                       ) -> tuple[list[Finding], list[ChartMedication], set[str], bool]:
    """Interactions from the local data. Each medication is looked up by its charted name; one
    the data does not know by name but whose ingredients are resolved (a charted brand or
    combination: "Janumet") is looked up again by its ingredients. Returns the findings, the
    medications with the data's generic names added to their ingredients, the medication names
    the data judged together with the drug (every ingredient known), and whether every
    medication was checked."""
    findings, generics, answered, failed = _ask(drug, [(m, m.name) for m in meds], knowledge)
    judged = {m.name for m in meds if (m.name, m.name) in generics}
    retry = [(m, i) for m in meds if m.name not in judged and (m.name, m.name) in answered
             and m.ingredients and m.ingredients != {fold(m.name)} for i in sorted(m.ingredients)]
    if retry:
        more, found, asked, broke = _ask(drug, retry, knowledge)
        findings += more
        generics.update(found)
        answered |= asked
        failed = failed or broke
        judged |= {m.name for m in meds if m.name not in judged and m.ingredients
                   and all((m.name, i) in found for i in m.ingredients)}
    unrecognised: list[str] = []
    for med in meds:
        if med.name in judged or (med.name, med.name) not in answered:
            continue
        missing = [i for i in sorted(med.ingredients) if (med.name, i) not in generics]
        partly = missing and len(missing) < len(med.ingredients)
        label = f"{med.name} ({', '.join(missing)})" if partly else med.name
        if label not in unrecognised:
            unrecognised.append(label)
    if failed:
        findings.append(Finding("not_checked", MODERATE, "interactions with the active medications not checked: "
                                "the drug knowledge service did not answer", {}, DATA))
    if unrecognised:
        text = f"interactions with {', '.join(unrecognised)} not checked against the interaction data: not in it"
        findings.append(Finding("not_checked", INFO, text, {"medications": unrecognised}, DATA))
    updated = [
        ChartMedication(m.row, m.name, m.ingredients | {g for (name, _), g in generics.items() if name == m.name})
        for m in meds
    ]
    return findings, updated, judged, not failed and not unrecognised


def _dose(name: str, written: tuple[str | None, ...], ingredients: frozenset[str], chart: dict
          ) -> tuple[list[Finding], bool]:
    """The dose checks of the order as written (``written``: dosage, frequency, notes): the dose
    table and the per-kg table with the charted weight (``doses.dose_findings``), then opioid and
    course rules (``regimen``), against the chart's active medications read by the same parser;
    ([], False) when no dosage was given."""
    if not written[0]:
        return [], False
    drugs = default_resolver().recogniser
    order = parse_order(" ".join(p for p in (name, *written) if p), drugs)
    charted = [(m, parse_order(" ".join(str(m.row.get(k) or "") for k in ("medication_name", "dosage", "frequency")),
                               drugs)) for m in charts.active_medications(chart)]
    patient = Patient(charts.patient_age(chart), charts.body_weight(chart))
    findings, checked = dose_findings(order, ingredients, charted, patient=patient)
    _, parts = order_parts(order, ingredients)
    in_mg = {}
    for ingredient, part in (parts or {}).items():
        if per_kg_unit(part.dose) is None:
            in_mg[ingredient] = part
        elif patient.weight is not None and (converted := to_mg(part, patient.weight.kg)) is not None:
            in_mg[ingredient] = converted
    return findings + regimen_findings(in_mg, charted), checked


def _daily_mg(name: str, written: tuple[str | None, ...], ingredients: frozenset[str]) -> dict[str, float]:
    """Milligrams a day per ingredient of the order as written (at the most it allows), where
    code reads them: not for a one-time or per-kg dose; {} with no dosage."""
    if not written[0]:
        return {}
    order = parse_order(" ".join(p for p in (name, *written) if p), default_resolver().recogniser)
    _, parts = order_parts(order, ingredients)
    daily = {i: p.mg_per_day() for i, p in (parts or {}).items()
             if not p.one_time and p.dose is not None and per_kg_unit(p.dose) is None}
    return {i: mg for i, mg in daily.items() if mg is not None}


def _with_class_rules(findings: list[Finding], curated: list[Finding]) -> list[Finding]:
    """The curated class rules' interactions beside the data's, one per medication: a pair the
    data judged without a row still gets the rule (the data may lack the row: metronidazole with
    warfarin); where both speak the more severe leads (the data's words at equal severity), the
    other kept in its evidence."""
    def med(f: Finding) -> str:
        return str((f.evidence.get("medication") or {}).get("medication_name") or "")

    out = list(findings)
    for rule in curated:
        data = [f for f in out if f.kind == "interaction" and med(f) == med(rule)]
        if not data:
            out.append(rule)
            continue
        top = min(data, key=lambda f: SEVERITIES.index(f.severity))
        if SEVERITIES.index(rule.severity) < SEVERITIES.index(top.severity):
            out[out.index(top)] = replace(rule, evidence={**rule.evidence, "data": top.text},
                                          source=f"{rule.source} + {top.source}")
    return out


def check_prescription(drug: str, chart: dict, knowledge: KnowledgeLookup, *, dosage: str | None = None,
                       frequency: str | None = None, notes: str | None = None) -> SafetyReport:
    """Check one prescription against a chart (``get_patient_chart``'s result); see the module
    docstring. ``drug`` is the medication name as prescribed; ``dosage`` and ``frequency`` as
    written (prescribe_medication's arguments) add the dose checks; ``notes`` (its notes: a
    duration, a maximum, a route) are read with them."""
    name = " ".join(str(drug or "").split())
    chart = chart if isinstance(chart, dict) else {}
    checked = dict.fromkeys(CHECKS, False)
    findings: list[Finding] = []

    prescribed, problems = _identify(name, knowledge)
    findings += problems
    # The data checked every ingredient (the name as a whole, or each ingredient on its own).
    data_complete = bool(prescribed.safeties) and not any(
        f.kind in ("unknown_drug", "not_checked") and f.severity != INFO for f in problems)
    checked["drug_data"] = data_complete

    meds = charts.active_medications(chart)
    if prescribed.generics and meds:
        found, meds, _, complete = _data_interactions(prescribed, meds, knowledge)
        findings += found
        checked["interactions"] = complete and data_complete
    elif data_complete:
        checked["interactions"] = isinstance(chart.get("medications"), list)
    findings = _with_class_rules(findings, class_interaction_findings(prescribed, meds, set()))

    findings += allergy_findings(prescribed, chart)
    checked["allergies"] = isinstance(chart.get("allergies"), list)
    findings += duplicate_findings(prescribed, meds)
    checked["duplicates"] = isinstance(chart.get("medications"), list)
    findings += pregnancy_findings(prescribed, chart)
    checked["pregnancy"] = isinstance(chart.get("active_problems"), list)
    findings += renal_findings(prescribed, chart, _daily_mg(name, (dosage, frequency, notes), prescribed.ingredients))
    checked["renal"] = isinstance(chart.get("labs"), list) or isinstance(chart.get("active_problems"), list)
    findings += age_findings(prescribed, chart)
    checked["age"] = charts.patient_age(chart) is not None
    found, checked["dose"] = _dose(name, (dosage, frequency, notes), prescribed.ingredients, chart)
    findings += found
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
