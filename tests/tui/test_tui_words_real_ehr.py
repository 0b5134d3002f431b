"""Patients in words against the real EHR (the servers in process, on a data home built by
``appliance init``): "pull up james wilson" lists the three, a birth year picks one, and a typo
in the search dialog offers the closest name (Pilot, no model call)."""

from __future__ import annotations

import pytest

from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from common import locations
from ehr_db.repository import EhrRepository
from tests.tui import test_tui_real_ehr
from tests.tui.helpers import SIZE, ask, ready, settle, texts, wait_until
from tests.tui.test_tui_real_ehr import InProcessToolBox
from tui.app import ClinicApp
from tui.screens.patient_search import PatientSearchScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
home = test_tui_real_ehr.home  # the real record's fixture, shared


def app_on(home_path) -> tuple[ClinicApp, ScriptedModel]:
    model = ScriptedModel({})
    tools = InProcessToolBox()
    return ClinicApp(Settings(), model_loader=lambda settings, progress: model, tools_factory=lambda: tools,
                     sessions_path=home_path / "sessions.sqlite", cursor_blink=False, health_interval=0), model


async def test_pull_up_james_wilson_then_the_one_born_in_a_year(home):
    wilsons = EhrRepository(locations.ehr_db_path()).search_patient("James Wilson")["matches"]
    assert len(wilsons) == 3
    chosen = wilsons[1]
    app, model = app_on(home)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "pull up james wilson")
        await wait_until(pilot, lambda: any("3 patients match 'james wilson'" in t for t in texts(app)), what="the list")
        assert all(m["patient_id"] in texts(app)[-1] for m in wilsons)
        await ask(pilot, f"the one born {chosen['birth_date'][:4]}")
        await wait_until(pilot, lambda: app.conversation.patient_id == chosen["patient_id"], what="the pick")
        await settle(pilot)
        assert model.history == []


async def test_a_typo_in_the_search_dialog_offers_emily_johnson(home):
    app, _ = app_on(home)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.action_patient()
        await wait_until(pilot, lambda: isinstance(app.screen, PatientSearchScreen), what="the dialog")
        await pilot.press(*"emily jonson", "enter")
        await wait_until(pilot, lambda: app.screen.matches, what="the offer")
        assert app.screen.matches[0]["name"] == "Emily Johnson"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.conversation.patient_id == "pat-006", what="Emily Johnson to open")
