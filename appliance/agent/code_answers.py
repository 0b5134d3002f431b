"""The answer in code's words when code can read every result of the turn (docs/design.md §4.8):
a write (done, refused, failed), a chart read, a patient search, a knowledge look-up, a
prescreen. No model call is spent on text code would replace.

Invariants:
- ``answer`` returns None (the model writes) when any result is one code does not render (an
  image analysis), when an image was attached, or when no tool ran.
- Every line is read from a result, a pre-formatted error, or code's own "not done" sentence:
  nothing from memory. A write is said in clinical words (what was written, for whom), never as
  a record dump or a row id; a prescription's safety check (findings, an override's reason) is
  printed before the answer by every front end (``wording.safety_lines``), so it is not repeated.
- A call that failed and was then retried with the same arguments is said once, by its last
  result.
"""

from __future__ import annotations

from appliance.agent import chart_answers, knowledge_answers
from appliance.agent.reading.chart_topics import ORDER
from appliance.agent.reading.request import reading_of
from appliance.agent.state import AgentState, ToolResult
from mcp_servers.contracts import WRITE_TOOLS

# Look-ups whose "nothing found" text names what was searched, clinician-safe by contract.
_SAYS_WHAT_IT_SEARCHED = frozenset({"find_clinical_trials", "search_medical_literature", "get_trial_details"})


def _last_of_each(results) -> list[ToolResult]:
    """Each call's last result (a retry replaces its failed attempt), in order of first call."""
    last: dict[str, ToolResult] = {}
    for r in results:
        last.pop(r.signature(), None)
        last[r.signature()] = r
    return list(last.values())


def _patient_name(state: AgentState) -> str | None:
    """The patient's name as a chart or a one-match search of this turn gives it."""
    for r in state.tool_results:
        found = r.result if isinstance(r.result, dict) and r.error_type is None else {}
        if r.tool_name == "get_patient_chart" and (found.get("patient") or {}).get("name"):
            return found["patient"]["name"]
        if r.tool_name == "search_patient" and found.get("total_matches") == 1:
            return found["matches"][0].get("name")
    return None


def _write_done(r: ToolResult, name: str | None) -> str:
    a = {**r.args, **(r.result or {})}
    if r.tool_name == "prescribe_medication":
        order = " ".join(str(a[k]) for k in ("medication_name", "dosage", "frequency") if a.get(k))
        head = f"Prescribed {order}" + (f" ({a['notes']})" if a.get("notes") else "") + "."
    elif r.tool_name == "add_allergy":
        details = "; ".join(str(a[k]) for k in ("reaction", "severity") if a.get(k))
        head = f"Recorded an allergy to {a.get('substance')}" + (f" ({details})" if details else "") + "."
    elif r.tool_name == "save_clinical_note":
        head = f"Saved a {a.get('note_type') or 'clinical'} note ({a.get('characters') or len(str(a.get('note_text') or ''))} characters)."
    else:
        shown = {k: v for k, v in r.args.items() if k != "patient_id" and v not in (None, "")}
        head = f"{r.tool_label} written: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown.items()) + "."
    who = f" for {name}" if name else ""
    return head[:-1] + who + ". The record was changed."


def _search(r: ToolResult) -> str:
    found = r.result or {}
    matches = found.get("matches") or []
    name = r.args.get("name")
    if not matches:
        return f"No patient matching '{name}' was found in the record."
    m = matches[0]
    return f"Found {m.get('name')} (born {m.get('birth_date') or 'unknown'}, ID {m.get('patient_id')})."


def render(state: AgentState, r: ToolResult, drug_count: int | None = None) -> str | None:
    """One result in code's words, or None when code does not render it."""
    if r.error_type is not None:
        if r.error_type == "drug_not_in_database" and r.tool_name in ("check_drug_safety", "check_drug_interactions"):
            return knowledge_answers.unknown_drug_error(r.tool_name, r.raw_error, r.args, drug_count)
        error = r.error or f"The {r.tool_label} could not be completed."
        if r.error_type == "not_found" and r.tool_name in _SAYS_WHAT_IT_SEARCHED and r.raw_error:
            # the server's own words say what it searched and what the filters left out
            return f"{r.tool_label}: {r.raw_error.strip().rstrip('.')}."
        return error
    if not isinstance(r.result, dict):
        return None
    if r.tool_name in WRITE_TOOLS:
        return _write_done(r, _patient_name(state))
    if r.tool_name == "get_patient_chart":
        topics = reading_of(state).chart_topics or ORDER
        return chart_answers.render(r.result, topics, state.user_query)
    if r.tool_name == "search_patient":
        return _search(r)
    if r.tool_name == "check_drug_safety":
        return knowledge_answers.safety({"drug": (r.args or {}).get("drug_name"), **r.result}, state.user_query)
    if r.tool_name == "check_drug_interactions":
        return knowledge_answers.interactions(r.result, drug_count)
    renderer = knowledge_answers.RENDERERS.get(r.tool_name)
    return renderer(r.result) if renderer else None


def notes(state: AgentState) -> list[str]:
    """What code read into the words ("did you mean", a pronoun's drug), once each."""
    return list(dict.fromkeys(n for c in state.knowledge_calls for n in c.notes))


def answer(state: AgentState, unavailable: list[str], drug_count: int | None = None) -> str | None:
    """The turn's answer in code's words (see the module docstring), or None."""
    if state.image_findings or state.extracted_entities.has_image or not state.tool_results:
        return None
    parts = []
    for r in _last_of_each(state.tool_results):
        if r.tool_name == "search_patient" and r.error_type is None and any(
                x.tool_name == "get_patient_chart" and x.error_type is None for x in state.tool_results):
            continue  # the chart that follows names the patient
        text = render(state, r, drug_count)
        if text is None:
            return None
        parts.append(text)
    said = "\n".join(parts)
    rendered_errors = {r.error for r in state.tool_results if r.error}  # each said above in code's words
    parts += [m for m in unavailable if m not in said and m not in rendered_errors]
    read = notes(state)
    if read:
        parts.insert(0, "Read as: " + "; ".join(read) + ".")
    return "\n\n".join(p for p in parts if p)


__all__ = ["answer", "notes", "render"]
