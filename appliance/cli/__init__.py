"""The ``appliance`` command line: one command tree, built here from one module per job.

Each module adds its commands with ``register(tree)`` (``options.Tree``); options several commands
take are declared once in ``options``. The modules: ``conversation`` (ask, session, tui),
``records`` (ehr, umls and knowledge imports; ehr backup and restore; audit), ``user`` and
``terminal`` (who may sign in and which terminals may connect), ``model`` (install, list,
accept), ``extract``, ``ground`` and ``prescreen`` (the three jobs, each with its ``eval``),
``machine`` (init, serve, bench, smoke, selftest); ``support`` holds what command bodies share
and ``grounding_serve`` launches the UMLS server with a model.

Invariants:
- Expected failures (``ApplianceError``) print one clear line to stderr and exit 2; they
  never print a traceback. Exit 1 means a check failed (a smoke scenario, the audit chain).
- With no subcommand it runs the main job (``conversation.cmd_default``).
- This package never imports the TUI (it sits a floor below it): the console script is
  ``tui.launcher:main``, which passes ``main`` the runner that starts the clinic terminal.
- Nothing here logs patient data: answers go to stdout only.
- Every command runs under ``common.locations.PRIVATE_UMASK``: the files it (and the servers
  it starts) creates are 0600 and its folders 0700.
"""

from __future__ import annotations

import argparse
import os
import sys

from appliance.cli import (
    conversation,
    extract,
    ground,
    machine,
    model,
    prescreen,
    records,
    terminal,
    user,
)
from appliance.cli.conversation import TuiRunner, cmd_default
from appliance.cli.options import Tree
from appliance.errors import ApplianceError
from common import environment
from common.locations import PRIVATE_UMASK

# In the order ``appliance --help`` lists their commands.
MODULES = (machine, conversation, user, terminal, model, prescreen, extract, ground, records)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="appliance", description="Offline clinical assistant (headless).")
    p.add_argument("--host", metavar="URL", help="use the model, record, UMLS and knowledge servers of a clinic "
                                                 "host (`appliance serve` there), e.g. https://clinic-host:8765")
    tree = Tree(p.add_subparsers(dest="command"))
    for module in MODULES:
        module.register(tree)
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

            environment.point_at_host(host_urls(args.host))
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

