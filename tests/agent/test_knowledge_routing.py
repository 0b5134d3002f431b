"""Knowledge requests as clinicians write them (typos, brands, pronouns, terse questions): code
routes each to the right tool first, with the right drugs, and no model is asked (the scripted
model's history stays empty). The knowledge server is the real one, in process, on a fresh
database built from the shipped content (``appliance.agent.knowledge_requests``)."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.agent.knowledge_requests import read_request
from appliance.agent.state import AgentState
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.medication.names import DrugRecogniser
from appliance.tools.base import ToolOutcome, deny_all
from mcp_servers.knowledge import server as knowledge
from mcp_servers.knowledge.store import ensure_database
from tests.knowledge.knowledge_helpers import call

pytestmark = pytest.mark.timeout(120)
S, INTERACT, L, T, D = ("check_drug_safety", "check_drug_interactions", "search_medical_literature",
                 "find_clinical_trials", "get_trial_details")
DOFETILIDE_TALK = [("user", "Check FDA warnings for dofetilide"), ("assistant", "Dofetilide: boxed warning ...")]
PAIR_TALK = [("user", "does warfarin interact with ibuprofen?"), ("assistant", "warfarin + ibuprofen: major ...")]

# (request, tool first, what its arguments must hold, earlier exchanges)
ROWS = [
    # the label: safety, warnings, side effects, contraindications, dosing, pregnancy, "what is"
    ("Check FDA warnings for dofetilide", S, {"drug_name": "dofetilide"}, None),
    ("FDA warnings for dofetilide", S, {"drug_name": "dofetilide"}, None),
    ("boxed warning amiodarone?", S, {"drug_name": "amiodarone"}, None),
    ("does warfarin have a black box warning", S, {"drug_name": "warfarin"}, None),
    ("side effects of lipitor", S, {"drug_name": "atorvastatin"}, None),
    ("Lipitor side effects?", S, {"drug_name": "atorvastatin"}, None),
    ("what are the side effects of metformin", S, {"drug_name": "metformin"}, None),
    ("adverse effects of sertraline", S, {"drug_name": "sertraline"}, None),
    ("contraindications for lisinopril", S, {"drug_name": "lisinopril"}, None),
    ("is Eliquis safe in pregnancy", S, {"drug_name": "apixaban"}, None),
    ("methotrexate in pregnancy?", S, {"drug_name": "methotrexate"}, None),
    ("can you use ibuprofen when breastfeeding", S, {"drug_name": "ibuprofen"}, None),
    ("what is metformin used for", S, {"drug_name": "metformin"}, None),
    ("What is metformin used for?", S, {"drug_name": "metformin"}, None),
    ("tell me about Coumadin", S, {"drug_name": "warfarin"}, None),
    ("max dose of Tylenol", S, {"drug_name": "acetaminophen"}, None),
    ("paracetamol dose in liver disease", S, {"drug_name": "acetaminophen"}, None),
    ("digoxin toxicity", S, {"drug_name": "digoxin"}, None),
    ("precautions with prednisone", S, {"drug_name": "prednisone"}, None),
    ("is cipro safe in the elderly", S, {"drug_name": "ciprofloxacin"}, None),
    ("renal dosing for metformin", S, {"drug_name": "metformin"}, None),
    ("any warnings on tramadol?", S, {"drug_name": "tramadol"}, None),
    ("safety of spironolactone in CKD", S, {"drug_name": "spironolactone"}, None),
    ("dofetilide", S, {"drug_name": "dofetilide"}, None),
    ("Zoloft warnings", S, {"drug_name": "sertraline"}, None),
    ("is amoxicillin ok in penicillin allergy", S, {"drug_name": "amoxicillin"}, None),
    ("monitoring for amiodarone", S, {"drug_name": "amiodarone"}, None),
    # typos: the closest name of the local drug data
    ("metfromin side effects", S, {"drug_name": "metformin"}, None),
    ("lisinoprill contraindications", S, {"drug_name": "lisinopril"}, None),
    ("warnings for dofetalide", S, {"drug_name": "dofetilide"}, None),
    ("amoxicilin in pregnancy", S, {"drug_name": "amoxicillin"}, None),
    # pronouns and follow-ups: the drug just discussed
    ("what are its side effects?", S, {"drug_name": "dofetilide"}, DOFETILIDE_TALK),
    ("is it safe in pregnancy", S, {"drug_name": "dofetilide"}, DOFETILIDE_TALK),
    ("and in renal failure?", S, {"drug_name": "dofetilide"}, DOFETILIDE_TALK),
    ("does it interact with ibuprofen?", INTERACT, {"drug_names": {"dofetilide", "ibuprofen"}}, DOFETILIDE_TALK),
    ("are they safe together?", INTERACT, {"drug_names": {"warfarin", "ibuprofen"}}, PAIR_TALK),
    # interactions: two named drugs with interaction words, or given together
    ("does warfarin interact with ibuprofen?", INTERACT, {"drug_names": {"warfarin", "ibuprofen"}}, None),
    ("Does warfarin interact with ibuprofen", INTERACT, {"drug_names": {"warfarin", "ibuprofen"}}, None),
    ("can I give metronidazole with warfarin", INTERACT, {"drug_names": {"metronidazole", "warfarin"}}, None),
    ("can i give clarithromycin with simvastatin?", INTERACT, {"drug_names": {"clarithromycin", "simvastatin"}}, None),
    ("warfarin and aspirin together?", INTERACT, {"drug_names": {"warfarin", "aspirin"}}, None),
    ("Xarelto and aspirin together", INTERACT, {"drug_names": {"rivaroxaban", "aspirin"}}, None),
    ("interaction between simvastatin and clarithromycin", INTERACT, {"drug_names": {"simvastatin", "clarithromycin"}}, None),
    ("any DDI between fluconazole and warfarin", INTERACT, {"drug_names": {"fluconazole", "warfarin"}}, None),
    ("is it safe to take ibuprofen and lisinopril together", INTERACT, {"drug_names": {"ibuprofen", "lisinopril"}}, None),
    ("is warfarin safe with ibuprofen?", INTERACT, {"drug_names": {"warfarin", "ibuprofen"}}, None),
    ("warfarin + aspirin?", INTERACT, {"drug_names": {"warfarin", "aspirin"}}, None),
    ("can I give tramadol to a patient on sertraline", INTERACT, {"drug_names": {"tramadol", "sertraline"}}, None),
    ("digoxin with amiodarone ok?", INTERACT, {"drug_names": {"digoxin", "amiodarone"}}, None),
    ("check Coumadin against Bactrim", INTERACT, {"drug_names": {"warfarin", "trimethoprim-sulfamethoxazole"}}, None),
    ("clopidogrel omeprazole interaction", INTERACT, {"drug_names": {"clopidogrel", "omeprazole"}}, None),
    ("combining sertraline and tramadol", INTERACT, {"drug_names": {"sertraline", "tramadol"}}, None),
    ("can he take naproxen alongside apixaban", INTERACT, {"drug_names": {"naproxen", "apixaban"}}, None),
    ("does ciprofloxacin interact with warfrin", INTERACT, {"drug_names": {"ciprofloxacin", "warfarin"}}, None),
    # a pair joined by '+', 'w/' or 'in someone on' is the pair, whatever else is asked; "pt on X, ok to add Y"
    ("naproxen + lithium - kidney risk?", INTERACT, {"drug_names": {"naproxen", "lithium"}}, None),
    ("clonazepam w/ oxycodone", INTERACT, {"drug_names": {"clonazepam", "oxycodone"}}, None),
    ("pt on lithium, Na 131, ok to add HCTZ?", INTERACT, {"drug_names": {"lithium", "hydrochlorothiazide"}}, None),
    ("Norco and Valium - any concern?", INTERACT, {"drug_names": {"hydrocodone-acetaminophen", "diazepam"}}, None),
    ("and with clarithromycin?", INTERACT, {"drug_names": {"warfarin", "clarithromycin"}}, PAIR_TALK),
    ("does rifampin affect apixaban?", INTERACT, {"drug_names": {"rifampin", "apixaban"}}, None),
    ("can it be taken with aspirin?", INTERACT, {"drug_names": {"dofetilide", "aspirin"}}, DOFETILIDE_TALK),
    ("sotalol QT risk with levofloxacin", INTERACT, {"drug_names": {"sotalol", "levofloxacin"}}, None),
    ("adding fluconazole to glyburide - ok?", INTERACT, {"drug_names": {"fluconazole", "glyburide"}}, None),
    ("ok to take Cialis if on nitroglycerin", INTERACT, {"drug_names": {"tadalafil", "nitroglycerin"}}, None),
    ("patient on sertraline needs tramadol for a fracture", INTERACT, {"drug_names": {"sertraline", "tramadol"}}, None),
    ("how about with fluconazole?", INTERACT, {"drug_names": {"warfarin", "fluconazole"}}, PAIR_TALK),
    ("what about naproxen?", INTERACT, {"drug_names": {"warfarin", "naproxen"}}, PAIR_TALK),
    ("what about the side effects of naproxen?", S, {"drug_name": "naproxen"}, PAIR_TALK),
    # label shorthand; the harms labels warn of; a drug and a short qualifier; lab words said of a drug
    ("Eliquis in dialysis", S, {"drug_name": "apixaban"}, None),
    ("zolpidem falls in the elderly", S, {"drug_name": "zolpidem"}, None),
    ("oxycodone addiction potential", S, {"drug_name": "oxycodone"}, None),
    ("anything to watch out for with digoxin?", S, {"drug_name": "digoxin"}, None),
    ("max duration for ibuprofen", S, {"drug_name": "ibuprofen"}, None),
    ("AEs of Januvia", S, {"drug_name": "sitagliptin"}, None),
    ("who shouldn't take Flomax", S, {"drug_name": "tamsulosin"}, None),
    ("what bloods to monitor on lithium", S, {"drug_name": "lithium"}, None),
    # the literature
    ("evidence for SGLT2 inhibitors in heart failure", L, {"query": "SGLT2 inhibitors heart failure"}, None),
    ("any studies on metformin and cancer risk", L, {"query": "metformin cancer risk"}, None),
    ("what does the literature say about aspirin for primary prevention", L, {"query": "aspirin primary prevention"}, None),
    ("pubmed papers on atrial fibrillation ablation", L, {"query": "atrial fibrillation ablation"}, None),
    ("meta-analysis of statins in the elderly", L, {"query": "statins elderly"}, None),
    ("latest research on GLP-1 agonists and weight loss", L, {"query": "GLP-1 agonists weight loss"}, None),
    ("do trials show benefit of DOACs over warfarin? any RCTs", L, {}, None),
    ("what's the data on statins in the elderly", L, {"query": "statins elderly"}, None),
    ("studies of dabigatran vs warfarin", L, {"query": "dabigatran vs warfarin"}, None),
    # trials
    ("any trials for lung cancer", T, {"condition": "lung cancer"}, None),
    ("recruiting trials for heart failure", T, {"condition": "heart failure", "status": None}, None),
    ("phase 3 trials in type 2 diabetes", T, {"condition": "type 2 diabetes", "phase": "phase3"}, None),
    ("clinical trials enrolling for mesothelioma", T, {"condition": "mesothelioma"}, None),
    ("trials of semaglutide in obesity", T, {"condition": "obesity", "intervention": "semaglutide"}, None),
    ("completed trials for asthma", T, {"condition": "asthma", "status": "completed"}, None),
    ("is anyone recruiting for COPD", T, {"condition": "COPD"}, None),
    ("ongoing COPD studies", T, {"condition": "COPD"}, None),
    ("details of NCT-DEMO-0001", D, {"nct_id": "NCT-DEMO-0001"}, None),
]


class RealKnowledge:
    """The knowledge server in process, through fastmcp, on real SQLite."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def call(self, tool: str, args: dict, deadline: float, **_kw) -> ToolOutcome:
        self.calls.append((tool, dict(args)))
        result, error = call(tool, args)
        return ToolOutcome(result=result) if error is None else ToolOutcome(error_type=error[0], message=error[1])

    def record_event(self, kind, patient_id, details, deadline) -> ToolOutcome:
        return ToolOutcome(result={"kind": kind})

    def call_server(self, server: str, tool: str, args: dict, deadline: float) -> ToolOutcome:
        result, error = call(tool, args)
        return ToolOutcome(result=result) if error is None else ToolOutcome(error_type=error[0], message=error[1])

    def drug_names(self) -> list[str]:
        return call("drug_vocabulary", {})[0]["names"]


