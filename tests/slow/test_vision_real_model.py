"""The shipped small model has no vision projector: it says so, and an attached image gives
the clear notice instead of findings (the real projector round trip cannot run here: no
mmproj file exists on this machine)."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.agent.nodes.input_assembly import IMAGE_UNAVAILABLE
from appliance.config import Settings
from appliance.llm.llama import LlamaModel
from appliance.llm.vision import VisionUnavailable
from appliance.tools.base import ToolOutcome
from common.locations import models_dir
from models.assemble import assemble_default_model
from models.profiles import get_profile
from tests.llm.gguf_helpers import png

pytestmark = pytest.mark.timeout(600)


class OfflineTools:
    """Whatever the small model decides, a tool answers with an error and the turn goes on."""

    def call(self, tool: str, args: dict, deadline: float) -> ToolOutcome:
        return ToolOutcome(error_type="service_unavailable", message="not running in this test")

    def drug_names(self) -> list[str]:
        return []


def test_the_default_model_reports_vision_unavailable_and_the_notice_reaches_the_turn(tmp_path):
    model = LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()), n_threads=2)
    image = tmp_path / "cxr.png"
    image.write_bytes(png(256, 256))
    assert model.vision_available is False and "no vision projector" in model.vision_problem
    with pytest.raises(VisionUnavailable):
        model.analyze_image(image, "What do you see?")
    settings = Settings(max_steps=1, max_retries=0, max_total_retries=0)  # a short turn, whatever it decides
    result = Agent(model, OfflineTools(), settings).run_turn("What do you see?", image_path=str(image))
    assert result.trace[0].output["image_analysis"] == "unavailable"
    assert IMAGE_UNAVAILABLE in result.state.error_messages and result.state.image_findings is None
    assert result.path[-1] == "SYNTHESIZE" and result.response
