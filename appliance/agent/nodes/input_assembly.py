"""Node 1, INPUT_ASSEMBLY: the turn's one reading of the clinician's words, the recent history,
the look-ups code routes, and for an attached image the image call (``analyze_image``) when the
model can run it.

Invariants: the message is read here once (``reading.request.read_turn``: the instruction,
write requests, chart topics, named steps, patient IDs, the order, the drugs) and put on the
state (``reading``, ``extracted_entities``); later nodes read those fields. The knowledge
look-ups (``knowledge_requests.read_request``) are read from that reading, so they parse
nothing again. No model call for text-only input, nor for an image the model cannot analyse (a
notice reaches synthesis instead); drug mentions are generic names from the drug recogniser
(``appliance/medication/names.py``); patient IDs in text follow the rule in
``reading/patient_refs.py``, and a reply to code's several-matches question that picks one
candidate adds that candidate's ID (returned by the search) to the turn's patient IDs.
"""

from __future__ import annotations

import threading

from appliance.agent import knowledge_requests
from appliance.agent.reading.request import read_turn
from appliance.agent.state import AgentState, Node, NodeResult
from appliance.errors import ApplianceError, GenerationCancelled
from appliance.llm.base import LanguageModel, VisionModel
from appliance.llm.vision import ImageFileError, VisionUnavailable
from appliance.medication.names import DrugRecogniser

__all__ = ["analyse_image", "run"]


IMAGE_UNAVAILABLE = "Image analysis is not available with the current model; the attached image was not analysed."
IMAGE_FAILED = "The attached image could not be analysed ({reason}); no image findings are available."


def run(state: AgentState, drugs: DrugRecogniser, history: list[tuple[str, str]], max_turns: int,
        model: LanguageModel | None = None, cancel: threading.Event | None = None,
        vocabulary: list[str] = (), drug_count: int | None = None) -> NodeResult:
    """The turn's reading (``reading.request.read_turn``: the words,
    the entities, the last ``max_turns`` exchanges, the look-ups code routes), and for an
    attached image either its findings (when the model is a ``VisionModel`` whose
    ``vision_available`` holds) or a notice for synthesis."""
    read = read_turn(state, drugs, history, max_turns)
    entities = read.entities
    update: dict = {"reading": read.reading, "extracted_entities": entities, "conversation_history": read.history}
    # The look-ups code reads, decided before any model call from the reading just made.
    calls = knowledge_requests.read_request(state.merge(update), drugs, vocabulary)
    update.update(knowledge_calls=calls, drug_data_size=drug_count)
    output: dict = {
        "patient_ids": list(entities.patient_ids), "drug_mentions": list(entities.drug_mentions),
        "action_verbs": list(entities.action_verbs), "has_image": entities.has_image,
        "history_messages": len(read.history),
    }
    if read.choice is not None:
        output["patient_choice"] = {"patient_id": read.choice[0].patient_id, "by": read.choice[1]}
    if calls:
        output["knowledge_calls"] = [c.to_dict() for c in calls]
    if entities.has_image:
        update_image, output_image = analyse_image(state, model, cancel)
        update.update(update_image)
        output.update(output_image)
    return NodeResult(update, output, Node.INTENT_CLASSIFY, model_call=output.get("image_analysis") in ("done", "failed"))


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
