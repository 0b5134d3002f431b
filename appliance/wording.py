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
    why = f" (reason: {args['reason']})" if args.get("reason") else ""
    if tool == "change_medication_order" and args.get("new_medication_name"):  # a switch: one write, both orders
        return (f"Switch {words('medication_name')} to {words('new_medication_name', 'dosage', 'frequency')} "
                f"(stops {words('medication_name')}){why}")
    if tool == "change_medication_order":
        return f"Change {words('medication_name')} to {words('dosage', 'frequency') or 'its current dose'}{why}"
    if tool == "update_medication_status":
        verb = {"stop": "Stop", "hold": "Hold", "resume": "Resume", "renew": "Renew"}.get(args.get("action"), "Change")
        return f"{verb} {words('medication_name')}{why}"
    if tool == "add_allergy":
        detail = ", ".join(str(args[k]) for k in ("reaction", "severity") if args.get(k))
        return f"Record an allergy to {words('substance')}" + (f": {detail}" if detail else "")
    if tool == "save_clinical_note":
        return f"Save a {words('note_type') or 'clinical'} note to the chart"
    return TOOL_LABELS.get(tool, tool)


def safety_lines(entry: dict) -> list[str]:
    """A prescription's safety check (``appliance.agent.graph.safety_reports``' entry) as the
    lines ``ask`` and the line session print before the answer: what was ordered, whether it
    was written, every finding most severe first, and what was not checked."""
    order = " ".join(str(entry.get(k)) for k in ("drug", "dosage", "frequency") if entry.get(k))
    patient = f" for {entry['patient_id']}" if entry.get("patient_id") else ""
    if entry.get("written"):
        state = "written, safety findings overridden" if entry.get("override_reason") else "written"
    elif entry.get("outcome") == "rejected_by_user" and (entry.get("blocking") or entry.get("not_checked")):
        state = "NOT WRITTEN: refused by the safety check"
    else:
        state = f"NOT WRITTEN ({str(entry.get('outcome') or 'not done').replace('_', ' ')})"
    findings = [f for f in entry.get("findings") or [] if f.get("severity") != "info"]
    tally = plural(len(findings), "finding") if findings else "no findings"
    lines = [f"Medication safety check: {order}{patient}: {tally}; {state}."]
    for f in entry.get("findings") or []:
        lines.append(f"  {str(f.get('severity')).upper()} {str(f.get('kind')).replace('_', ' ')}: {f.get('text')}")
    if entry.get("override_reason"):
        lines.append(f"  Override reason recorded: {entry['override_reason']}")
    return lines
