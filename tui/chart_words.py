"""How the terminal words a chart's identity and allergies, the same in the banner, the chart
panel and the approval dialog.

Invariant: an empty allergy list reads "allergies not recorded", never "no allergies"; "no
known allergies" is shown only when the chart itself records it (a no-known-allergy entry,
SNOMED CT 716186003 or 409137002, or a substance that says so).
"""

from __future__ import annotations

import re

from rich.text import Text

# SNOMED CT: 716186003 No known allergy; 409137002 No known drug allergy.
NO_KNOWN_ALLERGY_CODES = {"716186003": "no known allergies", "409137002": "no known drug allergies"}
_NKA_TEXT = re.compile(r"^\s*(nka|nkda|no known (drug )?allerg(y|ies))\s*$", re.IGNORECASE)

NOT_RECORDED = "allergies not recorded"


def _join(*parts) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def _no_known(entry: dict) -> str | None:
    code = str(entry.get("substance_code") or "")
    if code in NO_KNOWN_ALLERGY_CODES:
        return NO_KNOWN_ALLERGY_CODES[code]
    substance = str(entry.get("substance") or "")
    if _NKA_TEXT.match(substance):
        return "no known drug allergies" if "d" in substance.lower().replace("known", "") else "no known allergies"
    return None


def allergy_status(chart: dict) -> tuple[str, list[str]]:
    """(``recorded`` | ``none_known`` | ``not_recorded``, lines): the allergies as lines, the
    chart's own no-known-allergy statement, or the fact that nothing is recorded."""
    entries = chart.get("allergies")
    entries = entries if isinstance(entries, list) else []
    lines, none_known = [], []
    for entry in entries:
        if not isinstance(entry, dict):
            lines.append(str(entry))
            continue
        stated = _no_known(entry)
        if stated:
            none_known.append(stated)
            continue
        detail = ", ".join(str(x) for x in (entry.get("reaction"), entry.get("severity")) if x)
        lines.append(_join(entry.get("substance") or "unnamed substance", f"({detail})" if detail else None))
    if lines:
        return "recorded", lines
    if none_known:
        return "none_known", [none_known[0]]
    return "not_recorded", [NOT_RECORDED]


def allergy_text(status: str, lines: list[str]) -> Text:
    """The allergy line of ``allergy_status``: recorded allergies after a reversed ALLERGIES
    (readable on a 16-colour console), "not recorded" in yellow, a no-known statement plain."""
    text = Text()
    if status == "recorded":
        text.append("ALLERGIES:", style="bold reverse red")
        text.append(" " + "; ".join(lines), style="bold red")
    else:
        text.append("Allergies: ", style="bold")
        text.append(lines[0], style="bold yellow" if status == "not_recorded" else "")
    return text


def identity_line(chart: dict) -> str:
    """'John Smith · 67 y · male · MRN DEMO-000123'."""
    patient = chart.get("patient") or chart.get("demographics") or {}
    age = f"{patient['age']} y" if patient.get("age") is not None else None
    mrn = f"MRN {patient['mrn']}" if patient.get("mrn") else None
    parts = [patient.get("name") or "Unknown name", age, patient.get("sex"), mrn]
    return " · ".join(str(p) for p in parts if p)
