"""The ``appliance`` command line: the headless edge of the agent.

Invariants:
- Expected failures (``ApplianceError``) print one clear line to stderr and exit 2; they
  never print a traceback. Exit 1 means a check failed (a smoke scenario, the audit chain).
- With no subcommand it runs the main job: the clinic terminal (TUI) when stdin and stdout
  are terminals and a TUI runner was given, otherwise the line-based interactive session.
- This module never imports the TUI (it sits a floor below it): the console script is
  ``tui.launcher:main``, which passes ``main`` the runner that starts the clinic terminal.
- Nothing here logs patient data: answers go to stdout only.
- Every command runs under ``common.locations.PRIVATE_UMASK``: the files it (and the servers
  it starts) creates are 0600 and its folders 0700.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Callable

from appliance import extraction_cli, grounding_cli, model_cli, prescreen_cli, records_cli, terminal_cli, user_cli
from appliance.cli_support import load_script, settings_from
from appliance.config import Settings
from appliance.errors import ApplianceError, ScriptError
from appliance.wording import safety_lines
from common.locations import PRIVATE_UMASK


def agent_script(path: str) -> dict:
    """An ``ask``/``session``/``tui`` script: the agent's nodes, plus tool outcomes and drug names."""
    from appliance.agent.state import Node
    from appliance.llm.vision import NODE as IMAGE_NODE

    return load_script(path, [*Node, IMAGE_NODE, "tools", "drug_names"])


# Starts the clinic terminal: (settings, script, resume) -> exit code. Given by tui.launcher.
TuiRunner = Callable[[Settings, dict | None, str | None], int]


def cmd_ask(args) -> int:
    from appliance.runtime import build_agent
    from appliance.safety.headless import HeadlessApprover
    from appliance.accounts.sign_in import headless_clinician
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


def cmd_init(args) -> int:
    from appliance.setup.home import init_home

    init_home(with_model=not args.no_model)
    return 0


def cmd_smoke(args) -> int:
    from appliance.selftest.smoke import run_smoke

    return run_smoke(settings_from(args), as_json=args.json)


def cmd_selftest(args) -> int:
    from appliance.selftest.suite import main as selftest

    return selftest(as_json=args.json, bad_inputs=args.bad_inputs, crash_writes=args.crash_writes,
                    fault_rounds=args.fault_rounds)


def cmd_session(args) -> int:
    from appliance.line_session.loop import interactive_session

    script = agent_script(args.script) if getattr(args, "script", None) else None
    resume = getattr(args, "session", None) or ("latest" if getattr(args, "resume", False) else None)
    return interactive_session(settings_from(args), patient_id=getattr(args, "patient", None), script=script,
                               resume=resume)


def cmd_bench(args) -> int:
    if args.what == "clinic":
        from appliance.bench.clinic import run_clinic_bench

        try:
            terminals = [int(n) for n in args.terminals.split(",")]
        except ValueError:
            raise ApplianceError(f"--terminals takes counts separated by commas (e.g. 1,2,4), not {args.terminals!r}") from None
        return run_clinic_bench(settings_from(args), terminals, args.turns, args.json)
    if args.what == "tools":
        from appliance.bench.tools import run_tool_bench

        return run_tool_bench(n=args.calls, concepts=args.concepts, as_json=args.json, trials=args.trials)
    from appliance.bench.decoding import run_bench

    return run_bench(settings_from(args), as_json=args.json, rounds=args.rounds, repeats=args.repeats,
                     criteria=args.criteria)


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


