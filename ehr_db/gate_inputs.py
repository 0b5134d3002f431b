"""The chart facts the medication safety gate reads, as an import would change them.

The gate (``appliance.safety``) decides an order from the chart ``get_patient_chart`` returns.
An import may not change what it reads unseen, any more than an allergy:

| Gate input            | Where the gate reads it                          | Record rows guarded here                         |
|-----------------------|--------------------------------------------------|--------------------------------------------------|
| eGFR                  | ``chart.renal_status`` (renal rules, ``checks``) | observations, ``EGFR_LOINC`` or "eGFR" display   |
| kidney disease        | ``chart.renal_status`` (CKD stage floor)         | active conditions, ``CKD_SNOMED`` or CKD display |
| pregnancy             | ``chart.pregnancy_problem`` (``checks``)         | active conditions, 77386006 or "pregnan" display;|
|                       |                                                  | pregnancy-status observations 82810-3, 11449-6   |
| creatinine            | renal rules (stand-in for eGFR)                  | observations 2160-0, 38483-4, 14682-9            |
| potassium             | hyperkalaemia interactions                       | observations 2823-3, 6298-4                      |
| body weight           | weight-based (mg/kg) doses                       | observations ``WEIGHT_LOINC`` or "weight" display|
| QT / QTc interval     | QT-prolonging interactions                       | observations 8634-8, 8636-3                      |
| INR                   | anticoagulant interactions                       | observations 6301-6, 34714-6, 46418-0            |
| age, sex              | ``chart.patient_age``, sex rules                 | patients (identity: ``import_checks``)           |
| allergies, active meds| allergy and duplicate checks                     | ``import_checks.differences``                    |

Invariants:
- ``GateView`` of a patient is what the gate would read: per lab kind the latest row (newest
  ``effective_at``, first row on a tie, as the chart orders them) with its value and unit, and
  each active (active, recurrence, relapse) pregnancy or kidney-disease condition. A latest
  result taken back (entered-in-error, cancelled) is a change too, though the chart still lists it.
- ``Guard`` takes a patient's view before the first row of that patient an import writes
  (``touch``) and compares it with the view after the whole import (``differences``): a value
  changed in place, a newer value that changes the latest, a condition resolved, moved, recoded,
  added. A patient the import itself created has no view before and is not compared. Values are
  compared as shown (to 4 decimals) in the record's unit for their code (``units``), so a
  conversion's last digits are not a change.
- The codes and displays here mirror ``appliance.safety.chart`` (which ``ehr_db`` may not
  import); a test holds them equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlite_utils import Database

from ehr_db.import_checks import Difference

EGFR_LOINC = frozenset({"33914-3", "48642-3", "48643-1", "62238-1", "88293-6", "88294-4", "98979-8"})
PREGNANCY_SNOMED = frozenset({"77386006"})
CKD_SNOMED = frozenset({"709044004", "433144002", "431857002"})
WEIGHT_LOINC = frozenset({"29463-7", "3141-9", "3142-7", "8350-1", "8351-9"})
# kind -> (LOINC codes, display pattern or None). The display patterns are the gate's own.
LAB_KINDS: dict[str, tuple[frozenset[str], re.Pattern | None]] = {
    "eGFR": (EGFR_LOINC, re.compile(r"\begfr\b|glomerular filtration", re.I)),
    "creatinine": (frozenset({"2160-0", "38483-4", "14682-9"}), None),
    "potassium": (frozenset({"2823-3", "6298-4"}), None),
    "body weight": (WEIGHT_LOINC, re.compile(r"^\s*(body )?weight\s*$", re.I)),
    "QT interval": (frozenset({"8634-8"}), None),
    "QTc interval": (frozenset({"8636-3"}), None),
    "INR": (frozenset({"6301-6", "34714-6", "46418-0"}), None),
    "pregnancy status": (frozenset({"82810-3", "11449-6"}), None),
}
ACTIVE_CONDITIONS = ("active", "recurrence", "relapse")
WITHDRAWN = ("entered-in-error", "cancelled")  # an observation status that takes a result back
_PREGNANT = re.compile(r"\bpregnan", re.I)
_NOT_PREGNANT = re.compile(r"\bnot pregnant\b", re.I)
_CKD = re.compile(r"chronic (kidney|renal) disease|\bckd\b|end stage (renal|kidney)|\besrd\b|\beskd\b", re.I)
WHY = "a fact the safety gate reads"


def lab_kind(loinc: str | None, display: str | None) -> str | None:
    """The gate input an observation row is, or None."""
    for kind, (codes, pattern) in LAB_KINDS.items():
        if (loinc or "") in codes or (pattern is not None and pattern.search(display or "")):
            return kind
    return None


def condition_kind(snomed: str | None, display: str | None) -> str | None:
    """"pregnancy", "kidney disease" or None, as ``appliance.safety.chart`` reads a problem."""
    text = display or ""
    if (snomed or "") in PREGNANCY_SNOMED or (_PREGNANT.search(text) and not _NOT_PREGNANT.search(text)):
        return "pregnancy"
    if (snomed or "") in CKD_SNOMED or _CKD.search(text):
        return "kidney disease"
    return None


def _number(value: float) -> str:
    return f"{round(value, 4):g}"


def lab_words(row: dict | None) -> str | None:
    """"24 mL/min/1.73m2 (2026-10-06)", or None."""
    if row is None:
        return None
    value = _number(row["value_num"]) if row.get("value_num") is not None else str(row.get("value_text"))
    unit = f" {row['unit']}" if row.get("unit") else ""
    withdrawn = f", {row['status']}" if row.get("status") in WITHDRAWN else ""
    return f"{value}{unit} ({row.get('effective_at')}{withdrawn})"


def condition_words(row: dict | None) -> str | None:
    """"Pregnancy (active since 2026-04-06)", or None."""
    if row is None:
        return None
    since = f" since {row['onset_date']}" if row.get("onset_date") else ""
    return f"{row.get('display')} ({row.get('clinical_status')}{since})"


@dataclass(frozen=True)
class GateView:
    labs: dict[str, dict]  # kind -> latest row
    conditions: dict[str, dict]  # condition id -> active gate-relevant row


def gate_view(db: Database, patient_id: str) -> GateView:
    """What the gate would read of ``patient_id``'s record now."""
    labs: dict[str, dict] = {}
    for row in db.query("SELECT id, loinc_code, display, value_num, value_text, unit, effective_at, status "
                        "FROM observations WHERE patient_id = ? ORDER BY effective_at DESC, rowid", [patient_id]):
        if row["value_num"] is None and row["value_text"] is None:
            continue
        kind = lab_kind(row["loinc_code"], row["display"])
        if kind is not None and kind not in labs:
            labs[kind] = row
    conditions = {}
    for row in db.query("SELECT id, snomed_code, display, clinical_status, onset_date FROM conditions "
                        "WHERE patient_id = ? AND clinical_status IN (?, ?, ?)", [patient_id, *ACTIVE_CONDITIONS]):
        if condition_kind(row["snomed_code"], row["display"]) is not None:
            conditions[row["id"]] = row
    return GateView(labs, conditions)


