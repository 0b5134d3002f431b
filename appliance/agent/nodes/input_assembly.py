"""Node 1, INPUT_ASSEMBLY: history, image flag, regex/dictionary entities, and for an
attached image the image call (``analyze_image``) when the model can run it.

Invariants: no model call for text-only input, nor for an image the model cannot analyse (a
notice reaches synthesis instead); drug mentions are generic names from the drug recogniser
(``appliance/medication/names.py``: a maintained dictionary, our overlay, and the local knowledge and
UMLS servers' names, so it grows with every import); patient IDs in text follow the rule in
``appliance/agent/patient_refs.py``, and a reply to code's several-matches question that picks
one candidate adds that candidate's ID (returned by the search) to the turn's patient IDs.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

from appliance.agent.dictation import instruction_text
from appliance.agent.patient_refs import choice_from_history, find_patient_ids
from appliance.agent.state import AgentState, ExtractedEntities
from appliance.errors import ApplianceError, GenerationCancelled
from appliance.llm.base import LanguageModel, VisionModel
from appliance.llm.vision import ImageFileError, VisionUnavailable
from appliance.medication.names import DrugRecogniser

# "patient Maria Garcia", "patient named John Smith"; names are capitalised words.
PATIENT_NAME_RE = re.compile(r"\bpatient(?:\s+named)?\s+((?:[A-Z][a-z'\-]+)(?:\s+[A-Z][a-z'\-]+){1,2})")
ACTION_VERBS = (
    "prescribe", "order", "start", "document", "record", "note", "save", "write", "check",
    "search", "find", "look up", "review", "verify", "add",
)


def extract_entities(query: str, drugs: DrugRecogniser, has_image: bool = False) -> ExtractedEntities:
    ids = find_patient_ids(query)  # the rule: appliance/agent/patient_refs.py's docstring
    lowered = query.lower()
    verbs = tuple(v for v in ACTION_VERBS if re.search(rf"\b{re.escape(v)}\b", lowered))
    return ExtractedEntities(
        patient_ids=tuple(ids),
        # Names route (a named patient needs a search), so dictated text cannot supply one.
        patient_names=tuple(dict.fromkeys(m.group(1) for m in PATIENT_NAME_RE.finditer(instruction_text(query)))),
        drug_mentions=drugs.find(query),
        action_verbs=verbs,
        has_image=has_image,
    )


IMAGE_UNAVAILABLE = "Image analysis is not available with the current model; the attached image was not analysed."
IMAGE_FAILED = "The attached image could not be analysed ({reason}); no image findings are available."


def run(state: AgentState, drugs: DrugRecogniser, history: list[tuple[str, str]], max_turns: int,
        model: LanguageModel | None = None, cancel: threading.Event | None = None) -> tuple[dict, dict]:
    """(update, trace output): entities, the last ``max_turns`` exchanges, and for an attached
    image either its findings (when the model is a ``VisionModel`` whose ``vision_available``
    holds) or a notice for synthesis."""
    entities = extract_entities(state.user_query, drugs, has_image=state.image_path is not None)
    # The answer to code's "which one did you mean?" names one candidate (patient_refs.choose).
    choice = choice_from_history(state.user_query, history)
    if choice is not None:
        entities = replace(entities, patient_ids=(choice[0].patient_id,))
    recent = tuple(history[-2 * max_turns:]) if max_turns > 0 else ()
    earlier = [g for role, text in recent if role == "user" for g in drugs.find(text)]
    entities = replace(entities, drugs_named=tuple(dict.fromkeys([*earlier, *entities.drug_mentions])))
    update: dict = {"extracted_entities": entities, "conversation_history": recent}
    output: dict = {
        "patient_ids": list(entities.patient_ids), "drug_mentions": list(entities.drug_mentions),
        "action_verbs": list(entities.action_verbs), "has_image": entities.has_image,
        "history_messages": len(recent),
    }
    if choice is not None:
        output["patient_choice"] = {"patient_id": choice[0].patient_id, "by": choice[1]}
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
