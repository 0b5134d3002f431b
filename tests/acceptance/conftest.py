"""Fixtures of the acceptance tests: a run on the oracle models with scripted tools and job
figures, so the scoring is checked without a model file or a server."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from appliance.acceptance.evaluation import Evaluation

PERFECT = {
    "trialgpt": {"n": 341, "accuracy": 1.0, "macro_f1": 1.0, "kappa": 1.0, "complete": True,
                 "gpt4": {"n": 341, "accuracy": 0.88, "macro_f1": 0.87, "kappa": 0.75}, "errors": 0},
    "grounding": {"criteria": 20, "entities": 40, "grounded_share": 1.0, "expert_review_share": 0.0,
                  "extraction_failures": 0, "parse_failures": 0, "rejected_codes": 0, "criteria_with_errors": 0},
    "extraction": {"records": 3, "bullets": 51, "recall": 1.0, "invented_share": 0.0, "side_error_rate": 0.0},
}
POOR = {
    "trialgpt": {**PERFECT["trialgpt"], "accuracy": 0.27, "macro_f1": 0.14, "kappa": 0.0},
    "grounding": {**PERFECT["grounding"], "grounded_share": 0.1, "expert_review_share": 0.9},
    "extraction": {**PERFECT["extraction"], "recall": 0.5, "invented_share": 0.4},
}


def jobs(figures: dict) -> tuple[Evaluation, ...]:
    return tuple(Evaluation(name, lambda _m, _f, _l, _p, name=name: dict(figures[name])) for name in figures)


def _chart(pid: str, name: str) -> dict:
    return {"result": {"patient": {"patient_id": pid, "name": name}, "allergies": [], "medications": [],
                       "problems": [], "labs": [], "vitals": []}}


# What the turn subset's tools return, in the order the subset calls them (file order).
TOOLS = {
    "check_drug_safety": [{"result": {"drug": "amiodarone", "boxed_warning": "pulmonary toxicity"}},
                          {"result": {"drug": "warfarin", "boxed_warning": "bleeding"}}],
    "check_drug_interactions": [{"result": {"interactions": [{"drugs": ["warfarin", "aspirin"], "severity": "major"}]}}],
    "search_medical_literature": [{"result": {"articles": [{"pmid": "34449189", "title": "Empagliflozin in HFpEF"}]}}],
    "find_clinical_trials": [{"result": {"trials": [{"nct_id": "NCT-DEMO-0007", "title": "Mesothelioma study"}]}}],
    "search_patient": [
        {"result": {"total_matches": 1, "matches": [{"patient_id": "pat-001", "name": "Maria Garcia", "birth_date": "1971-08-22"}]}},
        {"result": {"total_matches": 3, "matches": [
            {"patient_id": f"pat-00{i}", "name": "James Wilson", "birth_date": f"19{y}-01-01"}
            for i, y in ((2, 48), (3, 67), (4, 90))]}},
        {"result": {"total_matches": 1, "matches": [{"patient_id": "pat-001", "name": "Maria Garcia", "birth_date": "1971-08-22"}]}},
    ],
    "get_patient_chart": [_chart("abc-123", "John Smith"), _chart("pat-001", "Maria Garcia")],
}


@pytest.fixture
def turn_agent():
    """A factory of turn agents over scripted tools (no server), for a given model."""
    from appliance.agent.graph import Agent
    from appliance.config import Settings
    from appliance.tools.scripted import ScriptedToolBox

    def make(model):
        @contextmanager
        def agent():
            tools = ScriptedToolBox({k: list(v) for k, v in TOOLS.items()}, None, [])
            yield Agent(model, tools, Settings())
        return agent
    return make
