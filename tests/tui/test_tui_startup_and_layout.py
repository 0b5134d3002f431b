"""The terminal's first minutes, each point as a clinician meets it (Pilot, scripted agent): the
chart and the servers' state shown as soon as the servers are up (before the drug dictionary is
read), at least ten lines of conversation at 80x24 with the trace showing, and a question never
taken off the screen by opening another patient."""

from __future__ import annotations

import threading

import pytest

from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox
from tests.tui.helpers import (
    DRUGS,
    IC,
    RC,
    SY,
    ask,
    chart,
    good,
    intent,
    make_app,
    ready,
    settle,
    texts,
    wait_until,
)
from tui.app import ClinicApp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class SlowDictionaryToolBox(ScriptedToolBox):
    """Servers that start at once, and a drug dictionary that takes until the test releases it
    (on a real machine: the knowledge and UMLS servers' vocabularies, then the bundled lexicon)."""

    def __init__(self, scripted):
        super().__init__(scripted, fallback=None, drug_names=DRUGS)
        self.dictionary = threading.Event()

    def start(self) -> dict[str, bool]:
        return {"ehr": True, "knowledge": True, "umls": True}

    def drug_names(self) -> list[str]:
        self.dictionary.wait(20)
        return super().drug_names()


async def test_the_chart_and_the_servers_show_before_the_drug_dictionary_is_read(tmp_path):
    from appliance.accounts.sessions import SessionStore

    store = SessionStore(tmp_path / "sessions.sqlite")
    session = store.create_session(model="gemma3-270m", patient_id="pat-006")
    store.add_exchange(session.id, "Any allergies?", "Penicillin (hives).", patient_id="pat-006", trace=[])
    toolbox = SlowDictionaryToolBox({"get_patient_chart": [{"result": chart("pat-006", "Emily Johnson")}]})
    app = ClinicApp(Settings(), model_loader=lambda s, p: ScriptedModel({}), tools_factory=lambda: toolbox,
                    sessions_path=tmp_path / "sessions.sqlite", cursor_blink=False, health_interval=0,
                    resume="latest")
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            # the resumed conversation is painted with no key pressed
            await wait_until(pilot, lambda: texts(app) == ["Any allergies?", "Penicillin (hives)."],
                             what="the resumed conversation")
            banner = lambda: str(app.main.banner.render())  # noqa: E731
            await wait_until(pilot, lambda: "Penicillin" in banner(), what="the allergies in the banner")
            assert app.main.status.health == {"ehr": True, "knowledge": True, "umls": True}
            assert app.agent is None and not toolbox.dictionary.is_set()  # all of it before the dictionary
            toolbox.dictionary.set()
            await ready(pilot)
            assert [tool for tool, _ in toolbox.calls] == ["get_patient_chart"]  # read once, not again at ready
    finally:
        toolbox.dictionary.set()


@pytest.mark.parametrize("size, folded", [((80, 24), True), ((100, 26), False)])
async def test_the_conversation_keeps_ten_lines_at_80x24_with_the_trace_showing(tmp_path, size, folded):
    app, _, _ = make_app(tmp_path, {}, {"get_patient_chart": [{"result": chart("abc-123")}]})
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        assert app.main.trace.display
        assert app.main.chat.region.height >= 10
        assert app.main.trace.has_class("folded") is folded
        assert app.main.trace.region.height == (4 if folded else 8)


async def test_opening_another_patient_never_takes_a_running_question_off_the_screen(tmp_path):
    from tests.tui.helpers import GatedModel

    # the first answer ("Summarise his care") is the chart's, in code's words; only the second is the model's
    model = GatedModel({IC: [intent(), intent()], RC: [good()], SY: ["Hypertension is raised pressure."]})
    tools = {"get_patient_chart": [{"result": chart("abc-123")}] * 3 + [{"result": chart("pat-002", "Maria Garcia")}] * 2}
    app, _, _ = make_app(tmp_path, None, tools, model=model)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        model.release.set()
        await ask(pilot, "Summarise his care")
        await wait_until(pilot, lambda: app.turn is None, what="the first answer")
        await settle(pilot)
        model.release.clear()
        model.first_piece.clear()
        await ask(pilot, "What is hypertension?")
        await wait_until(pilot, lambda: model.first_piece.is_set(), what="the answer being written")
        assert app.conversation.history and app.conversation.about == {"abc-123"}, (texts(app), app.conversation.history, app.conversation.about)
        app.open_patient("pat-002", "Maria Garcia")  # as the search dialog's choice does
        await pilot.pause()
        assert app.conversation.patient_id == "abc-123" and "What is hypertension?" in texts(app)
        assert any("Maria Garcia was not opened: an answer is still being written" in text for _, text in app.notices)
        model.release.set()
        await wait_until(pilot, lambda: app.turn is None, what="the second answer")
        await settle(pilot)
        assert texts(app)[-1].startswith("Hypertension is raised pressure")
        app.open_patient("pat-002", "Maria Garcia")  # now it opens, in a new conversation
        await settle(pilot)
        assert app.conversation.patient_id == "pat-002" and texts(app) == []
