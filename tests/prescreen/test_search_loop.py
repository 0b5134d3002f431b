"""The prescreen's search loop with a scripted model: the tool budget and the deterministic
stops (seed 004's loop, with code in charge)."""

from __future__ import annotations

from appliance.llm.fake import ScriptedModel
from appliance.prescreen.facts import build_facts
from appliance.prescreen.search import PROPOSE_NODE, find_candidates
from appliance.tools.base import ToolOutcome

CHART = {
    "patient": {"patient_id": "pat-1", "name": "Test Patient", "age": 61, "sex": "male"},
    "active_problems": [{"display": f"Problem {i}", "onset_date": f"2020-01-0{i}"} for i in range(1, 6)],
}


def propose(condition=None, action="search", intervention=None, keywords=None) -> dict:
    return {"action": action, "condition": condition, "intervention": intervention, "eligibility_keywords": keywords}


class Trials:
    """find_clinical_trials answered from a table: condition -> NCT ids (others: not found)."""

    def __init__(self, table: dict[str, list[str]]):
        self.table = table
        self.calls: list[dict] = []

    def call(self, tool, args, deadline, *, idempotency_key=None):
        assert tool == "find_clinical_trials"
        self.calls.append(args)
        found = self.table.get(args["condition"], [])
        if not found:
            return ToolOutcome(error_type="not_found", message="no trials")
        return ToolOutcome(result={"trials": [{"nct_id": n, "title": n} for n in found]})

    def drug_names(self):
        return []


def test_code_searches_the_problems_then_the_budget_stops_the_model():
    model = ScriptedModel({PROPOSE_NODE: [propose("cond A"), propose("cond B"), propose("cond C")]})
    tools = Trials({})
    out = find_candidates(model, tools, build_facts(CHART), max_trials=3, max_searches=4)
    assert [c["condition"] for c in tools.calls] == ["Problem 1", "Problem 2", "Problem 3", "cond A"]
    assert [c.source for c in out.calls] == ["code", "code", "code", "model"]
    assert out.stop_reason == "search budget spent (4 searches)" and out.proposals == 1
    assert model.pending() == {PROPOSE_NODE: 2}  # never asked again once the budget was spent


def test_code_fills_the_patient_filters_and_status():
    tools = Trials({"mesothelioma": ["NCT1"]})
    find_candidates(ScriptedModel(), tools, build_facts(CHART), condition="mesothelioma", max_trials=1)
    assert tools.calls == [{"condition": "mesothelioma", "intervention": None, "eligibility_keywords": None,
                            "status": "recruiting", "phase": None, "sex": "male", "patient_age": "61",
                            "study_type": None, "page_size": "10"}]


def test_enough_candidates_stop_without_a_model_call():
    model = ScriptedModel()
    out = find_candidates(model, Trials({"mesothelioma": ["NCT1", "NCT2", "NCT3"]}), build_facts(CHART),
                          condition="mesothelioma", max_trials=2)
    assert out.stop_reason.startswith("enough candidates") and out.proposals == 0 and model.history == []
    assert [c.nct_id for c in out.candidates] == ["NCT1", "NCT2"]


def test_the_model_saying_stop_ends_the_loop():
    model = ScriptedModel({PROPOSE_NODE: [propose(action="stop")]})
    out = find_candidates(model, Trials({"mesothelioma": ["NCT1"]}), build_facts(CHART), condition="mesothelioma",
                          max_trials=3)
    assert out.stop_reason == "the model proposed no further search" and len(out.calls) == 1


def test_a_repeated_search_stops_the_loop():
    model = ScriptedModel({PROPOSE_NODE: [propose("Mesothelioma ")]})  # the same search, spelt differently
    tools = Trials({"mesothelioma": ["NCT1"]})
    out = find_candidates(model, tools, build_facts(CHART), condition="mesothelioma", max_trials=3)
    assert out.stop_reason.startswith("a search repeated an earlier one") and len(tools.calls) == 1


def test_two_model_searches_that_find_nothing_new_stop_the_loop():
    model = ScriptedModel({PROPOSE_NODE: [propose("lung cancer"), propose("pleural effusion"), propose("x")]})
    tools = Trials({"mesothelioma": ["NCT1"], "lung cancer": ["NCT1"]})
    out = find_candidates(model, tools, build_facts(CHART), condition="mesothelioma", max_trials=3, max_searches=9)
    assert out.stop_reason == "two proposed searches in a row found nothing new"
    assert [c["condition"] for c in tools.calls] == ["mesothelioma", "lung cancer", "pleural effusion"]


def test_candidates_found_by_more_searches_rank_first():
    model = ScriptedModel({PROPOSE_NODE: [propose("b"), propose(action="stop")]})
    tools = Trials({"a": ["NCT1", "NCT2"], "b": ["NCT3", "NCT2"]})
    out = find_candidates(model, tools, build_facts(CHART), condition="a", max_trials=5)
    assert [c.nct_id for c in out.candidates] == ["NCT2", "NCT1", "NCT3"]
    assert [c.new for c in out.calls] == [2, 1]


def test_a_proposal_prompt_shows_the_facts_and_the_searches_made():
    model = ScriptedModel({PROPOSE_NODE: [propose(action="stop")]})
    find_candidates(model, Trials({"a": ["NCT1"]}), build_facts(CHART), condition="a", max_trials=5)
    (call,) = model.history
    assert call.node == PROPOSE_NODE and call.temperature == 0.0
    user = call.messages[-1].content
    assert "D1 Age: 61 years" in user and "- condition 'a': 1 trials (1 new)" in user
