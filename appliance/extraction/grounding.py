"""`extract --ground`: each criterion's entities grounded by the UMLS grounding loop
(``appliance.grounding.ground``, seed 000); its result is attached to the criterion as JSON.

Invariants:
- The grounding package is imported only when asked for, so extraction without ``--ground``
  never loads it.
- A criterion the loop refuses (``GroundingError``) keeps its place with an empty grounding
  and a warning; the other criteria are still grounded.
"""

from __future__ import annotations

from collections.abc import Callable

from appliance.extraction.pipeline import ExtractionResult


def grounding_nodes() -> set[str]:
    """The grounding loop's node names (for scripted runs)."""
    from appliance.grounding.loop import NODE_EVALUATE, NODE_EXTRACT

    return {NODE_EXTRACT, NODE_EVALUATE}


def ground_criteria(result: ExtractionResult, model, search=None, config=None,
                    progress: Callable[[int, int], None] | None = None) -> None:
    """Ground every criterion's text in place (``criterion.grounding``). ``search`` None: the
    data home's UMLS database, in process, opened for this call and closed after it."""
    from appliance.grounding import GroundingError, InProcessSearch, ground
    from common.locations import umls_db_path

    own = search is None
    search = InProcessSearch(umls_db_path()) if own else search
    try:
        total = len(result.criteria)
        for i, criterion in enumerate(result.criteria, start=1):
            try:
                criterion.grounding = ground(criterion.text, model, search, config).to_json()
            except GroundingError as exc:
                criterion.grounding = {"entities": [], "error": str(exc)}
                result.warnings.append(f"{criterion.document} page {criterion.page}: grounding: {exc}")
            if progress:
                progress(i, total)
    finally:
        if own:
            search.close()
