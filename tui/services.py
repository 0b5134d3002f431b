"""The terminal's services: loading the model, starting the MCP tool box, server health.

A mixin of ``ClinicApp``. The model load, tool start-up and health checks run in thread
workers that only post messages (``tui.events``); the handlers here own ``model``,
``tools``, ``drug_names``, ``model_error`` and ``tools_error``.

Invariants:
- A tool box reaches the app only in ``ToolsReady``; until then the start-up worker owns it
  and closes it if start-up fails or is abandoned. The app closes the one it holds on exit.
- A question never waits for a service that has failed: a waiting question is failed with a
  notice saying what is down and what to do, and later questions are refused (their text is
  kept in the prompt) until the service runs. F5 (``retry_tools``) starts the tool box again,
  or re-checks the servers when it is running.
- Server health is announced when it changes, not at every periodic check.
- The tool box belongs to one clinician: it starts after sign-in with the clinician as its
  servers' ``APPLIANCE_USER`` (the author the EHR server records), and a change of clinician
  closes it and starts another (``_tools_generation`` tells a late start-up of the old one
  apart, which is closed). With no accounts it starts at once, in the operator's name.
"""

from __future__ import annotations

import logging
import threading
import time

from textual import work

from appliance.errors import ApplianceError
from appliance.medication.names import DrugRecogniser, library_lexicon
from appliance.runtime import acceptance_status
from common.locations import logs_dir
from mcp_servers.contracts import TOOL_SERVERS
from tui import events
from tui.backend import SERVERS, close_quietly, ping_all, real_model_loader
from tui.workers import Closing, abandonable

log = logging.getLogger(__name__)
# Tool errors that mean the server itself did not answer (not a bad argument or an empty result).
SERVER_FAULTS = frozenset({"timeout", "service_unavailable", "permanent_failure", "server_error", "invalid_response"})


