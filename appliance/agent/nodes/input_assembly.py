"""Node 1, INPUT_ASSEMBLY: history, image flag, regex/dictionary entities, and for an
attached image the image call (``analyze_image``) when the model can run it.

Invariants: no model call for text-only input, nor for an image the model cannot analyse (a
notice reaches synthesis instead); the drug dictionary comes from local data (knowledge and
UMLS servers) so it grows with every import.
"""

from __future__ import annotations

import re
import threading
from typing import Iterable

from appliance.agent.state import AgentState, ExtractedEntities
from appliance.errors import ApplianceError, GenerationCancelled
from appliance.llm.base import LanguageModel, VisionModel
from appliance.llm.vision import ImageFileError, VisionUnavailable

UUID_RE = re.compile(r"\b[a-f0-9]{8}(?:-[a-f0-9]{4}){3}-[a-f0-9]{12}\b", re.IGNORECASE)
SHORT_ID_RE = re.compile(r"\b[a-z]{3}-\d{3}\b")
# "patient Maria Garcia", "patient named John Smith"; names are capitalised words.
PATIENT_NAME_RE = re.compile(r"\bpatient(?:\s+named)?\s+((?:[A-Z][a-z'\-]+)(?:\s+[A-Z][a-z'\-]+){1,2})")
ACTION_VERBS = (
    "prescribe", "order", "start", "document", "record", "note", "save", "write", "check",
    "search", "find", "look up", "review", "verify", "add",
)


class DrugDictionary:
    """Case-insensitive whole-word matching of drug names (generic and brand)."""

    def __init__(self, names: Iterable[str] = ()):
        cleaned = {n.strip().lower() for n in names if n and len(n.strip()) >= 3}
        self.names = frozenset(cleaned)
        longest_first = sorted(cleaned, key=len, reverse=True)
        self._re = (
            re.compile(r"\b(" + "|".join(re.escape(n) for n in longest_first) + r")\b", re.IGNORECASE)
            if longest_first
            else None
        )

    def find(self, text: str) -> tuple[str, ...]:
        if self._re is None:
            return ()
        seen: dict[str, None] = {}
        for match in self._re.finditer(text):
            seen.setdefault(match.group(1).lower(), None)
        return tuple(seen)

    def __len__(self) -> int:
        return len(self.names)


def extract_entities(query: str, drugs: DrugDictionary, has_image: bool = False) -> ExtractedEntities:
    ids = dict.fromkeys(m.group(0).lower() for m in UUID_RE.finditer(query))
    ids.update(dict.fromkeys(m.group(0) for m in SHORT_ID_RE.finditer(query)))
    lowered = query.lower()
    verbs = tuple(v for v in ACTION_VERBS if re.search(rf"\b{re.escape(v)}\b", lowered))
    return ExtractedEntities(
        patient_ids=tuple(ids),
        patient_names=tuple(dict.fromkeys(m.group(1) for m in PATIENT_NAME_RE.finditer(query))),
        drug_mentions=drugs.find(query),
        action_verbs=verbs,
        has_image=has_image,
    )


IMAGE_UNAVAILABLE = "Image analysis is not available with the current model; the attached image was not analysed."
IMAGE_FAILED = "The attached image could not be analysed ({reason}); no image findings are available."


def run(state: AgentState, drugs: DrugDictionary, history: list[tuple[str, str]], max_turns: int,
        model: LanguageModel | None = None, cancel: threading.Event | None = None) -> tuple[dict, dict]:
    """(update, trace output): entities, the last ``max_turns`` exchanges, and for an attached
    image either its findings (when the model is a ``VisionModel`` whose ``vision_available``
    holds) or a notice for synthesis."""
    entities = extract_entities(state.user_query, drugs, has_image=state.image_path is not None)
    recent = tuple(history[-2 * max_turns:]) if max_turns > 0 else ()
    update: dict = {"extracted_entities": entities, "conversation_history": recent}
    output: dict = {
        "patient_ids": list(entities.patient_ids), "drug_mentions": list(entities.drug_mentions),
        "action_verbs": list(entities.action_verbs), "has_image": entities.has_image,
        "history_messages": len(recent),
    }
    if entities.has_image:
        update_image, output_image = analyse_image(state, model, cancel)
        update.update(update_image)
        output.update(output_image)
    return update, output


def analyse_image(state: AgentState, model: LanguageModel | None,
                  cancel: threading.Event | None) -> tuple[dict, dict]:
    """The image call (docs/design.md §4.1, step 3), or the notice that replaces it. A failure
    never ends the turn (only a cancel does); the clinician learns the image was not analysed."""
    if not (isinstance(model, VisionModel) and model.vision_available):
        return {"error_messages": [IMAGE_UNAVAILABLE]}, {"image_analysis": "unavailable"}
    try:
        findings = model.analyze_image(state.image_path, state.user_query, cancel=cancel)
    except GenerationCancelled:
        raise
    except VisionUnavailable as exc:  # e.g. llama.cpp refused the projector at first use
        return {"error_messages": [IMAGE_UNAVAILABLE]}, {"image_analysis": "unavailable", "image_error": str(exc)}
    except ImageFileError as exc:
        return ({"error_messages": [IMAGE_FAILED.format(reason=exc)]},
                {"image_analysis": "failed", "image_error": str(exc)})
    except ApplianceError as exc:
        return ({"error_messages": [IMAGE_FAILED.format(reason="the model gave no usable findings")]},
                {"image_analysis": "failed", "image_error": str(exc)})
    data = findings.model_dump()
    return {"image_findings": data}, {"image_analysis": "done", "image_findings": data}
