"""What the command modules share: settings from ``--model``, ``--script`` files, and the progress
bar (``common.progress.ProgressBar``, which the importers in ``appliance.setup`` draw on too).

Invariants:
- A script is checked here before anything loads (UTF-8 JSON, an object, only the command's
  keys); every failure is one ``ScriptError``, which ``appliance.cli`` prints as one line, exit 2.
- The progress bar draws on stderr, and only when stderr is a terminal, so stdout stays the result.
- Importing this module is cheap: the model runtime is imported only when a model is built.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from appliance.config import Settings
from appliance.errors import ScriptError
from common.progress import ProgressBar


def settings_from(args) -> Settings:
    """The settings, with ``--model`` when given."""
    settings = Settings()
    if getattr(args, "model", None) is not None:  # an empty --model is an unknown profile, not the default
        settings = settings.model_copy(update={"model": args.model})
    return settings


def load_script(path: str, known: Collection[str]) -> dict:
    """A ``--script`` file: a JSON object whose keys are all in ``known``."""
    from common.user_files import file_problem

    problem = file_problem(path)
    if problem:
        raise ScriptError(f"cannot read script: {problem}")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise ScriptError(f"script {path} is nested too deeply to read") from None
    except OSError as exc:
        raise ScriptError(f"cannot read script {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ScriptError(f"script {path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    except UnicodeDecodeError:
        raise ScriptError(f"script {path} is not JSON: it is not UTF-8 text") from None
    if not isinstance(data, dict):
        raise ScriptError(f"script {path} must be a JSON object keyed by node name")
    if _depth(data) > MAX_SCRIPT_DEPTH:
        raise ScriptError(f"script {path} is nested too deeply (more than {MAX_SCRIPT_DEPTH} levels)")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ScriptError(f"script {path} must be an object keyed by {', '.join(sorted(known))}: "
                          f"unknown key {unknown[0]!r}")
    return data


MAX_SCRIPT_DEPTH = 32  # a scripted reply is a few levels deep; deeper JSON would recurse in the code it feeds


def _depth(value) -> int:
    """How deeply ``value``'s lists and objects nest (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def print_report(report, as_json: bool) -> None:
    """A command's report on stdout: its ``summary()`` for people, or (``--json``) one JSON object
    of its fields (a dataclass; paths and other values as text)."""
    if not as_json:
        print(report.summary())
        return
    from dataclasses import asdict

    data = asdict(report)
    if hasattr(report, "ok"):
        data["ok"] = report.ok
    print(json.dumps(_keys_as_text(data), indent=2, default=str))


def _keys_as_text(value):
    """JSON's object keys are text: a tuple key (resource type, table) becomes "a/b"."""
    if isinstance(value, dict):
        return {("/".join(map(str, k)) if isinstance(k, tuple) else k): _keys_as_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_keys_as_text(v) for v in value]
    return value


def model_from(args, nodes: Collection[str]):
    """``--script``'s scripted model (keyed by ``nodes``), else the real model of ``--model``."""
    if getattr(args, "script", None):
        from appliance.llm.fake import ScriptedModel

        return ScriptedModel(load_script(args.script, nodes))
    from appliance.runtime import load_model

    return load_model(settings_from(args))


__all__ = ["ProgressBar", "load_script", "model_from", "print_report", "settings_from"]
