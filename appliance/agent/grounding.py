"""What a call's arguments must be before the call is made (docs/design.md §4.4 steps 1-2, §13):
well formed, and grounded in what the clinician said and the turn found.

Invariants:
- Arguments are validated against the tool contract (``ARG_SCHEMAS``) before any call; a
  patient ID must also be a FHIR resource id (``common.patient_ids``). Invalid arguments never
  reach a server.
- A patient ID is used only when it is grounded: typed by the clinician in this message
  (recognised as an ID, picked from code's list of matches, or written there verbatim as a
  word with a digit), the patient open in the terminal (current in the line session), or
  returned by an earlier call this turn. An ID the model produced from nowhere counts as
  missing, so code asks the clinician instead of acting on a guess. A write goes only to a
  patient the clinician named: a search's match counts for it only when the clinician said
  the name searched for, so an instruction in a tool's output cannot move a write to another
  patient.
- The clinical values of a write (drug, dose, frequency; allergen, reaction) must be the
  clinician's own words, in this message or the recent exchanges: a value the model filled in
  counts as missing and the clinician is asked; a drug may be the generic name of one they
  named ("Tylenol" written, acetaminophen prescribed). The free text of a write (a
  prescription's notes, a note's text) may not copy what the model read this turn and the
  clinician did not type (``COPIED_RUN`` words in a row). The drug of an order must be a drug
  name the recogniser knows (``known_drug``): "mild" is asked about, not prescribed.
- Words are compared with the agent's one tokeniser (``reading.words``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from appliance.agent.order_gate import ORDER_TOOLS, implied_dosage_said
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.words import words
from appliance.agent.state import AgentState, ToolResult
from appliance.agent.tool_results import error_result
from common.patient_ids import is_patient_id
from mcp_servers.contracts import ARG_SCHEMAS, WRITE_TOOLS, ToolTable

# Per tool, from its record (``mcp_servers.contracts.Tool``): the write fields whose values must
# be the clinician's words (the grammar makes the model fill every field, so a value nobody said
# would otherwise reach the approval dialog), those of them a change may leave null (the order
# keeps its own value), and the free-text fields that may not copy what the model read.
GROUNDED_WRITE_FIELDS = ToolTable(lambda tool: tool.said_fields)
NULLABLE_GROUNDED = ToolTable(lambda tool: tool.keeps_when_null)
FREE_TEXT_FIELDS = ToolTable(lambda tool: tool.free_text_fields)
# How many words in a row copied from what the model read (and the clinician did not type) make
# a copy: short enough for an instruction, long enough that a dictated note sharing a phrase with
# the chart ("type 2 diabetes") is not one.
COPIED_RUN = 4
# Write fields that name a drug: the generic of a drug the clinician named is theirs too
# ("Tylenol" written, "acetaminophen" prescribed), since INPUT_ASSEMBLY offers the generic.
DRUG_FIELDS = frozenset({"medication_name", "new_medication_name", "substance"})


def validate_args(tool: str, args: dict | None) -> tuple[dict | None, str | None, list[str]]:
    """(clean args, error type, fields): the missing fields for ``missing_required_args``, the
    rejected ones for ``invalid_args``. A patient ID must be well formed (any FHIR resource id,
    ``common.patient_ids``; surrounding spaces are dropped); whether the record holds it is
    the record's answer."""
    try:
        clean = ARG_SCHEMAS[tool].model_validate(args or {}).model_dump()
    except ValidationError as exc:
        fields = {".".join(map(str, e["loc"])): e["type"] for e in exc.errors()}
        missing = [f for f, kind in fields.items() if kind in ("missing", "string_too_short", "too_short")]
        if missing:
            return None, "missing_required_args", missing
        return None, "invalid_args", list(fields)
    if "patient_id" in clean:
        clean["patient_id"] = clean["patient_id"].strip()
        if not is_patient_id(clean["patient_id"]):
            return None, "invalid_args", ["patient_id"]
    return clean, None, []


def said_by_clinician(value: str, clinician_text: str) -> bool:
    """Whether ``value``'s words occur, in order and adjacent, in what the clinician wrote."""
    want, have = words(value), words(clinician_text)
    if not want:
        return False
    n = len(want)
    return any(have[i:i + n] == want for i in range(len(have) - n + 1))


