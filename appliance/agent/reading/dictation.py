"""The clinician's instruction, apart from the text it dictates.

Dictated text is data: the words of a note ("save a note: ...", "add a note that ..."), or
anything inside double quotes, are content for a tool's arguments, never an instruction. A
note that mentions "interactions" or a drug must not make the agent check interactions.

Invariants:
- ``instruction_text`` is what routing reads (task patterns, write requests, the patient names
  that require a search, TOOL_SELECT's choice of tool). It keeps the marker ("note:",
  "a note that") so the request to save the note is still seen, and puts ``DICTATED`` where
  the content was.
- The dictated content is never lost: argument extraction and the grounding of a write's
  values (``tool_execute.clinician_text``) read the whole message, where the dictated words
  are exactly what must match.
- Dictation runs to the end of the message once a marker opens it; quotes close themselves. A
  message that starts with "Note:" is the clinician's aside, not dictation.
"""

from __future__ import annotations

import re

DICTATED = "(dictated text)"

_NOTE_KIND = r"(?:progress|consult|procedure|discharge|telephone|phone|clinical|brief|short|quick|new|follow-up)"
_DICTATION = re.compile(
    r"(?P<marker>(?<!^)\bnote\b[^.?!:;\n\"“]{0,40}:"  # "save a note: ...", "a progress note for abc-123: ..."
    r"|:(?=\s*[\"“])"  # 'record: "..."'
    rf"|\b(?:a|an|the|this|my)\s+(?:{_NOTE_KIND}\s+)?note\s+(?:(?:for|on|to|about)\s+\S+\s+)?"
    r"(?:that|saying|stating|reading|which\s+says|to\s+say)\b)"  # "a note that ...", "a note saying ..."
    r"(?P<content>.*)$"
    r"|\"[^\"]*\"|“[^”]*”",  # quoted words, wherever they are
    re.IGNORECASE | re.DOTALL,
)


def _replace(match: re.Match) -> str:
    marker = match.group("marker")
    return f"{marker} {DICTATED}" if marker is not None else DICTATED


def instruction_text(query: str) -> str:
    """``query`` with its dictated content replaced by ``DICTATED``: the words that may route
    (in a turn, the reading's ``instruction``)."""
    return read_instruction(query)


def read_instruction(query: str) -> str:
    """The parse behind ``instruction_text`` (``reading.request.read`` calls it once per turn)."""
    return _DICTATION.sub(_replace, query)
