"""Held-out knowledge requests on the shipped model (the real llama.cpp runtime with the embedded
270M model, the real MCP servers over stdio, a fresh data home): the table in
data/knowledge_heldout.json is written the way clinicians write (shorthand, typos, brands, pronouns
for the drug just discussed, a patient open or not) and shares no phrasing with the routing table
of tests/agent/test_knowledge_routing.py.

Each row runs as one turn of ``Agent.run_turn`` (what ``appliance ask`` runs) and is judged by:
- the tool that ran first, and the drugs or arguments it ran with (a drug also counts as named
  when the knowledge server resolved it to the expected one: "valproic acid" is divalproex);
- the answer shows the row's facts (read from the shipped data) and the facts of every result
  the turn got (a label's boxed warning and contraindications, each interaction's severity,
  each article's PMID, each trial's NCT id);
- the answer names no drug, PMID or NCT id that neither the clinician's words nor a result holds;
- no answer is withheld or "could not be produced" when a source answered.

Per-row results are written as JSON lines beside the run's config (a number reported can be
recomputed from them); the rates are printed and held to the issue's targets.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.runtime import load_model
from appliance.setup.home import init_home
from appliance.tools.mcp_client import MCPToolBox

pytestmark = pytest.mark.timeout(1500)

TABLE = Path(__file__).resolve().parent / "data" / "knowledge_heldout.json"
ROWS = json.loads(TABLE.read_text(encoding="utf-8"))["rows"]
TARGET = 0.95
WITHHELD = ("I could not produce an answer", "was withheld")
PMID = re.compile(r"\bPMID\s*(\d+)")
NCT = re.compile(r"\bNCT(?:\d{8}|-DEMO-\d+)\b")


def _resolved(tool: str, result) -> list[str]:
    """The drugs the knowledge server says it looked up, as its own generic names."""
    if not isinstance(result, dict):
        return []
    if tool == "check_drug_safety":
        return [result["drug"]] if result.get("drug") else []
    return [d.get("generic_name") for d in result.get("drugs_checked") or [] if d.get("generic_name")]


def _args_hold(tool: str, args: dict, result, expected: dict) -> bool:
    resolved = _resolved(tool, result)
    for key, want in expected.items():
        got = args.get(key)
        if isinstance(want, list):
            if set(got or ()) != set(want) and set(resolved) != set(want):
                return False
        elif got != want and not (key == "drug_name" and resolved == [want]):
            return False
    return True


def _source_facts(tool: str, result: dict) -> list[str]:
    """What code's answer must show of one result, read from the result itself."""
    if tool == "check_drug_safety":
        bw = result.get("boxed_warning")
        return ([f"Boxed warning: {bw[:60]}" if bw else "Boxed warning: none"]
                + [c[:40] for c in result.get("contraindications") or []])
    if tool == "check_drug_interactions":
        return [f"{i['drugs'][0]} + {i['drugs'][1]}: {i['severity']}." for i in result.get("interactions") or []]
    if tool == "search_medical_literature":
        return [f"PMID {a['pmid']}" for a in (result.get("articles") or [])[:5]]
    if tool in ("find_clinical_trials", "prescreen_for_trials"):
        return [t["nct_id"] for t in (result.get("trials") or [])[:5]]
    if tool == "get_trial_details":
        return [result.get("nct_id")]
    return []


class CountingModel:
    """The shipped model, counting its generations (the prescreen's inside its tool too)."""

    def __init__(self, model):
        self._model, self.calls = model, 0

    def __getattr__(self, name):
        attr = getattr(self._model, name)
        if name.startswith("generate") and callable(attr):
            def counted(*args, **kwargs):
                self.calls += 1
                return attr(*args, **kwargs)
            return counted
        return attr


