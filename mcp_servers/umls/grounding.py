"""The model-free half of concept grounding (docs/design.md §16, seed 000): spans, the exact fast
path, the candidates a model is shown, the record of one grounded entity, and the deterministic
grounding of entities someone else extracted (the UMLS server's ``ground_text`` without a model).

``appliance.grounding`` runs the whole loop (model extraction and evaluation) on top of this;
the server uses it alone. Both produce the same entity record (``GroundedEntity.to_json``).

Invariants:
- A span is ``[start, end)`` into the input and ``text`` is exactly ``input[start:end]``: code
  finds the entity's words in the input (case-insensitive, any run of whitespace matching any
  other); an entity whose words are not there has no span and is dropped by the caller.
- The exact fast path takes a concept only when the search for the entity's own words returned
  it as an exact preferred-name or synonym match (``match_type`` ``preferred_name``/``synonym``,
  i.e. the whole normalised text equals one of its names) and no other concept matches as well:
  several exact synonyms of different concepts are ambiguous and left to the model. One
  preferred-name match among synonym matches wins.
- Every entity that is not grounded with certainty ends as ``expert_review`` with confidence
  0.0 and a ``review_reason``: nothing is ever dropped silently once it has a span.
- Pure functions and reads; nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from mcp_servers.umls import search as umls_search
from mcp_servers.umls.foundation import InvalidQuery, NoMatch, norm

ENTITY_TYPES = ("Condition", "Medication", "Procedure", "Lab_Value", "Demographic", "Biomarker")
METHODS = ("exact", "model_selected", "expert_review")
BANDS = ("accept", "low", "review")
EXACT_MATCH_TYPES = ("preferred_name", "synonym")
DEFAULT_ACCEPT = 0.7  # confidence at or above: accept
DEFAULT_LOW = 0.5  # at or above (and below accept): low; below: review
MAX_CANDIDATES = 5

Search = Callable[[str, int], list[dict]]  # (term, max_results) -> candidates, [] when none


def band_of(confidence: float, accept: float = DEFAULT_ACCEPT, low: float = DEFAULT_LOW) -> str:
    """The confidence band: ``accept``, ``low`` or ``review``."""
    return "accept" if confidence >= accept else "low" if confidence >= low else "review"


def find_span(text: str, fragment: str, taken: frozenset | set = frozenset()) -> tuple[int, int] | None:
    """``[start, end)`` of the first occurrence of ``fragment`` in ``text`` (case-insensitive,
    whitespace-normalised) whose span is not in ``taken``; None when there is none."""
    words = fragment.split()
    if not words:
        return None
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)
    for match in pattern.finditer(text):
        span = (match.start(), match.end())
        if span not in taken:
            return span
    return None


def shown(candidate: dict, index: int | None = None) -> dict:
    """The compact form of a ``concept_search`` candidate: what a model is shown and the
    history keeps (with its 1-based number in the list when ``index`` is given)."""
    out = {"cui": candidate.get("cui"), "name": candidate.get("name"), "snomed_code": candidate.get("snomed_code"),
           "semantic_type": candidate.get("semantic_type"), "matched_term": candidate.get("matched_term"),
           "match_type": candidate.get("match_type"), "score": candidate.get("score")}
    return {"index": index, **out} if index is not None else out


def merge(lists: list[list[dict]], limit: int = MAX_CANDIDATES) -> list[dict]:
    """Candidates of several searches in order, each CUI once, at most ``limit``."""
    out: list[dict] = []
    seen: set[str] = set()
    for candidates in lists:
        for c in candidates:
            if c.get("cui") and c["cui"] not in seen and len(out) < limit:
                seen.add(c["cui"])
                out.append(c)
    return out


def exact_match(candidates: list[dict], entity_text: str) -> tuple[dict | None, str]:
    """(the concept the exact fast path takes, or None; why). See the module invariants."""
    q = norm(entity_text)
    exact = [c for c in candidates if c.get("match_type") in EXACT_MATCH_TYPES
             and norm(c.get("matched_term") or "") == q]
    if not exact:
        return None, "no_exact_match"
    if len(exact) == 1:
        return exact[0], "exact"
    preferred = [c for c in exact if c["match_type"] == "preferred_name"]
    if len(preferred) == 1:
        return preferred[0], "exact"
    return None, "ambiguous_exact"


@dataclass
class GroundedEntity:
    """One entity of the input and how it was grounded (``to_json`` is the published shape)."""

    text: str  # exactly input[span[0]:span[1]]
    span: tuple[int, int]
    type: str  # one of ENTITY_TYPES
    search_term: str  # the extraction's standard term
    method: str = "expert_review"
    cui: str | None = None
    snomed_code: str | None = None
    preferred_name: str | None = None
    semantic_type: str | None = None
    confidence: float = 0.0
    band: str = "review"
    review_reason: str | None = None
    candidates: list[dict] = field(default_factory=list)  # the last list seen (what a reviewer picks from)
    history: list[dict] = field(default_factory=list)  # per step: search terms, candidates, decision, outcome

    def take(self, candidate: dict, method: str, confidence: float, band: str) -> None:
        self.method, self.confidence, self.band, self.review_reason = method, confidence, band, None
        self.cui, self.snomed_code = candidate.get("cui"), candidate.get("snomed_code")
        self.preferred_name, self.semantic_type = candidate.get("name"), candidate.get("semantic_type")

    def to_review(self, reason: str) -> None:
        self.method, self.confidence, self.band, self.review_reason = "expert_review", 0.0, "review", reason
        self.cui = self.snomed_code = self.preferred_name = self.semantic_type = None

    def to_json(self) -> dict:
        return {
            "text": self.text, "span": list(self.span), "type": self.type, "cui": self.cui,
            "snomed_code": self.snomed_code, "preferred_name": self.preferred_name,
            "semantic_type": self.semantic_type, "confidence": self.confidence, "band": self.band,
            "method": self.method, "review_reason": self.review_reason, "search_term": self.search_term,
            "candidates": [shown(c, i) for i, c in enumerate(self.candidates, 1)], "history": self.history,
        }


def db_search(db) -> Search:
    """``umls.search.search`` over ``db`` (an open connection or a path) as a ``Search``:
    [] when nothing matches or the term is empty."""
    def run(term: str, max_results: int) -> list[dict]:
        try:
            return umls_search.search(db, term[:umls_search.MAX_TERM_CHARS], max_results)
        except (NoMatch, InvalidQuery):
            return []
    return run


def try_exact(entity: GroundedEntity, search: Search, max_candidates: int = MAX_CANDIDATES,
              accept: float = DEFAULT_ACCEPT, low: float = DEFAULT_LOW) -> list[dict]:
    """The exact fast path for one entity: search its own words and take an exact match (method
    ``exact``, confidence = the match score: 1.0 preferred name, 0.9 synonym). Records the step
    in the entity's history and returns the candidates found (for the next step to reuse)."""
    candidates = search(entity.text, max_candidates)
    chosen, outcome = exact_match(candidates, entity.text)
    entity.history.append({"iteration": 0, "search_terms": [entity.text],
                           "candidates": [shown(c, i) for i, c in enumerate(candidates, 1)],
                           "decision": None, "outcome": outcome})
    if chosen is not None:
        score = float(chosen.get("score") or 1.0)
        entity.take(chosen, "exact", score, band_of(score, accept, low))
        entity.candidates = candidates
    return candidates


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")


