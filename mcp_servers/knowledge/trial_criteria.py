"""A ClinicalTrials.gov record's eligibility, read by code: ages in years, the sex a trial
takes, and the criteria text split into inclusion and exclusion criteria.

Invariants:
- Pure functions over strings; nothing here reads or writes a store.
- Ages are ClinicalTrials.gov's ``"<number> <unit>"`` (Years, Months, Weeks, Days, Hours,
  Minutes), converted to years. A missing, "N/A" or unreadable age is ``None``: no limit, which
  is what ClinicalTrials.gov means by an empty age.
- ``split_criteria`` loses no text: every non-empty line of the eligibility text ends up in a
  criterion, either as its own text, as a continuation or sub-item joined to the criterion it
  belongs to, or as the sub-heading prefixed to the criteria under it ("Age: 18 and over"). The
  two section headings themselves ("Inclusion Criteria:", "Exclusion Criteria:") only switch the
  section. In a text that has section headings, what comes before the first one is a preamble
  (``notes``: "DEMO RECORD - not a real study.", a study summary), kept but not a criterion. A
  text without section headings (older records) is all inclusion criteria: "No prior
  chemotherapy" listed there is a requirement the patient meets by not having had it.
- CT.gov's markdown escapes (``\\>``, ``\\<``, ``\\[``) are undone, so "\\>= 18" reads ">= 18".
"""

from __future__ import annotations

import re

# Days per year for the unit conversion (ClinicalTrials.gov ages are calendar spans).
_YEAR_DAYS = 365.25
_UNIT_YEARS = {
    "year": 1.0, "month": 1 / 12, "week": 7 / _YEAR_DAYS, "day": 1 / _YEAR_DAYS,
    "hour": 1 / (_YEAR_DAYS * 24), "minute": 1 / (_YEAR_DAYS * 24 * 60),
}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(year|month|week|day|hour|minute)s?\b", re.IGNORECASE)
SEXES = ("ALL", "FEMALE", "MALE")


def age_years(text: str | None) -> float | None:
    """'18 Years' -> 18.0, '6 Months' -> 0.5; None for a missing, 'N/A' or unreadable age."""
    if not text:
        return None
    match = _AGE.match(str(text))
    if not match:
        return None
    return round(float(match.group(1)) * _UNIT_YEARS[match.group(2).lower()], 4)


def trial_sex(text: str | None) -> str | None:
    """The sex a trial takes as ClinicalTrials.gov writes it: ALL, FEMALE or MALE ('Both' is
    ALL); None when the record does not say."""
    if not text:
        return None
    value = str(text).strip().upper()
    value = "ALL" if value == "BOTH" else value
    return value if value in SEXES else None


def age_range_text(minimum: str | None, maximum: str | None) -> str:
    """'18 Years to 75 Years', '18 Years and older', 'up to 17 Years', 'any age'."""
    lo = minimum if age_years(minimum) is not None else None
    hi = maximum if age_years(maximum) is not None else None
    if lo and hi:
        return f"{lo} to {hi}"
    if lo:
        return f"{lo} and older"
    if hi:
        return f"up to {hi}"
    return "any age"


# -- splitting the eligibility text ------------------------------------------------------------
_ESCAPED = re.compile(r"\\([<>\[\](){}*_~^#+\-.!|`])")
_SECTION = re.compile(
    r"^(?:key\s+|main\s+|general\s+)?(inclusion|exclusion)\s+criteria\b[^:]{0,40}?:?\s*(.*)$", re.IGNORECASE
)
_BULLET = re.compile(r"^(\s*)(?:[*•·\-–—+]|\(?\d{1,2}[.)]|\(?[a-zA-Z][.)]|\(?[ivx]{1,4}[.)])\s+(.*)$")
_HEADING_MAX = 60  # a plain line this short, followed by items, is a sub-heading ("Age", "Hematopoietic")


def unescape(text: str) -> str:
    """Undo ClinicalTrials.gov's markdown escapes ("\\>" -> ">")."""
    return _ESCAPED.sub(r"\1", text)


def _section_of(line: str) -> tuple[str, str] | None:
    """('inclusion' | 'exclusion', text after the heading) when ``line`` is a section heading."""
    body = line.strip()
    bullet = _BULLET.match(body)
    if bullet:
        body = bullet.group(2)
    match = _SECTION.match(body.strip(" *_#"))
    if match is None:
        return None
    rest = match.group(2).strip(" *_:")
    # A sentence that merely starts with the words ("Inclusion criteria of the parent study
    # must be met") is a criterion, not a heading: a heading has a colon or nothing after it.
    if rest and ":" not in body and len(body) > _HEADING_MAX:
        return None
    return match.group(1).lower(), rest


def _is_heading(line: str, following: str | None) -> bool:
    """A plain (unbulleted) line that introduces the items below it."""
    text = line.strip()
    if text.endswith(":") and len(text) <= _HEADING_MAX:
        return True  # "PATIENT CHARACTERISTICS:", even when a sub-heading follows
    if following is None or not _BULLET.match(following):
        return False
    if text.endswith(":"):
        return True
    return len(text) <= _HEADING_MAX and not text.endswith((".", ";", ","))


def split_criteria(text: str | None) -> dict[str, list[str]]:
    """``{"inclusion": [...], "exclusion": [...], "notes": [...]}``: one entry per criterion,
    in order; ``notes`` is the preamble before the first section heading.

    A criterion is a bulleted or numbered item with its deeper-indented sub-items and its
    continuation lines, or a plain paragraph; the sub-heading it stands under is prefixed
    ("Performance status: CTC 0-2").
    """
    out: dict[str, list] = {"inclusion": [], "exclusion": [], "notes": []}
    if not text:
        return out
    lines = [line.rstrip() for line in unescape(text).replace("\r\n", "\n").split("\n")]
    lines = [line for line in lines if line.strip()]
    section = "notes" if any(_section_of(line) for line in lines) else "inclusion"
    heading: str | None = None
    current: list | None = None  # [indent, text] of the open criterion
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else None
        found = _section_of(line)
        if found is not None:
            section, rest = found
            heading, current = None, None
            if rest:
                current = [0, rest]
                out[section].append(current)
            continue
        bullet = _BULLET.match(line)
        if bullet:
            indent, body = len(bullet.group(1).expandtabs(4)), bullet.group(2).strip()
            if current is not None and indent > current[0]:
                current[1] = _join(current[1], body)  # a sub-item belongs to its parent criterion
                continue
            current = [indent, f"{heading}: {body}" if heading else body]
            out[section].append(current)
            continue
        plain = line.strip()
        if _is_heading(plain, following):
            heading, current = plain.rstrip(":").strip(), None
            continue
        if current is not None and line.startswith((" ", "\t")):
            current[1] = f"{current[1]} {plain}"  # an indented line continues its criterion (markdown)
            continue
        current = [len(line) - len(line.lstrip()), f"{heading}: {plain}" if heading else plain]
        out[section].append(current)
    return {name: [" ".join(item[1].split()) for item in items] for name, items in out.items()}


def _join(parent: str, child: str) -> str:
    if parent.endswith(":"):
        return f"{parent} {child}"
    return f"{parent}; {child}"


__all__ = ["SEXES", "age_range_text", "age_years", "split_criteria", "trial_sex", "unescape"]
