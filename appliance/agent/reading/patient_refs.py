"""How a clinician names a patient in words: patient IDs in free text, and the answer to
"which one did you mean?" after several patients matched a search.

The ID rule (``find_patient_ids``). What may *be* an ID is wider (``common.patient_ids``: any
FHIR resource id, e.g. from ``/patient`` or the terminal's open patient); what counts as an ID
*in text* is narrower, so ordinary words and doses never become IDs:
- a UUID (8-4-4-4-12 hexadecimal digits), lower-cased: ``0b6a1c2e-...``;
- the record's own shape: 2 to 10 letters, a dash, 3 or more digits, then optionally more
  ``-``/``.`` parts of letters and digits: ``abc-123``, ``pat-78234``, ``PAT-002``, ``pat-002-b``;
- an MRN-like digit string, 5 to 20 digits, only after a cue word: ``MRN 4412345``,
  ``patient 0012345``, ``pt #99120044``, ``ID: 30045127``, or ``#4412345``.
A candidate must stand alone (no letter, digit, ``-`` or ``.`` glued to either end) and be at
most 64 characters. Not IDs: doses and strengths (``500mg``, ``2.5 mg``, ``1000000 units``),
hyphenated words (``twice-daily``, ``x-ray``, ``follow-up``), short codes with fewer than three
digits (``COVID-19``, ``IL-6``, ``GLP-1``, ``ICD-10``), bare numbers and years (``take 2``,
``since 2019``, ``12345``). Known wrong guess: investigational drug codes have the record's
shape (``MK-3475``) and are taken for IDs; the record then answers that it holds no such
patient. Every ID found satisfies ``common.patient_ids.is_patient_id``.

The several-matches question (``router.clarification_for_matches``) is code's text: a question
line (``I found 3 patients matching 'James Wilson'. Which one did you mean?``), then one line
per candidate, ``- <name>, born <date>, ID <id>``; SYNTHESIZE returns it verbatim.
``candidates_in`` reads the candidates back only from a message that is that whole shape (that
question, then two or more candidate lines and nothing else); ``choose`` picks one from
the clinician's reply by position (``the second one``, ``2``, ``number 3``, ``the last``), birth
year or date (``the one born 1967``, ``1990-07-30``) or a distinguishing name word, combining
every cue given; it answers only when exactly one candidate fits all of them, otherwise None
(and the clinician is asked again). A chosen candidate's ID was returned by a patient search,
so the agent treats it as the clinician's own (grounded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.agent.reading.words import words
from common.patient_ids import MAX_PATIENT_ID_LENGTH, is_patient_id

_ALONE_BEFORE = r"(?<![A-Za-z0-9.\-])"
_ALONE_AFTER = r"(?![A-Za-z0-9]|[.\-][A-Za-z0-9])"
UUID_RE = re.compile(_ALONE_BEFORE + r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}" + _ALONE_AFTER, re.IGNORECASE)
# The record's shape; with 3 or more digits it is an ID in text, with 1 or 2 ("pat-7") it may be
# one too short to recognise (``short_ids``).
RECORD_SHAPE_RE = re.compile(_ALONE_BEFORE + r"[A-Za-z]{2,10}-(?P<digits>\d+)(?:[.\-][A-Za-z0-9]+)*" + _ALONE_AFTER)
# A word that may be an ID as typed: letters, digits, "." and "-", starting and ending alphanumeric.
ID_WORD_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?")
MRN_RE = re.compile(
    r"(?:\b(?:MRN|ID|patient|pt)\b\.?:?\s*(?:(?:no\.?|number|#)\s*)?|#\s?)(\d{5,20})" + _ALONE_AFTER,
    re.IGNORECASE,
)


def find_patient_ids(text: str) -> tuple[str, ...]:
    """Patient IDs in ``text`` by the rule above, in order of appearance, each once."""
    found: list[tuple[int, str]] = [(m.start(), m.group(0).lower()) for m in UUID_RE.finditer(text)]
    found += [(m.start(), m.group(0)) for m in RECORD_SHAPE_RE.finditer(text) if len(m["digits"]) >= 3]
    found += [(m.start(1), m.group(1)) for m in MRN_RE.finditer(text)]
    ids = dict.fromkeys(pid for _, pid in sorted(found) if len(pid) <= MAX_PATIENT_ID_LENGTH)
    return tuple(ids)


def short_ids(text: str) -> tuple[str, ...]:
    """Words with the record's shape but only one or two digits ("pat-7"): maybe an ID the
    clinician typed that is too short to be recognised in text, so code does not assume the
    open patient."""
    return tuple(m.group(0) for m in RECORD_SHAPE_RE.finditer(text) if len(m["digits"]) < 3)


def standing_alone(patient_id: str) -> re.Pattern:
    """``patient_id`` where it stands alone in text, as the rule reads IDs (any case): the
    place to replace it."""
    return re.compile(_ALONE_BEFORE + re.escape(patient_id) + _ALONE_AFTER, re.IGNORECASE)


def id_words(text: str) -> list[str]:
    """Every word of ``text`` that could be an ID as written (``ID_WORD_RE``)."""
    return ID_WORD_RE.findall(text)


def typed_ids(text: str) -> frozenset[str]:
    """Words of ``text`` that hold a digit and are well-formed patient IDs: what the clinician
    typed, even where it is too short to be recognised as an ID in text ("pat-7")."""
    return frozenset(w for w in id_words(text) if any(c.isdigit() for c in w) and is_patient_id(w))


# -- the answer to "which one did you mean?" -------------------------------------------------
QUESTION_RE = re.compile(r"I found \d+ patients matching '.*'\. Which one did you mean\?")
CANDIDATE_LINE_RE = re.compile(r"- (?P<name>.+), born (?P<born>.+?), ID (?P<id>\S+)")
_ORDINALS = {
    "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
    "fifth": 5, "5th": 5, "sixth": 6, "6th": 6, "seventh": 7, "7th": 7, "eighth": 8, "8th": 8,
    "ninth": 9, "9th": 9, "tenth": 10, "10th": 10,
}
_ORDINAL_RE = re.compile(r"\b(" + "|".join(_ORDINALS) + r"|last)\b", re.IGNORECASE)
_NUMBERED_RE = re.compile(r"(?:\b(?:number|no\.?|option)\s*|#\s?)(\d{1,2})\b", re.IGNORECASE)
# A reply that is only a number: "2", "the 2", "2.", "number 2 please" is _NUMBERED_RE's.
_BARE_NUMBER_RE = re.compile(r"\s*(?:the\s+)?(\d{1,2})(?:\s+one)?\s*[.!]?\s*", re.IGNORECASE)
_DATE_RE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_YEAR_RE = re.compile(r"\b((?:19|20)\d{2})\b")


@dataclass(frozen=True)
class Candidate:
    patient_id: str
    name: str
    birth_date: str | None


def candidates_in(message: str) -> tuple[Candidate, ...]:
    """The candidates of a several-matches question, or () when ``message`` is not one."""
    lines = [line.strip() for line in message.strip().splitlines()]
    if len(lines) < 3 or not QUESTION_RE.fullmatch(lines[0]):
        return ()
    found = []
    for line in lines[1:]:
        m = CANDIDATE_LINE_RE.fullmatch(line)
        if m is None or not is_patient_id(m["id"]):
            return ()
        born = m["born"] if m["born"] != "unknown" else None
        found.append(Candidate(m["id"], m["name"], born))
    return tuple(found)


def _by_position(reply: str, candidates: tuple[Candidate, ...]) -> set[int] | None:
    picks = {len(candidates) if w.lower() == "last" else _ORDINALS[w.lower()] for w in _ORDINAL_RE.findall(reply)}
    picks |= {int(n) for n in _NUMBERED_RE.findall(reply)}
    bare = _BARE_NUMBER_RE.fullmatch(reply)
    if bare:
        picks.add(int(bare.group(1)))
    if not picks:
        return None
    return {p - 1 for p in picks if 1 <= p <= len(candidates)} if len(picks) == 1 else set()


def _by_birth(reply: str, candidates: tuple[Candidate, ...]) -> set[int] | None:
    dates = set(_DATE_RE.findall(reply))
    if dates:
        return {i for i, c in enumerate(candidates) if c.birth_date in dates}
    years = set(_YEAR_RE.findall(reply))
    if not years:
        return None
    return {i for i, c in enumerate(candidates) if c.birth_date and c.birth_date[:4] in years}


def _by_name(reply: str, candidates: tuple[Candidate, ...]) -> set[int] | None:
    said = set(words(reply))
    counts = [len(said & set(words(c.name))) for c in candidates]
    best = max(counts, default=0)
    if best == 0:
        return None
    return {i for i, n in enumerate(counts) if n == best}


def choose(reply: str, candidates: tuple[Candidate, ...],
           typed: tuple[str, ...] | None = None) -> tuple[Candidate, str] | None:
    """(the candidate the reply picks, the cues used), or None unless exactly one fits every
    cue the reply gives. A reply holding a patient ID is left alone: the ID speaks for itself
    (``typed``: the IDs already read in the reply, so it is not read again)."""
    if not candidates or (find_patient_ids(reply) if typed is None else typed):
        return None
    fitting = set(range(len(candidates)))
    cues = []
    for cue, pick in (("position", _by_position), ("birth date", _by_birth), ("name", _by_name)):
        chosen = pick(reply, candidates)
        if chosen is not None:
            fitting &= chosen
            cues.append(cue)
    if not cues or len(fitting) != 1:
        return None
    return candidates[fitting.pop()], ", ".join(cues)


def choice_from_history(reply: str, history: list[tuple[str, str]] | tuple[tuple[str, str], ...],
                        typed: tuple[str, ...] | None = None) -> tuple[Candidate, str] | None:
    """The candidate ``reply`` picks when the last message of ``history`` is the assistant's
    several-matches question; otherwise None."""
    if not history or history[-1][0] != "assistant":
        return None
    return choose(reply, candidates_in(history[-1][1]), typed)
