"""A change to an order on the chart, read from a clinician's words: a new dose or frequency
("increase metformin to 1000 bid", "change amlodipine to 10 mg", "titrate lisinopril from 10
to 20 mg"), stop ("stop the warfarin", "d/c lisinopril due to cough"), hold ("hold metformin
for the CT"), resume ("resume the held lisinopril") and renew ("renew levothyroxine", "refill
her albuterol", "continue atorvastatin").

Invariants:
- ``CHANGE_VERBS`` names every verb, each with its action; the verb opens the clause (after a
  politeness: ``LEAD``). ``read_change`` reads the clause from its verb; the drug is the first
  drug mention after the verb (``orders.parse_order``), and a change's new values are what the
  parser reads there: "from 10 to 20 mg" is the new dose 20 mg, never the range 10-20.
- A relative change ("increase by 500 mg", "double the dose") gives no new values: ``relative``
  is set and the dose and frequency left None, so the change is the question "to what dose?"
  with the order as charted (``agent.order_gate``). Code never computes a dose the clinician
  did not write: the value signed is the value typed (docs/design.md §13).
- "switch to <drug>" and "change to <drug>" name a new drug (``switch_to`` is set). With the
  order's own drug named first ("switch lisinopril to losartan 50 mg daily", "change from
  lisinopril to losartan": the new drug right after "to", nothing between but the old order's
  own words; a drug named in a reason, "due to the new amiodarone", is no switch), the change
  is a switch of that order: ``order`` is the old drug (its words before the new drug's) and
  ``new_order`` the new drug with its dose and frequency, read from the new drug's name on. With no old drug named there is no order to switch
  (``new_order`` None; the caller treats it as a new prescription).
- The reason of a stop or hold is the clinician's words after "due to", "because (of)",
  "secondary to", "d/t", "for" (not a duration or a patient), or ":"/" - ".
- No model, no network, no logging: the text is patient data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from appliance.medication.orders import Order, parse_order

LEAD = (r"(?:(?:please|kindly|now|also|then|and|ok|okay|so)\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?"
        r"|go ahead and\s+|i(?:'d| would)? (?:like|want) (?:you )?to\s+|let's\s+)*")
# verb -> action; "change" covers a new dose or frequency.
CHANGE_VERBS: tuple[tuple[str, str], ...] = (
    (r"increase|decrease|titrate(?:\s+(?:up|down))?|up-?titrate|down-?titrate|reduce|raise|lower|wean|taper"
     r"|bump(?:\s+up)?|go\s+(?:up|down)\s+on|adjust|change|modify|switch|double|halve|cut(?:\s+back)?|drop", "change"),
    (r"stop|discontinue|d/c|dc|d\.c\.|cease|cancel|come\s+off|take\s+(?:him|her|them|the patient)\s+off", "stop"),
    (r"hold|pause|suspend|withhold", "hold"),
    (r"resume|restart|un-?hold|re-?start", "resume"),
    (r"renew|refill|continue|extend|re-?order", "renew"),
)
VERB_RE = re.compile(LEAD + r"(?P<verb>" + "|".join(f"(?P<a{i}>{p})" for i, (p, _) in enumerate(CHANGE_VERBS))
                     + r")(?![\w/])", re.IGNORECASE)
_RELATIVE = re.compile(r"\bby\s+\d|\b(?:double|halve|cut)\b|\bby\s+(?:half|a third|25|50)\b", re.IGNORECASE)
_FROM_TO = re.compile(r"\bfrom\s+\d[\d.,]*\s*(?:mg|mcg|g|units?|ml|tabs?|tablets?)?\s*(?=to\s+\d)", re.IGNORECASE)
_REASON = re.compile(
    r"(?:\b(?:due\s+to|because(?:\s+of)?|secondary\s+to|d/t|2/2|given|reason:?)\s+"
    r"|\bfor\s+(?!\d|a\s+\d|(?:one|two|three|four|five|six|seven)\s+(?:day|week|hour)|pat-|patient\b|him\b|her\b|them\b"
    r"|now\b|today\b|the\s+(?:next|day|week|weekend)\b|\d)"
    r"|\s+-\s+|:\s*)(?P<reason>[^.;\n]{2,200})", re.IGNORECASE)
_ID = re.compile(r"\s*\b(?:for\s+)?(?:patient\s+)?[A-Za-z]{2,10}-\d{3,}\b", re.IGNORECASE)


@dataclass(frozen=True)
class OrderChange:
    """One change read from the words (see the module docstring)."""

    action: str  # change | stop | hold | resume | renew
    verb: str  # as written: "increase", "d/c"
    order: Order  # the clause from its verb, parsed: the drug and any new values
    reason: str | None  # as written
    relative: bool  # "increase by 500 mg": no new dose code can read
    switch_to: bool  # "switch to amoxicillin": a new drug, not a change of this order
    new_order: Order | None = None  # "switch lisinopril to losartan 50 mg daily": the new drug's order

    @property
    def drug_text(self) -> str | None:
        return self.order.drug_text

    @property
    def generic(self) -> str | None:
        return self.order.generic


def change_verb(clause: str) -> tuple[str, re.Match] | None:
    """(action, match) when ``clause`` opens with a change verb, else None."""
    found = VERB_RE.match(clause.strip())
    if found is None:
        return None
    index = next(int(k[1:]) for k, v in found.groupdict().items() if k.startswith("a") and v is not None)
    return CHANGE_VERBS[index][1], found


def read_change(clause: str, drugs) -> OrderChange | None:
    """The change ``clause`` asks for, or None when it opens with no change verb or names no
    drug after it."""
    opened = change_verb(clause)
    if opened is None:
        return None
    action, verb = opened
    text = clause.strip()
    rest = text[verb.end():]
    at = _switch_target(rest, drugs) if action == "change" else None
    switch_to = action == "change" and (bool(re.match(r"\s*(?:over\s+)?to\b", rest, re.IGNORECASE))
                                        or at is not None)
    new_order = None
    if at is not None:  # the old drug, then the one it is switched to
        order, new_order = parse_order(rest[:at], drugs), parse_order(rest[at:], drugs)
        if order.drug_text is None or new_order.drug_text is None:
            return None
        order = replace(order, text=rest)
    else:
        masked = _FROM_TO.sub(lambda m: " " * len(m.group(0)), rest)
        order = parse_order(masked, drugs)
        if order.drug_text is None:
            return None
        order = _unmasked(order, rest)
    relative = action == "change" and bool(_RELATIVE.search(text))
    if relative:
        order = _without_dose(order)
    reason = None
    if action in ("stop", "hold", "change"):
        after = _ID.sub(lambda m: " " * len(m.group(0)), rest)
        named = new_order or order  # the reason follows the last drug named
        start = rest.find(named.drug_text, rest.find(order.drug_text) + len(order.drug_text) if new_order else 0)
        found = _REASON.search(after, start + len(named.drug_text))
        if found:
            reason = rest[found.start("reason"):found.end("reason")].strip(" ,") or None
            if reason and named.frequency_text and reason.startswith(named.frequency_text):
                reason = None
    return OrderChange(action, verb.group("verb"), order, reason, relative, switch_to, new_order)


# Between the order's drug and the drug it is switched to: its own words (a dose, "the", "from"),
# then "to" or "over to" right before the new drug; a reason ("due to amiodarone") is no switch.
_SWITCH_GAP = re.compile(r"(?:(?!\b(?:due|owing|because|secondary|given|with|for|and|then|d/t)\b)[^.;:,])*?"
                         r"\b(?:over\s+)?to\s+(?:the\s+|an?\s+)?", re.IGNORECASE)


def _switch_target(rest: str, drugs) -> int | None:
    """Where the drug an order is switched to starts ("lisinopril 10 mg to losartan ..."), or
    None when the words name no second drug in that place."""
    mentions = drugs.mentions(rest)
    if len(mentions) < 2:
        return None
    first = mentions[0]
    new = next((m for m in mentions[1:] if m.generic != first.generic), None)
    if new is None or not _SWITCH_GAP.fullmatch(rest[first.end:new.start]):
        return None
    return new.start


def _unmasked(order: Order, rest: str) -> Order:
    """The order with its text as written (the "from ..." part was only blanked for reading)."""
    return replace(order, text=rest)


def _without_dose(order: Order) -> Order:
    """A relative change's order: no dose and no frequency ("by 500 mg bid" is asked in full)."""
    return replace(order, dose=None, strength=None, frequency_text=None, per_day=None, as_needed=False,
                   max_per_day=None)


__all__ = ["CHANGE_VERBS", "OrderChange", "change_verb", "read_change"]
