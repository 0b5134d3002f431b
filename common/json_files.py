"""Reading a JSON file a command was pointed at, with one clear error for each way it fails.

Invariant: every failure is ``error(message)`` naming the file: it cannot be read (with the
system's reason), or it is not JSON (bad syntax or not UTF-8). What the JSON must hold is the
caller's to check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path | str, error: type[Exception], expected: str = "") -> Any:
    """The parsed file; ``expected`` (e.g. "TrialGPT criterion annotations") ends the not-JSON message."""
    from common.user_files import file_problem

    problem = file_problem(path)
    if problem:
        raise error(problem)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise error(f"{path} is nested too deeply to read") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{path} is not JSON" + (f": expected {expected}" if expected else "")) from None
