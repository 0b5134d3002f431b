"""The terminal's services: tool servers that fail to start, retrying them, health notices
(Pilot, scripted model)."""

from __future__ import annotations

import threading

import pytest

from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox
from tests.tui.helpers import (
    DRUGS,
    IC,
    SIZE,
    SY,
    ask,
    intent,
    ready,
    settle,
    texts,
    wait_until,
)
from tui import events
from tui.app import ClinicApp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
ANSWER = "Hypertension is persistently raised arterial blood pressure."


class ServerBox(ScriptedToolBox):
    """A scripted tool box with per-server health and a record of being closed."""

    def __init__(self, drug_names=DRUGS, scripted=None):
        super().__init__(scripted or {}, fallback=None, drug_names=drug_names)
        self.up = {"ehr": True, "knowledge": True, "umls": True}
        self.closed = threading.Event()

    def ping(self, server: str) -> bool:
        return self.up[server]

    def close(self) -> None:
        self.closed.set()


def app_with(tmp_path, tools_factory, script=None) -> ClinicApp:
    model = ScriptedModel(script or {IC: [intent()], SY: [ANSWER]})
    return ClinicApp(Settings(), model_loader=lambda settings, progress: model, tools_factory=tools_factory,
                     sessions_path=tmp_path / "sessions.sqlite", cursor_blink=False, health_interval=0)


async def test_tools_that_fail_to_start_release_the_waiting_question_and_can_be_retried(tmp_path):
    go = threading.Event()
    starts: list[ServerBox] = []

    def factory():
        starts.append(ServerBox())
        if len(starts) == 1:
            assert go.wait(20), "the test never let start-up fail"
            raise RuntimeError("the ehr server exited")
        return starts[-1]

    app = app_with(tmp_path, factory, {IC: [intent()], SY: [ANSWER]})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.model is not None, what="the model")
        await ask(pilot, "What is hypertension?")
        assert "Waiting for the clinical data services" in texts(app)[-1]
        go.set()
        await wait_until(pilot, lambda: app.turn is None, what="the waiting question to be released")
        reply = app.main.chat.messages()[-1]
        assert reply.has_class("failed") and "not running" in reply.text
        errors = [text for sev, text in app.notices if sev == "error"]
        assert any("not running" in t and "RuntimeError" in t and "F5" in t for t in errors)
        assert app.main.prompt.value == "What is hypertension?"  # ready to send again
        assert app.main.status.health == {"ehr": False, "knowledge": False, "umls": False}
        assert app.check_action("retry_tools", ()) is True
        # the terminal stays usable: a new question is refused with a notice, not queued forever
        before = len(app.main.chat.messages())
        await ask(pilot, "What is hypertension?")
        assert app.turn is None and len(app.main.chat.messages()) == before
        assert "F5" in app.notices[-1][1]
        # F5 starts them again; the question is then answered
        await pilot.press("f5")
        await ready(pilot)
        assert len(starts) == 2 and app.tools is starts[1] and app.tools_error is None
        assert app.notices[-1] == ("information", "All clinical data servers are answering again.")
        assert app.main.status.health == {"ehr": True, "knowledge": True, "umls": True}
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        assert texts(app)[-1] == ANSWER


async def test_a_tool_box_whose_start_up_fails_is_closed_at_once(tmp_path):
    box = ServerBox()

    def broken_names():
        raise ConnectionError("no vocabulary")

    box.drug_names = broken_names
    app = app_with(tmp_path, lambda: box)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.tools_error is not None, what="the failure")
        assert box.closed.wait(5) and app.tools is None
        assert "ConnectionError" in app.tools_error


async def test_a_server_that_stays_down_is_announced_once(tmp_path):
    box = ServerBox()
    app = app_with(tmp_path, lambda: box)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        box.up["umls"] = False
        for _ in range(3):  # three periodic checks while it stays down
            app._periodic_health()
            await settle(pilot)
        warnings = [text for sev, text in app.notices if sev == "warning"]
        assert warnings == ["Not answering: umls server. Answers may lack that information; F5 checks again."]
        assert app.main.status.health["umls"] is False and app.check_action("retry_tools", ()) is True
        box.up["ehr"] = False  # a change is announced
        await pilot.press("f5")
        await settle(pilot)
        assert "ehr, umls servers" in app.notices[-1][1]
        box.up.update(ehr=True, umls=True)
        app._periodic_health()
        await settle(pilot)
        assert app.notices[-1] == ("information", "All clinical data servers are answering again.")
        assert app.check_action("retry_tools", ()) is False


async def test_patient_search_says_the_record_service_is_not_running(tmp_path):
    def factory():
        raise RuntimeError("the ehr server exited")

    app = app_with(tmp_path, factory)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.tools_error is not None, what="the failure")
        outcome = app._search_patient("James Wilson")
        assert not outcome.ok and "not running" in outcome.message and "F5" in outcome.message


