"""Drive the line session in process: a scripted model and scripted tools in place of the real
ones, standard input from a list of lines, and Ctrl+C as a real SIGINT at a chosen moment."""

from __future__ import annotations

import os
import signal

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox

DRUGS = ["metformin", "warfarin", "aspirin", "penicillin", "lisinopril", "ibuprofen"]


class Box(ScriptedToolBox):
    """Scripted tools the session can enter; ``interrupt_after`` sends Ctrl+C once that tool ran."""

    interrupt_after: str | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def call(self, tool, args, deadline, **kw):
        outcome = super().call(tool, args, deadline, **kw)
        if tool == self.interrupt_after:
            self.interrupt_after = None
            os.kill(os.getpid(), signal.SIGINT)  # the clinician's Ctrl+C, just after the write
        return outcome


def run_session(monkeypatch, tmp_path, lines: list[str], script: dict | None = None,
                tools: dict | None = None, *, interrupt_after: str | None = None,
                box=None) -> tuple[str, Box, ScriptedModel]:
    """Run ``appliance session`` on ``lines``; (standard output, the tool box, the model).
    ``box``: a tool box of the caller's (e.g. the real servers in process) instead of scripted
    ``tools``."""
    from appliance import runtime
    from appliance.line_session import loop

    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path / "home"))
    model = ScriptedModel(script or {})
    if box is None:
        box = Box(tools or {}, fallback=None, drug_names=DRUGS)
        box.interrupt_after = interrupt_after
    settings = Settings()
    monkeypatch.setattr(runtime, "build_agent",
                        lambda settings, script=None, approver=None, clinician=None:
                        (Agent(model, box, settings, approver), box))
    feed = iter(lines)

    def fake_input(prompt=""):
        print(prompt, end="")
        try:
            line = next(feed)
        except StopIteration:
            raise EOFError from None
        print(line)
        return line

    monkeypatch.setattr("builtins.input", fake_input)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = loop.interactive_session(settings)
    assert code == 0, out.getvalue()
    return out.getvalue(), box, model
