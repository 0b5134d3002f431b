"""The clinic terminal app: turns and their message handlers. The model, tools and server health
(``tui.services``), sessions (``tui.saved_sessions``), the patient context (``tui.patients``) and the
clinician's sign-in and lock (``tui.clinician``) are mixins of the same app. The conversation (the
open patient, when a new conversation starts, the history, what is saved and resumed) is the
conversation core's (``appliance.conversation``, the line session's too): ``self.conversation``.

Invariants:
- The model load, tool start-up, health checks, chart loads and every agent turn run in
  ``@work(thread=True)`` workers that only post messages (``tui.events``); the handlers here
  own all state and are the only code that touches widgets.
- One turn at a time, so llama.cpp is never called from two workers at once (the model also
  holds its own lock). Questions asked while the model loads wait for it, visibly.
- Errors from the model, tools or the session database become notices; none ends the app.
- Writes to the record go through ``ApprovalBridge``: nothing is written without Approve.
- Clinician sign-in (README "Clinician sign-in"): when accounts exist, the sign-in screen
  covers everything until a clinician signs in; the tool box starts only then, in their name.
  After ``idle_lock_minutes`` without a key or click (or F12) the lock screen covers the
  terminal: the same clinician's password continues, F2 there signs out (turn cancelled,
  conversation and patient closed, tool box closed). While either screen is up no action but
  quit runs, no notice shows over it, and an approval dialog waits beneath until the unlock.
  With no accounts at all the terminal opens at once and writes carry the operator's name.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App
from textual.screen import Screen

from appliance.accounts import Account, AccountStore
from appliance.config import Settings
from appliance.conversation import Conversation, resume_problem
from appliance.conversation.approval import asked
from appliance.errors import ApplianceError, GenerationCancelled
from appliance.llm.base import VisionModel
from appliance.runtime import model_files
from models.profiles import get_profile
from models.projector import projector_problem
from tui import events
from tui.actions import app_bindings
from tui.approval import ApprovalBridge, ApprovalContext
from tui.backend import (
    ModelLoader,
    ToolsFactory,
    call_tool,
    close_quietly,
    real_model_loader,
    real_tools_factory,
)
from tui.chart_words import allergy_status, identity_line
from tui.clinician import ClinicianHandling
from tui.commands import ClinicCommands
from tui.patients import PatientHandling
from tui.prescreen import PrescreenHandling
from tui.saved_sessions import SessionHandling
from tui.screens.approval import ApprovalScreen
from tui.screens.attach_image import AttachImageScreen
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from tui.services import ServiceHandling
from tui.turn_messages import TurnMessages
from tui.widgets.question_input import QuestionInput
from tui.workers import Closing, Turn, abandonable

log = logging.getLogger(__name__)
PROGRESS_SECONDS = 0.5  # how often a running turn's elapsed time is redrawn


class ClinicApp(ClinicianHandling, ServiceHandling, SessionHandling, PatientHandling, PrescreenHandling, TurnMessages,
                App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "Offline clinical assistant"
    COMMANDS = App.COMMANDS | {ClinicCommands}
    BINDINGS = app_bindings()

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        model_loader: ModelLoader | None = None,
        tools_factory: ToolsFactory | None = None,
        sessions_path: Path | None = None,
        resume: str | None = None,
        cursor_blink: bool = True,
        health_interval: float = 60.0,
        accounts: AccountStore | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.profile = get_profile(self.settings.model)
        self._model_loader = model_loader or real_model_loader
        self._tools_factory = tools_factory or real_tools_factory
        self._sessions_path = sessions_path
        self._resume = resume  # a session id, or "latest"
        self.cursor_blink = cursor_blink
        self._health_interval = health_interval
        self.main = MainScreen(self.profile.name, cursor_blink, model_notice=self.profile.notice)
        self.bridge = ApprovalBridge(self, ApprovalScreen, describe=self._approval_context, present=self._present_approval,
                                     clinician=self.author_name, reauthenticate=self.reauthenticate)
        self.accounts = accounts if accounts is not None else AccountStore.from_settings(self.settings)
        self.accounts_required = False  # decided at mount: any account exists
        self.clinician: Account | None = None
        self.locked = False  # the sign-in or lock screen is up
        self._held: list[tuple[Screen, object]] = []  # approval dialogs waiting for the unlock
        self._last_input = time.monotonic()
        self._tools_generation = 0
        self.model = None
        self.tools = None
        self.drug_names: list[str] | None = None
        self.agent = None
        self.model_error: str | None = None
        self.tools_error: str | None = None
        self._down: frozenset[str] = frozenset()  # servers last announced as not answering
        self.conversation = Conversation(self.profile.name)  # saved once the store opens (on mount)
        self.chart: dict | None = None
        self.image_path: str | None = None
        self.turn: Turn | None = None
        self._turn_ids = 0
        self.notices: list[tuple[str, str]] = []  # (severity, text), also shown as toasts
        self._quitting = threading.Event()

    # -- start-up ---------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return self.main

    def on_mount(self) -> None:
        self.main.status.show_loading("starting")
        self._load_model()
        try:
            self.accounts_required = self.accounts.exists()
        except ApplianceError:  # an unreadable accounts file: fail closed, the sign-in says why
            self.accounts_required = True
        if self.accounts_required:
            self._show_sign_in()
            idle = self.settings.idle_lock_minutes * 60
            if idle > 0:
                self.set_interval(min(15.0, max(idle / 4, 0.02)), self._check_idle)
        else:
            self.main.status.set_clinician("no sign-in")
            self._launch_tools()
        self._open_store()
        if self._health_interval:
            self.set_interval(self._health_interval, self._periodic_health)
        self.set_interval(PROGRESS_SECONDS, self._show_progress)

    @property
    def image_analysable(self) -> bool:
        """True only when the model can analyse images: its ``vision_available`` once loaded
        (a projector llama.cpp refused makes it false), before that the profile's projector file."""
        if self.model is not None:
            return isinstance(self.model, VisionModel) and self.model.vision_available
        return projector_problem(self.profile, model_files(self.settings).folder) is None

    def notice(self, text: str, severity: str = "information") -> None:
        self.notices.append((severity, text))
        if self.locked:  # nothing shows over the sign-in or lock screen (a notice may name a patient)
            return
        self.notify(text, severity=severity, markup=False, timeout=8 if severity == "error" else 5)

    # -- turns ------------------------------------------------------------------------------
    def on_question_input_asked(self, message: QuestionInput.Asked) -> None:
        if self.turn is None and self.choose_in_words(message.text):  # tui.patients: a patient in words
            return
        self.ask_agent(message.text)

    def ask_agent(self, text: str, shown: bool = True) -> None:
        """Start a turn for ``text`` (``shown``: False when the question is already in the chat)."""
        if self.turn is not None:
            self.main.prompt.value = text
            self.notice("An answer is still being written: wait for it, or press Escape to cancel it.", "warning")
            return
        if self.model_error:
            self.main.prompt.value = text
            self.notice(f"The model is not available: {self.model_error}", "error")
            return
        if self.tools_error and self.agent is None:
            self.main.prompt.value = text
            self.notice(f"The clinical data services are not running ({self.tools_error}); "
                        "press F5 to start them again, then send the question.", "error")
            return
        self.before_question()  # tui.patients: a turn made another patient current
        waiting = self.waiting_for()
        self._new_turn(text, f"Waiting for {waiting}…" if waiting else "Thinking…", self.image_path, shown)
        self.image_path = None
        self.main.attachment.clear()
        if waiting and self.model is None:
            self.notice("The model is still loading; your question will be answered as soon as it is ready.")
        elif waiting:
            self.notice("The clinical data services are starting; your question will be answered as soon as they run.")
        else:
            self._start_turn(self.turn)

    def _new_turn(self, question: str, waiting: str, image_path: str | None = None, shown: bool = True) -> Turn:
        """The question and its waiting reply in the chat, as the running turn (not started)."""
        if shown:
            self.main.chat.add_question(question)
        self._turn_ids += 1
        reply = self.main.chat.add_reply(waiting)
        self.turn = Turn(self._turn_ids, question, reply, self.conversation.patient_id, image_path)
        self.refresh_bindings()
        return self.turn

    def _begin(self, turn: Turn) -> None:
        """The turn starts now: Escape cancels it and its trace opens."""
        turn.started, turn.began, turn.step = True, time.monotonic(), "Thinking"
        self.bridge.cancel = turn.cancel
        self.main.trace.start_turn(turn.id, turn.question)

    def _start_turn(self, turn: Turn) -> None:
        self._begin(turn)
        self._show_progress()
        self._run_turn(turn.id, turn.question, list(self.conversation.history), turn.patient_id, turn.image_path, turn.cancel)

    @work(thread=True, group="turn", exit_on_error=False)
    def _run_turn(self, turn_id: int, question: str, history: list, patient_id: str | None,
                  image_path: str | None, cancel: threading.Event) -> None:
        self._post_outcome(
            turn_id, cancel, self.agent.run_turn,
            question, history=history, patient_id=patient_id, image_path=image_path,
            on_event=lambda event: self.post_message(events.TurnTrace(turn_id, event)),
            on_step=lambda label: self.post_message(events.TurnStep(turn_id, label)),
            cancel=cancel,  # no on_token: only the checked answer is shown, once the turn is done
        )

    def _post_outcome(self, turn_id: int, cancel: threading.Event, fn, /, *args, **kwargs) -> None:
        """Runs in a turn's worker thread: ``fn`` (abandoned when the app closes), then its
        result as ``TurnFinished`` or its error as ``TurnFailed``; nothing escapes."""
        try:
            result = abandonable(self._quitting, fn, *args, **kwargs)
        except Closing:
            return
        except GenerationCancelled:
            self.post_message(events.TurnFailed(turn_id, "cancelled", cancelled=True))
        except ApplianceError as exc:
            self.post_message(events.TurnFailed(turn_id, str(exc), cancelled=cancel.is_set()))
        except Exception as exc:  # noqa: BLE001 - a third-party exception never crashes the terminal
            log.exception("turn failed")
            self.post_message(events.TurnFailed(turn_id, f"an unexpected {type(exc).__name__} occurred",
                                                cancelled=cancel.is_set()))
        else:
            self.post_message(events.TurnFinished(turn_id, result))

    def _current(self, turn_id: int) -> Turn | None:
        return self.turn if self.turn is not None and self.turn.id == turn_id else None

    def _end_turn(self) -> None:
        self.turn = None
        self.bridge.cancel = None
        self.refresh_bindings()

    def action_cancel_turn(self) -> None:
        turn = self.turn
        if turn is None:
            return
        turn.cancel.set()
        self._dismiss_approval()  # an open approval dialog belongs to this turn: nothing is written
        if not turn.started:
            self._finish_cancelled(turn)
        else:
            turn.reply.border_subtitle = "cancelling…"

    def _approval_context(self, tool: str, args: dict, known_chart: dict | None = None) -> ApprovalContext:
        """Runs in the turn's thread: the chart of the patient being written to (the one the safety
        gate just read, else the open one as loaded, else read now) in the dialog's words, and the
        author of the write."""
        pid = args.get("patient_id")
        not_open = asked(args, self.conversation.current).not_current  # the line session's words too
        gate_read = (known_chart or {}).get("patient") or {}
        chart = known_chart if (pid and gate_read.get("patient_id") == pid) else None
        if chart is None and pid and pid == self.conversation.patient_id and self.chart:
            chart = self.chart
        if chart is None and pid and self.tools is not None:
            outcome = call_tool(self.tools, "get_patient_chart", {"patient_id": pid}, self.settings.tool_deadline_seconds)
            chart = outcome.result if outcome.ok else None
        if not chart:
            return ApprovalContext(str(pid), "unknown", [], self.author_label(), not_open=not_open)
        status, allergies = allergy_status(chart)
        return ApprovalContext(identity_line(chart), status, allergies, self.author_label(), not_open=not_open)

    def _dismiss_approval(self) -> None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ApprovalScreen):
                if screen is not self.screen:
                    screen.pop_until_active()
                screen.dismiss(None)  # the bridge reads None as a rejection
                return

    def check_action(self, action: str, parameters) -> bool | None:
        """Hide keys that cannot act now, so the footer fits 80 columns with the ones that can."""
        if self.locked and action not in ("quit", "help_quit", "focus_next", "focus_previous"):
            return False  # nothing behind the sign-in or lock screen, not even the command palette
        if action == "lock":
            return self.clinician is not None
        if action == "cancel_turn":
            return self.turn is not None
        if action in ("new_session", "sessions"):
            return self.turn is None
        if action == "close_patient":
            return self.conversation.patient_id is not None
        if action == "retry_tools":
            return bool(self.tools_error) or self.servers_not_known_up()
        return True

    # -- image, trace, help, quit ------------------------------------------------------------
    def action_attach_image(self) -> None:
        self.push_screen(AttachImageScreen(self.image_analysable, cursor_blink=self.cursor_blink),
                         callback=self._attach)

    def _attach(self, path: str | None) -> None:
        if not path:
            return
        self.image_path = path
        self.main.attachment.show_image(path, self.image_analysable)
        if not self.image_analysable:
            self.notice(f"Image analysis is unavailable on this model ({self.profile.name}); "
                        "the image will be noted but not analysed.", "warning")

    def action_toggle_trace(self) -> None:
        self.main.trace.display = not self.main.trace.display

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self._shutdown_turns()
        self.exit(0)

    def _shutdown_turns(self) -> None:
        self._quitting.set()
        self.bridge.close()
        if self.turn is not None:
            self.turn.cancel.set()

    def _fatal_error(self) -> None:
        """An unexpected error ends the terminal with one line instead of Textual's traceback,
        whose local variables could show chart text; the traceback (no locals) goes to the log."""
        error = self._exception
        log.error("the clinic terminal stopped on an unexpected error", exc_info=error)
        self.bell()
        name = type(error).__name__ if error is not None else "error"
        self._exit_renderables.append(
            Text(f"appliance tui: the clinic terminal stopped on an unexpected error ({name}).", style="bold red"))
        self._close_messages_no_wait()

    async def on_unmount(self) -> None:
        self._shutdown_turns()
        tools, self.tools = self.tools, None
        closer = threading.Thread(target=close_quietly, args=(tools,), name="clinic-close", daemon=True)
        closer.start()
        deadline = time.monotonic() + 10  # a hung server must not hold the terminal open
        while closer.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


def startup_problem(resume: str | None, sessions_path: Path | None = None) -> str | None:
    """Why the terminal cannot open as asked (one line), checked before the screen takes over."""
    return resume_problem(resume, sessions_path)


def run(settings: Settings | None = None, *, script: dict | None = None, resume: str | None = None) -> int:
    """Run the terminal in the current terminal; returns the exit code (non-zero when it could
    not start or stopped on an unexpected error, with one line on standard error)."""
    problem = startup_problem(resume)
    if problem:
        print(f"appliance tui: {problem}", file=sys.stderr)
        return 2
    loader = tools = None
    if script is not None:
        from tui.backend import scripted_backend

        loader, tools = scripted_backend(script)
    app = ClinicApp(settings, model_loader=loader, tools_factory=tools, resume=resume)
    code = app.run()
    app._shutdown_turns()
    return app.return_code or code or 0
