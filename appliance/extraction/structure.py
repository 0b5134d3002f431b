"""What the text itself says about its structure: headings, bullets, paragraphs.

These rules are the pipeline's code shortcuts (seed 001's filters ask the model only when the
text does not already say): an "Inclusion Criteria" / "Exclusion Criteria" heading marks a page
as holding criteria and sets the side of the bullets under it.

Invariants:
- Pure functions of the text; no model, no I/O.
- ``blocks`` returns every non-blank line of its input exactly once, in order, inside one
  block (a heading, a bullet list, or a prose paragraph); wrapped lines of a bullet stay with it.
- A side comes only from an eligibility heading; a heading that is not about eligibility ends
  the section in a document (never in a CT.gov record, whose text is all eligibility).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Side = Literal["inclusion", "exclusion"]
BlockKind = Literal["heading", "bullets", "prose"]

_BULLET = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>[*\-+\u2022]|\d{1,2}[.)]|[a-zA-Z][.)]|\(\w{1,3}\))[ \t]+(?P<text>\S.*)$")
_MD_HEADING = re.compile(r"^\s*#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
_SECTION_NUMBER = re.compile(r"^\s*(?:section\s+)?\d+(?:\.\d+)*\.?\s+(?=\S)", re.I)
_DECIMAL_SECTION = re.compile(r"^\s*\d+\.\d+(?:\.\d+)*\.?\s+\S")
_INCLUSION = re.compile(r"\binclusion\b|\bincluded if\b|\beligible if\b", re.I)
_EXCLUSION = re.compile(r"\bexclusion\b|\bexcluded if\b|\bnot eligible if\b|\bineligible if\b", re.I)
_ELIGIBILITY = re.compile(r"\beligib|\bcriteria\b|\bpatient selection\b|\bselection of (?:patients|subjects|participants)\b|"
                          r"\b(?:disease|patient) characteristics\b|\bprior concurrent therapy\b", re.I)
WRAP_WIDTH = 70  # the narrowest page width (characters) assumed when judging wrapped lines
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]%][.!?])\s+(?=[A-Z(])")


@dataclass(frozen=True)
class Heading:
    text: str  # without markdown marks, numbering or the trailing colon
    major: bool  # a section heading (markdown, numbered section, capitals) rather than a label
    eligibility: bool  # names an eligibility section
    side: Side | None  # inclusion/exclusion when the heading says so


@dataclass
class Block:
    kind: BlockKind
    lines: list[str] = field(default_factory=list)
    heading: Heading | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Bullet:
    text: str  # the item's words, wrapped lines joined, marker removed
    depth: int  # 0 for a top-level item


def clean_heading(line: str) -> str:
    text = line.strip()
    m = _MD_HEADING.match(text)
    if m:
        text = m.group("text")
    text = text.strip("*_ ").strip()
    text = _SECTION_NUMBER.sub("", text)
    return text.rstrip(":").strip("*_ ").strip()


def heading_of(line: str) -> Heading | None:
    """The line as a heading, or None when it reads as text. Labels are short lines without
    final punctuation or ending with a colon ("Age", "Renal Impaired Participants",
    "Patients must meet all of the following:")."""
    raw = line.strip()
    bullet = _BULLET.match(line)
    if not raw or bullet and not _DECIMAL_SECTION.match(line) and not (
            bullet.group("marker")[0].isdigit() and _capitals(bullet.group("text"))):
        return None  # a list item ("5. STUDY DESIGN" is a numbered section heading)
    text = clean_heading(raw)
    if not text or len(text) > 90:
        return None
    words = text.split()
    capitals = _capitals(text)
    markdown = bool(_MD_HEADING.match(raw)) or (raw.startswith("**") and raw.rstrip(":").endswith("**"))
    numbered = bool(_DECIMAL_SECTION.match(raw)) or bool(re.match(r"^\s*\d+\.?\s+[A-Z][A-Z\s/&,-]+:?$", raw))
    label = raw.endswith(":") and len(words) <= 12 or (len(words) <= 5 and not re.search(r"[.;,!?)]$", raw))
    if not (markdown or numbered or capitals or label):
        return None
    inclusion, exclusion = bool(_INCLUSION.search(text)), bool(_EXCLUSION.search(text))
    side: Side | None = None
    if inclusion != exclusion and len(words) <= 8:
        side = "inclusion" if inclusion else "exclusion"
    eligibility = side is not None or (bool(_ELIGIBILITY.search(text)) and len(words) <= 8)
    return Heading(text, markdown or numbered or capitals, eligibility, side)


def _capitals(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 3 and sum(c.isupper() for c in letters) / len(letters) > 0.8


def says_eligibility(text: str) -> bool:
    """Whether a page's own words hold an eligibility heading (stage 1's code shortcut)."""
    for line in text.split("\n"):
        h = heading_of(line)
        if h is not None and h.eligibility:
            return True
    return False


def blocks(text: str) -> list[Block]:
    """The text as headings, bullet lists and prose paragraphs, in order. A label ("Age") is
    a heading only after a blank line or another heading; right under a line of text it is
    that line's wrapped end (PDF text wraps)."""
    out: list[Block] = []
    current: Block | None = None
    blank_before = True
    lines = text.split("\n")
    lengths = sorted(len(line.strip()) for line in lines if line.strip())
    width = max(lengths[int(0.9 * (len(lengths) - 1))] if lengths else 0, WRAP_WIDTH)
    previous = ""
    for line in lines:
        # A line right under a short one starts something new unless it starts in lower case: text
        # wraps only at the margin, and a PDF's text layer has no blank lines to say so.
        wrapped = bool(previous) and (len(previous) >= 0.6 * width or line.strip()[:1].islower())
        previous = line.strip()
        if not line.strip():
            blank_before = True
            if current is not None and current.kind == "prose":
                current = None  # a blank line ends a paragraph; a list may go on after one
            continue
        heading = heading_of(line)
        if heading is not None and not (heading.major or heading.eligibility or blank_before
                                        or current is None or current.kind == "heading"):
            heading = None
        if heading is not None:
            current = Block("heading", [line], heading)
            out.append(current)
        elif _BULLET.match(line):
            if current is None or current.kind != "bullets":
                current = Block("bullets")
                out.append(current)
            current.lines.append(line)
        elif current is not None and current.kind != "heading" and not blank_before and wrapped:
            current.lines.append(line)  # a wrapped line of the item or paragraph above
        else:
            current = Block("prose", [line])
            out.append(current)
        blank_before = False
    return out


def bullets(block: Block) -> list[Bullet]:
    """The items of a bullet block, each with its wrapped lines joined."""
    items: list[tuple[int, list[str]]] = []
    for line in block.lines:
        m = _BULLET.match(line)
        if m:
            indent = len(m.group("indent").expandtabs(4))
            items.append((indent, [m.group("text").strip()]))
        elif items:
            items[-1][1].append(line.strip())
    indents = sorted({indent for indent, _ in items})
    return [Bullet(" ".join(parts), indents.index(indent)) for indent, parts in items]


def sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends (a full stop before a capital), whitespace collapsed."""
    flat = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(flat) if s]


def is_compound(text: str) -> bool:
    """Whether a bullet may hold more than one criterion: several sentences, a semicolon, or
    more than 30 words. Such an item goes to the model to be split; any other is one criterion."""
    flat = " ".join(text.split())
    return len(sentences(flat)) > 1 or ";" in flat or len(flat.split()) > 30
