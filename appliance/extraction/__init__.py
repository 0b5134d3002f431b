"""Protocol criteria extraction: ``load_documents`` then ``extract_criteria``."""

from appliance.extraction.errors import DocumentError, ExtractionError
from appliance.extraction.loaders import Document, Page, load_documents
from appliance.extraction.pipeline import (
           ExtractionConfig,
           ExtractionResult,
           Progress,
           extract_criteria,
)

__all__ = ["Document", "DocumentError", "ExtractionConfig", "ExtractionError", "ExtractionResult", "Page",
           "Progress", "extract_criteria", "load_documents"]
