"""The model-dependent unit rows of docs/design.md §15, for the production model.

These expectations hold for MedGemma 1.5 4B-it, not for the 270M base model the project ships,
so they run only where the operator has placed the production GGUF (``models/`` or
APPLIANCE_MODEL_PATH with APPLIANCE_MODEL=medgemma-1.5-4b-it): an acceptance check for a site.
"""

from __future__ import annotations

import pytest

from appliance.agent.nodes import intent_classify, result_classify, tool_select
from appliance.agent.reading.request import extract_entities
from appliance.agent.state import AgentState, ToolResult
from appliance.config import Settings
from appliance.medication.names import DrugRecogniser
from common.locations import models_dir
from mcp_servers.contracts import TOOL_LABELS
from models.profiles import get_profile

PROFILE = get_profile("medgemma-1.5-4b-it")
SETTINGS = Settings()
PATH = PROFILE.path(models_dir(), SETTINGS.model_path if SETTINGS.model == PROFILE.name else None)
pytestmark = pytest.mark.skipif(not PATH.exists(), reason=f"production model not placed at {PATH}")

DRUGS = DrugRecogniser(["dofetilide", "warfarin", "aspirin", "amoxicillin", "metformin"])


@pytest.fixture(scope="module")
def model():
    from appliance.runtime import load_model

    return load_model(Settings(model=PROFILE.name))


def _state(query: str, **kw) -> AgentState:
    return AgentState(user_query=query, extracted_entities=extract_entities(query, DRUGS), **kw)


@pytest.mark.parametrize("query,intent,tool", [
    ("Hello", "DIRECT", None),
    ("Check FDA warnings for dofetilide", "TOOL_NEEDED", "check_drug_safety"),
    ("What is hypertension?", "DIRECT", None),
    ("Find patient John Smith and check his meds", "TOOL_NEEDED", None),
])
def test_intent_classify_rows(model, query, intent, tool):
    done = intent_classify.run(_state(query), model)
    update = done.update
    assert update["intent"] == intent
    if tool:
        assert update["suggested_tool"] == tool


@pytest.mark.parametrize("query,tool,args", [
    ("Check FDA warnings for dofetilide", "check_drug_safety", {"drug_name": "dofetilide"}),
    ("Check interactions between warfarin and aspirin", "check_drug_interactions", None),
    ("Check amoxicillin info for my patient", "check_drug_safety", None),
    ("Write a note for patient abc-123", "save_clinical_note", None),
])
def test_tool_select_rows(model, query, tool, args):
    done = tool_select.run(_state(query, task_summary="Clinician request."), model)
    update = done.update
    assert update["current_tool"] == tool
    if args:
        assert {k: str(v).lower() for k, v in update["current_args"].items()} == args
    if tool == "check_drug_interactions":
        assert sorted(d.lower() for d in update["current_args"]["drug_names"]) == ["aspirin", "warfarin"]


@pytest.mark.parametrize("tool,text,etype,quality", [
    ("check_drug_safety", "[Drug Safety Report]\nboxed_warning: QT prolongation and torsade de pointes; "
     "start only with continuous ECG monitoring and creatinine clearance for at least 3 days.", None, "success_rich"),
    ("search_medical_literature", "No results were found for zorblatin in the Medical Literature.", "not_found", "no_results"),
    ("check_drug_safety", "The Drug Safety Report was temporarily unavailable. Please try again shortly.", "timeout",
     "error_retryable"),
])
def test_result_classify_rows(model, tool, text, etype, quality):
    result = ToolResult(tool, TOOL_LABELS[tool], {}, None if etype else {"x": 1}, text,
                        error=text if etype else None, error_type=etype)
    done = result_classify.run(_state("Check FDA warnings for dofetilide", task_summary="Safety lookup.",
                                      tool_results=(result,)), model)
    update = done.update
    assert update["last_result_classification"] == quality
