"""What the command modules share: settings from ``--model``, ``--script`` files, the progress bar.

Invariants:
- A script is checked here before anything loads (UTF-8 JSON, an object, only the command's
  keys); every failure is one ``ScriptError``, which ``appliance.cli`` prints as one line, exit 2.
- The progress bar draws on stderr, and only when stderr is a terminal, so stdout stays the result.
- Importing this module is cheap: the model runtime is imported only when a model is built.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection
from pathlib import Path

from appliance.config import Settings
from appliance.errors import ScriptError


def settings_from(args) -> Settings:
    """The settings, with ``--model`` when given."""
    settings = Settings()
    if getattr(args, "model", None) is not None:  # an empty --model is an unknown profile, not the default
        settings = settings.model_copy(update={"model": args.model})
    return settings


def load_script(path: str, known: Collection[str]) -> dict:
    """A ``--script`` file: a JSON object whose keys are all in ``known``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"cannot read script {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ScriptError(f"script {path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    except UnicodeDecodeError:
        raise ScriptError(f"script {path} is not JSON: it is not UTF-8 text") from None
    if not isinstance(data, dict):
        raise ScriptError(f"script {path} must be a JSON object keyed by node name")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ScriptError(f"script {path} must be an object keyed by {', '.join(sorted(known))}: "
                          f"unknown key {unknown[0]!r}")
    return data


def model_from(args, nodes: Collection[str]):
    """``--script``'s scripted model (keyed by ``nodes``), else the real model of ``--model``."""
    if getattr(args, "script", None):
        from appliance.llm.fake import ScriptedModel

        return ScriptedModel(load_script(args.script, nodes))
    from appliance.runtime import load_model

    return load_model(settings_from(args))


class ProgressBar:
    """One self-rewriting line on stderr (a terminal only): a label, a bar and counts, or a note."""

    WIDTH = 24

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = False

    def show(self, label: str, done: int, total: int, tail: str = "") -> None:
        filled = int(self.WIDTH * done / total) if total else self.WIDTH
        self.note(f"{label:<24} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total}"
                  + (f"  {tail}" if tail else ""))

    def note(self, message: str) -> None:
        if not self.enabled:
            return
        self.stream.write(f"\r{message}\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