def ungrounded_fields(tool: str, args: dict, clinician_text: str, drugs_named: tuple[str, ...] = ()) -> list[str]:
    named = {tuple(words(g)) for g in drugs_named}
    return [
        f for f in GROUNDED_WRITE_FIELDS.get(tool, ())
        if not (args.get(f) is None and f in NULLABLE_GROUNDED.get(tool, ()))  # kept as charted
        and not said_by_clinician(str(args.get(f) or ""), clinician_text)
        and not (f == "dosage" and implied_dosage_said(str(args.get(f) or ""), clinician_text))
        and not (f in DRUG_FIELDS and tuple(words(str(args.get(f) or ""))) in named)
    ]


def _runs(text: str, n: int) -> set[tuple[str, ...]]:
    found = words(text)
    return {tuple(found[i:i + n]) for i in range(len(found) - n + 1)}


def copied_fields(tool: str, args: dict, clinician_text: str, model_read: str) -> list[str]:
    """The free-text fields (``FREE_TEXT_FIELDS``) holding ``COPIED_RUN`` words in a row that
    the model read (``model_read``) and the clinician did not type."""
    foreign = _runs(model_read, COPIED_RUN) - _runs(clinician_text, COPIED_RUN)
    return [f for f in FREE_TEXT_FIELDS.get(tool, ()) if _runs(str(args.get(f) or ""), COPIED_RUN) & foreign]


def model_read(state: AgentState) -> str:
    """What the model read this turn that the clinician did not write: the tool results and
    failures so far, image findings, and the assistant's side of the recent exchanges."""
    seen = [text for role, text in state.conversation_history if role != "user"]
    for r in state.tool_results:
        seen += [r.formatted_result or "", r.error or "", r.raw_error or ""]
    if state.image_findings:
        seen.append(json.dumps(state.image_findings, ensure_ascii=False))
    return "\n".join(seen)


def clinician_text(state: AgentState) -> str:
    """This message and the clinician's side of the recent exchanges."""
    said = [text for role, text in state.conversation_history if role == "user"]
    return "\n".join(said + [state.user_query])


def grounded_patient_ids(state: AgentState, *, for_write: bool = False) -> set[str]:
    """The patient IDs a call may use. ``for_write``: only patients the clinician named (typed,
    picked, open, or found by a search for a name they said), never one reached through a
    search or a call that a tool's output led the model to."""
    ids = set(state.extracted_entities.patient_ids) | reading_of(state).typed_ids
    if state.selected_patient_id:
        ids.add(state.selected_patient_id)
    said = set(words(clinician_text(state))) if for_write else set()
    for r in state.tool_results:
        searched = str(r.args.get("name") or "")
        if r.result and r.tool_name == "search_patient" and (not for_write or set(words(searched)) <= said):
            ids.update(m.get("patient_id") for m in r.result.get("matches", []))
        if not for_write and r.error_type is None and r.args.get("patient_id"):
            ids.add(r.args["patient_id"])
    return ids


@dataclass(frozen=True)
class Grounding:
    """What one call's arguments are checked against: the patient IDs it may use, the
    clinician's words (``said``) with the generics of the drugs they named, what the model
    read this turn, and the drug recogniser's yes or no for an order's drug."""

    patient_ids: frozenset[str]
    said: str
    drugs_named: tuple[str, ...] = ()
    read: str = ""
    known_drug: Callable[[str], bool] | None = None

    @classmethod
    def of(cls, state: AgentState, tool: str, known_drug: Callable[[str], bool] | None = None) -> Grounding:
        return cls(frozenset(grounded_patient_ids(state, for_write=tool in WRITE_TOOLS)), clinician_text(state),
                   state.extracted_entities.drugs_named, model_read(state), known_drug)

    def patient_ungrounded(self, clean: dict) -> bool:
        return "patient_id" in clean and clean["patient_id"] not in self.patient_ids


def grounding_problem(tool: str, clean: dict, grounding: Grounding) -> ToolResult | None:
    """The error result for the first ungrounded argument of a validated call, or None."""
    if grounding.patient_ungrounded(clean):
        return error_result(tool, clean, "missing_required_args", "patient ID not grounded", ["patient_id"])
    said = grounding.said
    unsaid = ungrounded_fields(tool, clean, said, grounding.drugs_named) + copied_fields(tool, clean, said,
                                                                                          grounding.read)
    if unsaid:
        return error_result(tool, clean, "missing_required_args", "values not given by the clinician", unsaid)
    if grounding.known_drug is not None and tool in ORDER_TOOLS and not grounding.known_drug(clean["medication_name"]):
        return error_result(tool, clean, "missing_required_args", "not a drug name the appliance knows",
                            ["medication_name"])
    return None
