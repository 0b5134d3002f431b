"""``appliance bench tools`` times successes only and reports failed calls (a scripted box)."""

from __future__ import annotations

import random

from appliance.bench.tools import (
    TOOL_CALLS,
    bench_concept_search,
    bench_tool_calls,
    print_report,
    umls_queries,
)
from appliance.tools.base import ToolOutcome
from mcp_servers.contracts import TOOL_SERVERS


class ScriptedBox:
    """Answers every call; fails the tools named in ``failing`` with the given error type."""

    def __init__(self, failing: dict[str, str] | None = None, names: bool = True):
        self.failing = failing or {}
        self.names = names
        self.calls: list[tuple[str, str]] = []

    def call_server(self, server, tool, args, deadline):
        self.calls.append((server, tool))
        if tool in self.failing:
            return ToolOutcome(error_type=self.failing[tool], message="scripted")
        if tool == "get_concept":
            return ToolOutcome(result={"name": "cardio neph itis"} if self.names else {})
        return ToolOutcome(result={"ok": True})


def test_every_server_tool_is_measured():
    measured = {(server, tool) for server, tool, _ in TOOL_CALLS}
    assert {(s, t) for t, s in TOOL_SERVERS.items() if s != "local"} <= measured
    assert {("knowledge", "get_trial_details"), ("knowledge", "drug_vocabulary"), ("umls", "get_concept"),
            ("umls", "get_semantic_type"), ("umls", "drug_vocabulary")} <= measured


def test_failed_calls_are_counted_not_timed(capsys):
    box = ScriptedBox({"check_drug_safety": "drug_not_in_database"})
    report = bench_tool_calls(box, 4)
    failed = report["knowledge.check_drug_safety"]
    assert (failed["ok"], failed["failed"], failed["p50_ms"]) == (0, 4, None)
    assert failed["errors"] == {"drug_not_in_database": 4}
    fine = report["ehr.search_patient"]
    assert (fine["ok"], fine["failed"]) == (4, 0) and fine["p50_ms"] is not None

    queries, lookup_failures = umls_queries(box, random.Random(1), 3)
    assert lookup_failures == 0 and len(queries["exact"]) == 3
    searches = bench_concept_search(ScriptedBox({"concept_search": "timeout"}), queries)
    assert all(p["failed"] == 3 and p["ok"] == 0 and p["p50_ms"] is None for p in searches.values())

    print_report({"tools": report, "concept_search_100k": {"build_seconds": 1.0, "db_mib": 2.0,
                                                          "query_lookups_failed": 0, **searches}}, 100)
    out = capsys.readouterr().out
    assert "FAILED CALLS" in out and "drug_not_in_database x4" in out and "timeout x3" in out


def test_picking_queries_gives_up_instead_of_looping_forever():
    queries, failed = umls_queries(ScriptedBox({"get_concept": "not_found"}), random.Random(1), 5)
    assert queries["exact"] == [] and failed == 100
