"""F6's result as the clinician sees it: the verdicts on screen when the prescreen finishes (not
scrolled away under the patient facts), and the disclaimer once."""

from __future__ import annotations

import pytest

from appliance.prescreen.run import DISCLAIMER
from tests.tui.helpers import chart, make_app, ready, settle, texts, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
TRIALS = ("NCT-DEMO-0002", "NCT-DEMO-0005", "NCT-DEMO-0008")


def long_chart() -> dict:
    """A chart with enough results that its facts fill several screens."""
    base = chart()
    base["labs"] = [{"display": f"Analyte {i}", "value": i, "unit": "mg/dL", "effective_at": f"2026-0{1 + i % 9}-01"}
                    for i in range(40)]
    return base


def details(nct: str) -> dict:
    return {"nct_id": nct, "title": f"DEMO trial {nct}", "status": "RECRUITING", "minimum_age": "18 Years",
            "maximum_age": None, "sex": "ALL", "inclusion_criteria": ["Diagnosed essential hypertension"],
            "exclusion_criteria": ["Pregnancy", "Mechanical heart valve"]}


def tools() -> dict:
    return {"get_patient_chart": [{"result": long_chart()}, {"result": long_chart()}],
            "find_clinical_trials": [{"result": {"trials": [{"nct_id": n, "title": f"DEMO trial {n}"} for n in TRIALS]}}],
            "get_trial_details": [{"result": details(n)} for n in TRIALS]}


SCRIPT = {  # only "Mechanical heart valve" is the model's: the chart decides the rest
    "CRITERION_EXCLUSION": [{"excluding_condition_present": "unknown", "cited_facts": [], "reason": "Not recorded."}] * 3,
}


def screen_text(app) -> str:
    """What the terminal shows now, line by line."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def prescreened(pilot):
    app = pilot.app
    await ready(pilot)
    app.open_patient("abc-123", "John Smith")
    await settle(pilot)
    await pilot.press("f6")
    await wait_until(pilot, lambda: app.turn is None and len(texts(app)) >= 2, what="the prescreen")
    await settle(pilot)
    return app.main.chat.messages()[-1]


async def test_the_verdicts_are_on_screen_when_the_prescreen_finishes(tmp_path):
    app, model, _ = make_app(tmp_path, SCRIPT, tools())
    async with app.run_test(size=(100, 30)) as pilot:
        answer = await prescreened(pilot)
        assert answer.kind == "answer" and "Patient facts used:" in answer.text
        shown = screen_text(app)
        assert "Prescreen for John Smith (abc-123)" in shown and "Verdicts:" in shown, shown
        for i, nct in enumerate(TRIALS, 1):
            assert f"{i}. UNCERTAIN  {nct}" in shown, shown
        assert "Patient facts used:" not in shown  # the facts are below, a scroll away
        assert model.pending() == {}


async def test_the_disclaimer_is_shown_once_as_the_answers_footnote(tmp_path):
    app, _, _ = make_app(tmp_path, SCRIPT, tools())
    async with app.run_test(size=(100, 30)) as pilot:
        answer = await prescreened(pilot)
        assert answer.footnote == DISCLAIMER
        assert DISCLAIMER not in answer.text
        whole = f"{answer.text}\n\n{answer.footnote}"
        assert whole.count("confirm every criterion") == 1
        assert app.conversation.history[-1] == ("assistant", answer.text)
