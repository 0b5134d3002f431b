"""Choosing a patient in the clinician's own words, the same in the terminal and the line
session: "pull up james wilson", then "the one born 1967", "the second one" or "James Wilson
born 1990" from the last list of patients the front end showed; a name with a typo offers the
closest names ("no exact match for 'emily jonson'; did you mean ...").

Invariants:
- A pick comes only from the list the front end itself last showed (``Shown``): a search's
  matches or the closest names of a search with no exact match; the list is forgotten once a
  patient is picked from it or an agent answer follows. (A reply to the agent's own
  several-matches question is the agent's: it goes on with the request that asked.) A pick is
  ``patient_refs.choose``'s: exactly one candidate fits every cue given (position, birth year or
  date, name words), otherwise nothing is picked.
- ``open_request`` takes a line as a request to open a patient only when the whole line is an
  opening verb ("pull up", "open", "switch to", ...) and a name, optionally with "born YEAR" or
  a date, or only a name with its birth year, and the name holds no word that names something
  else in the chart ("pull up the labs" is a question, not a patient). "find" is left to the
  agent and ``/find``: "find metformin interactions" is not a patient.
- Nothing here reads the record: the caller passes ``search`` (the EHR's ``search_patient``)
  and opens the chosen patient its own way (chart shown, conversation rule applied).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.agent.reading.patient_refs import Candidate, candidates_in, choose
from ehr_db.name_match import closest_in

_OPEN_RE = re.compile(
    r"\s*(?:please\s+)?(?:can you\s+|could you\s+)?(?:pull up|bring up|open|switch to|go to|load|select)"
    r"\s+(?:the\s+)?(?:patient\s+|chart\s+(?:of|for)\s+|record\s+(?:of|for)\s+)?"
    r"(?P<name>[^\W\d_][\w'’\-]*(?:\s+[^\W\d_][\w'’\-]*){0,3}?)"
    r"(?:\s*,?\s*(?:born(?:\s+in)?|dob|b\.)\s*(?P<born>\d{4}(?:-\d{2}-\d{2})?))?\s*[.!?]?\s*", re.IGNORECASE)
# A line that is only a name and a birth year or date: "James Wilson born 1990".
_NAME_BORN_RE = re.compile(
    r"\s*(?P<name>[^\W\d_][\w'’\-]*(?:\s+[^\W\d_][\w'’\-]*){1,3}?)\s*,?\s*(?:born(?:\s+in)?|dob|b\.)\s*"
    r"(?P<born>\d{4}(?:-\d{2}-\d{2})?)\s*[.!?]?\s*", re.IGNORECASE)
# Words that make "open X" something other than a patient's name.
_NOT_NAMES = frozenset("""
the his her their this that a an my our chart charts record records labs lab results meds medications medication
notes note allergies allergy vitals problems trials trial interactions interaction order orders prescription
patient patients list history it one last first second third image session sessions help
""".split())
# Words a line may hold besides its cues and still be only a choice ("the one born 1967").
_FILLER = frozenset("""
the one born in on that this patient please i mean meant want him her his number no option yes ok okay choose
pick select open pull up bring show me chart record of with date birth dob is it who was s a an and
first second third fourth fifth sixth seventh eighth ninth tenth last 1st 2nd 3rd 4th 5th 6th 7th 8th 9th 10th
""".split())


@dataclass
class Shown:
    """The last list of patients a front end showed the clinician, best first."""

    candidates: tuple[Candidate, ...] = ()
    agent_asked: bool = False  # the last answer is the agent's "which one did you mean?"

    def show(self, matches) -> None:
        """Remember search matches (dicts with patient_id, name, birth_date) or candidates."""
        self.agent_asked = False
        self.candidates = tuple(m if isinstance(m, Candidate) else
                                Candidate(str(m["patient_id"]), str(m.get("name") or m["patient_id"]),
                                          m.get("birth_date")) for m in matches)

    def after_answer(self, response: str) -> None:
        """After an agent turn no list of the front end's is the last one shown. The agent's own
        several-matches question is answered by the agent (``patient_refs.choice_from_history``),
        which goes on with the request that asked it, so it is not taken here either."""
        self.candidates = ()
        self.agent_asked = bool(candidates_in(response or ""))

    def pick(self, line: str) -> Candidate | None:
        chosen = choose(line, self.candidates)
        return chosen[0] if chosen else None


def open_request(line: str) -> tuple[str, str | None] | None:
    """(the name, the birth year or date given) when ``line`` only asks to open a patient."""
    m = _OPEN_RE.fullmatch(line) or _NAME_BORN_RE.fullmatch(line)
    if m is None:
        return None
    words = m["name"].lower().split()
    if not words or any(w in _NOT_NAMES for w in words):
        return None
    return m["name"], m["born"]


def only_a_choice(line: str, chosen: Candidate) -> bool:
    """True when ``line`` says nothing but which patient (no question to answer as well)."""
    names = set(re.findall(r"[a-z]+", chosen.name.lower()))
    for word in re.findall(r"[a-z0-9][a-z0-9\-]*", line.lower()):
        if word in _FILLER or word in names or re.fullmatch(r"\d{1,4}(?:-\d{2}-\d{2})?", word):
            continue
        return False
    return True


@dataclass
class Outcome:
    """What a line did: ``opened`` (a patient to open), ``lines`` (to show), ``question`` (True:
    the line also asks something, so it goes on to the agent with that patient)."""

    opened: Candidate | None = None
    lines: list[str] = field(default_factory=list)
    question: bool = False


def list_lines(candidates, lead: str) -> list[str]:
    return [lead] + [f"  {i}. {c.name}, born {c.birth_date or 'unknown'}, ID {c.patient_id}"
                     for i, c in enumerate(candidates, 1)]


HOW_TO_PICK = "Say which one (e.g. 'the second one' or 'the one born 1967'), or give the ID."


def resolve(line: str, shown: Shown, search: Callable[[str], object]) -> Outcome | None:
    """The patient ``line`` picks or opens, or None when the line is not about choosing one
    or answers the agent's own question (it then goes to the agent as it is). ``search(name)``
    returns a ``ToolOutcome``."""
    if shown.agent_asked:
        return None
    picked = shown.pick(line) if shown.candidates else None
    if picked is not None:
        shown.candidates = ()  # the list has done its work: later ordinals are not patients
    if picked is not None and (only_a_choice(line, picked) or open_request(line) is not None):
        return Outcome(picked)
    if picked is not None:
        return Outcome(picked, question=True)
    asked = open_request(line)
    if asked is None:
        return None
    name, born = asked
    return search_and_pick(name, born, shown, search)


def search_and_pick(name: str, born: str | None, shown: Shown, search: Callable[[str], object]) -> Outcome:
    """Search ``name``: one match (or one fitting ``born``) is opened; several are listed and
    remembered; none offers the closest names (remembered too)."""
    outcome = search(name)
    if not getattr(outcome, "ok", False):
        offered = closest_in(getattr(outcome, "message", "") or "")
        if getattr(outcome, "error_type", None) == "not_found" and offered:
            shown.show(offered)
            return Outcome(lines=list_lines(shown.candidates, f"No exact match for '{name}'; did you mean:")
                           + [HOW_TO_PICK])
        if getattr(outcome, "error_type", None) == "not_found":
            return Outcome(lines=[f"No patient matches '{name}'."])
        kind = (getattr(outcome, "error_type", None) or "error").replace("_", " ")
        return Outcome(lines=[f"The search could not be done ({kind})."])
    matches = [m for m in (outcome.result or {}).get("matches") or [] if m.get("patient_id")]
    if not matches:
        return Outcome(lines=[f"No patient matches '{name}'."])
    found = Shown()
    found.show(matches)
    if born:
        chosen = found.pick(f"born {born}")
        if chosen is not None:
            return Outcome(chosen)
    if len(found.candidates) == 1:
        return Outcome(found.candidates[0])
    shown.candidates = found.candidates
    total = (outcome.result or {}).get("total_matches", len(matches))
    lead = f"{total} patients match '{name}'" + (f" (none born {born})" if born else "") + ":"
    return Outcome(lines=list_lines(shown.candidates, lead) + [HOW_TO_PICK])
