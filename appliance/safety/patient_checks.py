"""The safety gate's checks against the patient rather than the chart's other entries:
pregnancy, renal function and age, one pure function each (``checks`` holds the shared
``Prescribed`` and the allergy, duplicate and interaction checks).

Invariants:
- At most one finding per kind: the most severe reason wins and the others are kept in its
  evidence; a curated rule and the drug's safety data may both speak, and the finding names
  both sources.
- Renal function is the chart's latest eGFR, else the floor of a listed CKD stage
  (``chart.renal_status``). Given the order's milligrams a day per ingredient (``daily_mg``),
  a drug with a renal daily cap (``rules.RENAL_DAILY_CAPS``) is compared with the cap of the
  patient's band: above it is high and the text names both amounts ("2,000 mg a day ... above
  1,000 mg a day"), so a change of dose is judged as the new daily dose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from appliance.safety import chart as charts
from appliance.safety.checks import (
    CURATED,
    DATA,
    Prescribed,
    clip_at_clause,
    safety_sentences,
    worst,
)
from appliance.safety.classes import HIGH, INFO, LOW, MODERATE
from appliance.safety.report import SEVERITIES, Finding
from appliance.safety.rules import (
    AFTER_TONSILLECTOMY,
    AFTER_TONSILLECTOMY_AGE,
    BEERS,
    OLDER_ADULT_AGE,
    PAEDIATRIC,
    PAEDIATRIC_AGE,
    PAEDIATRIC_NOTE,
    PREGNANCY,
    RENAL,
    RENAL_DAILY_CAPS,
    RENAL_EXEMPT,
    RENAL_NEEDS_EGFR,
)

_PREGNANCY_WORDS = re.compile(r"pregnan|\bfetal|\bfoetal|fetus|embryo|teratogen", re.I)
_RENAL_WORDS = re.compile(
    r"\b(?:renal|kidney) (?:impairment|insufficiency|disease|failure|function)|impaired renal|"
    r"creatinine clearance|\begfr\b", re.I)
_SEVERE_RENAL = re.compile(r"\bsevere\b|\badvanced\b", re.I)
_RENAL_BOUND = re.compile(
    r"(?:creatinine clearance|crcl|egfr)\s*(?:below|under|less than|<)\s*(\d{2})\b|"
    r"(?:below|under|less than|<)\s*(?:creatinine clearance|crcl|egfr)?\s*(\d{2})\b", re.I)
_OLDER_WORDS = re.compile(r"\bolder(?:,| age\b| patients\b| adults\b| people\b)|\belderly\b|\bgeriatric\b|"
                          r"\b(?:aged?|over) (\d{2})\b", re.I)


def _one(kind: str, drug: Prescribed, parts: list[tuple[str, str, str]], lead: str,
         evidence: dict[str, Any]) -> list[Finding]:
    """One finding from (severity, text, source) parts: the worst severity, whose text leads
    (a curated text before the data's at equal severity)."""
    if not parts:
        return []
    severity = worst([p[0] for p in parts])
    ordered = sorted(parts, key=lambda p: (SEVERITIES.index(p[0]), p[2] != CURATED))
    text = f"{lead}; {drug.label}: {ordered[0][1]}"
    sources = sorted({p[2] for p in parts})
    evidence = {**evidence, "reasons": [{"severity": s, "text": t, "source": src} for s, t, src in ordered]}
    return [Finding(kind, severity, text, evidence, " + ".join(sources))]


def pregnancy_findings(drug: Prescribed, chart: dict) -> list[Finding]:
    problem = charts.pregnancy_problem(chart)
    if problem is None:
        return []
    parts = [(*PREGNANCY[k], CURATED) for k in sorted(drug.keys) if k in PREGNANCY]
    for field, sentence in safety_sentences(drug.safeties):
        found = _PREGNANCY_WORDS.search(sentence)
        if found:
            severity = HIGH if field == "contraindications" else MODERATE
            parts.append((severity, f"the drug data says: {clip_at_clause(sentence, around=found)}", DATA))
    evidence = {"problem": {k: problem.get(k) for k in ("display", "snomed_code")}}
    return _one("pregnancy", drug, parts, f"pregnancy on the problem list ({problem.get('display')})", evidence)


def _mg(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:g}"


def renal_cap_parts(daily_mg: Mapping[str, float], egfr: float) -> tuple[list[tuple[str, str, str]], list[dict]]:
    """(finding parts for each ingredient whose ``daily_mg`` is above its renal cap at
    ``egfr``, the evidence of every cap compared)."""
    parts, compared = [], []
    for ingredient, mg in sorted(daily_mg.items()):
        band = next(((bound, cap, source) for bound, cap, source in sorted(RENAL_DAILY_CAPS.get(ingredient, ()))
                     if egfr < bound), None)
        if band is None:
            continue
        bound, cap, source = band
        compared.append({"ingredient": ingredient, "mg_per_day": mg, "cap_mg_per_day": cap,
                         "egfr_below": bound, "source": source})
        if mg > cap + 1e-9:
            of = f" of {ingredient}" if len(daily_mg) > 1 else ""  # a combination names the part
            text = (f"{_mg(mg)} mg a day{of} ordered is above {_mg(cap)} mg a day, the most below "
                    f"eGFR {bound:g} (source: {source})")
            parts.append((HIGH, text, CURATED))
    return parts, compared


def renal_findings(drug: Prescribed, chart: dict, daily_mg: Mapping[str, float] | None = None) -> list[Finding]:
    """``daily_mg``: the order's milligrams a day per ingredient, where code read them (a change
    is its new dose), compared with ``RENAL_DAILY_CAPS``."""
    status = charts.renal_status(chart)
    if not status.impaired:
        if status.effective_egfr is None and drug.keys & RENAL_NEEDS_EGFR:
            text = f"no eGFR on the chart: check renal function before {drug.label}"
            return [Finding("renal", INFO, text, {}, CURATED)]
        return []
    egfr = status.effective_egfr if status.effective_egfr is not None else 59.0
    parts = []
    for key in sorted(drug.keys):
        if drug.ingredients and drug.ingredients <= RENAL_EXEMPT.get(key, frozenset()):
            continue
        for bound, severity, text in RENAL.get(key, ()):
            if egfr < bound:
                parts.append((severity, text, CURATED))
                break
    for field, sentence in safety_sentences(drug.safeties):
        found = _RENAL_WORDS.search(sentence)
        if not found:
            continue
        # A stated bound ("creatinine clearance below 20") decides; "severe" alone means below 30.
        bound = _RENAL_BOUND.search(sentence)
        limit = int(bound.group(1) or bound.group(2)) if bound else 30 if _SEVERE_RENAL.search(sentence) else None
        if limit is not None and egfr >= limit:
            continue
        severity = (HIGH if limit is not None else MODERATE) if field == "contraindications" else LOW
        parts.append((severity, f"the drug data says: {clip_at_clause(sentence, around=found)}", DATA))
    capped, compared = renal_cap_parts(daily_mg or {}, egfr)
    evidence = {**status.evidence(), **({"daily_dose": compared} if compared else {})}
    return _one("renal", drug, parts + capped, status.describe(), evidence)


_TONSILLECTOMY = re.compile(r"tonsillectom|adenoidectom|adenotonsillectom", re.I)


def _tonsillectomy(chart: dict) -> bool:
    """A tonsillectomy or adenoidectomy named on the problem list or in a recent note."""
    rows = [r for key in ("active_problems", "recent_notes") for r in (chart.get(key) or []) if isinstance(r, dict)]
    return any(_TONSILLECTOMY.search(" ".join(str(r.get(k) or "") for k in ("display", "title", "text")))
               for r in rows)


def age_findings(drug: Prescribed, chart: dict) -> list[Finding]:
    age = charts.patient_age(chart)
    if age is None:
        return []
    parts: list[tuple[str, str, str]] = []
    if age < PAEDIATRIC_AGE:
        for key in sorted(drug.keys):
            if key in PAEDIATRIC and age < PAEDIATRIC[key][0]:
                _, severity, text, source = PAEDIATRIC[key]
                parts.append((severity, f"{text} (source: {source})", CURATED))
            if key in AFTER_TONSILLECTOMY and age < AFTER_TONSILLECTOMY_AGE and _tonsillectomy(chart):
                severity, text, source = AFTER_TONSILLECTOMY[key]
                parts.append((severity, f"{text} (source: {source})", CURATED))
        parts.append((MODERATE, PAEDIATRIC_NOTE, CURATED))
    else:
        if age >= OLDER_ADULT_AGE:
            parts += [(MODERATE, f"AGS Beers Criteria 2023: {BEERS[k]}", CURATED) for k in sorted(drug.keys) if k in BEERS]
        for _field, sentence in safety_sentences(drug.safeties):
            for match in _OLDER_WORDS.finditer(sentence):
                threshold = int(match.group(1)) if match.group(1) else OLDER_ADULT_AGE
                if threshold >= 50 and age >= threshold:
                    parts.append((LOW, f"the drug data says: {clip_at_clause(sentence, around=match)}", DATA))
                    break
    return _one("age", drug, parts, f"age {age}", {"patient": {"age": age}})


__all__ = ["age_findings", "pregnancy_findings", "renal_cap_parts", "renal_findings"]
