"""Messages that worker threads post to the app. Workers never touch widgets; the app's
handlers for these messages own all state (../shared/STYLE.md, "The TUI").

Invariant: every message that belongs to a turn carries its ``turn_id``, so a message from a
turn the clinician already left (cancelled, new session) is recognised and dropped.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from appliance.agent.state import TraceEvent


class ModelLoadProgress(Message):
    def __init__(self, stage: str, fraction: float | None = None) -> None:
        super().__init__()
        self.stage = stage
        self.fraction = fraction  # while hashing: the part done, 0..1


class ModelLoaded(Message):
    def __init__(self, model: Any, seconds: float, acceptance: Any = None) -> None:
        super().__init__()
        self.model = model
        self.seconds = seconds
        self.acceptance = acceptance  # appliance.runtime.acceptance_status (None: a scripted model)


class ModelLoadFailed(Message):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message


class ToolsStarted(Message):
    """The tool box's servers are up (or not): the chart and patient search may use it now,
    before the drug dictionary the agent needs has been read."""

    def __init__(self, tools: Any, health: dict[str, bool | None], generation: int = 0) -> None:
        super().__init__()
        self.tools = tools
        self.health = health
        self.generation = generation


class ToolsReady(Message):
    def __init__(self, tools: Any, drug_names: list[str], generation: int = 0) -> None:
        super().__init__()
        self.tools = tools
        self.drug_names = drug_names
        self.generation = generation  # the start-up it answers; an older one's tool box is closed


class ToolsFailed(Message):
    def __init__(self, message: str, generation: int = 0) -> None:
        super().__init__()
        self.message = message
        self.generation = generation


class ServerHealth(Message):
    def __init__(self, health: dict[str, bool | None]) -> None:
        super().__init__()
        self.health = health  # server -> up (True), down (False), unknown (None)


class TurnStep(Message):
    """The step a turn's agent is starting, in words (the progress line's)."""

    def __init__(self, turn_id: int, label: str) -> None:
        super().__init__()
        self.turn_id = turn_id
        self.label = label


class TurnTrace(Message):
    def __init__(self, turn_id: int, event: TraceEvent) -> None:
        super().__init__()
        self.turn_id = turn_id
        self.event = event


class TurnFinished(Message):
    def __init__(self, turn_id: int, result: Any) -> None:
        super().__init__()
        self.turn_id = turn_id
        self.result = result


class TurnFailed(Message):
    def __init__(self, turn_id: int, message: str, cancelled: bool) -> None:
        super().__init__()
        self.turn_id = turn_id
        self.message = message
        self.cancelled = cancelled


class PatientWords(Message):
    """What a line choosing a patient in words found (``appliance.conversation.patient_choice``), and the
    list of patients the clinician has now seen."""

    def __init__(self, text: str, outcome: Any, shown: tuple) -> None:
        super().__init__()
        self.text = text
        self.outcome = outcome
        self.shown = shown


class ChartLoaded(Message):
    def __init__(self, patient_id: str, chart: dict) -> None:
        super().__init__()
        self.patient_id = patient_id
        self.chart = chart


class ChartFailed(Message):
    def __init__(self, patient_id: str, message: str) -> None:
        super().__init__()
        self.patient_id = patient_id
        self.message = message
