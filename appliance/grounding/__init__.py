"""Concept grounding (docs/design.md §16, seed 000): clinical or eligibility text to UMLS
concepts (CUI + SNOMED CT), the model extracting and choosing, code bounding and checking.

Public API: ``ground(text, model, search, config=None) -> GroundingResult`` (and
``ground_entities`` for pre-extracted entities); ``InProcessSearch`` / ``MCPSearch`` answer the
``ConceptSearch`` protocol; ``GroundingConfig`` holds the loop bounds and confidence bands.
"""

from appliance.grounding.config import GroundingConfig
from appliance.grounding.errors import GroundingError, SearchUnavailable
from appliance.grounding.loop import GroundingResult, ground, ground_entities
from appliance.grounding.search import ConceptSearch, InProcessSearch, MCPSearch
from mcp_servers.umls.grounding import ENTITY_TYPES, METHODS, GroundedEntity

__all__ = ["ConceptSearch", "ENTITY_TYPES", "GroundedEntity", "GroundingConfig", "GroundingError", "GroundingResult",
           "InProcessSearch", "MCPSearch", "METHODS", "SearchUnavailable", "ground", "ground_entities"]
