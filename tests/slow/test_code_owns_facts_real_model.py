"""Code owns the facts it can read, on the shipped model (the real llama.cpp runtime with the
embedded 270M model, the real MCP servers over stdio, a fresh data home):
- prescriptions: with a patient open, an order typed the way clinicians type it
  reaches the approval step in one turn with that patient and the clinician's drug, dose and
  frequency, whatever the model writes as arguments, and the gate's findings travel with it
  (pat-006's penicillin anaphylaxis leads); the approver records what it was shown and rejects,
  so nothing is written;
- chart questions: answered with the chart's facts and no others."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.runtime import load_model
from appliance.setup.home import init_home
from appliance.tools.base import Approval
from appliance.tools.mcp_client import MCPToolBox

pytestmark = [pytest.mark.timeout(900), pytest.mark.heavy]

# (open patient, the clinician's words, drug, dosage, frequency as the approval must show them)
ORDERS = (
    ("pat-006", "Prescribe amoxicillin 500 mg three times daily", "amoxicillin", "500 mg", "three times daily"),
    ("pat-006", "Prescribe amoxicillin 500 mg three times daily for pat-006", "amoxicillin", "500 mg",
     "three times daily"),
    ("pat-006", "Start her on amoxicillin 500mg TID for 7 days", "amoxicillin", "500mg", "TID"),
    # an as-needed order keeps "as needed" (and its indication) in its frequency: charted as needed
    ("pat-012", "Prescribe acetaminophen 500 mg every 6 hours as needed", "acetaminophen", "500 mg",
     "every 6 hours as needed"),
    ("abc-123", "Prescribe Zithromax 500 mg once daily", "Zithromax", "500 mg", "once daily"),
    ("pat-003", "Prescribe warfarin 50 mg once daily", "warfarin", "50 mg", "once daily"),
    ("pat-010", "prescribe methotrexate 15 mg once daily", "methotrexate", "15 mg", "once daily"),
    ("pat-017", "Please prescribe MS Contin 15 mg q12h", "MS Contin", "15 mg", "q12h"),
    ("pat-015", "Start him on Janumet 50/1000 mg BID", "Janumet", "50/1000 mg", "BID"),
    ("pat-001", "Prescribe omeprazole 20 mg daily before breakfast", "omeprazole", "20 mg", "daily"),
    ("pat-009", "prescribe ibuprofen 400mg PO q8h prn pain", "ibuprofen", "400mg", "q8h prn pain"),
    ("pat-020", "Start her on ferrous sulfate 325 mg every other day", "ferrous sulfate", "325 mg", "every other day"),
    ("abc-123", "Start metformin 500 mg twice daily", "metformin", "500 mg", "twice daily"),
    ("pat-006", "Order amoxicillin 500 mg TID", "amoxicillin", "500 mg", "TID"),
)


@pytest.fixture(scope="module")
def agent_parts(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("APPLIANCE_HOME", str(home))
    init_home(progress=lambda message: None, with_model=True)
    settings = Settings()
    model = load_model(settings)
    with MCPToolBox() as tools:
        yield model, tools, settings
    mp.undo()


class Recorder:
    """Rejects every write, keeping what the approval step was shown."""

    def __init__(self):
        self.seen: list[tuple[str, dict, object]] = []

    def __call__(self, tool, args, safety=None):
        self.seen.append((tool, dict(args), safety))
        return Approval(False, args, "test: not approved")


@pytest.mark.parametrize("patient, words, drug, dosage, frequency", ORDERS,
                         ids=[f"{p}:{w}" for p, w, *_ in ORDERS])
def test_an_order_reaches_the_approval_step_in_one_turn(agent_parts, patient, words, drug, dosage, frequency):
    model, tools, settings = agent_parts
    approver = Recorder()
    result = Agent(model, tools, settings, approver).run_turn(words, patient_id=patient)
    asked = [(tool, args) for tool, args, _ in approver.seen]
    assert len(asked) == 1, (result.path, result.tool_calls)
    tool, args = asked[0]
    assert tool == "prescribe_medication"
    assert (args["patient_id"], args["medication_name"], args["dosage"], args["frequency"]) == \
        (patient, drug, dosage, frequency)
    assert result.safety and result.safety[0]["patient_id"] == patient  # the gate's report travels with it


def test_the_penicillin_anaphylaxis_leads_for_pat_006(agent_parts):
    model, tools, settings = agent_parts
    approver = Recorder()
    Agent(model, tools, settings, approver).run_turn("Prescribe amoxicillin 500 mg three times daily",
                                                     patient_id="pat-006")
    (_tool, _args, report), = approver.seen
    first = report.findings[0]
    assert (first.severity, first.kind) == ("high", "allergy") and "Penicillin" in first.text


# Chart questions on the shipped model answer with the chart's facts and no others.
# (open patient, question, words the answer must hold: the chart's own facts)
CHART_QUESTIONS = (
    ("pat-006", "any allergies?", ("Penicillin", "Anaphylaxis")),
    ("pat-006", "What medications is this patient on?", ("Sertraline",)),
    ("abc-123", "Any allergies?", ("Sulfamethoxazole",)),
    ("abc-123", "last HbA1c?", ("Hemoglobin A1c", "7.9")),
    ("abc-123", "What is his latest eGFR?", ("eGFR", "42")),
    ("pat-001", "What meds is she taking?", ("Lisinopril", "Levothyroxine", "Omeprazole")),
    ("pat-001", "What was her last TSH?", ("TSH", "3.1")),
    ("pat-005", "What medications is he on?", ("Warfarin", "Metoprolol succinate", "Furosemide", "Lisinopril")),
    ("pat-005", "What was the last INR?", ("INR", "3.4")),
    ("pat-008", "What are her active problems?", ("Pregnancy", "Anemia")),
    ("pat-008", "Does she have any allergies?", ("No allergies recorded",)),
    ("pat-010", "any drug allergies?", ("Sulfasalazine",)),
    ("pat-010", "What is she taking?", ("Methotrexate", "once weekly", "Folic acid")),
    ("pat-012", "Allergies?", ("Aspirin", "gastrointestinal bleeding")),
    ("pat-012", "What are her diagnoses?", ("Alzheimer's disease",)),
    ("pat-015", "What was his latest potassium?", ("Potassium", "5.4")),
    ("pat-015", "List his allergies", ("Lisinopril", "Angioedema")),
    ("pat-017", "What are his medications?", ("Apixaban", "Carvedilol", "Furosemide")),
    ("pat-019", "Any allergies?", ("Carbamazepine", "Stevens-Johnson")),
    ("pat-023", "What is her current medication list?", ("Rivaroxaban", "Hydrochlorothiazide", "Acetaminophen")),
    ("pat-005", "Is he on any blood thinners?", ("Warfarin",)),
    ("abc-123", "Does he have diabetes?", ("Type 2 diabetes mellitus",)),
    ("pat-008", "Is she pregnant?", ("Pregnancy",)),
)


@pytest.mark.parametrize("patient, question, facts", CHART_QUESTIONS, ids=[f"{p}:{q}" for p, q, _ in CHART_QUESTIONS])
def test_a_chart_question_answers_with_the_charts_facts_and_no_others(agent_parts, patient, question, facts):
    from appliance.agent.fact_guard import sources_text, unsupported_facts

    model, tools, settings = agent_parts
    agent = Agent(model, tools, settings, Recorder())
    result = agent.run_turn(question, patient_id=patient)
    assert [c["tool"] for c in result.tool_calls] == ["get_patient_chart"]
    assert result.tool_calls[0]["args"] == {"patient_id": patient}
    for fact in facts:
        assert fact.lower() in result.response.lower(), (fact, result.response)
    chart = result.state.tool_results[0].result
    assert unsupported_facts(result.response, sources_text([question, patient], [chart]), agent.drugs,
                             patient_data=True) == []
    others = {f"pat-{n:03d}" for n in range(1, 24)} | {"abc-123"}
    assert not [pid for pid in others - {patient} if pid in result.response]
