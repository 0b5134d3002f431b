"""The agent core's exceptions. Each edge converts them: the CLI to a message and exit code,
the TUI to a notice. None of them carries patient data in its message."""

from __future__ import annotations

from common.errors import ApplianceError, ConfigError  # noqa: F401 - re-exported: the core's base classes
from models.errors import ModelFileError  # noqa: F401 - re-exported: the model layer's own


class SchemaNotSupported(ApplianceError):
    """A Pydantic schema cannot be turned into a safe grammar."""


class GenerationError(ApplianceError):
    """The model produced no usable output."""


class GenerationTruncated(GenerationError):
    """Generation hit max_tokens before the output was complete."""


class ConstrainedOutputInvalid(GenerationError):
    """Constrained output failed to parse or validate against its schema."""


class GenerationCancelled(GenerationError):
    """The caller cancelled a generation."""


class ContextOverflow(GenerationError):
    """The current message alone does not fit the model's context, even with nothing else."""


class TurnCancelled(ApplianceError):
    """The clinician cancelled a turn between nodes."""


class ScriptError(ApplianceError):
    """A scripted-model file is malformed or ran out of replies."""


class ToolClientError(ApplianceError):
    """An MCP server could not be started or reached."""
