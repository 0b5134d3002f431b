"""The cached-UMLS MCP server: concept search with CUI + SNOMED CT (+ RxNorm, LOINC) in one call.

Invariants:
- Every tool is read-only (``readOnlyHint``) and opens its own query-only SQLite connection,
  so calls are safe from fastmcp's worker threads.
- The tools use the database path given to ``configure`` (tests; ``main`` passes ``--db`` or
  ``common.locations.umls_db_path()``). A missing database is built from the shipped starter
  subset at the first call (``umls.store.ensure_database`` is idempotent).
- ``concept_search`` returns both the CUI and the SNOMED CT code of each candidate (no separate
  mapping call), with a score whose bands mean the same thing everywhere (see ``umls.search``).
- ``ground_text`` grounds a text's entities (``umls.grounding``): without a model it takes the
  entities a client extracted, grounds the exact ones and returns the others as expert review
  with their candidates; a launcher that has a model (``python -m appliance.cli.grounding_serve``)
  hands it the whole loop through ``configure_grounder``. This module never loads a model.
- Expected failures are ``ToolError("<error_type>: <text>")`` (``contracts.tool_error_message``):
  ``invalid_args`` for an empty term, a bad CUI or max_results out of range, ``not_found`` when
  nothing matches. Anything unexpected is masked by ``mask_error_details``.

Run: ``python -m mcp_servers.umls [--db PATH] [--http HOST:PORT]`` (stdio by default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

from mcp_servers.contracts import READ_ONLY, tool_error_message
from mcp_servers.serving import ArgumentErrors, LazyDatabase, serve
from mcp_servers.umls import foundation, grounding, lookup, store
from mcp_servers.umls import search as umls_search

mcp = FastMCP(
    "umls",
    instructions=(
        "Local UMLS concept lookup. concept_search turns a clinical term, abbreviation or brand "
        "name into ranked UMLS concepts, each with CUI, SNOMED CT code, RxNorm code where it has "
        "one, semantic type and a match score (1.0 exact preferred name, 0.9 exact synonym)."
    ),
    mask_error_details=True,
    middleware=[ArgumentErrors()],
)

MAX_RESULTS_LIMIT = 25

_db = LazyDatabase(store.ensure_database)


def configure(db_path: Path | str | None) -> None:
    """Point the server at a database file (``None``: none; its tools then report the service unavailable)."""
    _db.configure(db_path)


@contextmanager
def _read() -> Iterator:
    path = _db.ready()
    db = foundation.connect(path, read_only=True)
    try:
        yield db
    except foundation.InvalidQuery as exc:
        raise ToolError(tool_error_message("invalid_args", str(exc))) from None
    except foundation.ConceptNotFound as exc:
        raise ToolError(tool_error_message("not_found", f"no concept with CUI {exc} in the local UMLS cache")) from None
    except foundation.NoMatch as exc:
        raise ToolError(tool_error_message(
            "not_found", f"no UMLS concept matches '{exc}'; try a synonym, the generic name or a broader term"
        )) from None
    finally:
        db.close()


@mcp.tool(annotations=READ_ONLY)
def concept_search(
    term: Annotated[str, Field(description="Clinical term, abbreviation or brand name, e.g. 'Tylenol', 'HTN'")],
    max_results: Annotated[int, Field(description="How many candidates to return (1-25)")] = 5,
) -> dict:
    """Find UMLS concepts for a clinical term and return CUI and SNOMED CT code together.

    Accepts preferred names, synonyms, abbreviations (HTN, MI, T2DM, COPD, AFib) and drug brand
    names (Tylenol -> acetaminophen); a single typo is tolerated. Each candidate has cui, name,
    snomed_code, rxnorm (drugs), loinc (lab tests), semantic_type, source vocabulary, the
    matched_term and a score: 1.0 exact preferred name, 0.9 exact synonym/abbreviation/brand,
    0.5-0.875 word or prefix match, below 0.5 typo-corrected match. Best candidate first.
    Fails with not_found when nothing matches.
    """
    if not isinstance(max_results, int) or not 1 <= max_results <= MAX_RESULTS_LIMIT:
        raise ToolError(tool_error_message("invalid_args", f"max_results must be between 1 and {MAX_RESULTS_LIMIT}"))
    if len(term) > umls_search.MAX_TERM_CHARS:
        raise ToolError(tool_error_message("invalid_args", f"the term is longer than {umls_search.MAX_TERM_CHARS} characters"))
    with _read() as db:
        candidates = umls_search.search(db, term, max_results)
    return {"term": term, "candidates": candidates, "count": len(candidates)}


@mcp.tool(annotations=READ_ONLY)
def get_concept(cui: Annotated[str, Field(description="UMLS CUI, e.g. C0020538")]) -> dict:
    """Get one UMLS concept: preferred name, semantic types, codes (SNOMED CT, RxNorm, LOINC)
    and every synonym with its source vocabulary. Fails with not_found for an unknown CUI."""
    with _read() as db:
        return lookup.get_concept(db, cui)


@mcp.tool(annotations=READ_ONLY)
def get_semantic_type(cui: Annotated[str, Field(description="UMLS CUI, e.g. C0020538")]) -> dict:
    """Get the semantic types (TUI and name, e.g. T047 Disease or Syndrome) of one UMLS concept,
    and whether it is a drug. An empty list means the shipped starter subset does not record the
    type (a licensed UMLS import does). Fails with not_found for an unknown CUI."""
    with _read() as db:
        return lookup.semantic_types(db, cui)


@mcp.tool(annotations=READ_ONLY)
def drug_vocabulary() -> dict:
    """Every preferred, synonym and brand name of the drug concepts (semantic types T121
    Pharmacologic Substance, T195 Antibiotic, T200 Clinical Drug), sorted, for name matching."""
    with _read() as db:
        names = lookup.drug_names(db)
    return {"names": names, "count": len(names)}


MAX_GROUND_CHARS = 4000
# (text, entities or None) -> {"entities": [...], "stats": {...}}: the model-backed loop, given by
# a launcher that has a model (``python -m appliance.cli.grounding_serve``); this layer has none.
Grounder = Callable[[str, "list[dict] | None"], dict]
_grounder: Grounder | None = None


def configure_grounder(grounder: Grounder | None) -> None:
    """Give ``ground_text`` the full model loop (``None``: the deterministic part only)."""
    global _grounder
    _grounder = grounder


class GivenEntity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=200, description="the entity's words exactly as in the text")
    type: Literal["Condition", "Medication", "Procedure", "Lab_Value", "Demographic", "Biomarker"]
    search_term: str | None = Field(None, max_length=200, description="standard term to search, e.g. "
                                    "'acetaminophen' for 'Tylenol' (default: the text itself)")


@mcp.tool(annotations=READ_ONLY)
def ground_text(
    text: Annotated[str, Field(min_length=1, max_length=MAX_GROUND_CHARS,
                               description="Clinical or eligibility-criterion text to ground")],
    entities: Annotated[list[GivenEntity] | None, Field(
        max_length=20, description="The text's entities, if you extracted them (needed when this server has no model)",
    )] = None,
) -> dict:
    """Ground clinical text to UMLS concepts. Returns {"entities": [...], "stats": {...}}; each
    entity has text (exactly as in the input), span [start, end), type, cui, snomed_code,
    preferred_name, semantic_type, confidence (0-1), method (exact, model_selected or
    expert_review), review_reason, the candidates seen and the search history.

    An entity whose own words are a concept's exact name or synonym is grounded with method
    exact. When this server runs with a model it also extracts the entities and chooses among
    candidates itself; otherwise pass entities (text, type, search_term) and those without an
    exact match come back as expert_review with their candidates to choose from.
    Fails with invalid_args when the text is blank or no entities are given to a server without a model.
    """
    if not text.strip():
        raise ToolError(tool_error_message("invalid_args", "the text is empty"))
    given = [e.model_dump() for e in entities] if entities else None
    if _grounder is not None:
        return _grounder(text, given)
    if not given:
        raise ToolError(tool_error_message(
            "invalid_args", "this UMLS server has no model: pass entities (text, type, search_term) to ground"))
    with _read() as db:
        return grounding.ground_given(text, given, grounding.db_search(db))


def main(argv: list[str] | None = None) -> int:
    from common.locations import (
        umls_db_path,  # the launcher resolves the default; the tools take a path
    )

    return serve(mcp, argv, name="umls", doc=__doc__, configure=configure, default_db=umls_db_path)


if __name__ == "__main__":
    raise SystemExit(main())