@pytest.fixture(scope="module")
def agent_parts(tmp_path_factory):
    path = tmp_path_factory.mktemp("knowledge") / "knowledge.sqlite"
    ensure_database(path)
    knowledge.configure(path)
    tools = RealKnowledge()
    yield tools, DrugRecogniser(tools.drug_names())
    knowledge.configure(None)


def _matches(args: dict, expected: dict) -> bool:
    for key, want in expected.items():
        got = args.get(key)
        if isinstance(want, set):
            if set(got or ()) != want:
                return False
        elif got != want:
            return False
    return True


def test_the_table_is_long_enough_and_says_what_it_tests():
    assert len(ROWS) >= 60
    assert {row[1] for row in ROWS} == {S, INTERACT, L, T, D}


@pytest.mark.parametrize("query, tool, expected, history", ROWS, ids=[r[0] for r in ROWS])
def test_code_routes_the_request_to_the_right_tool_first_with_no_model_call(agent_parts, query, tool, expected, history):
    tools, drugs = agent_parts
    tools.calls.clear()
    model = ScriptedModel({})
    result = Agent(model, tools, Settings(), deny_all, drugs=drugs).run_turn(query, history=history)
    assert model.history == [], [c.node for c in model.history]  # no model call: not for routing, nor the answer
    first_tool, first_args = tools.calls[0]
    assert first_tool == tool and _matches(first_args, expected), tools.calls
    assert result.response and "I could not produce an answer" not in result.response
    assert result.trace[1].output.get("by") == "code" and result.trace[2].output.get("by") == "code"


