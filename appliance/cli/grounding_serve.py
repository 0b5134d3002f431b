"""The UMLS MCP server with a grounding model in its process, so ``ground_text`` runs the whole
loop (extraction, exact fast path, evaluation) for any MCP client.

Run: ``python -m appliance.cli.grounding_serve [--model PROFILE] [--db PATH] [--http HOST:PORT]``

Why a launcher: ``mcp_servers`` sits a floor below ``appliance`` and cannot import the model
runtime, so the server module only offers a hook (``umls.configure_grounder``); this launcher
loads the model and hands the server a grounder (``appliance.grounding.grounder``). The agent's
own UMLS server (``python -m mcp_servers.umls``, started by the MCP client) stays model-free and
its ``ground_text`` runs the deterministic part on entities the caller passes: a second copy of
the model is loaded only by an operator who asks for one.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from appliance.errors import ApplianceError
from appliance.grounding.grounder import make_grounder
from mcp_servers.umls import server as umls


def main(argv: list[str] | None = None) -> int:
    from appliance.cli.support import settings_from
    from appliance.runtime import load_model
    from common.locations import umls_db_path

    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--model")
    pre.add_argument("--db", type=Path)
    known, rest = pre.parse_known_args(argv)
    settings = settings_from(known)
    db = known.db or umls_db_path()
    try:
        model = load_model(settings)
    except ApplianceError as exc:
        print(f"appliance.cli.grounding_serve: {exc}", file=sys.stderr)
        return 2
    umls.configure_grounder(make_grounder(model, db))
    try:
        return umls.main([*rest, "--db", str(db)])
    finally:
        # Free llama.cpp while its library is still loaded: left to interpreter shutdown, the
        # model's finaliser runs after llama_cpp's globals are gone and prints a traceback.
        umls.configure_grounder(None)
        del model
        gc.collect()


if __name__ == "__main__":
    raise SystemExit(main())
