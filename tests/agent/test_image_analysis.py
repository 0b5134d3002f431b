"""INPUT_ASSEMBLY's image step with the scripted model: findings reach SYNTHESIZE's prompt and
the trace when the model has vision; otherwise (or on a failure) a notice does, and the turn
goes on."""

from __future__ import annotations

import threading

import pytest

from appliance.agent.graph import Agent
from appliance.agent.nodes.input_assembly import IMAGE_UNAVAILABLE
from appliance.config import Settings
from appliance.errors import ConstrainedOutputInvalid, GenerationCancelled
from appliance.llm.base import VisionModel
from appliance.llm.fake import ScriptedModel
from appliance.llm.vision import VisionUnavailable
from appliance.tools.scripted import ScriptedToolBox
from tests.llm.gguf_helpers import png

pytestmark = pytest.mark.timeout(30)
IA, IM, IC, SY = "INPUT_ASSEMBLY", "IMAGE_ANALYSIS", "INTENT_CLASSIFY", "SYNTHESIZE"
DIRECT = {"intent": "DIRECT", "task_summary": "Describe the attached chest X-ray.", "suggested_tool": None}
FINDINGS = {"modality": "chest X-ray", "findings": ["Right lower lobe consolidation.", "No pleural effusion."],
            "confidence": "moderate"}


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "cxr.png"
    path.write_bytes(png(512, 512))
    return str(path)


def run(script, image_path, vision=None, cancel=None):
    model = ScriptedModel(script, vision=vision)
    agent = Agent(model, ScriptedToolBox({}, fallback=None, drug_names=["amoxicillin"]), Settings())
    result = agent.run_turn("What do you see?", image_path=image_path, cancel=cancel)
    assert model.pending() == {}, f"unused scripted replies: {model.pending()}"
    return result, model


def synthesis_prompt(model) -> str:
    return [c for c in model.history if c.node == SY][-1].messages[-1].content


def test_findings_reach_synthesis_and_the_trace(image):
    result, model = run({IM: [FINDINGS], IC: [DIRECT], SY: ["Right lower lobe consolidation."]}, image)
    assert result.path == [IA, IC, SY]
    call = model.history[0]
    assert (call.node, call.schema, call.temperature, call.max_tokens) == (IM, "ImageFindings", 0.3, 512)
    assert call.messages[-1].content == "<__media__>\nWhat do you see?"
    prompt = synthesis_prompt(model)
    assert "Image findings (automated analysis of the attached chest X-ray; moderate confidence):" in prompt
    assert "- Right lower lobe consolidation.\n- No pleural effusion." in prompt
    assert IMAGE_UNAVAILABLE not in prompt
    assembly = result.trace[0]
    assert assembly.output["image_analysis"] == "done" and assembly.output["image_findings"] == FINDINGS
    assert assembly.model_stats is not None  # the image call is a model call
    assert result.state.image_findings == FINDINGS and result.state.error_messages == ()


def test_without_vision_the_notice_reaches_synthesis_and_no_image_call_is_made(image):
    result, model = run({IC: [DIRECT], SY: ["The image could not be analysed."]}, image)
    assert model.vision_available is False and [c.node for c in model.history] == [IC, SY]
    assert IMAGE_UNAVAILABLE in synthesis_prompt(model)
    assert result.trace[0].output["image_analysis"] == "unavailable" and result.trace[0].model_stats is None


def test_a_text_question_makes_no_image_call(image):
    result, model = run({IC: [DIRECT], SY: ["Hello."]}, None, vision=True)
    assert [c.node for c in model.history] == [IC, SY] and "image_analysis" not in result.trace[0].output


@pytest.mark.parametrize("reply, expected", [
    (VisionUnavailable("image analysis is unavailable: llama.cpp could not load the vision projector"), IMAGE_UNAVAILABLE),
    (ConstrainedOutputInvalid("ImageFindings: confidence: bad"), "no usable findings"),
    ({"modality": "CT", "findings": [], "confidence": "high"}, "no usable findings"),  # schema still applies
])
def test_a_failed_analysis_becomes_a_notice_and_the_turn_goes_on(image, reply, expected):
    result, model = run({IM: [reply], IC: [DIRECT], SY: ["No findings are available."]}, image)
    assert result.path == [IA, IC, SY]
    assert expected in synthesis_prompt(model) and result.state.image_findings is None
    assert result.trace[0].output["image_analysis"] in ("failed", "unavailable") and result.trace[0].output["image_error"]


def test_a_bad_image_file_is_named_in_the_notice(tmp_path):
    bad = tmp_path / "scan.gif"
    bad.write_bytes(b"GIF89a" + b"\x00" * 20)
    result, model = run({IC: [DIRECT], SY: ["No findings."]}, str(bad), vision=True)
    assert [c.node for c in model.history] == [IC, SY]  # refused before any model call
    assert "The attached image could not be analysed (the attached file is not a PNG or JPEG image)" in synthesis_prompt(model)
    assert str(tmp_path) not in synthesis_prompt(model)


def test_a_cancel_during_the_image_call_ends_the_turn(image):
    cancel = threading.Event()
    model = ScriptedModel({IM: [GenerationCancelled("IMAGE_ANALYSIS: cancelled")]})
    agent = Agent(model, ScriptedToolBox({}, fallback=None, drug_names=[]), Settings())
    with pytest.raises(GenerationCancelled):
        agent.run_turn("What do you see?", image_path=image, cancel=cancel)


class TextOnly:
    """A language model with no image capability at all (not a VisionModel)."""

    def __init__(self, scripted: ScriptedModel):
        self.scripted, self.profile_name, self.last_stats = scripted, "text-only", None

    def generate_constrained(self, *args, **kwargs):
        return self.scripted.generate_constrained(*args, **kwargs)

    def generate_free(self, *args, **kwargs):
        return self.scripted.generate_free(*args, **kwargs)


def test_vision_is_a_typed_capability(image):
    scripted = ScriptedModel({IC: [DIRECT], SY: ["The image could not be analysed."]}, vision=False)
    assert isinstance(scripted, VisionModel)  # LlamaModel's check is in tests/llm/test_vision.py
    assert not isinstance(TextOnly(scripted), VisionModel)
    agent = Agent(TextOnly(scripted), ScriptedToolBox({}, fallback=None, drug_names=[]), Settings())
    result = agent.run_turn("What do you see?", image_path=image)
    assert result.trace[0].output["image_analysis"] == "unavailable"
    assert IMAGE_UNAVAILABLE in synthesis_prompt(scripted)
