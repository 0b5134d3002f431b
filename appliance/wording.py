"""Wording shared by the terminal, the line session and the trace: counts in words, local times.

Invariant: stored timestamps are UTC ISO 8601; anything shown to the clinician is local time.
"""

from __future__ import annotations

from datetime import datetime

from mcp_servers.contracts import TOOL_LABELS


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 match``, ``3 matches``, ``0 exchanges``."""
    if count == 1:
        return f"1 {noun}"
    if plural_form is None:
        plural_form = noun + ("es" if noun.endswith(("s", "sh", "ch", "x", "z")) else "s")
    return f"{count} {plural_form}"


def local_time(iso: str | None, *, seconds: bool = False) -> str:
    """A stored UTC timestamp as local date and time ('2026-11-25 09:14'); unparseable text as is."""
    if not iso:
        return ""
    try:
        moment = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def action_words(tool: str, args: dict) -> str:
    """The write as a clinician would say it: 'Prescribe amoxicillin 500 mg three times daily'."""
    def words(*keys: str) -> str:
        return " ".join(str(args[k]).strip() for k in keys if args.get(k) not in (None, ""))

    if tool == "prescribe_medication":
        text = "Prescribe " + words("medication_name", "dosage", "frequency")
        return text + (f" (notes: {args['notes']})" if args.get("notes") else "")
    if tool == "add_allergy":
        detail = ", ".join(str(args[k]) for k in ("reaction", "severity") if args.get(k))
        return f"Record an allergy to {words('substance')}" + (f": {detail}" if detail else "")
    if tool == "save_clinical_note":
        return f"Save a {words('note_type') or 'clinical'} note to the chart"
    return TOOL_LABELS.get(tool, tool)
