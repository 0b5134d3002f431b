"""The interactive headless session: a line-based clinic terminal for scripts and SSH.

Invariant: writes to the EHR run only after the clinician types "y" at the approval prompt
showing the exact arguments; anything else (including end of input) rejects them.
"""

from __future__ import annotations

import json
import sys
import threading

from appliance.config import Settings
from appliance.errors import ApplianceError
from appliance.tools.base import Approval

HELP = """Type a question and press Enter.
  /patient ID   open a patient (their ID is passed with every question)
  /patient      close the patient
  /trace        show the last turn's reasoning trace
  /quit         leave (Ctrl-D works too)"""


def ask_approval(tool: str, args: dict) -> Approval:
    print(f"\nThe assistant wants to write to the record ({tool}):")
    print(json.dumps(args, indent=2))
    try:
        answer = input("Approve this write? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer in ("y", "yes"):
        return Approval(True, args)
    return Approval(False, args, "rejected at the terminal")


def interactive_session(settings: Settings, patient_id: str | None = None, script: dict | None = None) -> int:
    from appliance.runtime import build_agent

    print("Offline clinical assistant. Loading the model...", flush=True)
    agent, tools = build_agent(settings, script, approver=ask_approval)
    print(f"Ready ({settings.model}). {HELP}\n", flush=True)
    if agent.model_notice:
        print(f"*** {agent.model_notice.upper()} ***\n", flush=True)
    history: list[tuple[str, str]] = []
    last = None
    with tools:
        while True:
            try:
                line = input(f"[{patient_id or 'no patient'}] > ").strip()
            except EOFError:
                print()
                return 0
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line.startswith("/patient"):
                patient_id = line.split(maxsplit=1)[1] if " " in line else None
                continue
            if line == "/trace":
                for event in last.trace if last else []:
                    print(json.dumps(event.to_dict(), default=str))
                continue
            try:
                last = agent.run_turn(
                    line, history=history, patient_id=patient_id,
                    on_token=lambda piece: print(piece, end="", flush=True), cancel=threading.Event(),
                )
            except ApplianceError as exc:
                print(f"\n[problem] {exc}", file=sys.stderr)
                continue
            print()
            if last.disclaimer:
                print(last.disclaimer)
            if last.model_notice:
                print(f"[{last.model_notice}]")
            print()
            history += [("user", line), ("assistant", last.response)]