async def test_the_status_line_shows_each_model_load_stage(tmp_path):
    from tui.backend import HASHING, LOADING, VERIFYING

    steps = [threading.Event() for _ in range(6)]
    model = ScriptedModel({})

    def staged_loader(settings, progress):
        for event, (stage, fraction) in zip(steps, [(VERIFYING, None), (HASHING, 0.0), (HASHING, 0.454),
                                                    (HASHING, 1.0), (LOADING, None)]):
            assert event.wait(20), "the test never moved the load on"
            progress(stage, fraction)
        assert steps[-1].wait(20), "the test never let the load finish"
        return model

    box = ServerBox()
    box.up = dict.fromkeys(box.up, False)  # every server down: the widest status line
    app = ClinicApp(Settings(), model_loader=staged_loader, tools_factory=lambda: box,
                    sessions_path=tmp_path / "sessions.sqlite", cursor_blink=False, health_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        status = app.main.status
        bar = status.query_one("#status-progress")
        shown = lambda: str(status.query_one("#status-model").render())  # noqa: E731
        await pilot.pause()
        assert shown().startswith("gemma3-270m loading ") and bar.display and bar.total is None
        expected = ["gemma3-270m verifying file", "gemma3-270m hashing 0%", "gemma3-270m hashing 45%",
                    "gemma3-270m hashing 100%", "gemma3-270m loading into llama.cpp"]
        await wait_until(pilot, lambda: status.health["umls"] is False, what="the servers' health")
        for step, text in zip(steps, expected):
            step.set()
            await wait_until(pilot, lambda text=text: shown() == text, what=text)
            rest = status.query_one("#status-rest")  # server health still fits in 80 columns
            assert status.rest_text().plain.endswith("umls:DOWN") and status.rest_text().cell_len <= rest.region.width
            if "hashing" in text:
                percent = int(text.rsplit(" ", 1)[-1].rstrip("%"))
                assert bar.total == 100 and bar.progress == pytest.approx(percent, abs=1)
            else:
                assert bar.total is None  # no percentage to show
        steps[-1].set()
        await wait_until(pilot, lambda: app.model is model, what="the model")
        await pilot.pause()
        assert shown() == "gemma3-270m ready" and not bar.display


def test_the_real_loader_reports_hashing_progress_and_hashes_once(tmp_path, monkeypatch):
    import hashlib

    from appliance import runtime
    from tui.backend import HASHING, LOADING, VERIFYING, real_model_loader

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * (3 * (1 << 20) - 4))  # three 1 MiB chunks
    settings = Settings(model_path=str(gguf), model_sha256=hashlib.sha256(gguf.read_bytes()).hexdigest())
    loaded = []
    monkeypatch.setattr(runtime, "load_model", lambda s: loaded.append(s) or "model")
    seen: list = []
    assert real_model_loader(settings, lambda stage, fraction: seen.append((stage, fraction))) == "model"
    assert seen == [(VERIFYING, None), (HASHING, pytest.approx(1 / 3)), (HASHING, pytest.approx(2 / 3)),
                    (HASHING, 1.0), (LOADING, None)]
    assert loaded == [settings]
    seen.clear()
    real_model_loader(settings, lambda stage, fraction: seen.append((stage, fraction)))
    assert seen == [(VERIFYING, None), (LOADING, None)]  # the checked sum is remembered


async def test_a_failed_tool_call_marks_its_server_down_at_once(tmp_path):
    from tests.tui.helpers import RC, TS

    script = {IC: [intent("check_drug_safety")], TS: [{"tool_name": "check_drug_safety"}, {"drug_name": "warfarin"}],
              RC: [{"quality": "error_retryable", "brief_summary": "No answer."}] * 3,
              "ERROR_HANDLER": [{"strategy": "skip", "reasoning": None}] * 3, SY: [ANSWER]}
    dead = {"error_type": "service_unavailable", "message": "the server exited"}
    box = ServerBox(scripted={"check_drug_safety": [dead] * 3})
    app = app_with(tmp_path, lambda: box, script)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.check_action("retry_tools", ()) is False  # every server answered its check
        box.up["knowledge"] = False  # it dies; no health check runs before the next call
        await ask(pilot, "Check FDA warnings for warfarin")
        await settle(pilot)
        assert app.main.status.health["knowledge"] is False
        assert app.check_action("retry_tools", ()) is True
        assert any("Not answering: knowledge server" in text for _, text in app.notices)


async def test_f5_is_offered_while_a_server_is_not_known_to_be_up(tmp_path):
    box = ServerBox()
    app = app_with(tmp_path, lambda: box)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.check_action("retry_tools", ()) is False
        app.on_server_health(events.ServerHealth({"umls": None}))
        assert app.check_action("retry_tools", ()) is True  # unknown is not up
