"""Bad input for every MCP tool, without hypothesis (a test dependency): a seeded generator of
argument objects from each tool's published input schema, and a run that calls the three servers
in process with them and counts what must never happen (``appliance selftest``; the property
tests in tests/properties do the same with hypothesis, by the thousand).

What is counted as wrong, per call:
- ``uncaught``: anything but a result or a ``ToolError`` whose text starts with an error type of
  ``contracts.ERROR_TYPES``: an exception out of the client, or a tool's own exception that the
  server masked into a generic message;
- ``leaks``: an error text that shows a traceback, a ``.py`` name or a path beyond what the
  caller sent;
- ``refused_but_wrote``: a call that failed (or any call to a read-only tool) after which the
  record holds more prescriptions, allergies, notes, audit rows or idempotency keys.

Invariant: the run uses the servers as configured by the caller (``tools.in_process.servers_on``)
and the row counts of the EHR database it is given; the same seed gives the same calls.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import random
import re
import sqlite3
from collections import Counter
from pathlib import Path

from mcp_servers.contracts import ERROR_TYPES

SERVERS = ("ehr", "umls", "knowledge")
WATCHED = ("medication_requests", "allergy_intolerances", "document_references", "audit_log", "write_keys")
# Strings a careless or hostile caller sends: empty, invisible, control characters, a lone
# surrogate (JSON's "\ud800" escape reaches a server), paths, SQL, format strings, very long.
JUNK_STRINGS = ("", " ", "\x00", "\t\n", "\u202eabc", "\u200b", "\ud800", "../../etc/passwd", "C:\\x\\y.py",
                "'; DROP TABLE patients;--", "%s%s%n", "{{7*7}}", "Robert'); --", "NaN", "null", "-1",
                "abc-123\x00", "\x1b[2J", "a" * 70, "x" * 5000, "é" * 300)
PLAUSIBLE = {
    "patient_id": ("abc-123", "pat-005", "no-such-999"), "name": ("Maria Garcia", "garcia", "Smith, John"),
    "medication_name": ("empagliflozin", "warfarin"), "dosage": ("10 mg", "500 mg", "lots"),
    "frequency": ("once daily", "q6h", "sometimes"), "substance": ("latex", "peanut"), "reaction": ("hives",),
    "note_text": ("Stable, review in 3 months.",), "drug_name": ("warfarin", "Coumadin", "zorbitravine"),
    "query": ("metformin",), "condition": ("diabetes", "asthma"), "term": ("HTN", "Tylenol", "metfromin"),
    "cui": ("C0020538", "C9999999"), "nct_id": ("NCT-DEMO-0001",), "details": ({"decision": "approved"},),
}
_LEAK = re.compile(r"/|\\|\.py\b|Traceback|File \"")


def junk(rng: random.Random, depth: int = 0):
    """A value of any JSON type, often the wrong one."""
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice((True, False, 0, -1, 2**63, 1e308, -0.5, float("nan")))
    if kind in (2, 3, 4):
        return rng.choice(JUNK_STRINGS) if rng.random() < 0.7 else "".join(
            chr(rng.choice((rng.randrange(0x20), rng.randrange(0x20, 0x7f), rng.randrange(0xa0, 0x3000))))
            for _ in range(rng.randrange(1, 40)))
    if kind == 5:
        return [junk(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {rng.choice(("a", "", "patient_id", "\x00", "__class__")): junk(rng, depth + 1) for _ in range(rng.randrange(4))}


def _valid(rng: random.Random, name: str, sub: dict):
    """A value the schema allows, plausible where ``PLAUSIBLE`` knows the field."""
    if name in PLAUSIBLE and rng.random() < 0.6:
        return rng.choice(PLAUSIBLE[name])
    options = sub.get("anyOf")
    if options:
        return _valid(rng, name, rng.choice(options))
    if "enum" in sub:
        return rng.choice(sub["enum"])
    kind = sub.get("type")
    if kind == "null":
        return None
    if kind == "integer":
        return rng.randint(sub.get("minimum", -5), sub.get("maximum", 30))
    if kind == "array":
        items = sub.get("items", {})
        return [_valid(rng, name, items) for _ in range(rng.randint(sub.get("minItems", 0), sub.get("maxItems", 4)))]
    if kind == "object":
        return {"k": junk(rng, 1)}
    low, high = sub.get("minLength", 0), min(sub.get("maxLength", 40), 200)
    return "".join(rng.choice("abcdefghij klmnop-0123.") for _ in range(rng.randint(low, max(low, high))))


def arguments(rng: random.Random, schema: dict) -> dict:
    """One argument object: valid by schema, one field spoiled, a field dropped, an unknown key
    added, or a dict of junk."""
    props = schema.get("properties", {})
    args = {name: _valid(rng, name, sub) for name, sub in props.items()}
    mode = rng.randrange(5)
    if mode == 1 and props:
        args[rng.choice(list(props))] = junk(rng)
    elif mode == 2 and props:
        args.pop(rng.choice(list(props)))
    elif mode == 3:
        args[rng.choice(("extra", "patient_id ", "__proto__", "idempotency_key"))] = junk(rng)
    elif mode == 4:
        args = {rng.choice(("", "x", "name", "\x00")): junk(rng) for _ in range(rng.randrange(4))}
    return args


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [str(value)]


def leaked(message: str, args: dict) -> str | None:
    """What in ``message`` looks like a traceback or a file path, after removing what the caller
    sent (a message may repeat the caller's words, stripped or whole); None when nothing."""
    rest = message
    for text in sorted({v for s in _strings(args) for v in (s, s.strip(), " ".join(s.split())) if v},
                       key=len, reverse=True):
        rest = rest.replace(text, "")
    found = _LEAK.search(rest)
    return None if found is None else rest[max(0, found.start() - 40):found.end() + 40]


class RowCounts:
    """The watched tables' row counts, read through one read-only connection (each read sees
    the last commit: the connection holds no transaction between reads)."""

    SQL = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in WATCHED)

    def __init__(self, ehr_db: Path):
        self._conn = sqlite3.connect(f"file:{ehr_db}?mode=ro", uri=True, isolation_level=None)

    def __call__(self) -> tuple[int, ...]:
        return tuple(self._conn.execute(self.SQL).fetchone())

    def close(self) -> None:
        self._conn.close()