def exact_phrases(db, text: str, max_words: int = 6) -> list[dict]:
    """Every phrase of ``text`` (up to ``max_words`` words, longest first, left to right, not
    overlapping) whose normalised form is exactly a concept name or synonym: what the exact fast
    path would take, with no model, if an extractor named those phrases. Each: span, text, the
    concepts it names (several when ambiguous)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    found: list[dict] = []
    i = 0
    while i < len(words):
        for n in range(min(max_words, len(words) - i), 0, -1):
            start, end = words[i][0], words[i + n - 1][1]
            q = norm(text[start:end])
            rows = db.execute(
                "SELECT DISTINCT a.cui, c.name, c.snomed_code FROM atoms a JOIN concepts c ON c.cui = a.cui "
                "WHERE a.norm = ? ORDER BY a.cui", [q]).fetchall() if q else []
            if rows:
                found.append({"span": [start, end], "text": text[start:end],
                              "concepts": [{"cui": r[0], "name": r[1], "snomed_code": r[2]} for r in rows]})
                i += n
                break
        else:
            i += 1
    return found


def ground_given(text: str, entities: list[dict], search: Search, max_candidates: int = MAX_CANDIDATES) -> dict:
    """Ground entities someone else extracted, without a model: spans checked, the exact fast
    path, and for the rest the candidates of their search term (and their own words), sent to
    ``expert_review`` with reason ``needs_model_evaluation`` for the caller to choose from.

    ``entities``: dicts with ``text``, ``type`` and ``search_term`` (None: the text itself).
    Returns ``{"entities": [...], "stats": {...}}`` as ``appliance.grounding`` does."""
    grounded: list[GroundedEntity] = []
    taken: set[tuple[int, int]] = set()
    dropped = duplicates = searches = 0
    for given in entities:
        words = str(given.get("text") or "").strip()
        span = find_span(text, words, taken)
        if span is None:
            if find_span(text, words) is None:
                dropped += 1
            else:
                duplicates += 1
            continue
        taken.add(span)
        term = str(given.get("search_term") or "").strip() or text[span[0]:span[1]]
        entity = GroundedEntity(text=text[span[0]:span[1]], span=span, type=str(given.get("type")), search_term=term)

        def counted(t: str, n: int) -> list[dict]:
            nonlocal searches
            searches += 1
            return search(t, n)

        own = try_exact(entity, counted, max_candidates)
        if entity.method != "exact":
            lists = [own] if norm(term) == norm(entity.text) else [counted(term, max_candidates), own]
            entity.candidates = merge(lists, max_candidates)
            entity.history.append({"iteration": 1, "search_terms": [term],
                                   "candidates": [shown(c, i) for i, c in enumerate(entity.candidates, 1)],
                                   "decision": None, "outcome": "no model on this server"})
            entity.to_review("needs_model_evaluation" if entity.candidates else "no_candidates")
        grounded.append(entity)
    grounded.sort(key=lambda e: e.span)
    methods = {m: sum(e.method == m for e in grounded) for m in METHODS}
    return {"entities": [e.to_json() for e in grounded],
            "stats": {"entities": len(grounded), "methods": methods, "dropped_entities": dropped,
                      "duplicate_entities": duplicates, "search_calls": searches, "model_calls": 0}}
