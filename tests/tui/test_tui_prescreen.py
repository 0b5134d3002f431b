"""F6 on the open patient: the prescreen runs as a turn and its result is the assistant's message."""

from __future__ import annotations

import pytest

from tests.tui.helpers import chart, make_app, ready, settle, texts, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
SEARCH = {"trials": [{"nct_id": "NCT-DEMO-0002", "title": "DEMO: Home blood-pressure telemonitoring"}]}
DETAILS = {"nct_id": "NCT-DEMO-0002", "title": "DEMO: Home blood-pressure telemonitoring", "status": "RECRUITING",
           "minimum_age": "18 Years", "maximum_age": None, "sex": "ALL",
           "inclusion_criteria": ["Diagnosed essential hypertension"], "exclusion_criteria": ["Pregnancy"]}
# The chart settles both criteria (a listed hypertension; pregnancy for a man): code decides them,
# no model call (appliance/prescreen/decide.py).
SCRIPT = {
    "PRESCREEN_SEARCH": [{"action": "stop", "condition": None, "intervention": None, "eligibility_keywords": None}],
}


async def test_f6_prescreens_the_open_patient_into_the_conversation(tmp_path):
    tools = {"get_patient_chart": [{"result": chart()}, {"result": chart()}],
             "find_clinical_trials": [{"result": SEARCH}], "get_trial_details": [{"result": DETAILS}]}
    app, model, toolbox = make_app(tmp_path, SCRIPT, tools)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await pilot.press("f6")
        await wait_until(pilot, lambda: app.turn is None and len(texts(app)) >= 2, what="the prescreen")
        await settle(pilot)
        question, answer = texts(app)[-2:]
        assert question == "Prescreen John Smith (abc-123) for clinical trials"
        assert "1. ELIGIBLE  NCT-DEMO-0002" in answer and "Patient facts used:" in answer
        assert [t for t, _ in toolbox.calls] == ["get_patient_chart", "get_patient_chart", "find_clinical_trials",
                                                 "get_trial_details"]
        assert app.conversation.history[-1] == ("assistant", answer)  # context for a follow-up question
        assert model.pending() == {}


async def test_f6_without_an_open_patient_is_a_notice(tmp_path):
    app, model, toolbox = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("f6")
        await settle(pilot)
        assert app.notices[-1] == ("warning", "Open a patient first (Ctrl+O): the prescreen checks the open patient's chart.")
        assert toolbox.calls == [] and app.turn is None