def run_bad_inputs(ehr_db: Path, calls: int, seed: int = 15) -> dict:
    """``calls`` generated calls spread over every tool of every server (already configured);
    the counts of the module docstring, per tool and in total."""
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    loop = asyncio.new_event_loop()
    rng = random.Random(seed)
    rows = RowCounts(ehr_db)
    per_tool, wrong = Counter(), Counter()
    examples: list[str] = []
    quiet = logging.root.manager.disable
    logging.disable(logging.ERROR)  # the servers and the client log every refused call
    clients = {s: Client(importlib.import_module(f"mcp_servers.{s}.server").mcp) for s in SERVERS}
    try:
        for client in clients.values():
            loop.run_until_complete(client.__aenter__())
        tools = [(s, t.name, dict(t.input_schema), bool(t.annotations and t.annotations.read_only_hint))
                 for s, c in clients.items() for t in loop.run_until_complete(c.list_tools())]
        for i in range(calls):
            server, tool, schema, read_only = tools[i % len(tools)]
            args = arguments(rng, schema)
            before = rows()
            failed, problem = False, None
            try:
                loop.run_until_complete(clients[server].call_tool(tool, args))
            except ToolError as exc:
                failed, text = True, str(exc)
                if text.partition(": ")[0] not in ERROR_TYPES:
                    problem = "uncaught"
                elif leaked(text, args) is not None:
                    problem = "leaks"
            except Exception as exc:  # noqa: BLE001 - counted: this is what the run looks for
                failed, problem = True, "uncaught"
                text = type(exc).__name__
            if (failed or read_only) and rows() != before:
                wrong["refused_but_wrote"] += 1
                examples.append(f"{server}.{tool}: rows changed")
            if problem:
                wrong[problem] += 1
                examples.append(f"{server}.{tool}: {problem}: {text[:120]!r}")
            per_tool[f"{server}.{tool}"] += 1
        alive = not loop.run_until_complete(clients["ehr"].call_tool("search_patient", {"name": "Maria Garcia"})).is_error
    finally:
        for client in clients.values():
            loop.run_until_complete(client.__aexit__(None, None, None))
        loop.close()
        rows.close()
        logging.disable(quiet)
    return {"calls": sum(per_tool.values()), "tools": len(per_tool), "per_tool": dict(per_tool),
            "uncaught": wrong["uncaught"], "leaks": wrong["leaks"], "refused_but_wrote": wrong["refused_but_wrote"],
            "servers_alive": alive, "examples": examples[:10], "seed": seed}
