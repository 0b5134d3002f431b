"""Builders for clinic-terminal tests: scripted agent parts, and waiting without sleeping."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from appliance.config import Settings
from appliance.errors import GenerationCancelled
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox
from tui.app import ClinicApp

IA, IC, TS, TE, RC, DR, EH, SY = (
    "INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
    "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE",
)
DRUGS = ["metformin", "warfarin", "aspirin", "penicillin", "lisinopril"]
SIZE = (100, 30)

THREE_WILSONS = {"total_matches": 3, "matches": [
    {"patient_id": f"pat-01{i}", "name": "James Wilson", "birth_date": f"19{40 + 10 * i}-06-01",
     "sex": "male", "mrn": f"DEMO-01{i}"} for i in range(3)
]}


def chart(pid: str = "abc-123", name: str = "John Smith", meds=("lisinopril",)) -> dict:
    return {
        "patient": {"patient_id": pid, "name": name, "birth_date": "1958-04-12", "age": 67, "sex": "male",
                    "mrn": "DEMO-000123"},
        "synthetic_demo_record": True,
        "active_problems": [{"display": "Essential hypertension", "clinical_status": "active", "onset_date": "2012-03-01"}],
        "medications": [{"medication_name": m, "dosage": "10 mg", "frequency": "once daily", "status": "active"} for m in meds],
        "allergies": [{"substance": "Penicillin", "reaction": "Hives", "severity": "moderate"}],
        "labs": [{"display": "Hemoglobin A1c", "value": 7.4, "unit": "%", "flag": "H", "effective_at": "2025-01-10T09:00:00"}],
        "vitals": [{"display": "Blood pressure systolic", "value": 142, "unit": "mmHg", "flag": "H", "effective_at": "2025-01-10T09:00:00"}],
        "recent_notes": [],
    }


def intent(tool: str | None = None) -> dict:
    if tool is None:
        return {"intent": "DIRECT", "task_summary": "General question.", "suggested_tool": None}
    return {"intent": "TOOL_NEEDED", "task_summary": "Clinician needs a record action.", "suggested_tool": tool}


def good(summary: str = "Data returned.") -> dict:
    return {"quality": "success_rich", "brief_summary": summary}


WRITE_ARGS = {
    "prescribe_medication": {"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg",
                             "frequency": "twice daily", "notes": None},
    "add_allergy": {"patient_id": "abc-123", "substance": "penicillin", "reaction": "hives", "severity": "moderate"},
    "save_clinical_note": {"patient_id": "abc-123", "note_type": "progress",
                           "note_text": "Stable on current plan. Review in 3 months."},
}
WRITE_QUESTIONS = {
    "prescribe_medication": "Prescribe metformin 500 mg twice daily for abc-123",
    "add_allergy": "Document a penicillin allergy with hives for abc-123",
    "save_clinical_note": "Write a progress note for abc-123: stable, review in 3 months",
}


def write_script(tool: str, approved: bool) -> dict:
    """The model's part of a write turn: the intent and, unless code reads the order, the tool
    and its arguments. The result's label and the answer are code's (appliance.agent.code_answers):
    "Prescribed ... The record was changed." or the refusal and "The record was not changed."."""
    # A prescription whose words give the whole order is code's call (appliance.agent.order_calls): no model.
    select = [] if tool == "prescribe_medication" else [{"tool_name": tool}, dict(WRITE_ARGS[tool])]
    return {IC: [intent(tool)], TS: select}


class GatedModel(ScriptedModel):
    """A scripted model whose streamed answer pauses after its first piece until released or
    cancelled, so a test can act while an answer is being written. Like the real runtime, a
    cancel raises GenerationCancelled."""

    def __init__(self, replies=None):
        super().__init__(replies)
        self.release = threading.Event()
        self.first_piece = threading.Event()

    def generate_free(self, node, messages, *, temperature, max_tokens, on_token=None, cancel=None):
        def gated(piece: str) -> None:
            if on_token:
                on_token(piece)
            self.first_piece.set()
            while not self.release.is_set():
                if cancel is not None and cancel.wait(0.01):
                    raise GenerationCancelled(f"{node}: cancelled")

        return super().generate_free(node, messages, temperature=temperature, max_tokens=max_tokens,
                                     on_token=gated, cancel=cancel)


def make_app(tmp_path: Path, script: dict | None = None, tools: dict | None = None, *, model=None,
             model_loader=None, **kw) -> tuple[ClinicApp, ScriptedModel, ScriptedToolBox]:
    model = model if model is not None else ScriptedModel(script or {})
    toolbox = ScriptedToolBox(tools or {}, fallback=None, drug_names=DRUGS)
    app = ClinicApp(
        Settings(), model_loader=model_loader or (lambda settings, progress: model), tools_factory=lambda: toolbox,
        sessions_path=tmp_path / "sessions.sqlite", cursor_blink=False, health_interval=0, **kw,
    )
    return app, model, toolbox


async def wait_until(pilot, predicate, timeout: float = 10.0, what: str = "condition") -> None:
    """Let the app process messages until ``predicate()`` holds (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


async def settle(pilot) -> None:
    """Wait for every worker, then for the messages they posted."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def ready(pilot) -> None:
    await wait_until(pilot, lambda: pilot.app.agent is not None, what="the agent to be ready")
    await settle(pilot)


async def ask(pilot, question: str) -> None:
    pilot.app.main.prompt.focus()
    pilot.app.main.prompt.value = question
    await pilot.press("enter")
    await pilot.pause()


def texts(app) -> list[str]:
    return [m.text for m in app.main.chat.messages()]


OVERRIDE_REASON = "reviewed with the patient at the bedside"


async def approve(pilot) -> None:
    """Approve the open dialog as a clinician would: where approving is an override (the scripted
    tool boxes answer no drug data, so a prescription's checks do not all run), with a reason
    of real words first (these apps have no accounts: no password is asked)."""
    screen = pilot.app.screen
    if getattr(screen, "is_override", False):
        from textual.widgets import Input

        screen.query_one("#approval-reason", Input).value = OVERRIDE_REASON
    await pilot.press("ctrl+y")
