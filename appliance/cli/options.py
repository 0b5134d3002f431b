"""The command tree's shared parts: ``Tree``, which every command module adds its commands to
(one ``register(tree)`` each), and the options several commands take, each declared once here.

Invariants:
- A command is a parser with ``func`` set: ``Tree.command`` makes one, ``Tree.group`` a noun
  whose sub-commands are required (``appliance ehr`` alone is a usage error, exit 2).
- A group is made once and shared: ``appliance eval`` is filled by the modules of the jobs it
  measures (extraction, grounding, TrialGPT), ``appliance ehr`` by the record's importer and its
  custody commands.
- The wording of a shared option's help is the same wherever it appears, unless a command says
  what the option means for it (``help=``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


class Tree:
    """The ``appliance`` command tree, or one noun's part of it."""

    def __init__(self, sub: argparse._SubParsersAction):
        self._sub = sub
        self._groups: dict[str, Tree] = {}

    def command(self, name: str, help: str, func: Callable[[argparse.Namespace], int],
                **defaults) -> argparse.ArgumentParser:
        """A command: ``appliance [group] NAME``, run by ``func(args)``."""
        parser = self._sub.add_parser(name, help=help)
        parser.set_defaults(func=func, **defaults)
        return parser

    def group(self, name: str, help: str, dest: str = "action") -> Tree:
        """A noun with sub-commands (made on first use, shared after)."""
        if name not in self._groups:
            parser = self._sub.add_parser(name, help=help)
            self._groups[name] = Tree(parser.add_subparsers(dest=dest, required=True))
        return self._groups[name]

    def parser(self, name: str) -> argparse.ArgumentParser:
        """A command already in the tree (to add a job's own options to it)."""
        return self._sub.choices[name]


MODEL_HELP = "model profile (default: gemma3-270m)"
# ``appliance eval``: filled by the modules of the jobs it measures.
EVAL_HELP = "measurements on the shipped public data (figures; asserts nothing)"


def model(p: argparse.ArgumentParser, help: str = MODEL_HELP) -> None:
    p.add_argument("--model", help=help)


def json_output(p: argparse.ArgumentParser, help: str = "print one JSON object on stdout") -> None:
    p.add_argument("--json", action="store_true", help=help)


def script(p: argparse.ArgumentParser, help: str = "JSON file of scripted model outputs (instead of the model)") -> None:
    p.add_argument("--script", help=help)


def patient(p: argparse.ArgumentParser, help: str, **kwargs) -> None:
    p.add_argument("--patient", help=help, **kwargs)


def conversation(p: argparse.ArgumentParser) -> None:
    """Which saved conversation to reopen (the line session and the terminal)."""
    p.add_argument("--resume", action="store_true", help="reopen the most recent session (here or the other terminal's)")
    p.add_argument("--session", help="reopen this session ID")


def limit(p: argparse.ArgumentParser, help: str = "only the first N rows") -> None:
    p.add_argument("--limit", type=int, metavar="N", help=help)


def run_dir(p: argparse.ArgumentParser, *, resume: bool = True, recompute: bool = False,
            out_help: str = "folder for the run directory (default: runs/ in the data home)") -> None:
    """Where a long run keeps its files, and how to finish or re-read one."""
    p.add_argument("--out", metavar="DIR", help=out_help)
    if resume:
        p.add_argument("--resume", metavar="RUN_DIR", help="finish a stopped run (what it finished is kept)")
    if recompute:
        p.add_argument("--recompute", metavar="RUN_DIR", help="print the metrics of an earlier run from its files "
                                                              "(no model)")


def data_file(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--data", help=help)


__all__ = ["EVAL_HELP", "Tree", "conversation", "data_file", "json_output", "limit", "model", "patient", "run_dir", "script"]
