"""Criteria extraction: pages -> paragraphs -> atomic criteria (seed 001, docs/design.md §16).

Stage 1 keeps the pages that hold eligibility criteria, stage 2 the paragraphs, stage 3 splits
what is kept into atomic criteria and describes each one. Every stage asks the text first: a
CT.gov record's eligibility module, an "Inclusion/Exclusion Criteria" heading, a page that goes
on with the list of the page before, and a bullet list under such a heading are kept by code
(no model call); a bullet that is a single condition is one criterion as it stands. The model is
asked only where the text does not say.

Invariants:
- Every model call sees a piece of text sized to the model's context (``chunking``), so a long
  protocol never overflows it; no text is dropped by sizing.
- A heading's side (inclusion/exclusion) is code's and wins over the model's; each criterion's
  ``provenance`` says which path decided each stage, so figures can be read per path.
- A model output that fails (invalid, truncated) costs that one decision, with a warning: a
  page or paragraph is then left out, a passage kept whole, a criterion kept undescribed.
  Cancellation and script errors propagate.
- Criteria are deduplicated per document on (heading side, normalised words) before they are
  described, so a repeat costs no model call.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from appliance.errors import GenerationCancelled, GenerationError, TurnCancelled
from appliance.extraction import stages
from appliance.extraction.chunking import (
    Count,
    context_size,
    split_to_fit,
    text_budget,
    token_counter,
)
from appliance.extraction.loaders import Document
from appliance.extraction.schemas import Criterion
from appliance.extraction.structure import (
    Block,
    blocks,
    bullets,
    is_compound,
    says_eligibility,
)
from appliance.llm.base import LanguageModel

LABEL_WORDS = 5  # a sub-heading this short ("Age", "Healthy Participants") prefixes its items


@dataclass(frozen=True)
class ExtractionConfig:
    """Sizes of the pieces of text one call sees, in tokens (each also bounded by the context)."""

    n_ctx: int | None = None  # the model's context size; None: the loaded model's profile
    page_cap: int = 2048
    paragraph_cap: int = 1024
    unit_cap: int = 384
    split: bool = True  # stage 3's split call for a compound item (off: each item is one criterion)
    details: bool = True  # stage 3's description call per criterion (off: text, side and code's finds)


@dataclass(frozen=True)
class Progress:
    stage: str  # "pages" or "criteria"
    done: int
    total: int
    criteria: int


ProgressCallback = Callable[[Progress], None]


@dataclass
class ExtractionResult:
    criteria: list[Criterion]
    documents: list[dict]
    warnings: list[str] = field(default_factory=list)
    stats: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        return {"criteria": [c.to_json() for c in self.criteria], "documents": self.documents,
                "warnings": self.warnings, "stats": dict(sorted(self.stats.items()))}


@dataclass
class _Unit:
    text: str
    side: str | None
    page: int
    kind: str  # "bullet" or "paragraph"
    paragraph_filter: str
    page_filter: str


class _Run:
    def __init__(self, model: LanguageModel, config: ExtractionConfig, progress: ProgressCallback | None,
                 cancel: threading.Event | None):
        self.model, self.config, self.progress, self.cancel = model, config, progress, cancel
        self.count: Count = token_counter(model)
        n_ctx = context_size(model, config.n_ctx)
        self.page_budget = text_budget(self.count, n_ctx, stages.page_messages("", 0),
                                       stages.FILTER_MAX_TOKENS, config.page_cap)
        self.paragraph_budget = text_budget(self.count, n_ctx, stages.paragraph_messages("", "x" * 90),
                                            stages.FILTER_MAX_TOKENS, config.paragraph_cap)
        self.unit_budget = min(
            text_budget(self.count, n_ctx, stages.split_messages("", "exclusion"), stages.SPLIT_OVERHEAD,
                        config.unit_cap, copies=stages.SPLIT_COPIES),
            text_budget(self.count, n_ctx, stages.details_messages("", "exclusion"), stages.DETAILS_MAX_TOKENS,
                        config.unit_cap))
        self.stats: Counter = Counter()
        self.warnings: list[str] = []
        self.found = 0

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise TurnCancelled("extraction cancelled")

    def ask(self, what: str, call, fallback):
        """One model call; a failed output gives ``fallback`` and a warning."""
        self.check_cancel()
        self.stats["model_calls"] += 1
        try:
            return call()
        except GenerationCancelled:
            raise
        except GenerationError as exc:
            self.stats["model_failures"] += 1
            self.warnings.append(f"{what}: {exc}")
            return fallback

    # -- stage 1 --------------------------------------------------------------------------
    def pages(self, doc: Document) -> list[tuple[int, str, str, bool]]:
        """Every window of every page as (page, text, how it was decided, kept)."""
        windows = [(p.number, w) for p in doc.pages for w in split_to_fit(p.text, self.page_budget, self.count)]
        out: list[tuple[int, str, str, bool]] = []
        for i, (number, text) in enumerate(windows, start=1):
            if doc.kind == "ctgov":
                how, kept = "record", True
            elif says_eligibility(text):
                how, kept = "heading", True
            elif out and out[-1][3] and _starts_with_list(text):
                how, kept = "continuation", True
            else:
                kept = self.ask(f"{doc.name} page {number}: page filter",
                                lambda text=text, number=number: stages.page_holds_criteria(self.model, text, number), False)
                how = "model"
            self.stats[f"page_filter.{how}.{'kept' if kept else 'left'}"] += 1
            out.append((number, text, how, kept))
            if self.progress:
                self.progress(Progress("pages", i, len(windows), self.found))
        return out

    # -- stage 2 --------------------------------------------------------------------------
    def units(self, doc: Document, windows: list[tuple[int, str, str, bool]]) -> list[_Unit]:
        units: list[_Unit] = []
        in_section, side, label, heading = doc.kind == "ctgov", None, None, None
        previous_kept = False
        for number, text, page_how, kept in windows:
            if not kept:
                previous_kept = False
                continue
            if not previous_kept and doc.kind != "ctgov":
                in_section, side, label, heading = False, None, None, None  # a gap: no heading carries over
            previous_kept = True
            for block in blocks(text):
                if block.kind == "heading":
                    h = block.heading
                    heading = h.text
                    if h.eligibility:  # "Exclusion Criteria" sets the side; "Eligibility" keeps it
                        in_section, label = True, None
                        side = h.side or side
                    elif h.major and doc.kind != "ctgov":
                        in_section, side, label = False, None, None
                    else:
                        label = h.text if len(h.text.split()) <= LABEL_WORDS and not h.text.endswith(":") else None
                    continue
                if block.kind == "bullets" and in_section:
                    how = "bullets"
                else:
                    pieces = split_to_fit(block.text, self.paragraph_budget, self.count)
                    keep = any(self.ask(f"{doc.name} page {number}: paragraph filter",
                                        lambda piece=piece, heading=heading: stages.paragraph_holds_criteria(self.model, piece, heading),
                                        False) for piece in pieces)
                    how = "model"
                    self.stats[f"paragraph_filter.model.{'kept' if keep else 'left'}"] += 1
                    if not keep:
                        continue
                if how == "bullets":
                    self.stats["paragraph_filter.bullets.kept"] += 1
                units += self._block_units(block, side, label, number, how, page_how)
        return units

    def _block_units(self, block: Block, side, label, page: int, how: str, page_how: str) -> list[_Unit]:
        if block.kind == "bullets":
            texts = [f"{label}: {b.text}" if label else b.text for b in bullets(block)]
            kind = "bullet"
        else:
            texts, kind = [" ".join(block.text.split())], "paragraph"
        out = []
        for text in texts:
            for piece in split_to_fit(text, self.unit_budget, self.count):
                out.append(_Unit(piece, side, page, kind, how, page_how))
        return out

    # -- stage 3 --------------------------------------------------------------------------
    def criteria(self, doc: Document, units: list[_Unit]) -> list[Criterion]:
        out: list[Criterion] = []
        seen: set[tuple] = set()
        for i, unit in enumerate(units, start=1):
            if self.config.split and is_compound(unit.text):
                pieces, split_how = self.ask(
                    f"{doc.name} page {unit.page}: split",
                    lambda unit=unit: stages.split_passage(self.model, unit.text, unit.side, self.count(unit.text)),
                    ([" ".join(unit.text.split())], "passage"))
            else:
                pieces, split_how = [unit.text], unit.kind
            self.stats[f"split.{split_how}"] += 1
            for text in pieces:
                key = dedupe_key(doc.name, unit.side, text)
                if not key[2] or key in seen:  # described once, before any model call
                    self.stats["duplicates_removed"] += 1
                    continue
                seen.add(key)
                out.append(self._criterion(doc, unit, text, split_how))
                self.found += 1
            if self.progress:
                self.progress(Progress("criteria", i, len(units), self.found))
        return out

    def _criterion(self, doc: Document, unit: _Unit, text: str, split_how: str) -> Criterion:
        provenance = {"page_filter": unit.page_filter, "paragraph_filter": unit.paragraph_filter,
                      "split": split_how, "type": "heading" if unit.side else "none", "details": "off"}
        crit = Criterion(text=text, type=unit.side, category=None, assertion=None, thresholds=[], temporal=None,
                         triplets=[], document=doc.name, page=unit.page, provenance=provenance)
        details = None
        if self.config.details:
            details = self.ask(f"{doc.name} page {unit.page}: details",
                               lambda: stages.describe(self.model, text, unit.side), None)
            provenance["details"] = "failed" if details is None else "model"
        if details is None:  # code's finds only
            crit.thresholds = stages.thresholds_in_text(text)
            crit.temporal = stages.temporal_in_text(text)
            return crit
        provenance["model_type"] = details.type  # kept beside the heading's, so the model can be measured
        if unit.side is None:
            crit.type, provenance["type"] = details.type, "model"
        elif details.type != unit.side:
            crit.notes.append(f"the model said {details.type}; the heading says {unit.side}")
        crit.category, crit.assertion = details.category, details.assertion
        crit.thresholds, crit.temporal, crit.triplets = details.thresholds, details.temporal, details.triplets
        if details.dropped:
            crit.notes.append("not in the text, dropped: " + "; ".join(details.dropped))
        return crit


def _starts_with_list(text: str) -> bool:
    first = next((b for b in blocks(text)), None)
    return first is not None and first.kind == "bullets"


def dedupe_key(document: str, side: str | None, text: str) -> tuple[str, str | None, str]:
    """Two criteria are one when document, side and normalised words are the same."""
    return document, side, " ".join(stages.tokens(text))


def extract_criteria(documents: Sequence[Document], model: LanguageModel, config: ExtractionConfig | None = None,
                     progress: ProgressCallback | None = None,
                     cancel: threading.Event | None = None) -> ExtractionResult:
    """The atomic criteria of ``documents``, in document order."""
    run = _Run(model, config or ExtractionConfig(), progress, cancel)
    criteria: list[Criterion] = []
    summaries: list[dict] = []
    for doc in documents:
        windows = run.pages(doc)
        units = run.units(doc, windows)
        found = run.criteria(doc, units)
        criteria += found
        summaries.append({
            "name": doc.name, "kind": doc.kind, "title": doc.title, "pages": len(doc.pages),
            "windows": len(windows), "pages_with_criteria": sorted({n for n, _, _, kept in windows if kept}),
            "criteria": len(found),
        })
    return ExtractionResult(criteria, summaries, run.warnings, run.stats)
