"""The grounding loop (docs/design.md §16, seed 000): entities of a text, coded against UMLS.

``ground(text, model, search, config)`` is the public call (CLI, evaluation, the UMLS server's
``ground_text`` when it has a model, criteria extraction); ``ground_entities`` does the same for
entities someone else extracted, without the extraction call.

Steps, all bounded by code:
1. One extraction call (T=0): entities with their words, one of six types and a standard
   search term. Code finds each entity's words in the input; an entity whose words are not
   there is dropped and counted (``dropped_entities``), a second copy of a span already taken
   is counted as a duplicate.
2. The exact fast path, no model call: ``concept_search`` on the entity's own words; an exact
   preferred-name or synonym match for the whole text is taken (method ``exact``) and the
   evaluate call it saves is counted (``evaluate_calls_saved``).
3. Rounds (at most ``max_iterations``, default 3): code searches each pending entity's terms
   (CUI and SNOMED CT in one call, up to ``max_candidates``), then one evaluate call (T=0) per
   entity: select a shown candidate by its number with a confidence word, refine with new
   terms (which replace the old ones), or none. After the last round code ends the loop.

Rules in code, not in the prompt:
- A selection must name a candidate that was shown (by number; its CUI and SNOMED code are then
  the shown candidate's). Anything else is rejected and counted (``rejected_codes``).
- ``expert_review`` with confidence 0.0 (and a ``review_reason``): no candidates, a parse
  failure, a search failure, none chosen, a rejected or incomplete selection, a refine with no
  new terms, or rounds exhausted.
- Confidence words map to numbers and numbers to bands through ``GroundingConfig``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from appliance.errors import GenerationCancelled, GenerationError
from appliance.grounding.config import GroundingConfig
from appliance.grounding.errors import GroundingError, SearchUnavailable
from appliance.grounding.prompts import evaluate_messages, extract_messages
from appliance.grounding.schemas import ExtractedEntity, Extraction, evaluation_schema
from appliance.grounding.search import ConceptSearch, default_search
from appliance.llm.base import LanguageModel
from appliance.llm.grammar import token_budget
from mcp_servers.umls.foundation import norm
from mcp_servers.umls.grounding import (
    METHODS,
    GroundedEntity,
    find_span,
    merge,
    shown,
    try_exact,
)

NODE_EXTRACT = "GROUNDING_EXTRACT"
NODE_EVALUATE = "GROUNDING_EVALUATE"
TEMPERATURE = 0.0  # both calls are operational decisions (docs/design.md §7)
EXTRACT_MAX_TOKENS = 384  # about 12 entities of short phrases; the decoder ends the list within it
EVALUATE_MAX_TOKENS = 96
MAX_TEXT_CHARS = 4000


@dataclass
class GroundingResult:
    text: str
    entities: list[GroundedEntity]
    stats: dict

    def to_json(self) -> dict:
        return {"entities": [e.to_json() for e in self.entities], "stats": self.stats}


def code_was_shown(cui: str | None, snomed_code: str | None, candidates: Sequence[dict]) -> bool:
    """Whether a selected CUI (and SNOMED code, when given) belongs to one candidate shown."""
    return any(c.get("cui") == cui and (snomed_code is None or c.get("snomed_code") == snomed_code)
               for c in candidates) if cui else False


def check_selection(number: str | None, candidates: Sequence[dict]) -> dict | None:
    """The shown candidate a selection names by its 1-based number, or None when it names none
    (out of range, not a number) or its code was not among those shown."""
    if number is None or not str(number).isdigit() or not 1 <= int(number) <= len(candidates):
        return None
    chosen = candidates[int(number) - 1]
    return chosen if code_was_shown(chosen.get("cui"), chosen.get("snomed_code"), candidates) else None


@dataclass
class _Pending:
    entity: GroundedEntity
    terms: list[str]
    tried: set[str]
    fill: list[dict] = field(default_factory=list)  # the entity's own search, for the first round


class _Run:
    def __init__(self, text: str, model: LanguageModel, search: ConceptSearch, config: GroundingConfig):
        self.text, self.model, self.search, self.config = text, model, search, config
        self.cache: dict[tuple[str, int], list[dict]] = {}
        self.started = time.perf_counter()
        self.stats = {
            "model_calls": 0, "extraction_calls": 0, "evaluate_calls": 0, "evaluate_calls_saved": 0,
            "search_calls": 0, "extracted": 0, "entities": 0, "dropped_entities": 0, "duplicate_entities": 0,
            "rejected_codes": 0, "parse_failures": 0, "search_failures": 0, "extraction_failed": False,
            "iterations": 0, "methods": {}, "seconds": 0.0, "dropped": [],
        }

    # -- searches (cached per text: a term searched twice costs one call) ---------------------
    def _search(self, term: str, max_results: int) -> list[dict]:
        key = (norm(term), max_results)
        if key not in self.cache:
            self.stats["search_calls"] += 1
            self.cache[key] = self.search.search(term, max_results)
        return self.cache[key]

    def _call(self, node: str, messages, schema, max_tokens: int):
        """One constrained call; None when its output did not parse (counted)."""
        self.stats["model_calls"] += 1
        try:
            return self.model.generate_constrained(node, messages, schema, temperature=TEMPERATURE,
                                                   max_tokens=token_budget(schema, max_tokens))
        except GenerationCancelled:
            raise
        except GenerationError:
            self.stats["parse_failures"] += 1
            return None

    # -- steps --------------------------------------------------------------------------------
    def extract(self) -> list[ExtractedEntity]:
        self.stats["extraction_calls"] += 1
        out = self._call(NODE_EXTRACT, extract_messages(self.text), Extraction, EXTRACT_MAX_TOKENS)
        if out is None:
            self.stats["extraction_failed"] = True
            return []
        return list(out.entities)

    def place(self, extracted: Sequence[ExtractedEntity | dict]) -> list[GroundedEntity]:
        """Entities with their spans in the input; the others dropped (not in the text) or
        counted as duplicates (every occurrence already taken)."""
        placed: list[GroundedEntity] = []
        taken: set[tuple[int, int]] = set()
        self.stats["extracted"] += len(extracted)
        for item in extracted:
            e = item if isinstance(item, dict) else item.model_dump()
            words = str(e.get("text") or "").strip()
            span = find_span(self.text, words, taken)
            if span is None:
                if find_span(self.text, words) is None:
                    self.stats["dropped_entities"] += 1
                    self.stats["dropped"].append({"text": words[:60], "type": e.get("type")})
                else:
                    self.stats["duplicate_entities"] += 1
                continue
            taken.add(span)
            found = self.text[span[0]:span[1]]
            term = str(e.get("search_term") or "").strip() or found
            placed.append(GroundedEntity(text=found, span=span, type=str(e.get("type")), search_term=term))
        return placed

    def resolve(self, entities: list[GroundedEntity]) -> None:
        cfg = self.config
        pending: list[_Pending] = []
        for entity in entities:
            try:
                own = try_exact(entity, self._search, cfg.max_candidates, cfg.accept_threshold, cfg.low_threshold)
            except SearchUnavailable:
                self._unavailable(entity, 0, [entity.text])
                continue
            if entity.method == "exact":
                self.stats["evaluate_calls_saved"] += 1
                continue
            terms = [entity.search_term]
            pending.append(_Pending(entity, terms, {norm(entity.search_term), norm(entity.text)}, own))
        for iteration in range(1, cfg.max_iterations + 1):
            if not pending:
                break
            self.stats["iterations"] = iteration
            pending = [p for p in pending if self._round(p, iteration)]
        for p in pending:  # still asking to refine after the last round: code ends the loop
            p.entity.history[-1]["outcome"] = "iterations_exhausted"
            p.entity.to_review("iterations_exhausted")

    def _unavailable(self, entity: GroundedEntity, iteration: int, terms: list[str]) -> None:
        self.stats["search_failures"] += 1
        entity.history.append({"iteration": iteration, "search_terms": terms, "candidates": [], "decision": None,
                               "outcome": "search_unavailable"})
        entity.to_review("search_unavailable")

    def _round(self, p: _Pending, iteration: int) -> bool:
        """One search and evaluation of a pending entity; True when it asks for another round."""
        cfg, entity = self.config, p.entity
        try:
            lists = [self._search(t, cfg.max_candidates) for t in p.terms]
        except SearchUnavailable:
            self._unavailable(entity, iteration, list(p.terms))
            return False
        if iteration == 1:
            lists.append(p.fill)
        candidates = merge(lists, cfg.max_candidates)
        record = {"iteration": iteration, "search_terms": list(p.terms),
                  "candidates": [shown(c, i) for i, c in enumerate(candidates, 1)], "decision": None, "outcome": None}
        entity.history.append(record)
        entity.candidates = candidates

        def review(reason: str) -> bool:
            record["outcome"] = reason
            entity.to_review(reason)
            return False

        if not candidates:
            return review("no_candidates")
        self.stats["evaluate_calls"] += 1
        messages = evaluate_messages(self.text, entity.text, entity.type, p.terms, candidates, iteration,
                                     cfg.max_iterations)
        decision = self._call(NODE_EVALUATE, messages, evaluation_schema(len(candidates)), EVALUATE_MAX_TOKENS)
        if decision is None:
            return review("parse_failure")
        record["decision"] = decision.model_dump()
        if decision.decision == "select":
            if decision.candidate is None:
                return review("incomplete_decision")
            chosen = check_selection(decision.candidate, candidates)
            if chosen is None:
                self.stats["rejected_codes"] += 1
                return review("rejected_selection")
            value = cfg.confidence_values[decision.confidence or "low"]  # no word: the lowest
            entity.take(chosen, "model_selected", value, cfg.band(value))
            record["outcome"] = "selected"
            return False
        if decision.decision == "refine":
            new: list[str] = []
            for term in decision.refine_terms:
                key = norm(term)
                if key and key not in p.tried:
                    p.tried.add(key)
                    new.append(term.strip())
            if not new:
                return review("refine_without_new_terms")
            p.terms = new  # the new terms replace the old ones
            record["outcome"] = "refine"
            return True
        return review("no_acceptable_candidate")

    def result(self, entities: list[GroundedEntity]) -> GroundingResult:
        entities.sort(key=lambda e: e.span)
        self.stats["entities"] = len(entities)
        self.stats["methods"] = {m: sum(e.method == m for e in entities) for m in METHODS}
        self.stats["seconds"] = round(time.perf_counter() - self.started, 3)
        return GroundingResult(self.text, entities, self.stats)


def _checked(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError("ground() takes the text as a string")
    if len(text) > MAX_TEXT_CHARS:
        raise GroundingError(f"the text is longer than {MAX_TEXT_CHARS} characters; ground it in parts")
    return text


def ground(text: str, model: LanguageModel, search: ConceptSearch | None,
           config: GroundingConfig | None = None) -> GroundingResult:
    """Extract the entities of ``text`` and ground each to a UMLS concept (module docstring).
    ``search`` None: the data home's UMLS database, in process."""
    run = _Run(_checked(text), model, search or default_search(), config or GroundingConfig())
    if not text.strip():
        return run.result([])
    entities = run.place(run.extract())
    run.resolve(entities)
    return run.result(entities)


def ground_entities(text: str, entities: Sequence[ExtractedEntity | dict], model: LanguageModel,
                    search: ConceptSearch | None, config: GroundingConfig | None = None) -> GroundingResult:
    """Ground entities already extracted from ``text`` (dicts or ``ExtractedEntity`` with
    ``text``, ``type``, ``search_term``): the same rules as ``ground``, no extraction call."""
    run = _Run(_checked(text), model, search or default_search(), config or GroundingConfig())
    placed = run.place(entities)
    run.resolve(placed)
    return run.result(placed)
