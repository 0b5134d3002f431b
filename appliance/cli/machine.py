"""The machine's own commands: ``appliance init`` (the data home), ``serve`` (the clinic host),
``bench`` (figures and ratios), ``smoke`` (the scenarios on the real model) and ``selftest``
(the safety, bad-input, injection, audit and durability checks).

Invariant: each command's work lives in the package named for it (``setup``, ``host``,
``bench``, ``selftest``); this module reads the arguments and calls it.
"""

from __future__ import annotations

import json
from pathlib import Path

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.cli.support import settings_from
from appliance.errors import ApplianceError


def cmd_init(args) -> int:
    from appliance.setup.home import init_home

    if not args.json:
        init_home(with_model=not args.no_model)
        return 0
    steps: list[str] = []
    home = init_home(progress=steps.append, with_model=not args.no_model)
    print(json.dumps({"data_home": str(home), "steps": steps,
                      "warnings": [s.split("WARNING: ", 1)[1] for s in steps if "WARNING: " in s]}, indent=2))
    return 0


def cmd_smoke(args) -> int:
    from appliance.selftest.smoke import run_smoke

    return run_smoke(settings_from(args), as_json=args.json)


def cmd_selftest(args) -> int:
    from appliance.selftest.suite import main as selftest

    return selftest(as_json=args.json, bad_inputs=args.bad_inputs, crash_writes=args.crash_writes,
                    fault_rounds=args.fault_rounds)


def cmd_bench(args) -> int:
    if args.what == "clinic":
        from appliance.bench.clinic import run_clinic_bench

        try:
            terminals = [int(n) for n in args.terminals.split(",")]
        except ValueError:
            raise ApplianceError(f"--terminals takes counts separated by commas (e.g. 1,2,4), not {args.terminals!r}") from None
        return run_clinic_bench(settings_from(args), terminals, args.turns, args.json)
    if args.what == "contention":
        from appliance.bench.contention import run_contention_bench

        return run_contention_bench(settings_from(args), args.turns, args.with_host, args.json)
    if args.what == "tools":
        from appliance.bench.tools import run_tool_bench

        return run_tool_bench(n=args.calls, concepts=args.concepts, as_json=args.json, trials=args.trials)
    from appliance.bench.decoding import run_bench

    return run_bench(settings_from(args), as_json=args.json, rounds=args.rounds, repeats=args.repeats,
                     criteria=args.criteria)


def cmd_serve(args) -> int:
    from appliance.host.serve import serve

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ApplianceError("--tls-cert and --tls-key go together")
    return serve(args.bind, args.port, (Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert else None,
                 slots=args.slots, model=not args.no_model)



def register(tree: Tree) -> None:
    srv = tree.command("serve", "the clinic host: the model, record, UMLS and knowledge servers over HTTP", cmd_serve)
    srv.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                     help="the address to listen on (default 127.0.0.1; a LAN address needs terminal tokens)")
    srv.add_argument("--port", type=int, default=8765, help="the first of four ports (default 8765; the model "
                                                            "server on the fourth)")
    srv.add_argument("--slots", type=int, default=4, help="model requests decoded side by side (default 4)")
    srv.add_argument("--no-model", action="store_true", help="serve the record, UMLS and knowledge only (terminals "
                                                             "then run the model themselves: APPLIANCE_MODEL_SERVER= empty)")
    srv.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    srv.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")

    init = tree.command("init", "create or update the data home (idempotent)", cmd_init)
    init.add_argument("--no-model", action="store_true", help="skip assembling the default model")
    options.json_output(init, "print the data home and each step as one JSON object")

    smoke = tree.command("smoke", "run the integration scenarios (docs/design.md §15) on the real model", cmd_smoke)
    options.model(smoke)
    options.json_output(smoke)

    bench = tree.command("bench", "figures and ratios (prints, asserts nothing)", cmd_bench)
    bench.add_argument("what", nargs="?", choices=("decoding", "tools", "clinic", "contention"), default="decoding",
                       help="decoding: model calls and turns (default); tools: MCP tool latency over stdio; "
                            "clinic: turn latency with terminals sharing one clinic host; contention: the same "
                            "turns idle and beside busy processes the bench starts (1 and cores-1 CPU-bound, "
                            "one second model process)")
    options.model(bench)
    bench.add_argument("--calls", type=int, default=50, help="tools: calls per tool")
    bench.add_argument("--concepts", type=int, default=100_000, help="tools: size of the synthetic UMLS database")
    bench.add_argument("--trials", type=int, default=50_000,
                       help="tools: size of the synthetic trial cache (0 skips the trial-search section)")
    options.json_output(bench)
    bench.add_argument("--terminals", default="1,2,4", help="clinic: concurrent terminals, e.g. 1,2,4")
    bench.add_argument("--turns", type=int, default=3, help="clinic: turns per terminal; contention: turns per "
                                                            "condition (the three paths in turn)")
    bench.add_argument("--with-host", action="store_true",
                       help="contention: the same conditions through a clinic host (appliance serve on loopback) too")
    bench.add_argument("--rounds", type=int, default=3, help="turns per path")
    bench.add_argument("--repeats", type=int, default=3, help="repeats per decoder comparison")
    bench.add_argument("--criteria", type=int, default=16,
                       help="TrialGPT criterion calls timed three ways for criteria_throughput_vs_naive (0: skip)")

    from appliance.selftest.suite import (  # a small module: no heavy imports
        DEFAULT_BAD_INPUTS,
        DEFAULT_CRASH_WRITES,
        DEFAULT_FAULT_ROUNDS,
    )

    selftest = tree.command("selftest", "safety, bad-input, injection, audit and durability checks on a fresh "
                                        "temporary data home (exit 1 when one fails)", cmd_selftest)
    options.json_output(selftest)
    selftest.add_argument("--bad-inputs", type=int, default=DEFAULT_BAD_INPUTS, metavar="N",
                          help=f"generated calls to the tools (default {DEFAULT_BAD_INPUTS})")
    selftest.add_argument("--crash-writes", type=int, default=DEFAULT_CRASH_WRITES, metavar="N",
                          help=f"writes in the SIGKILL durability check (default {DEFAULT_CRASH_WRITES}; 0 skips it)")
    selftest.add_argument("--fault-rounds", type=int, default=DEFAULT_FAULT_ROUNDS, metavar="N",
                          help=f"rounds of the three server faults (default {DEFAULT_FAULT_ROUNDS}; 0 skips them)")