@pytest.mark.parametrize("query", ["What is hypertension?", "hello", "thanks!", "Is amoxicillin a penicillin?",
                                   "what causes gout?"])
def test_a_question_code_reads_no_look_up_in_is_left_to_the_model(agent_parts, query):
    _tools, drugs = agent_parts
    assert read_request(AgentState(user_query=query), drugs) == ()


def test_a_typo_is_said_in_the_answer(agent_parts):
    tools, drugs = agent_parts
    result = Agent(ScriptedModel({}), tools, Settings(), deny_all, drugs=drugs).run_turn("metfromin side effects")
    assert "did you mean metformin?" in result.response


def test_a_pronoun_is_said_in_the_answer(agent_parts):
    tools, drugs = agent_parts
    result = Agent(ScriptedModel({}), tools, Settings(), deny_all, drugs=drugs).run_turn(
        "what are its side effects?", history=DOFETILIDE_TALK)
    assert "dofetilide, named earlier in this conversation" in result.response


def test_a_request_to_write_and_a_chart_question_are_not_knowledge_requests(agent_parts):
    _tools, drugs = agent_parts
    assert read_request(AgentState(user_query="Prescribe metformin 500 mg twice daily for abc-123"), drugs) == ()
    assert read_request(AgentState(user_query="is she on warfarin?", selected_patient_id="abc-123"), drugs) == ()
    # about the open patient, not the drug's label: the chart's (or the model's) to answer
    for words in ("how long has she been on metformin?", "did the rash start after amoxicillin?",
                  "what is her max dose of gabapentin"):
        assert read_request(AgentState(user_query=words, selected_patient_id="abc-123"), drugs) == (), words


def test_trial_words_about_the_open_patient_are_the_prescreen(agent_parts):
    _tools, drugs = agent_parts
    calls = read_request(AgentState(user_query="is she eligible for any trials?", selected_patient_id="abc-123"), drugs)
    assert [(c.tool, c.args["patient_id"]) for c in calls] == [("prescreen_for_trials", "abc-123")]
    calls = read_request(AgentState(user_query="any trials for this patient with asthma?",
                                    selected_patient_id="abc-123"), drugs)
    assert calls[0].tool == "prescreen_for_trials"
    # who the trial is for is not its condition
    calls = read_request(AgentState(user_query="would she qualify for any asthma trials?",
                                    selected_patient_id="abc-123"), drugs)
    assert [(c.tool, c.args["condition"]) for c in calls] == [("prescreen_for_trials", "asthma")]
    calls = read_request(AgentState(user_query="get him a trial", selected_patient_id="abc-123"), drugs)
    assert [c.tool for c in calls] == ["prescreen_for_trials"]
    # no patient: which one is not code's to guess
    assert read_request(AgentState(user_query="is she eligible for any trials?"), drugs) == ()
