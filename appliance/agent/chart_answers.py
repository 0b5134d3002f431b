"""Chart questions: what code reads in the words ("any allergies?", "what is she on?", "last
HbA1c?") and the chart's facts rendered by code for them (issue 23, "code owns every fact code
can read").

Invariants:
- The topics are read with the request (``reading.chart_topics``, the reading's
  ``chart_topics``); a request to write asks about no topic.
- ``render`` writes only what the chart result holds, row for row (names, values, units and
  dates as recorded), under the topics asked; a topic with no rows says so in words ("No
  allergies recorded."), never "none known" where the chart did not say it.
"""

from __future__ import annotations

import re

from appliance.agent.reading.chart_topics import ORDER


def _value(row: dict) -> str:
    unit = f" {row['unit']}" if row.get("unit") else ""
    flag = f" ({row['flag']})" if row.get("flag") in ("H", "L", "HH", "LL") else ""
    when = f", {row['effective_at']}" if row.get("effective_at") else ""
    return f"{row.get('display')}: {row.get('value')}{unit}{flag}{when}"


def _asked_analytes(query: str, rows: list[dict]) -> list[dict]:
    """The lab rows whose name the words mention (all of them when none is named)."""
    lowered = query.lower()
    aliases = {"hba1c": "a1c", "a1c": "a1c", "haemoglobin a1c": "a1c", "hemoglobin a1c": "a1c"}
    wanted = [r for r in rows if any(part in lowered for part in _names_of(str(r.get("display") or ""), aliases))]
    return wanted or rows


def _names_of(display: str, aliases: dict[str, str]) -> set[str]:
    lowered = display.lower()
    names = {lowered}
    names |= {alias for alias, target in aliases.items() if target in lowered}
    head = re.split(r"[ (]", lowered)[0]
    if len(head) >= 3 and head not in ("body", "total", "urine", "white", "platelet", "heart", "oxygen"):
        names.add(head)
    return names


def render(chart: dict, topics: tuple[str, ...], query: str = "") -> str:
    """The chart's facts for ``topics``, in code's words (see the module docstring)."""
    patient = chart.get("patient") or {}
    head = f"From the chart of {patient.get('name') or patient.get('patient_id')}"
    if patient.get("birth_date"):
        head += f" (born {patient['birth_date']}, ID {patient.get('patient_id')})"
    lines = [head + ":"]
    for topic in topics or ORDER:
        rows = chart.get(_SECTION[topic])
        if not isinstance(rows, list):
            lines.append(f"{_TITLE[topic]}: not included in the chart that was read.")
            continue
        if topic == "labs":
            rows = _asked_analytes(query, rows)
        if topic == "medications" and rows:
            lines += medication_lines(chart)
            continue
        if not rows:
            lines.append(_NONE[topic])
            continue
        lines.append(f"{_TITLE[topic]}:")
        lines += [f"- {_ROW[topic](row)}" for row in rows]
    return "\n".join(lines)


def _allergy(row: dict) -> str:
    details = "; ".join(str(row[k]) for k in ("reaction", "severity") if row.get(k))
    return f"{row.get('substance')}" + (f" ({details})" if details else "")


def _medication(row: dict) -> str:
    words = " ".join(str(row[k]) for k in ("medication_name", "dosage", "frequency") if row.get(k))
    status = row.get("status")
    return words + (f" [{status}]" if status and status != "active" else "")


# How each order status is listed (the chart's medications hold active and held orders; its
# past_medications the stopped and completed ones): each apart, under its own heading.
_STATUS_HEADINGS = (("Medications", ("active", "draft")), ("Held", ("on-hold",)),
                    ("Stopped", ("stopped", "cancelled")), ("Completed", ("completed",)))


def medication_lines(chart: dict) -> list[str]:
    """The chart's orders under one heading per status: active, held, stopped, completed."""
    rows = [r for r in (chart.get("medications") or []) + (chart.get("past_medications") or []) if isinstance(r, dict)]
    lines: list[str] = []
    for title, statuses in _STATUS_HEADINGS:
        found = [r for r in rows if (r.get("status") or "active") in statuses]
        if found:
            lines.append(f"{title}:")
            lines += [f"- {_order(r)}" for r in found]
    return lines


def _order(row: dict) -> str:
    words = " ".join(str(row[k]) for k in ("medication_name", "dosage", "frequency") if row.get(k))
    why = row.get("status_reason")
    return words + (f" ({why})" if why and row.get("status") != "active" else "")


def _problem(row: dict) -> str:
    onset = f", since {row['onset_date']}" if row.get("onset_date") else ""
    return f"{row.get('display')}{onset}"


def _note(row: dict) -> str:
    text = " ".join(str(row.get("text") or "").split())
    return f"{row.get('created_at')} {row.get('note_type') or ''} note ({row.get('author') or 'unknown author'}): {text}"


_SECTION = {"allergies": "allergies", "medications": "medications", "problems": "active_problems", "labs": "labs",
            "vitals": "vitals", "notes": "recent_notes"}
_TITLE = {"allergies": "Allergies", "medications": "Medications", "problems": "Active problems",
          "labs": "Latest labs", "vitals": "Latest vital signs", "notes": "Recent notes"}
_NONE = {"allergies": "No allergies recorded.", "medications": "No medications recorded.",
         "problems": "No active problems recorded.", "labs": "No lab results recorded.",
         "vitals": "No vital signs recorded.", "notes": "No notes recorded."}
_ROW = {"allergies": _allergy, "medications": _medication, "problems": _problem, "labs": _value, "vitals": _value,
        "notes": _note}

__all__ = ["medication_lines", "render"]
