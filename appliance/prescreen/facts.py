"""The patient's key facts for a prescreen, built by code from the chart.

Invariants:
- Every fact has a short id the model cites ("D1" age, "D2" sex, "P1" a problem, "M1" a
  medication, "A1" an allergy, "L1" a lab, "V1" a vital sign); ids are unique and stable for
  one chart. An empty category still gets a fact ("P0 No active problems recorded"), so a
  judgement that rests on an absence has something to cite.
- Each fact carries the date it holds (onset, order, result) and, where the chart gives one,
  the record's own row id (``source``), so a clinician can find the row used.
- The facts are the whole input the evaluator sees about the patient; they are shown with every
  result, so the clinician sees what was used.
- Each fact keeps the chart row it was read from (``data``: the problem's onset and code, the
  order's status and date, the result's value, unit and date) so code can decide criteria from
  the record itself (``decide``), never from the shortened text.
- ``complete`` names the lists the chart gave whole (problems, medications, allergies, labs,
  vitals): only there does an absence count as absent. A list the chart did not give, or one
  trimmed to fit, is not complete. The chart's problem list holds active problems only.
- Trimming is by rule and never silent: a fact longer than ``MAX_FACT_CHARS`` is shortened
  (marked in its text); when the block exceeds ``MAX_BLOCK_CHARS``, vital signs and then labs
  are left out oldest first, then medications and problems beyond the most recent ones; every
  left-out fact is named in ``trimmed``. Demographics and allergies are never left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_FACT_CHARS = 220
MAX_BLOCK_CHARS = 3500
# When even problems and medications overflow the block, the most recent ones are kept.
KEEP_AT_LEAST = 8


@dataclass(frozen=True)
class Fact:
    id: str
    kind: str  # demographics | problem | medication | allergy | lab | vital
    text: str
    date: str | None = None
    source: str | None = None  # the chart row's own id, where it has one
    data: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)  # the chart row read

    def line(self) -> str:
        return f"{self.id} {self.text}"

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "text": self.text, "date": self.date, "source": self.source}


@dataclass(frozen=True)
class PatientFacts:
    patient_id: str
    name: str | None
    age: int | None
    sex: str | None
    facts: tuple[Fact, ...]
    trimmed: tuple[str, ...] = ()  # what was left out or shortened, and why
    synthetic_demo_record: bool = False
    problems: tuple[str, ...] = field(default=())  # the active problems' names, for the search
    complete: frozenset[str] = frozenset()  # kinds whose list the chart gave whole (see the module docstring)
    birth_date: str | None = None

    def of_kind(self, kind: str) -> list[Fact]:
        """The facts of one kind, the "none recorded" fact (id ending in 0) left out."""
        return [f for f in self.facts if f.kind == kind and f.data is not None]

    def ids(self) -> frozenset[str]:
        return frozenset(f.id for f in self.facts)

    def text(self) -> str:
        """The block the evaluator reads: one fact per line, id first."""
        return "\n".join(f.line() for f in self.facts)

    def to_json(self) -> dict:
        return {
            "patient_id": self.patient_id, "name": self.name, "age": self.age, "sex": self.sex,
            "synthetic_demo_record": self.synthetic_demo_record,
            "facts": [f.to_json() for f in self.facts], "trimmed": list(self.trimmed),
        }


def _clip(text: str) -> tuple[str, bool]:
    text = " ".join(str(text).split())
    if len(text) <= MAX_FACT_CHARS:
        return text, False
    return text[:MAX_FACT_CHARS - 12].rsplit(" ", 1)[0] + " [shortened]", True


def _date(value) -> str | None:
    return str(value)[:10] if value else None


def _result_text(r: dict) -> str:
    text = f"{r.get('display')}: {r.get('value')}"
    if r.get("unit"):
        text += f" {r['unit']}"
    if r.get("flag") and r["flag"] != "N":
        text += f" ({'high' if r['flag'] == 'H' else 'low' if r['flag'] == 'L' else r['flag']})"
    if r.get("reference_range"):
        text += f", reference {r['reference_range']}"
    if r.get("effective_at"):
        text += f", on {_date(r['effective_at'])}"
    previous = r.get("previous")
    if previous:
        text += f"; previous {previous.get('value')} on {_date(previous.get('effective_at'))}"
    return text


def clean_problem(display: str) -> str:
    """A problem's name as a search term: '(disorder)' and similar qualifiers dropped."""
    return " ".join(re.sub(r"\((?:disorder|finding|situation|morphologic abnormality)\)", "", display).split())


