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
- A message that is an order and nothing else ("amoxicillin 500 mg PO TID x 7 days", "augmentin
  875 bid", "acetaminophen 650 mg PRN max 12/day": a treatment, a dose with or without its unit,
  and a frequency or "PRN", no question mark, no question word first) is a prescription too, as
  a written order line is on a ward.
- A change to an order on the chart is asked for by a change verb (``medication.changes``:
  increase, titrate, change, stop, d/c, hold, resume, renew, refill, continue, ...) opening a
  clause and followed by a drug the recogniser knows, or a misspelling of one (for the
  question "did you mean ...?"): a new dose or frequency is ``change_medication_order``; stop,
  hold, resume and renew are ``update_medication_status``. A switch of a named order ("switch
  lisinopril to losartan 50 mg daily") is ``change_medication_order`` with the new drug (one
  write that stops the old order); "switch to <drug>" with no old drug, and restarting or
  continuing a drug with a new dose and frequency, are new prescriptions.
"""

from __future__ import annotations

import functools
import re

from appliance.agent.reading.dictation import instruction_text
from appliance.agent.reading.words import name_words
from appliance.medication.changes import change_verb, read_change
from appliance.medication.names import DrugRecogniser
from appliance.medication.order_words import AMOUNT_RE, AS_NEEDED_RE, FREQUENCY_RES
from appliance.medication.spelling import suggestion
from mcp_servers.contracts import ALLERGY, CHANGE, NOTE, PRESCRIBE, STATUS

# Lead-ins that keep a clause imperative; "should I" / "is it" / "what if" do not.
_LEAD = r"(?:(?:please|kindly|now|also|then|and|ok|okay|so)\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?|go ahead and\s+|i(?:'d| would)? (?:like|want) (?:you )?to\s+|let's\s+)*"
_CLAUSE_SPLIT = re.compile(r"(?:[;!?\n]|\.(?!\d)|,\s*(?:and\s+|then\s+)?|\s+(?:and|then)\s+)",
                           re.IGNORECASE)  # "2.5 mg" is one clause

# The verbs that may open a prescribing clause (``reading.orders`` finds the clause with it).
_ORDER_VERBS = r"(?:re-?prescribe|prescribe|rx\b\s*:?|start|commence|initiate|put|begin|order|give|add|restart|resume)"
PRESCRIBING_VERB = re.compile(rf"\b{_ORDER_VERBS}", re.IGNORECASE)

_RULES: tuple[tuple[str, re.Pattern], ...] = (
    (ALLERGY, re.compile(_LEAD + r"(?:add|record|document|log|enter|note|flag|chart)\b.*\b(?:allerg\w*|intoleran\w*|anaphyla\w*)", re.IGNORECASE)),
    (NOTE, re.compile(_LEAD + r"(?:save|write|add|document|record|enter|file|create|draft|log)\b.*\bnote\b", re.IGNORECASE)),
    (PRESCRIBE, re.compile(_LEAD + _ORDER_VERBS + r"\b(?!\s+(?:a|the)\s+note)", re.IGNORECASE)),
)

# Words that make the start of a message something other than a treatment's name.
_NOT_A_NAME = frozenset("""what how is are was were can could should would does do did why when which who whom any has
    have had tell show find check compare list explain about he she they it we i you patient his her their takes take
    taking took on last latest recent current previous""".split())


_BARE_NUMBER = re.compile(r"(?<![\w.\-/,])\d+(?:\.\d+)?(?![\w.%/\-])")


def _sig_follows(text: str) -> bool:
    """A frequency the order parser reads (``FREQUENCY_RES``) or "PRN" in ``text``."""
    return any(rx.search(text) for rx, _ in FREQUENCY_RES) or bool(AS_NEEDED_RE.search(text))


def _named_amount(text: str, lead_words: int) -> re.Match | None:
    """The first amount (the order parser's ``AMOUNT_RE``: "500 mg", "2 puffs", "50/1000 mg"),
    or a number with no unit followed by a frequency or "PRN" ("augmentin 875 bid"), when
    ``lead_words`` words and then one to four words of a treatment's name stand before it
    ("order 2 units" has no name before its amount)."""
    bare = next((m for m in _BARE_NUMBER.finditer(text) if _sig_follows(text[m.end():])), None)
    amount = min((m for m in (AMOUNT_RE.search(text), bare) if m is not None), key=lambda m: m.start(), default=None)
    if amount is None:
        return None
    words = text[:amount.start()].split()
    names = words[lead_words:]
    if not 1 <= len(names) <= 4 or not all(re.fullmatch(r"[a-z][\w\-/]*", w, re.I) for w in names):
        return None
    return amount


def _is_order_line(text: str) -> bool:
    """The message is an order and nothing else (see the module docstring): a name, an amount,
    then a frequency the order parser reads (``FREQUENCY_RES``), and no question."""
    text = text.strip()
    amount = _named_amount(text, 0)
    if amount is None or "?" in text or set(text[:amount.start()].lower().split()) & _NOT_A_NAME:
        return False
    return _sig_follows(text[amount.end():])


def clauses(text: str) -> list[str]:
    """The message's clauses (a decimal point is no clause end: "2.5 mg")."""
    return [c.strip() for c in _CLAUSE_SPLIT.split(text) if c and c.strip()]


def write_requests(text: str) -> tuple[str, ...]:
    """The write tools the clinician's words ask for, in order of mention (empty for none; in a
    turn, the reading's ``writes``)."""
    return read_write_requests(text, instruction_text(text))


def read_write_requests(text: str, head: str) -> tuple[str, ...]:
    """The parse behind ``write_requests``: ``head`` is ``text``'s instruction (dictation apart)."""
    wanted: dict[str, None] = {}
    for clause in clauses(head):
        changed = change_request(clause)
        if changed is not None:
            wanted.setdefault(changed, None)
            continue
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


@functools.cache
def drug_names() -> DrugRecogniser:
    """The bundled drug recogniser (dictionary and overlay), built once per process."""
    return DrugRecogniser()


def change_request(clause: str) -> str | None:
    """The write tool a clause opening with a change verb asks for (see the module docstring),
    or None: no change verb, or no drug (nor a misspelt one) after it."""
    opened = change_verb(clause)
    if opened is None:
        return None
    action, verb = opened
    drugs = drug_names()
    change = read_change(clause, drugs)
    if change is None:
        after = name_words(clause[verb.end():])[:3]
        return (CHANGE if action == "change" else STATUS) if any(suggestion(w, drugs) for w in after) else None
    if change.new_order is not None:
        return CHANGE  # "switch lisinopril to losartan ...": one change that stops the old order
    if change.switch_to:
        return PRESCRIBE if _named_amount(change.order.text, 0) is not None or change.order.dose else None
    if action == "change":
        return CHANGE
    if action in ("resume", "renew") and change.order.dose is not None and change.order.frequency_text:
        return PRESCRIBE  # "restart metformin 500 mg bid": an order in full
    return STATUS


def _names_a_treatment(clause: str) -> bool:
    """'start him on metformin' or 'prescribe amoxicillin' ask for a prescription; 'start a new
    session' or 'put the chart up' do not."""
    lowered = re.sub("^" + _LEAD, "", clause.lower())
    verb = re.split(r"[\s:]", lowered, maxsplit=1)[0]
    if verb in ("prescribe", "re-prescribe", "represcribe", "rx"):
        return True
    if verb in ("start", "commence", "initiate", "put", "restart", "resume") and re.search(r"\b(?:on|with)\s+\w", lowered):
        return True
    return _named_amount(lowered, 1) is not None  # the verb, then a treatment and its amount


NOT_CHANGED = "The record was not changed."
