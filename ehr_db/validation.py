"""Checks applied to every field of a write (the clinician's values and the approval code sends
with them) and of an audit event, before anything is written.

Invariants:
- A value that passes is stripped and plausible; a value that fails raises ``InvalidField``
  naming the field, with a reason that never repeats the value itself.
- An approval (``approval``: what the agent's code sends with an approved write) is an object of
  exactly a decision, a clinician and a safety report, at most ``MAX_AUDIT_JSON_CHARS`` as JSON.
- Text holds something visible: a value of only spaces, zero-width or other invisible
  characters is empty. It holds no control characters (NUL included; a note may hold line
  breaks and tabs), no text-direction overrides (they make the approval dialog show other text
  than what is stored) and no unpaired surrogates.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from common.patient_ids import MAX_PATIENT_ID_LENGTH, is_patient_id
from ehr_db.errors import InvalidField
from ehr_db.migrations import NOTE_TYPES, SEVERITIES

_NUMBER = r"\d+(?:[.,]\d+)?(?:\s*(?:-|to)\s*\d+(?:[.,]\d+)?)?"
_FRACTION = r"\d+\s*/\s*\d+"
_DOSE_UNIT = (
    r"(?:mg|mcg|µg|ug|ng|g|kg|ml|l|units?|iu|meq|mmol|%|"
    r"tablets?|tabs?|capsules?|caps?|puffs?|drops?|sprays?|patch(?:es)?|"
    r"suppositor(?:y|ies)|sachets?|vials?|ampoules?|applications?|inhalations?|"
    r"pumps?|lozenges?|teaspoons?|tsp|tablespoons?|tbsp)"
)
_PER = r"(?:\s*/\s*(?:kg|m2|m²|day|d|dose|hour|hr|h|min|ml|l)){0,2}"
_ROUTE = (
    r"(?:\s+(?:po|p\.o\.|by mouth|orally|oral|iv|im|sc|sq|subcut|subcutaneously|sublingual|sl|"
    r"topical|topically|inhaled|intranasal|pr|rectally|vaginally))?"
)
DOSAGE_RE = re.compile(
    rf"(?:{_FRACTION}|{_NUMBER})\s*{_DOSE_UNIT}\b{_PER}{_ROUTE}", re.IGNORECASE
)

_COUNT = r"(?:once|twice|thrice|three times|four times|five times|six times|[1-6]\s*(?:x|times))"
_PERIOD = r"(?:daily|a day|per day|each day|weekly|a week|per week|monthly|a month|per month)"
_INTERVAL = (
    r"\d+(?:\s*(?:-|to)\s*\d+)?\s*"
    r"(?:hours?|hrs?|h|days?|d|weeks?|wks?|wk|minutes?|mins?|months?)"
)
_BASE = "|".join(
    (
        rf"{_COUNT}\s+{_PERIOD}",
        r"daily|weekly|monthly|nightly|hourly|fortnightly",
        rf"every\s+(?:other\s+day|day|morning|evening|night|week|month|{_INTERVAL})",
        rf"q\s*{_INTERVAL}",
        r"q\.?d\.?|b\.?i\.?d\.?|t\.?i\.?d\.?|q\.?i\.?d\.?|qhs|qam|qpm|qod|qw|qwk|hs|stat",
        r"once|one time|single dose",
        r"(?:prn|as needed)(?:\s+(?:for\s+)?[a-z][a-z ]{0,30}?)?|at bedtime|in the morning|in the evening|at night",
        r"before meals|after meals|with meals",
    )
)
# After a frequency: "PRN" and what for ("prn pain", "as needed for sleep"), and a maximum per
# day as written ("max 4 g/day", "PRN max 12/day").
_MAX_PER_DAY = (r"(?:max(?:imum)?\.?|not to exceed|no more than|up to)\s*(?:of\s*)?\d+(?:[.,]\d+)?\s*"
                r"(?:[a-z]+\s*)?(?:/|per|a|in)\s*(?:day|d|24\s*h(?:ours|rs|r)?)")
_QUALIFIER = (
    r"(?:,?\s+(?:(?:prn|as needed)(?:\s+(?:for\s+)?[a-z][a-z ]{0,30}?)?|with (?:meals|food)|"
    r"before (?:meals|breakfast|bedtime)|after meals|at bedtime|in the morning|"
    rf"in the evening|at night|{_MAX_PER_DAY}))*"
)
FREQUENCY_RE = re.compile(rf"(?:{_BASE}){_QUALIFIER}", re.IGNORECASE)


# Text-direction controls (bidi embeddings, overrides, isolates and marks).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# Letters and symbols that render as blank space.
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_LINE_BREAKS = frozenset("\n\r\t")


def visible(text: str) -> bool:
    """Whether ``text`` has a character that shows: not a space, a format character (zero-width
    space, joiner, BOM...), a control, a lone combining mark or a blank glyph."""
    return any(not (c.isspace() or c in _BLANK_GLYPHS or unicodedata.category(c) in ("Cc", "Cf", "Mn", "Me"))
               for c in text)


def _character_problem(text: str, multiline: bool) -> str | None:
    for c in text:
        if c in BIDI_CONTROLS:
            return "must not contain text-direction control characters"
        category = unicodedata.category(c)
        if category == "Cc" and not (multiline and c in _LINE_BREAKS):
            return "must not contain control characters" + ("" if multiline else " or line breaks")
        if category == "Cs":
            return "must not contain invalid characters"
    return None


def required_text(field: str, value: object, max_length: int, *, multiline: bool = False) -> str:
    """The value stripped; rejects non-strings, blank or invisible values, control characters
    (line breaks and tabs only where ``multiline``), text-direction overrides and over-long values."""
    if not isinstance(value, str):
        raise InvalidField(field, "must be text")
    text = value.strip()
    if not visible(text):
        raise InvalidField(field, "must not be empty")
    problem = _character_problem(text, multiline)
    if problem:
        raise InvalidField(field, problem)
    if len(text) > max_length:
        raise InvalidField(field, f"must be at most {max_length} characters")
    return text


def optional_text(field: str, value: object, max_length: int) -> str | None:
    """Like ``required_text`` but None, blank or invisible becomes None (a control character
    is still refused)."""
    if value is None or (isinstance(value, str) and not visible(value)
                         and _character_problem(value.strip(), False) is None):
        return None
    return required_text(field, value, max_length)


def patient_id(value: object) -> str:
    """A FHIR resource id (``common.patient_ids``): letters, digits, '-' and '.', up to 64."""
    text = required_text("patient_id", value, MAX_PATIENT_ID_LENGTH)
    if not is_patient_id(text):
        raise InvalidField("patient_id", "may hold only letters, digits, '-' and '.'")
    return text


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).rstrip(".")


def dosage(value: object) -> str:
    """A dose with a number and a unit: '500 mg', '10 mg/kg', '1 tablet', '2 puffs'."""
    text = required_text("dosage", value, 40)
    if not DOSAGE_RE.fullmatch(_squash(text)):
        raise InvalidField("dosage", "needs a number and a unit, for example '500 mg' or '1 tablet'")
    return text


def frequency(value: object) -> str:
    """A dosing frequency: 'once daily', 'BID', 'every 8 hours', 'q6h', 'PRN', ..."""
    text = required_text("frequency", value, 40)
    if not FREQUENCY_RE.fullmatch(_squash(text)):
        raise InvalidField(
            "frequency", "is not a recognised frequency, for example 'once daily', 'BID' or 'every 8 hours'"
        )
    return text


def severity(value: object) -> str | None:
    """mild, moderate, severe, or None when not stated."""
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in SEVERITIES:
        raise InvalidField("severity", "must be mild, moderate or severe (or left empty)")
    return value.strip().lower()


def note_type(value: object) -> str:
    """One of the document types the record knows."""
    if not isinstance(value, str) or value.strip().lower() not in NOTE_TYPES:
        raise InvalidField("note_type", "must be one of " + ", ".join(NOTE_TYPES))
    return value.strip().lower()


# An approval and an audit event's details, as JSON (both may carry a medication safety report).
MAX_AUDIT_JSON_CHARS = 20_000
APPROVAL_DECISIONS = ("approval", "override")
_APPROVAL_KEYS = {"decision", "clinician", "safety"}


def bounded_json(field: str, value: Any) -> None:
    """Refuses a ``value`` that is not JSON, or is over ``MAX_AUDIT_JSON_CHARS`` as JSON."""
    try:
        size = len(json.dumps(value, sort_keys=True))
    except (TypeError, ValueError):
        raise InvalidField(field, "must hold only JSON values") from None
    if size > MAX_AUDIT_JSON_CHARS:
        raise InvalidField(field, f"must be at most {MAX_AUDIT_JSON_CHARS} characters as JSON")


def approval(value: object) -> dict[str, Any] | None:
    """None, or ``{"decision": "approval" | "override", "clinician": name or None, "safety":
    object or None}``; an override needs the safety report it overrode."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != _APPROVAL_KEYS:
        raise InvalidField("approval", "must be an object of exactly decision, clinician and safety")
    if value["decision"] not in APPROVAL_DECISIONS:
        raise InvalidField("approval.decision", "must be approval or override")
    clinician = value["clinician"]
    if clinician is not None:
        clinician = required_text("approval.clinician", clinician, 200)
    safety = value["safety"]
    if safety is not None and not isinstance(safety, dict):
        raise InvalidField("approval.safety", "must be an object (a safety report) or null")
    if value["decision"] == "override" and safety is None:
        raise InvalidField("approval.safety", "must hold the safety report an override overrode")
    clean = {"decision": value["decision"], "clinician": clinician, "safety": safety}
    bounded_json("approval", clean)
    return clean