def _raw_facts(chart: dict) -> list[Fact]:
    patient = chart.get("patient") or {}
    facts: list[Fact] = []
    age, born = patient.get("age"), patient.get("birth_date")
    age_text = f"Age: {age} years" if age is not None else "Age: not recorded"
    facts.append(Fact("D1", "demographics", age_text + (f" (born {born})" if born else ""), _date(born),
                      data={"age": age, "birth_date": born}))
    facts.append(Fact("D2", "demographics", f"Sex: {patient.get('sex') or 'not recorded'}",
                      data={"sex": patient.get("sex")}))
    if patient.get("deceased_date"):
        facts.append(Fact("D3", "demographics", f"Deceased: {_date(patient['deceased_date'])}",
                          _date(patient["deceased_date"])))

    def category(prefix: str, kind: str, rows: list[dict], text_of, date_key: str, none_text: str,
                 source_key: str | None = None) -> None:
        if not rows:
            facts.append(Fact(f"{prefix}0", kind, none_text))
            return
        for i, row in enumerate(rows, 1):
            facts.append(Fact(f"{prefix}{i}", kind, text_of(row), _date(row.get(date_key)),
                              str(row[source_key]) if source_key and row.get(source_key) else None, data=row))

    def problem(r: dict) -> str:
        text = f"Problem: {r.get('display')}"
        if r.get("snomed_code"):
            text += f" (SNOMED {r['snomed_code']})"
        return text + (f", since {_date(r['onset_date'])}" if r.get("onset_date") else "") + f", {r.get('clinical_status') or 'active'}"

    def medication(r: dict) -> str:
        text = f"Medication: {r.get('medication_name')}"
        for key in ("dosage", "frequency"):
            if r.get(key):
                text += f" {r[key]}"
        text += f" ({r.get('status') or 'active'}"
        return text + (f", ordered {_date(r['authored_at'])})" if r.get("authored_at") else ")")

    def allergy(r: dict) -> str:
        text = f"Allergy: {r.get('substance')}"
        if r.get("reaction"):
            text += f", reaction {r['reaction']}"
        if r.get("severity"):
            text += f" ({r['severity']})"
        return text + (f", recorded {_date(r['recorded_at'])}" if r.get("recorded_at") else "")

    category("P", "problem", list(chart.get("active_problems") or []), problem, "onset_date",
             "Problems: no active problems recorded")
    category("M", "medication", list(chart.get("medications") or []), medication, "authored_at",
             "Medications: no active medications recorded", "id")
    category("A", "allergy", list(chart.get("allergies") or []), allergy, "recorded_at",
             "Allergies: no active allergies recorded")
    category("L", "lab", list(chart.get("labs") or []), lambda r: "Lab " + _result_text(r), "effective_at",
             "Labs: no results recorded")
    category("V", "vital", list(chart.get("vitals") or []), lambda r: "Vital " + _result_text(r), "effective_at",
             "Vitals: none recorded")
    return facts


def _block_len(facts: list[Fact]) -> int:
    return sum(len(f.line()) + 1 for f in facts)


def _trim(facts: list[Fact]) -> tuple[list[Fact], list[str]]:
    """Leave out facts by the rule of the module docstring until the block fits."""
    notes: list[str] = []
    kept = list(facts)
    for kind, keep in (("vital", 0), ("lab", 0), ("medication", KEEP_AT_LEAST), ("problem", KEEP_AT_LEAST)):
        if _block_len(kept) <= MAX_BLOCK_CHARS:
            break
        of_kind = [f for f in kept if f.kind == kind and not f.id.endswith("0")]
        oldest_first = sorted(of_kind, key=lambda f: (f.date or "", f.id))
        dropped: list[Fact] = []
        while _block_len(kept) > MAX_BLOCK_CHARS and len(oldest_first) > keep:
            fact = oldest_first.pop(0)
            kept.remove(fact)
            dropped.append(fact)
        if dropped:
            names = ", ".join(f"{f.id} ({f.date or 'undated'})" for f in dropped)
            notes.append(f"left out to fit the model's context ({kind}s, oldest first): {names}")
    if _block_len(kept) > MAX_BLOCK_CHARS:
        notes.append(f"the facts still exceed {MAX_BLOCK_CHARS} characters; nothing further is left out")
    return kept, notes


def build_facts(chart: dict) -> PatientFacts:
    """The key facts of a chart (``get_patient_chart``'s result), trimmed by rule."""
    patient = chart.get("patient") or {}
    raw = _raw_facts(chart)
    clipped_ids: list[str] = []
    facts: list[Fact] = []
    for fact in raw:
        text, clipped = _clip(fact.text)
        if clipped:
            clipped_ids.append(fact.id)
        facts.append(Fact(fact.id, fact.kind, text, fact.date, fact.source, fact.data))
    kept, notes = _trim(facts)
    kept_ids = {f.id for f in kept}
    lists = {"problem": "active_problems", "medication": "medications", "allergy": "allergies", "lab": "labs",
             "vital": "vitals"}
    complete = frozenset(kind for kind, key in lists.items() if isinstance(chart.get(key), list)
                         and all(f.id in kept_ids for f in raw if f.kind == kind))
    if clipped_ids:
        notes.insert(0, f"shortened to {MAX_FACT_CHARS} characters: {', '.join(clipped_ids)}")
    sex = str(patient.get("sex") or "").lower() or None
    problems = tuple(clean_problem(p.get("display") or "") for p in chart.get("active_problems") or []
                     if p.get("display"))
    return PatientFacts(
        patient_id=str(patient.get("patient_id") or ""), name=patient.get("name"), age=patient.get("age"),
        sex=sex, facts=tuple(kept), trimmed=tuple(notes),
        synthetic_demo_record=bool(chart.get("synthetic_demo_record")), problems=problems, complete=complete,
        birth_date=_date(patient.get("birth_date")),
    )


__all__ = ["Fact", "PatientFacts", "build_facts", "clean_problem", "MAX_BLOCK_CHARS", "MAX_FACT_CHARS"]
