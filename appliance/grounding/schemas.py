"""The two constrained outputs of grounding: the extraction of a text's entities and the
evaluation of one entity's candidates.

Invariants (docs/design.md §6):
- Decision-critical fields first, every field required (nullable where it may be empty),
  strings and lists bounded, choices as enums, no extra fields.
- Every schema is one the fast decoder handles (``appliance.llm.fast.fast_handles``, checked at
  import): no numbers. Confidence is a word (high / moderate / low) that
  ``GroundingConfig.confidence_values`` maps to a number, as ``ImageFindings`` does.
- A candidate is chosen by its number in the list shown, from an enum of exactly the numbers
  shown (``evaluation_schema(k)``): the model cannot name a concept it was not shown.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from appliance.llm.fast import fast_handles
from mcp_servers.umls.grounding import ENTITY_TYPES, MAX_CANDIDATES

EntityType = Literal["Condition", "Medication", "Procedure", "Lab_Value", "Demographic", "Biomarker"]
Decision = Literal["select", "refine", "none"]
ConfidenceWord = Literal["high", "moderate", "low"]
MAX_ENTITIES = 12
MAX_REFINE_TERMS = 3
Term = Annotated[str, Field(min_length=1, max_length=60)]

assert EntityType.__args__ == ENTITY_TYPES  # one list of types, here and in the server's records


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExtractedEntity(_Schema):
    text: str = Field(min_length=1, max_length=60, description="the entity's words, copied from the text")
    type: EntityType
    search_term: Term


class Extraction(_Schema):
    """The medical entities of one text, each with the standard term to search for."""

    entities: list[ExtractedEntity] = Field(max_length=MAX_ENTITIES)


def _evaluation(count: int) -> type[BaseModel]:
    numbers = tuple(str(i) for i in range(1, count + 1))
    return create_model(
        f"Evaluation{count}",
        __base__=_Schema,
        __doc__=f"The decision on one entity's {count} candidate(s): select one, refine the search, or none.",
        decision=(Decision, ...),
        candidate=(Literal[numbers] | None, ...),  # the number shown; null unless "select"
        confidence=(ConfidenceWord | None, ...),  # null unless "select"
        refine_terms=(list[Term], Field(..., max_length=MAX_REFINE_TERMS)),  # empty unless "refine"
    )


_EVALUATIONS = {k: _evaluation(k) for k in range(1, MAX_CANDIDATES + 1)}


def evaluation_schema(count: int) -> type[BaseModel]:
    """The evaluation schema for a list of ``count`` candidates (1..MAX_CANDIDATES)."""
    return _EVALUATIONS[count]


assert all(fast_handles(s) for s in (Extraction, *_EVALUATIONS.values()))
