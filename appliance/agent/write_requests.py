"""Whether the clinician's own words ask to change the record, and which change.

Code, not the model, decides this: a request to change the record ("prescribe ...", "add a
penicillin allergy ...", "save a note: ...") must never be answered with prose alone, and a
question that only mentions a drug ("is warfarin 10 mg safe for her?", "should I prescribe
...?") is never a request to write.

Invariants:
- A request is an imperative clause: the verb opens the message or a clause ("..., then
  prescribe ..."), optionally after a politeness ("please", "can you", "go ahead and").
- Dictated text is data: the words are read through ``dictation.instruction_text``, so what
  follows "note:" or sits inside quotes never makes a request.
"""

from __future__ import annotations

import re

from appliance.agent.dictation import instruction_text

PRESCRIBE, ALLERGY, NOTE = "prescribe_medication", "add_allergy", "save_clinical_note"

# Lead-ins that keep a clause imperative; "should I" / "is it" / "what if" do not.
_LEAD = r"(?:(?:please|kindly|now|also|then|and|ok|okay|so)\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?|go ahead and\s+|i(?:'d| would)? (?:like|want) (?:you )?to\s+|let's\s+)*"
_CLAUSE_SPLIT = re.compile(r"(?:[.;!?\n]|,\s*(?:and\s+|then\s+)?|\s+(?:and|then)\s+)", re.IGNORECASE)

_RULES: tuple[tuple[str, re.Pattern], ...] = (
    (ALLERGY, re.compile(_LEAD + r"(?:add|record|document|log|enter|note|flag|chart)\b.*\b(?:allerg\w*|intoleran\w*|anaphyla\w*)", re.IGNORECASE)),
    (NOTE, re.compile(_LEAD + r"(?:save|write|add|document|record|enter|file|create|draft|log)\b.*\bnote\b", re.IGNORECASE)),
    (PRESCRIBE, re.compile(_LEAD + r"(?:prescribe|re-?prescribe|start|commence|initiate|put)\b(?!\s+(?:a|the)\s+note)", re.IGNORECASE)),
)


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT.split(text) if c and c.strip()]


def write_requests(text: str) -> tuple[str, ...]:
    """The write tools the clinician's words ask for, in order of mention (empty for none)."""
    head = instruction_text(text)
    wanted: dict[str, None] = {}
    for clause in _clauses(head):
        for tool, rule in _RULES:
            if rule.match(clause):
                if tool == PRESCRIBE and not _names_a_treatment(clause):
                    continue
                wanted.setdefault(tool, None)
                break
    # "Save a note: ..." puts the verb before the dictation marker, which the clause split keeps.
    if re.match(_LEAD + r"(?:save|write|add|document|record|file|create)\b[^:]*\bnote\s*:", text.strip(), re.IGNORECASE):
        wanted.setdefault(NOTE, None)
    return tuple(wanted)


def _names_a_treatment(clause: str) -> bool:
    """'start him on metformin' or 'prescribe amoxicillin' ask for a prescription; 'start a new
    session' or 'put the chart up' do not."""
    lowered = re.sub("^" + _LEAD, "", clause.lower())
    if lowered.split(" ", 1)[0] in ("prescribe", "re-prescribe", "represcribe"):
        return True
    return bool(re.search(r"\b(?:on|with)\s+\w", lowered))


NOT_CHANGED = "The record was not changed."
