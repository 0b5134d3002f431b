"""The README's knowledge questions through ``appliance ask --json`` on the shipped model (a
subprocess on a fresh data home, the real MCP servers over stdio): each runs the right tool
first with the right arguments, answers with the source's facts, is never withheld nor "I could
not produce an answer", and spends no model call (code routes and answers it)."""

from __future__ import annotations

import json
import re

import pytest

from common.locations import PROJECT_ROOT
from tests.slow.cli_run import run

pytestmark = [pytest.mark.timeout(900), pytest.mark.heavy]

# (the question as the README writes it, the tool, its arguments, facts the answer must show)
EXAMPLES = [
    ("Check FDA warnings for dofetilide", "check_drug_safety", {"drug_name": "dofetilide"},
     ("Boxed warning: Risk of induced arrhythmia", "Contraindications:", "Source: ")),
    ("side effects of lipitor", "check_drug_safety", {"drug_name": "atorvastatin"}, ("Atorvastatin", "Source: ")),
    ("what is metformin used for?", "check_drug_safety", {"drug_name": "metformin"},
     ("Boxed warning: Lactic acidosis", "not its indications or dosing")),
    ("does warfarin interact with ibuprofen?", "check_drug_interactions", {"drug_names": ["warfarin", "ibuprofen"]},
     ("ibuprofen + warfarin: major. Effect:", "What to do:")),
    ("can I give metronidazole with warfarin", "check_drug_interactions",
     {"drug_names": ["metronidazole", "warfarin"]}, ("metronidazole", "warfarin")),
    ("evidence for SGLT2 inhibitors in heart failure", "search_medical_literature",
     {"query": "SGLT2 inhibitors heart failure"}, ("PMID 31535829", "(N Engl J Med, 2019)")),
    ("any trials for lung cancer", "find_clinical_trials", {"condition": "lung cancer"},
     ("NCT", "RECRUITING", "ClinicalTrials.gov")),
]


def test_every_example_is_in_the_readme():
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    flat = re.sub(r"\s+", " ", readme)
    for question, *_ in EXAMPLES:
        assert question in flat, question


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    done = run(["init", "--json"], home, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return home


@pytest.mark.parametrize("question, tool, args, facts", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_readme_knowledge_question_is_answered_from_the_source(home, question, tool, args, facts):
    done = run(["ask", question, "--json"], home, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    turn = json.loads(done.stdout)
    first = turn["tool_calls"][0]
    assert first["tool"] == tool and all(first["args"].get(k) == v for k, v in args.items()), turn["tool_calls"]
    for fact in facts:
        assert fact in turn["response"], (fact, turn["response"][:800])
    assert "I could not produce an answer" not in turn["response"] and "was withheld" not in turn["response"]
    assert not [e["node"] for e in turn["trace"] if e.get("model_stats")]  # no model call at all