def cmd_serve(args) -> int:
    from appliance.host.serve import serve

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ApplianceError("--tls-cert and --tls-key go together")
    return serve(args.bind, args.port, (Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert else None,
                 slots=args.slots, model=not args.no_model)


def cmd_import(args) -> int:
    from appliance.setup.importers import run_import

    print(run_import(args.area, args.kind, Path(args.path), replace=getattr(args, "replace", False)))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="appliance", description="Offline clinical assistant (headless).")
    p.add_argument("--host", metavar="URL", help="use the model, record, UMLS and knowledge servers of a clinic "
                                                 "host (`appliance serve` there), e.g. https://clinic-host:8765")
    sub = p.add_subparsers(dest="command")

    srv = sub.add_parser("serve", help="the clinic host: the model, record, UMLS and knowledge servers over HTTP")
    srv.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                     help="the address to listen on (default 127.0.0.1; a LAN address needs terminal tokens)")
    srv.add_argument("--port", type=int, default=8765, help="the first of four ports (default 8765; the model "
                                                            "server on the fourth)")
    srv.add_argument("--slots", type=int, default=4, help="model requests decoded side by side (default 4)")
    srv.add_argument("--no-model", action="store_true", help="serve the record, UMLS and knowledge only (terminals "
                                                             "then run the model themselves: APPLIANCE_MODEL_SERVER= empty)")
    srv.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    srv.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    srv.set_defaults(func=cmd_serve)

    ask = sub.add_parser("ask", help="answer one question and exit")
    ask.add_argument("question")
    ask.add_argument("--patient", help="the patient ID the question is about")
    ask.add_argument("--model", help="model profile (default: gemma3-270m)")
    ask.add_argument("--json", action="store_true", help="print one JSON object with the path, tools and timings")
    ask.add_argument("--script", help="JSON file of scripted node outputs (and optional tool outcomes)")
    ask.add_argument("--approve-writes", action="store_true",
                     help="approve EHR writes without asking (a prescription with a high-severity safety "
                          "finding is still refused)")
    ask.add_argument("--clinician", metavar="NAME",
                     help="with --approve-writes: the local account writing (default $APPLIANCE_USER); its "
                          "password is read from the terminal or one line of standard input")
    ask.add_argument("--override-safety", metavar="REASON",
                     help="with --approve-writes: prescribe despite high-severity safety findings (audited)")
    ask.set_defaults(func=cmd_ask)

    init = sub.add_parser("init", help="create or update the data home (idempotent)")
    init.add_argument("--no-model", action="store_true", help="skip assembling the default model")
    init.set_defaults(func=cmd_init)

    smoke = sub.add_parser("smoke", help="run the integration scenarios (docs/design.md §15) on the real model")
    smoke.add_argument("--model", help="model profile")
    smoke.add_argument("--json", action="store_true")
    smoke.set_defaults(func=cmd_smoke)

    bench = sub.add_parser("bench", help="figures and ratios (prints, asserts nothing)")
    bench.add_argument("what", nargs="?", choices=("decoding", "tools", "clinic"), default="decoding",
                       help="decoding: model calls and turns (default); tools: MCP tool latency over stdio; "
                            "clinic: turn latency with terminals sharing one clinic host")
    bench.add_argument("--model", help="model profile")
    bench.add_argument("--calls", type=int, default=50, help="tools: calls per tool")
    bench.add_argument("--concepts", type=int, default=100_000, help="tools: size of the synthetic UMLS database")
    bench.add_argument("--trials", type=int, default=50_000,
                       help="tools: size of the synthetic trial cache (0 skips the trial-search section)")
    bench.add_argument("--json", action="store_true")
    bench.add_argument("--terminals", default="1,2,4", help="clinic: concurrent terminals, e.g. 1,2,4")
    bench.add_argument("--turns", type=int, default=3, help="clinic: turns per terminal (the three paths in turn)")
    bench.add_argument("--rounds", type=int, default=3, help="turns per path")
    bench.add_argument("--repeats", type=int, default=3, help="repeats per decoder comparison")
    bench.add_argument("--criteria", type=int, default=16,
                       help="TrialGPT criterion calls timed three ways for criteria_throughput_vs_naive (0: skip)")
    bench.set_defaults(func=cmd_bench)

    session = sub.add_parser("session", help="interactive headless session")
    session.add_argument("--model", help="model profile")
    session.add_argument("--patient", help="start with this patient open")
    session.add_argument("--script", help="JSON file of scripted node outputs (as for ask --script)")
    session.add_argument("--resume", action="store_true", help="reopen the most recent session (here or the terminal's)")
    session.add_argument("--session", help="reopen this session ID")
    session.set_defaults(func=cmd_session)

    tui = sub.add_parser("tui", help="the clinic terminal (full-screen)")
    tui.add_argument("--model", help="model profile")
    tui.add_argument("--resume", action="store_true", help="reopen the most recent session")
    tui.add_argument("--session", help="reopen this session ID")
    tui.add_argument("--script", help="JSON file of scripted node outputs (as for ask --script)")
    tui.set_defaults(func=cmd_tui)

    user_cli.register(sub)
    terminal_cli.register(sub)
    model_cli.register(sub)
    prescreen_cli.register(sub)

    evals = sub.add_parser("eval", help="measurements on the shipped public data (figures; asserts nothing)")
    eval_sub = evals.add_subparsers(dest="what", required=True)
    extraction_cli.register(sub, eval_sub)
    grounding_cli.register(sub, eval_sub)
    prescreen_cli.register_eval(eval_sub)

    for area, kinds in (("ehr", ("fhir",)), ("umls", ("rrf",)), ("knowledge", ("openfda", "pubmed", "ctgov"))):
        ap = sub.add_parser(area, help=f"{area} data")
        asub = ap.add_subparsers(dest="action", required=True)
        imp = asub.add_parser("import", help=f"import {'/'.join(kinds)} data")
        if len(kinds) > 1:
            imp.add_argument("kind", choices=kinds)
        else:
            imp.set_defaults(kind=kinds[0])
        imp.add_argument("path")
        imp.set_defaults(func=cmd_import, area=area)
        if area == "ehr":
            records_cli.register_ehr(asub)
        else:  # these importers replace or prune a store's content
            imp.add_argument("--replace", action="store_true",
                             help="accept a result that shrinks the store by more than the safety threshold")
    records_cli.register_audit(sub)

    from appliance.selftest.suite import (  # a small module: no heavy imports
        DEFAULT_BAD_INPUTS, DEFAULT_CRASH_WRITES, DEFAULT_FAULT_ROUNDS,
    )

    selftest = sub.add_parser("selftest", help="safety, bad-input, injection, audit and durability checks on a "
                                               "fresh temporary data home (exit 1 when one fails)")
    selftest.add_argument("--json", action="store_true")
    selftest.add_argument("--bad-inputs", type=int, default=DEFAULT_BAD_INPUTS, metavar="N",
                          help=f"generated calls to the tools (default {DEFAULT_BAD_INPUTS})")
    selftest.add_argument("--crash-writes", type=int, default=DEFAULT_CRASH_WRITES, metavar="N",
                          help=f"writes in the SIGKILL durability check (default {DEFAULT_CRASH_WRITES}; 0 skips it)")
    selftest.add_argument("--fault-rounds", type=int, default=DEFAULT_FAULT_ROUNDS, metavar="N",
                          help=f"rounds of the three server faults (default {DEFAULT_FAULT_ROUNDS}; 0 skips them)")
    selftest.set_defaults(func=cmd_selftest)
    return p


def main(argv: list[str] | None = None, run_tui: TuiRunner | None = None) -> int:
    """Run one command line; ``run_tui`` starts the clinic terminal (None: no TUI available)."""
    args = parser().parse_args(argv)
    args.run_tui = run_tui
    func = getattr(args, "func", None) or cmd_default
    umask = os.umask(PRIVATE_UMASK)  # what it writes may hold patient data (common.locations)
    try:
        if args.host:  # every MCP client this process makes reaches the clinic host's servers
            from appliance.host.serve import host_urls

            urls = host_urls(args.host)
            os.environ.setdefault("APPLIANCE_MODEL_SERVER", urls.pop("APPLIANCE_MODEL_SERVER"))  # empty: in process
            os.environ.update(urls)
        return func(args)
    except ApplianceError as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a command that stopped reading (e.g. head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        os.umask(umask)


if __name__ == "__main__":
    sys.exit(main())