class ServiceHandling:
    model: object | None
    tools: object | None
    drug_names: list[str] | None
    agent: object | None
    model_error: str | None
    tools_error: str | None
    _down: frozenset[str]  # servers last announced as not answering
    _tools_generation: int  # bumped when a tool box is closed for a change of clinician
    acceptance = None  # appliance.runtime.acceptance_status of the loaded file (None: not known, scripted)

    # -- the model --------------------------------------------------------------------------
    @work(thread=True, group="model", exit_on_error=False)
    def _load_model(self) -> None:
        started = time.perf_counter()
        shown: list = [None]  # the last (stage, percent) posted: at most one message per percent

        def progress(stage: str, fraction: float | None = None) -> None:
            key = (stage, None if fraction is None else int(fraction * 100))
            if key != shown[0]:
                shown[0] = key
                self.post_message(events.ModelLoadProgress(stage, fraction))

        try:
            model = abandonable(self._quitting, self._model_loader, self.settings, progress)
        except Closing:
            return
        except ApplianceError as exc:
            self.post_message(events.ModelLoadFailed(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - a third-party failure becomes a notice
            log.exception("model load failed")
            self.post_message(events.ModelLoadFailed(f"the model could not be loaded ({type(exc).__name__})"))
            return
        seconds = time.perf_counter() - started
        acceptance = None
        if self._model_loader is real_model_loader:  # this site's verdict on the loaded file (hashed once if unpinned)
            try:
                acceptance = abandonable(self._quitting, acceptance_status, self.settings)
            except Closing:
                return
            except Exception:  # noqa: BLE001 - unknown acceptance: the notice stays
                log.exception("model acceptance could not be read")
        self.post_message(events.ModelLoaded(model, seconds, acceptance))

    def on_model_load_progress(self, message: events.ModelLoadProgress) -> None:
        if self.model is None and self.model_error is None:
            self.main.status.show_loading(message.stage, message.fraction)

    def on_model_loaded(self, message: events.ModelLoaded) -> None:
        self.model = message.model
        self.acceptance = message.acceptance
        accepted = bool(self.acceptance and self.acceptance.accepted)
        self.main.status.set_ready(message.seconds, acceptance=self.acceptance.state if self.acceptance else None)
        self.main.show_model_notice(self.profile.notice_for(accepted))
        if self.acceptance is not None:
            self.notice(f"Model acceptance at this site: {self.acceptance.line}")
        self._maybe_ready()

    def on_model_load_failed(self, message: events.ModelLoadFailed) -> None:
        self.model_error = message.message
        self.main.status.set_failed()
        self.notice(f"The model is not available: {message.message}", "error")
        if self.turn is not None and not self.turn.started:
            self._finish_failed(self.turn, message.message)

    # -- the tools --------------------------------------------------------------------------
    def _launch_tools(self) -> None:
        """Start a tool box for the signed-in clinician (the operator when there are no accounts)."""
        self._start_tools(self._tools_generation, self.tools_user())

    def _stop_tools(self) -> None:
        """Close the tool box (a change of clinician); a start-up still running is disowned."""
        self._tools_generation += 1
        tools, self.tools, self.agent, self.drug_names, self.tools_error = self.tools, None, None, None, None
        self._down = frozenset()
        self.main.status.set_health({s: None for s in SERVERS})
        if tools is not None:
            threading.Thread(target=close_quietly, args=(tools,), name="clinic-close", daemon=True).start()

    @work(thread=True, group="tools", exit_on_error=False)
    def _start_tools(self, generation: int = 0, user: str | None = None) -> None:
        """Start the tool box and read the drug dictionary (see the ownership invariants)."""
        factory = (lambda: self._tools_factory(user)) if user else self._tools_factory
        try:
            tools = abandonable(self._quitting, factory)
        except Closing:
            return
        except Exception as exc:  # noqa: BLE001
            log.exception("tool start-up failed")
            self.post_message(events.ToolsFailed(f"they did not start ({type(exc).__name__})", generation))
            return
        start = getattr(tools, "start", None)  # every server at once (MCPToolBox); scripted boxes have none
        try:
            health = abandonable(self._quitting, start) if start else dict.fromkeys(SERVERS)
        except Closing:
            threading.Thread(target=close_quietly, args=(tools,), name="clinic-close", daemon=True).start()
            return
        if not self.post_message(events.ToolsStarted(tools, health, generation)):
            close_quietly(tools)
            return
        try:
            names = abandonable(self._quitting, tools.drug_names)
            library_lexicon()  # read the bundled drug dictionary here, not on the UI thread (about 0.6 s)
        except Closing:
            threading.Thread(target=close_quietly, args=(tools,), name="clinic-close", daemon=True).start()
            return
        except Exception as exc:  # noqa: BLE001
            log.exception("tool start-up failed")
            close_quietly(tools)
            self.post_message(events.ToolsFailed(f"they did not start ({type(exc).__name__})", generation))
            return
        if not self.post_message(events.ToolsReady(tools, names, generation)):  # the app is already closing
            close_quietly(tools)
            return
        if start is None:  # health not known from the start: ask each server
            try:
                self.post_message(events.ServerHealth(abandonable(self._quitting, ping_all, tools)))
            except Closing:
                return

    def on_tools_started(self, message: events.ToolsStarted) -> None:
        """The servers are up: the status line says so and the open patient's chart loads now,
        while the drug dictionary is still being read."""
        if message.generation != self._tools_generation:
            return  # its ToolsReady closes it
        self.tools = message.tools
        if any(ok is not None for ok in message.health.values()):
            self.on_server_health(events.ServerHealth(message.health))
        if self.conversation.patient_id and self.chart is None:
            self._load_chart(self.conversation.patient_id)

    def on_tools_ready(self, message: events.ToolsReady) -> None:
        if message.generation != self._tools_generation:  # started for a clinician who signed out
            threading.Thread(target=close_quietly, args=(message.tools,), name="clinic-close", daemon=True).start()
            return
        started = self.tools is message.tools  # its chart read began at ToolsStarted
        self.tools, self.drug_names, self.tools_error = message.tools, message.drug_names, None
        self.refresh_bindings()  # the health check that follows announces a recovery
        if self.conversation.patient_id and not started:
            self._load_chart(self.conversation.patient_id)
        self._maybe_ready()

    def on_tools_failed(self, message: events.ToolsFailed) -> None:
        if message.generation != self._tools_generation:
            return
        self.tools_error = message.message
        self.tools = None  # a box that started but failed its dictionary read is closed
        self._down = frozenset(SERVERS)
        self.main.status.set_health({s: False for s in SERVERS})
        self.refresh_bindings()
        self.notice(f"The clinical data services (record, terminology, knowledge) are not running: "
                    f"{message.message}. Questions cannot be answered until they run. Press F5 to start "
                    f"them again; the servers' logs are in {logs_dir()}.", "error")
        if self.turn is not None and not self.turn.started:
            turn = self.turn
            self._finish_failed(turn, "the clinical data services are not running (F5 starts them again)")
            if not self.main.prompt.value:
                self.main.prompt.value = turn.question  # ready to send again once they run

    def action_retry_tools(self) -> None:
        if self.tools is not None:
            self.notice("Checking the clinical data servers…")
            self._check_health(self.tools)
        elif self.tools_error is None:
            self.notice("The clinical data services are still starting.")
        else:
            self.tools_error = None
            self.main.status.set_health({s: None for s in SERVERS})
            self.refresh_bindings()
            self.notice("Starting the clinical data services again…")
            self._launch_tools()

    # -- health -----------------------------------------------------------------------------
    def _periodic_health(self) -> None:
        if self.tools is not None and self.turn is None and not self._quitting.is_set():
            self._check_health(self.tools)

    @work(thread=True, group="health", exclusive=True, exit_on_error=False)
    def _check_health(self, tools) -> None:
        try:
            self.post_message(events.ServerHealth(abandonable(self._quitting, ping_all, tools)))
        except Closing:
            return

    def on_server_health(self, message: events.ServerHealth) -> None:
        self.main.status.set_health(message.health)
        self.refresh_bindings()
        down = (self._down | {s for s, ok in message.health.items() if ok is False}) - {
            s for s, ok in message.health.items() if ok is not False}
        if down == self._down:
            return
        if down:
            names = ", ".join(sorted(down)) + (" servers" if len(down) > 1 else " server")
            self.notice(f"Not answering: {names}. Answers may lack that information; F5 checks again.",
                        "warning")
        else:
            self.notice("All clinical data servers are answering again.")
        self._down = down
        self.refresh_bindings()

    def tool_call_seen(self, tool: str, error_type: str | None) -> None:
        """A tool call tells its server's health at once: one that found the server dead or
        stalled marks it down, one that was answered marks it up (no waiting for a check)."""
        server = TOOL_SERVERS.get(tool)
        if server is None:
            return
        if error_type in SERVER_FAULTS:
            self.on_server_health(events.ServerHealth({server: False}))
        elif error_type is None and self.main.status.health.get(server) is not True:
            self.on_server_health(events.ServerHealth({server: True}))

    def servers_not_known_up(self) -> bool:
        """Some server is not shown as up in the status line (down, or not yet checked)."""
        return any(self.main.status.health.get(s) is not True for s in SERVERS)

    # -- both -------------------------------------------------------------------------------
    def _maybe_ready(self) -> None:
        if self.agent is not None or self.model is None or self.drug_names is None:
            return
        from appliance.agent.graph import Agent

        self.agent = Agent(self.model, self.tools, self.settings, self.bridge, drugs=DrugRecogniser(self.drug_names),
                           accepted=bool(self.acceptance and self.acceptance.accepted))
        if self.turn is not None and not self.turn.started:
            self._start_turn(self.turn)

    def waiting_for(self) -> str | None:
        """What a new question would have to wait for, or None when the agent is ready."""
        if self.agent is not None:
            return None
        return "the model to finish loading" if self.model is None else "the clinical data services to start"
