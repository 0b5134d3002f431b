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
- A prescription is asked for by "prescribe ..." / "Rx: ...", by "start/put/commence/initiate
  <patient> on ...", or by an order verb ("start", "begin", "order", "give", "add", "restart",
  "resume", ...) followed by a treatment and a dose ("start metformin 500 mg twice daily",
  "order amoxicillin 500mg TID"); an order verb with no dose after a word ("order a CBC", "give
  me her chart", "start a new session") is not one.
- A message that is an order and nothing else ("amoxicillin 500 mg PO TID x 7 days": a
  treatment, a dose and a frequency, no question mark, no question word first) is a
  prescription too, as a written order line is on a ward.
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
    (PRESCRIBE, re.compile(_LEAD + r"(?:prescribe|re-?prescribe|rx\b\s*:?|start|commence|initiate|put|begin|order|give|add|restart|resume)\b(?!\s+(?:a|the)\s+note)", re.IGNORECASE)),
)

# The verbs that may open a prescribing clause (``appliance.agent.orders`` finds the clause with it).
PRESCRIBING_VERB = re.compile(r"\b(?:re-?prescribe|prescribe|rx\b|start|commence|initiate|put|begin|order|give|add|restart|resume)\b", re.IGNORECASE)

# An amount after at least one word of treatment: "metformin 500 mg", "amoxicillin 500mg",
# "ceftriaxone 1 g", "salbutamol 2 puffs"; "order 2 units" (a number straight after the verb) is not.
_AMOUNT = (r"\d+(?:[.,]\d+)?(?:\s*/\s*\d+(?:[.,]\d+)?)?\s*(?:mg|mcg|µg|ug|g|gm|grams?|milligrams?|micrograms?|ml|mL|"
           r"units?|iu|meq|mmol|tabs?|tablets?|caps?|capsules?|puffs?|drops?|sprays?|patch(?:es)?|mg/kg|%)\b")
_DOSE_AFTER_A_NAME = re.compile(r"^\S+\s+(?:[a-z][\w\-/]*\s+){1,4}?" + _AMOUNT, re.IGNORECASE)

# An order line: a treatment's name (one to four words), an amount, then a frequency somewhere after.
_FREQUENCY = (r"(?:daily|nightly|weekly|bid|b\.i\.d\.?|tid|t\.i\.d\.?|qid|q\.i\.d\.?|qd|qds|tds|bd|od|qhs|qam|qpm|hs|prn|"
              r"q\s*\d+(?:\s*-\s*\d+)?\s*(?:h|hr|hrs|hours?)|once|twice|(?:three|four) times|every|at (?:night|bedtime)|"
              r"stat|in the (?:morning|evening))")
_ORDER_LINE = re.compile(r"^((?:[a-z][\w\-/]*\s+){1,4}?)" + _AMOUNT + r"(.*)$", re.IGNORECASE)
# Words that make the start of a message something other than a treatment's name.
_NOT_A_NAME = frozenset("""what how is are was were can could should would does do did why when which who whom any has
    have had tell show find check compare list explain about he she they it we i you patient his her their takes take
    taking took on last latest recent current previous""".split())


def _is_order_line(text: str) -> bool:
    """The message is an order and nothing else (see the module docstring)."""
    match = _ORDER_LINE.match(text.strip())
    if not match or "?" in text:
        return False
    name_words = match.group(1).lower().split()
    return not set(name_words) & _NOT_A_NAME and bool(re.search(r"\b" + _FREQUENCY + r"\b", match.group(2), re.I))


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
    if not wanted and _is_order_line(head):
        wanted[PRESCRIBE] = None  # the message is an order line and nothing else
    # "Save a note: ..." puts the verb before the dictation marker, which the clause split keeps.
    if re.match(_LEAD + r"(?:save|write|add|document|record|file|create)\b[^:]*\bnote\s*:", text.strip(), re.IGNORECASE):
        wanted.setdefault(NOTE, None)
    return tuple(wanted)


def _names_a_treatment(clause: str) -> bool:
    """'start him on metformin' or 'prescribe amoxicillin' ask for a prescription; 'start a new
    session' or 'put the chart up' do not."""
    lowered = re.sub("^" + _LEAD, "", clause.lower())
    verb = re.split(r"[\s:]", lowered, maxsplit=1)[0]
    if verb in ("prescribe", "re-prescribe", "represcribe", "rx"):
        return True
    if verb in ("start", "commence", "initiate", "put", "restart", "resume") and re.search(r"\b(?:on|with)\s+\w", lowered):
        return True
    return bool(_DOSE_AFTER_A_NAME.match(lowered))


NOT_CHANGED = "The record was not changed."
