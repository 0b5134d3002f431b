"""A saved conversation as a Markdown document a clinician can keep, print or attach: every
exchange with its status and the one-line trace summary of each step.

Invariants: built only from the session store (what was saved is what is exported); times
in local time; the file is created private to the user (0600), since it holds patient data.
"""

from __future__ import annotations

import os
from pathlib import Path

from appliance.accounts.sessions import Session, StoredMessage
from appliance.agent.state import TraceEvent
from appliance.wording import local_time
from common.locations import PRIVATE_FILE_MODE, private_dir
from tui.widgets.trace_panel import approval_line, trace_line


def session_markdown(session: Session, messages: list[StoredMessage], model_notice: str | None = None) -> str:
    lines = [f"# {session.title}", ""]
    lines.append(f"- Started: {local_time(session.created_at)}; last answer: {local_time(session.updated_at)}")
    if session.patient_ids:
        label = "Patient" if len(session.patient_ids) == 1 else "Patients"
        lines.append(f"- {label}: {', '.join(session.patient_ids)}")
    if session.model:
        lines.append(f"- Model: {session.model}")
    if model_notice:
        lines.append(f"- **{model_notice}**")
    turn = 0
    for message in messages:
        if message.role == "user":
            turn += 1
            lines += ["", f"## {turn}. {message.text}", ""]
            continue
        status = "" if message.status == "complete" else f" ({message.status})"
        label = "Question for the clinician" if message.kind == "clarification" else "Answer"
        lines += [f"**{label}{status}:**", "", message.text, ""]
        steps = []
        for item in message.trace or []:
            try:
                event = TraceEvent(**item)
            except TypeError:  # a trace stored by another version: skip the step
                continue
            waited = approval_line(event)
            if waited is not None:
                steps.append(waited.plain)
            steps.append(trace_line(event).plain)
        if steps:
            lines += ["<details><summary>Trace</summary>", ""] + [f"- {s}" for s in steps] + ["", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_export(folder: Path, session: Session, text: str) -> Path:
    """Write ``text`` to a new private file in ``folder``; returns its path."""
    private_dir(folder)
    stamp = local_time(session.updated_at).replace(" ", "_").replace(":", "")
    path = folder / f"session-{stamp}-{session.id[:8]}.md"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path