class GateChange(Difference):
    """A change to a gate input: old and new shown as the chart words them."""

    def describe(self) -> str:
        return (f"patient {self.patient_id}: {self.table} {self.row_id}: {self.field} "
                f"{self.before or '(none)'} -> {self.after or '(none)'} ({self.why})")


def _same_lab(old: dict | None, new: dict | None) -> bool:
    if old is None or new is None:
        return old is new
    same_value = (_number(old["value_num"]) == _number(new["value_num"])
                  if old["value_num"] is not None and new["value_num"] is not None
                  else old["value_num"] is None and new["value_num"] is None and old["value_text"] == new["value_text"])
    return (same_value and (old["unit"] or "") == (new["unit"] or "")
            and (old["status"] in WITHDRAWN) == (new["status"] in WITHDRAWN))


def compare(db: Database, patient_id: str, before: GateView, after: GateView) -> list[GateChange]:
    """Each gate input of ``patient_id`` that differs between ``before`` and ``after``."""
    found: list[GateChange] = []
    for kind in LAB_KINDS:
        old, new = before.labs.get(kind), after.labs.get(kind)
        if not _same_lab(old, new):
            row_id = (new or old)["id"]
            found.append(GateChange("observations", row_id, patient_id, f"latest {kind}", lab_words(old),
                                    lab_words(new), WHY))
    for cid in sorted(set(before.conditions) | set(after.conditions)):
        old, new = before.conditions.get(cid), after.conditions.get(cid)
        if old is not None and new is not None and all(old[k] == new[k] for k in old):
            continue
        if new is None:  # no longer an active gate condition of this patient: say what it is now
            now = list(db.query("SELECT * FROM conditions WHERE id = ?", [cid]))
            new_words = (condition_words(now[0]) if now and now[0]["patient_id"] == patient_id
                         else f"moved to patient {now[0]['patient_id']}" if now else None)
        else:
            new_words = condition_words(new)
        kind = condition_kind((old or new)["snomed_code"], (old or new)["display"])
        found.append(GateChange("conditions", cid, patient_id, kind, condition_words(old), new_words, WHY))
    return found


@dataclass
class Guard:
    """One import's views before, per patient it touches; see the module docstring."""

    before: dict[str, GateView] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)  # patients the import itself created

    def touch(self, db: Database, *patient_ids: str | None) -> None:
        """Call before writing a row of these patients (observations, conditions)."""
        for pid in patient_ids:
            if pid and pid not in self.before and pid not in self.created:
                self.before[pid] = gate_view(db, pid)

    def differences(self, db: Database) -> list[GateChange]:
        out: list[GateChange] = []
        for pid, view in self.before.items():
            out += compare(db, pid, view, gate_view(db, pid))
        return out
