"""The clinic terminal end to end: the real small model and the real MCP servers over stdio
(one Pilot test), and write approval against the real EHR (scripted decisions, real writes)."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from common import locations
from tests.tui.helpers import (
    SY,
    WRITE_QUESTIONS,
    approve,
    ask,
    ready,
    settle,
    wait_until,
    write_script,
)
from tui.app import ClinicApp
from tui.screens.approval import ApprovalScreen
from tui.screens.patient_search import PatientSearchScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def home(appliance_home):
    from ehr_db.setup import ensure_database
    from mcp_servers.knowledge.store import ensure_database as ensure_knowledge

    ensure_database(locations.ehr_db_path())
    ensure_knowledge(locations.knowledge_db_path())
    return appliance_home


def chart_medications(app, patient_id):
    outcome = app.tools.call("get_patient_chart", {"patient_id": patient_id}, 10)
    assert outcome.ok, outcome
    return [m["medication_name"] for m in outcome.result["medications"]]


def chart_allergies(app, patient_id):
    outcome = app.tools.call("get_patient_chart", {"patient_id": patient_id}, 10)
    return [a["substance"].lower() for a in outcome.result["allergies"]]


@pytest.mark.heavy
async def test_real_model_and_servers(home):
    app = ClinicApp(Settings(n_threads=2), sessions_path=home / "sessions.sqlite", cursor_blink=False,
                    health_interval=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.agent is not None or app.model_error, timeout=120, what="start-up")
        assert app.model_error is None
        await settle(pilot)
        assert app.main.status.load_state == "ready"
        assert app.main.status.health["ehr"] is True
        # three real James Wilsons: pick the second
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, PatientSearchScreen), what="the search dialog")
        await pilot.press(*"James Wilson", "enter")
        options = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: options.option_count == 3, timeout=30, what="three matches")
        second = app.screen.matches[1]
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: "ALLERGIES" in str(app.main.patient.query_one("#patient-body").render()),
                         timeout=30, what="the real chart")
        assert app.conversation.patient_id == second["patient_id"]
        # one question answered by the real model
        await ask(pilot, "What is hypertension?")
        await wait_until(pilot, lambda: app.turn is None, timeout=240, what="the real model's answer")
        await settle(pilot)
        reply = app.main.chat.messages()[-1]
        assert reply.kind in ("answer", "clarification") and reply.text.strip()
        nodes = [e.node for e in app.main.trace.events(1)]
        assert nodes[0] == "INPUT_ASSEMBLY" and nodes[-1] == SY
        assert app.main.status.tokens_per_second and app.main.status.tokens_per_second > 0
        assert app.conversation.store.history(app.conversation.session.id)[0] == ("user", "What is hypertension?")


async def test_writes_reach_the_real_ehr_only_after_approve(home):
    from tui.backend import real_tools_factory

    script = write_script("prescribe_medication", approved=True)
    rejected = write_script("add_allergy", approved=False)
    for node, replies in rejected.items():
        script[node] = script.get(node, []) + replies
    model = ScriptedModel(script)
    app = ClinicApp(Settings(), model_loader=lambda s, progress: model, tools_factory=real_tools_factory,
                    sessions_path=home / "sessions.sqlite", cursor_blink=False, health_interval=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        assert "metformin" not in chart_medications(app, "abc-123")
        await ask(pilot, WRITE_QUESTIONS["prescribe_medication"])
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        assert "metformin" not in chart_medications(app, "abc-123")  # not written while asking
        # John Smith already takes metformin: a HIGH duplicate, so approving is an override with a reason
        assert app.screen.is_override
        assert str(app.screen.query_one("#approval-headline").render()).startswith("HIGH duplicate")
        await approve(pilot)
        await wait_until(pilot, lambda: app.turn is None, timeout=60, what="the turn")
        await settle(pilot)
        assert "metformin" in chart_medications(app, "abc-123")
        assert "metformin" in str(app.main.patient.query_one("#patient-body").render())  # chart refreshed
        before = chart_allergies(app, "abc-123")
        await ask(pilot, WRITE_QUESTIONS["add_allergy"])
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.turn is None, timeout=60, what="the turn")
        await settle(pilot)
        assert chart_allergies(app, "abc-123") == before
        assert model.pending() == {}




@pytest.mark.heavy
async def test_an_order_with_a_patient_open_reaches_the_approval_dialog_on_the_real_model(home):
    """A prescription typed in clinical words on the shipped model: pat-006 open, the order typed as a clinician types it; the
    dialog opens in one turn with that patient and the clinician's drug, dose and frequency, and
    leads with the penicillin anaphylaxis. Rejected: nothing is written."""
    app = ClinicApp(Settings(n_threads=2), sessions_path=home / "sessions.sqlite", cursor_blink=False,
                    health_interval=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.agent is not None or app.model_error, timeout=120, what="start-up")
        assert app.agent is not None, app.model_error
        app.open_patient("pat-006", "Emily Johnson")
        await settle(pilot)
        await ask(pilot, "Prescribe amoxicillin 500 mg three times daily")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=240, what="the approval dialog")
        args = app.screen.original
        assert (args["patient_id"], args["medication_name"], args["dosage"], args["frequency"]) == \
            ("pat-006", "amoxicillin", "500 mg", "three times daily")
        headline = str(app.screen.query_one("#approval-headline").render())
        assert headline.startswith("HIGH allergy") and "Penicillin" in headline
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.turn is None, timeout=240, what="the end of the turn")
        assert "amoxicillin" not in [m.lower() for m in chart_medications(app, "pat-006")]
