"""Paths a user gives a command, checked before anything opens them.

Invariants:
- ``file_problem`` says, in one line naming the path, why it is not a regular file a command
  can read (missing, a folder, a FIFO, a device, a socket), or returns None. It only calls
  ``stat``, which never waits: opening a FIFO waits for a writer forever, and a device such as
  ``/dev/zero`` never ends, so every command that reads a file the user named asks here first.
- A symbolic link is judged by what it points at.
- This module imports nothing from the project, so every floor may use it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def file_problem(path: str | os.PathLike, *, folder_ok: bool = False) -> str | None:
    """Why ``path`` cannot be read as a file (``folder_ok``: or as a folder), or None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path} does not exist"
    except OSError as exc:
        return f"cannot use {path}: {exc.strerror or 'the file system refused the path'}"
    if stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode)):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "something other than a regular file")
    return f"{path} is {kind}, not a file this command can read"


def regular_file(path: str | os.PathLike, error: type[Exception], *, folder_ok: bool = False) -> Path:
    """``path`` as a ``Path`` when ``file_problem`` finds nothing, else ``error(problem)``."""
    problem = file_problem(path, folder_ok=folder_ok)
    if problem:
        raise error(problem)
    return Path(path)
