"""Image availability in the terminal follows the loaded model's ``vision_available``."""

from __future__ import annotations

import pytest

from appliance.llm.fake import ScriptedModel
from tests.llm.gguf_helpers import png
from tests.tui.helpers import IC, SY, ask, intent, make_app, ready, settle

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
FINDINGS = {"modality": "chest X-ray", "findings": ["No focal consolidation."], "confidence": "high"}


async def test_a_model_with_vision_analyses_the_attached_image(tmp_path):
    image = tmp_path / "cxr.png"
    image.write_bytes(png(64, 64))
    model = ScriptedModel({"IMAGE_ANALYSIS": [FINDINGS], IC: [intent()], SY: ["No focal consolidation."]})
    app, _, _ = make_app(tmp_path, model=model)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.image_analysable
        await pilot.press("ctrl+g")
        assert "will be analysed with the question" in str(app.screen.query_one("#attach-note").render())
        app.screen.query_one("#attach-path").value = str(image)
        await pilot.press("enter")
        await pilot.pause()
        assert "will be analysed" in str(app.main.attachment.render())
        assert not any("unavailable" in text for _, text in app.notices)
        await ask(pilot, "What does this X-ray show?")
        await settle(pilot)
        assembly = app.main.trace.events(1)[0]
        assert assembly.output["image_analysis"] == "done" and assembly.output["image_findings"] == FINDINGS
        assert "Image findings" in model.history[-1].messages[-1].content
        assert model.pending() == {}


async def test_the_same_model_without_vision_says_unavailable(tmp_path):
    app, model, _ = make_app(tmp_path, model=ScriptedModel({IC: [intent()], SY: ["ok"]}, vision=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert not app.image_analysable
        model.vision_available = True  # decided from the model each time, never a fixed flag
        assert app.image_analysable
