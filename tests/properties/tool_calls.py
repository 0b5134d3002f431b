"""Generated calls to every MCP tool, from the schema each server publishes, against a real data home.

What must hold for every call (``check_call``):
- it returns a result, or raises fastmcp's ``ToolError`` whose message starts with an error type
  from ``contracts.ERROR_TYPES`` (so nothing unexpected was masked into a generic message);
- the message carries no traceback, no file path and no ``.py`` name (the caller's own words,
  which a message may repeat, are taken out before looking);
- a call that failed, and any call to a read-only tool, leaves the record's rows as they were
  (prescriptions, allergies, notes, the audit log, idempotency keys);
- the servers keep answering (``InProcessServers.alive``).

Arguments come from ``hypothesis_jsonschema.from_schema`` over each tool's published input
schema (valid by schema), from valid arguments with plausible clinical values (so writes can
succeed and the "nothing written on failure" check bites), and from noise: wrong types, None,
nested junk, very long strings, NUL and control characters, unknown keys, missing keys.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastmcp import Client
from fastmcp.exceptions import ToolError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

# The selftest's own bad-input run counts the same things: its servers, watched rows
# (every table a write or an audit event touches) and leak rule are the ones checked here.
from appliance.selftest.bad_input import SERVERS, RowCounts, leaked
from appliance.setup.home import init_home
from appliance.tools.in_process import servers_on
from common import locations
from mcp_servers.contracts import ERROR_TYPES

FAST_CALLS = 500  # across every tool in the fast suite; the slow run's number is --bad-input-calls
# Values that make a write plausible (demo patients, real doses and frequencies), so that some
# generated writes succeed and the others are refused for one bad field at a time.
PLAUSIBLE = {
    "patient_id": ["abc-123", "pat-005", "pat-006", "pat-017", "no-such-999", " abc-123 ", "abc-123\x00"],
    "medication_name": ["empagliflozin", "amoxicillin", "warfarin", "John", "mild"],
    "dosage": ["500 mg", "10 mg", "1 tablet", "0 mg", "lots"],
    "frequency": ["twice daily", "once daily", "q6h", "PRN", "sometimes"],
    "substance": ["penicillin", "peanut", "latex"],
    "reaction": ["hives", "anaphylaxis", "rash"],
    "severity": ["mild", "moderate", "severe", None],
    "note_type": ["progress", "consult", "telephone"],
    "note_text": ["Stable on current plan.", "Seen today; review in 3 months."],
    "name": ["Maria Garcia", "James Wilson", "garcia", "Smith, John"],
    "drug_name": ["warfarin", "Coumadin", "dofetilide", "zorbitravine"],
    "drug_names": [["warfarin", "aspirin"], ["warfarin", "warfarin"], ["ibuprofen", "zorbitravine", "aspirin"]],
    "query": ["metformin lactic acidosis", "SGLT2 heart failure"],
    "condition": ["diabetes", "heart failure", "asthma"],
    "status": ["recruiting", "active", "completed", None],
    "nct_id": ["NCT-DEMO-001", "NCT00000000"],
    "term": ["Tylenol", "HTN", "diabetes mellitus", "metfromin"],
    "max_results": [1, 5, 25],
    "cui": ["C0020538", "C0011849", "C9999999"],
    "kind": ["approval", "rejection", "override", "safety_findings"],
    "details": [{"tool": "prescribe_medication", "decision": "approved"}, {}],
}

_CONTROL = st.characters(min_codepoint=0, max_codepoint=0x1F) | st.sampled_from("\u202e\u200b\ufeff\u2028\x7f")
# Keys stay encodable: the MCP client itself refuses to send a lone surrogate in a key (it never
# reaches a server), while JSON's "\ud800" escape does bring one to a server inside a value.
_KEY_TEXT = st.text(alphabet=st.characters(codec="utf-8") | _CONTROL, max_size=80)
_TEXT = st.text(alphabet=st.characters(codec="utf-8") | _CONTROL | st.characters(categories=["Cs"]), max_size=80)
LONG_STRINGS = st.builds(lambda piece, n: (piece or "x") * n, st.text(min_size=1, max_size=8),
                         st.integers(min_value=50, max_value=20_000))
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | _TEXT | LONG_STRINGS | st.sampled_from(["", " ", "\x00", "../../etc/passwd", "'; DROP TABLE patients;--",
                                                     "%s%s%n", "{{7*7}}", "C:\\Windows\\x.py"]))
JUNK = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEY_TEXT, inner, max_size=4),
                    max_leaves=12)
UNKNOWN_KEYS = st.text(min_size=1, max_size=20).filter(lambda k: k not in PLAUSIBLE)


def _plausible(schema: dict) -> st.SearchStrategy[dict]:
    """Required fields from ``PLAUSIBLE`` where it has them, else from the schema; keys not in
    ``PLAUSIBLE`` (and optional keys) from the schema."""
    props = schema.get("properties", {})
    fields = {}
    for name, sub in props.items():
        field = from_schema(sub) if sub else JUNK
        if name in PLAUSIBLE:
            field = st.sampled_from(PLAUSIBLE[name]) | field if name not in ("patient_id",) else \
                st.sampled_from(PLAUSIBLE[name])
        fields[name] = field
    required = set(schema.get("required", ()))
    return st.fixed_dictionaries({k: v for k, v in fields.items() if k in required},
                                 optional={k: v for k, v in fields.items() if k not in required})


@st.composite
def _noisy(draw, schema: dict) -> dict:
    """Valid-looking arguments with one or more fields replaced by junk, dropped, or joined by unknown keys."""
    props = list(schema.get("properties", {}))
    args = draw(_plausible(schema))
    for name in draw(st.lists(st.sampled_from(props), max_size=len(props))) if props else ():
        if draw(st.integers(0, 2)) == 0:
            args.pop(name, None)
        else:
            args[name] = draw(JUNK)
    for key in draw(st.lists(UNKNOWN_KEYS, max_size=2)):
        args[key] = draw(JUNK)
    return args


def arguments(schema: dict) -> st.SearchStrategy[dict]:
    """Every kind of argument object for one tool: valid by schema, plausible, noisy, or a junk dict."""
    valid, plausible, noisy = from_schema(schema), _plausible(schema), _noisy(schema)
    return st.one_of(valid, valid, plausible, plausible, plausible, noisy, noisy, noisy,
                     st.dictionaries(_KEY_TEXT, JUNK, max_size=5))


def published_tools() -> list[tuple[str, str, dict, bool]]:
    """(server, tool, input schema, read-only hint) for every tool of every server, as each lists them."""
    async def listing():
        found = []
        for server in SERVERS:
            async with Client(importlib.import_module(f"mcp_servers.{server}.server").mcp) as client:
                found += [(server, t.name, dict(t.input_schema), bool(t.annotations and t.annotations.read_only_hint))
                          for t in await client.list_tools()]
        return found

    return asyncio.run(listing())


class InProcessServers:
    """The three servers in this process, each behind one open fastmcp ``Client`` (the in-memory
    transport) on a private event loop; every server must be ``configure``d first."""

    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._clients = {s: Client(importlib.import_module(f"mcp_servers.{s}.server").mcp) for s in SERVERS}
        for client in self._clients.values():
            self._loop.run_until_complete(client.__aenter__())

    def call(self, server: str, tool: str, args: dict) -> tuple[object | None, str | None]:
        """(result, None) or (None, the ToolError's message). Anything else propagates."""
        try:
            result = self._loop.run_until_complete(self._clients[server].call_tool(tool, args))
        except ToolError as exc:
            return None, str(exc)
        return result.data if result.data is not None else result.structured_content, None

    def alive(self) -> bool:
        result, error = self.call("ehr", "search_patient", {"name": "Maria Garcia"})
        return error is None and result["total_matches"] >= 1

    def close(self) -> None:
        for client in self._clients.values():
            self._loop.run_until_complete(client.__aexit__(None, None, None))
        self._loop.close()


def check_call(server: str, tool: str, args: dict, result, error: str | None,
               before: tuple[int, ...], after: tuple[int, ...], read_only: bool) -> None:
    """Assert the invariants of one call (module docstring)."""
    if error is not None:
        head = error.partition(": ")[0]
        assert head in ERROR_TYPES, f"{server}.{tool}: error without a contract type: {error[:300]!r}"
        bad = leaked(error, args)
        assert bad is None, f"{server}.{tool}: the message shows internals: {bad!r}"
        assert after == before, f"{server}.{tool}: a refused call changed the record {before} -> {after}"
    else:
        assert result is not None, f"{server}.{tool}: neither a result nor an error"
    if read_only:
        assert after == before, f"{server}.{tool}: a read changed the record {before} -> {after}"


class Tally:
    """Calls made per tool ("server.tool"), and how they ended ("ok" or the error type)."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.outcomes: dict[str, Counter] = {}

    def add(self, tool: str, error: str | None) -> None:
        self.calls[tool] += 1
        self.outcomes.setdefault(tool, Counter())["ok" if error is None else error.partition(": ")[0]] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def table(self) -> str:
        lines = [f"{'tool':38} {'calls':>6}  outcomes"]
        for tool, n in self.calls.items():
            outcomes = ", ".join(f"{k} {v}" for k, v in self.outcomes[tool].most_common())
            lines.append(f"{tool:38} {n:6}  {outcomes}")
        lines.append(f"{'total':38} {self.total:6}")
        return "\n".join(lines)


def run_tool(servers: InProcessServers, counts: RowCounts, tally: Tally, tool: tuple[str, str, dict, bool],
             examples: int) -> None:
    """``examples`` generated calls to one tool, each checked (``check_call``)."""
    server, name, schema, read_only = tool

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(arguments(schema))
    def one_call(args):
        before = counts()
        result, error = servers.call(server, name, args)
        after = counts()
        tally.add(f"{server}.{name}", error)
        check_call(server, name, args, result, error, before, after, read_only)

    one_call()
    assert servers.alive(), f"the servers stopped answering after {server}.{name}"


def audit_chain_verifies() -> bool:
    """Whether the data home's audit hash chain still verifies (``ehr_db.audit.verify``)."""
    from ehr_db.repository import EhrRepository

    return EhrRepository(locations.ehr_db_path()).verify_audit().ok


@contextmanager
def servers_on_a_fresh_home(home: Path) -> Iterator[tuple[InProcessServers, RowCounts]]:
    """``appliance init`` (no model) into ``home`` (already $APPLIANCE_HOME), the three servers
    configured on its databases and opened in process; unconfigured afterwards."""
    init_home(progress=lambda message: None, with_model=False)
    with servers_on(locations.data_home()) as paths:
        servers, counts = InProcessServers(), RowCounts(paths["ehr"])
        quiet = logging.root.manager.disable
        logging.disable(logging.ERROR)  # fastmcp logs every refused call; thousands of lines say nothing
        try:
            yield servers, counts
        finally:
            logging.disable(quiet)
            counts.close()
            servers.close()
