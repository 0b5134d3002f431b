"""Talking to the agent: ``appliance ask`` (one question), ``session`` (the line session) and
``tui`` (the clinic terminal), and what runs with no command at all.

Invariants:
- With no subcommand it runs the main job: the clinic terminal (TUI) when stdin and stdout
  are terminals and a TUI runner was given, otherwise the line-based interactive session.
- This package never imports the TUI (it sits a floor below it): the console script is
  ``tui.launcher:main``, which passes ``main`` the runner that starts the clinic terminal.
- ``ask`` prints every safety finding before its answer, whatever the model wrote; its exit code
  tells a script a write that carried findings (3) and one the safety check refused (4).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.cli.support import load_script, settings_from
from appliance.config import Settings
from appliance.errors import ApplianceError, ScriptError
from appliance.wording import safety_lines


def agent_script(path: str) -> dict:
    """An ``ask``/``session``/``tui`` script: the agent's nodes, plus tool outcomes and drug names."""
    from appliance.agent.state import Node
    from appliance.llm.vision import NODE as IMAGE_NODE

    return load_script(path, [*Node, IMAGE_NODE, "tools", "drug_names"])


# Starts the clinic terminal: (settings, script, resume) -> exit code. Given by tui.launcher.
TuiRunner = Callable[[Settings, dict | None, str | None], int]


def cmd_ask(args) -> int:
    from appliance.accounts.sign_in import headless_clinician
    from appliance.runtime import build_agent
    from appliance.safety.headless import HeadlessApprover
    from appliance.tools.base import deny_all, signed_by

    settings = settings_from(args)
    script = agent_script(args.script) if args.script else None
    if args.override_safety is not None and not args.approve_writes:
        raise ScriptError("--override-safety only applies with --approve-writes")
    if args.clinician is not None and not args.approve_writes:
        raise ScriptError("--clinician only applies with --approve-writes")
    clinician = None
    approver = deny_all
    if args.approve_writes:  # signed in before anything is built: a refusal writes nothing
        clinician = headless_clinician(settings, args.clinician).name
        approver = signed_by(HeadlessApprover(args.override_safety), clinician)
    agent, tools = build_agent(settings, script, approver, clinician=clinician)
    with tools:
        result = agent.run_turn(args.question, patient_id=args.patient)
    if args.json:
        from appliance.runtime import acceptance_status

        print(json.dumps({**result.to_json(), "acceptance": acceptance_status(settings).line}, indent=2, default=str))
    else:
        if result.model_notice:
            print(f"[{result.model_notice}]")
        for entry in result.safety:  # every finding before the answer, whatever the model wrote
            print("\n".join(safety_lines(entry)) + "\n")
        print(result.response)
        if result.disclaimer:
            print(f"\n{result.disclaimer}")
    return safety_exit_code(result.safety, writes_enabled=args.approve_writes)


# ``ask``'s exit codes for a turn with prescriptions (README "Using it"): a script can tell a
# write that carried findings, and a prescription the safety check refused, from a clean one.
EXIT_WRITTEN_WITH_FINDINGS = 3
EXIT_REFUSED_BY_SAFETY = 4


def safety_exit_code(entries: list[dict], *, writes_enabled: bool) -> int:
    """With writes enabled: 4 when the safety check refused a prescription, 3 when one was
    written with findings above info level, else 0 (without, nothing is written: 0)."""
    if not writes_enabled:
        return 0
    if any(e["outcome"] == "rejected_by_user" and (e["blocking"] or e["not_checked"]) for e in entries):
        return EXIT_REFUSED_BY_SAFETY
    if any(e["written"] and any(f["severity"] != "info" for f in e["findings"]) for e in entries):
        return EXIT_WRITTEN_WITH_FINDINGS
    return 0


def cmd_session(args) -> int:
    from appliance.line_session.loop import interactive_session

    script = agent_script(args.script) if getattr(args, "script", None) else None
    resume = getattr(args, "session", None) or ("latest" if getattr(args, "resume", False) else None)
    return interactive_session(settings_from(args), patient_id=getattr(args, "patient", None), script=script,
                               resume=resume)


def cmd_tui(args) -> int:
    if args.run_tui is None:
        raise ApplianceError("the clinic terminal starts from the appliance command "
                             "(or python -m tui.launcher), not from appliance.cli")
    settings = settings_from(args)
    script = agent_script(args.script) if getattr(args, "script", None) else None
    resume = getattr(args, "session", None) or ("latest" if getattr(args, "resume", False) else None)
    return args.run_tui(settings, script, resume)


def cmd_default(args) -> int:
    """No subcommand: the TUI on a terminal, the line-based session otherwise (pipes, scripts)."""
    if args.run_tui is not None and sys.stdin.isatty() and sys.stdout.isatty():
        return cmd_tui(args)
    return cmd_session(args)




def register(tree: Tree) -> None:
    ask = tree.command("ask", "answer one question and exit", cmd_ask)
    ask.add_argument("question")
    options.patient(ask, "the patient ID the question is about")
    options.model(ask)
    options.json_output(ask, "print one JSON object with the path, tools and timings")
    options.script(ask, "JSON file of scripted node outputs (and optional tool outcomes)")
    ask.add_argument("--approve-writes", action="store_true",
                     help="approve EHR writes without asking (a prescription with a high-severity safety "
                          "finding is still refused)")
    ask.add_argument("--clinician", metavar="NAME",
                     help="with --approve-writes: the local account writing (default $APPLIANCE_USER); its "
                          "password is read from the terminal or one line of standard input")
    ask.add_argument("--override-safety", metavar="REASON",
                     help="with --approve-writes: prescribe despite high-severity safety findings (audited)")

    session = tree.command("session", "interactive headless session", cmd_session)
    options.model(session)
    options.patient(session, "start with this patient open")
    options.script(session, "JSON file of scripted node outputs (as for ask --script)")
    options.conversation(session)

    tui = tree.command("tui", "the clinic terminal (full-screen)", cmd_tui)
    options.model(tui)
    options.conversation(tui)
    options.script(tui, "JSON file of scripted node outputs (as for ask --script)")