def judge(row: dict, turn, seconds: float, drugs, model_calls: int = 0) -> dict:
    response = turn.response or ""
    results = [r for r in turn.state.tool_results]
    first = turn.tool_calls[0] if turn.tool_calls else None
    first_result = results[0].result if results else None
    answered = [r for r in results if r.error_type is None and isinstance(r.result, dict)]
    source_text = json.dumps([r.result for r in results], default=str) + " ".join(
        [row["request"], *(t for _role, t in row.get("history") or []), *(r.raw_error or "" for r in results)])
    wanted = list(row["facts"]) + [f for r in answered for f in _source_facts(r.tool_name, r.result)]
    said_drugs = set(drugs.find(response))
    source_drugs = set(drugs.find(source_text))
    foreign = sorted(said_drugs - source_drugs)
    foreign += [f"PMID {p}" for p in PMID.findall(response) if p not in source_text]
    foreign += [n for n in NCT.findall(response) if n not in source_text]
    return {
        "request": row["request"], "kind": row["kind"], "expected_tool": row["tool"], "expected_args": row["args"],
        "first_tool": first and first["tool"], "first_args": first and first["args"],
        "tool_first": bool(first and first["tool"] == row["tool"]),
        "args_right": bool(first and first["tool"] == row["tool"]
                           and _args_hold(first["tool"], first["args"], first_result, row["args"])),
        "facts_missing": [f for f in wanted if f and f not in response],
        "foreign": foreign,
        "withheld": bool(answered) and (not response.strip() or any(w in response for w in WITHHELD)),
        "routing_model_calls": sum(1 for e in turn.trace if e.model_stats),  # the nodes': routing and answer
        "model_calls": model_calls,  # every generation of the turn, a prescreen's included
        "path": turn.path, "seconds": round(seconds, 3), "response": response[:1500],
    }


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    out = tmp_path_factory.mktemp("heldout")
    mp = pytest.MonkeyPatch()
    mp.setenv("APPLIANCE_HOME", str(home))
    try:
        init_home(progress=lambda message: None, with_model=True)
        settings = Settings()
        model = CountingModel(load_model(settings))
        lines = []
        with MCPToolBox() as tools:
            agent = Agent(model, tools, settings)
            for row in ROWS:
                history = [tuple(x) for x in row.get("history") or []] or None
                started, calls = time.perf_counter(), model.calls
                turn = agent.run_turn(row["request"], history=history, patient_id=row.get("patient"))
                lines.append(judge(row, turn, time.perf_counter() - started, agent.drugs, model.calls - calls))
    finally:
        mp.undo()
    (out / "rows.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (out / "config.json").write_text(json.dumps({"table": str(TABLE), "rows": len(ROWS), "model": str(
        getattr(model, "path", "")), "settings": settings.model_dump(mode="json")}, default=str), encoding="utf-8")
    print(f"\nheld-out knowledge run: {out}\n" + json.dumps(rates(lines), indent=1))
    for x in lines:
        if not (x["tool_first"] and x["args_right"]) or x["facts_missing"] or x["foreign"] or x["withheld"]:
            print("ROW:", json.dumps({k: x[k] for k in ("request", "first_tool", "first_args", "facts_missing",
                                                        "foreign", "withheld")}))
    return lines


def rates(lines: list[dict]) -> dict:
    n = len(lines)
    seconds = [x["seconds"] for x in lines]
    return {
        "rows": n,
        "right_tool_first": sum(x["tool_first"] for x in lines) / n,
        "right_args": sum(x["args_right"] for x in lines) / n,
        "facts_named": sum(not x["facts_missing"] for x in lines) / n,
        "no_foreign_fact": sum(not x["foreign"] for x in lines) / n,
        "none_withheld": sum(not x["withheld"] for x in lines) / n,
        "routing_model_calls_per_row": sum(x["routing_model_calls"] for x in lines) / n,
        "model_calls_per_row": sum(x["model_calls"] for x in lines) / n,
        "median_seconds_per_row": statistics.median(seconds),
        "max_seconds_per_row": max(seconds),
    }


def test_the_table_is_held_out_and_covers_what_clinicians_ask():
    from tests.agent.test_knowledge_routing import ROWS as ROUTING_ROWS

    assert len(ROWS) >= 60
    seen = {r[0].casefold().strip(" ?") for r in ROUTING_ROWS}
    assert not [r["request"] for r in ROWS if r["request"].casefold().strip(" ?") in seen]
    assert len({r["request"] for r in ROWS}) == len(ROWS)
    assert {r["kind"] for r in ROWS} == {"label", "interaction", "literature", "trials"}
    assert {r["tool"] for r in ROWS} >= {"check_drug_safety", "check_drug_interactions", "search_medical_literature",
                                         "find_clinical_trials", "get_trial_details", "prescreen_for_trials"}
    assert sum(bool(r.get("history")) for r in ROWS) >= 5 and sum(bool(r.get("patient")) for r in ROWS) >= 3
    assert all(r["facts"] for r in ROWS)


def test_the_right_tool_runs_first(judged):
    assert rates(judged)["right_tool_first"] >= TARGET, [x["request"] for x in judged if not x["tool_first"]]


def test_it_runs_with_the_right_drugs_and_arguments(judged):
    assert rates(judged)["right_args"] >= TARGET, [(x["request"], x["first_args"]) for x in judged
                                                   if x["tool_first"] and not x["args_right"]]


def test_the_answer_names_the_source_facts(judged):
    assert rates(judged)["facts_named"] >= TARGET, [(x["request"], x["facts_missing"]) for x in judged
                                                    if x["facts_missing"]]


def test_the_answer_names_no_fact_the_sources_lack(judged):
    assert not [(x["request"], x["foreign"]) for x in judged if x["foreign"]]


def test_no_answer_is_withheld_when_a_source_answered(judged):
    assert not [x["request"] for x in judged if x["withheld"]]
