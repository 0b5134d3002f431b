"""SYNTHESIZE's handling of an answer cut at its token limit."""

from __future__ import annotations

import pytest

from appliance.agent.nodes.synthesize import run, whole_sentences
from appliance.llm.base import CallStats
from appliance.llm.fake import ScriptedModel
from tests.agent.helpers import state


@pytest.mark.parametrize("text,expected", [
    ("Warfarin raises bleeding risk. Monitor the INR weekly and adj", "Warfarin raises bleeding risk."),
    ("Key points:\n- INR 3.1 (high)\n- Hold one do", "Key points:\n- INR 3.1 (high)"),
    ("No sentence end at all and cut", "No sentence end at all and cut …"),
    ("Dose is 2.5 mg daily. Recheck in 3 days (see label.) More", "Dose is 2.5 mg daily. Recheck in 3 days (see label.)"),
])
def test_whole_sentences(text, expected):
    assert whole_sentences(text) == expected


class CutModel(ScriptedModel):
    """Reports that its free text stopped on the token limit, as the runtime does."""

    def generate_free(self, node, messages, **kw):
        text = super().generate_free(node, messages, **kw)
        self.last_stats = CallStats(node=node, completion_tokens=256, finish_reason="length")
        return text


def test_an_answer_cut_at_the_limit_ends_at_a_whole_sentence_and_says_so():
    model = CutModel({"SYNTHESIZE": ["Hypertension is persistently raised blood pressure. It is treated by"]})
    done = run(state("What is hypertension?", quality=None), model)
    update, output = done.update, done.output
    assert update["final_response"] == "Hypertension is persistently raised blood pressure."
    assert output["cut_at_token_limit"] is True


def test_a_finished_answer_is_left_whole():
    model = ScriptedModel({"SYNTHESIZE": ["Hypertension is raised blood pressure, treated by"]})
    done = run(state("What is hypertension?", quality=None), model)
    update, output = done.update, done.output
    assert update["final_response"] == "Hypertension is raised blood pressure, treated by"
    assert output["cut_at_token_limit"] is False


# -- the answer guard ------------------------------------------------------------------------
from appliance.agent.nodes.synthesize import SYSTEM_PROMPT, answer_problem  # noqa: E402
from appliance.agent.state import ToolResult  # noqa: E402

SAFETY = ToolResult("check_drug_safety", "Drug Safety Report", {"drug_name": "amiodarone"},
                    {"boxed_warning": "pulmonary toxicity"},
                    "[Drug Safety Report] amiodarone: boxed warning for pulmonary toxicity, hepatic injury "
                    "and worsened arrhythmia.")


# The model writes only where code cannot read a result (an image's findings): the guard's cases
# run on such a result, holding the same findings text.
READ_BY_MODEL = ToolResult("analyze_medical_image", "Image Analysis", {"query": "amiodarone"},
                           {"findings": ["pulmonary toxicity"]}, SAFETY.formatted_result)


@pytest.mark.parametrize("answer, results, problem", [
    ("", (), "empty"),
    (SYSTEM_PROMPT.split("\n")[0], (), "repeated the instructions"),
    ("Clinician's question: Check FDA warnings for amiodarone. Clinical context: Safety lookup.", (SAFETY,),
     "repeated the instructions"),
    ("- If information was unavailable, say so plainly and do not speculate or fill the gap", (),
     "repeated the instructions"),
    ("The weather is pleasant and the garden is green.", (SAFETY,), "used none of the findings"),
    ("Amiodarone carries a boxed warning for pulmonary toxicity.", (SAFETY,), None),
    ("Hypertension is persistently raised arterial pressure.", (), None),  # nothing was looked up
    # a base model looping (seen on the shipped model for "Does he have diabetes?")
    ("- If the patient is a child, do not provide a medical history.\n- If the patient is an adult, do not provide "
     "a medical history.\n- If the patient is an adult, do not provide a medical history.\n- If the patient is an "
     "adult, do not provide a medical history.", (), "repeated itself"),
    ("Take it with food. Take it with food.", (), None),  # twice is not a loop
])
def test_the_answer_guard(answer, results, problem):
    assert answer_problem(answer, state("Check FDA warnings for amiodarone", results=results)) == problem


def test_an_echoed_prompt_falls_back_to_the_findings_and_the_trace_says_why():
    echo = "Information found:\n[Drug Safety Report] Include only the most critical findings."
    model = ScriptedModel({"SYNTHESIZE": [echo]})
    done = run(state("Check FDA warnings for amiodarone", results=(READ_BY_MODEL,)), model)
    update, output = done.update, done.output
    assert update["final_response"].startswith("Here is what was found:")
    assert "pulmonary toxicity" in update["final_response"]
    assert output["fallback_used"] is True and output["fallback_reason"] == "repeated the instructions"


def test_an_answer_about_something_else_falls_back_to_the_findings():
    model = ScriptedModel({"SYNTHESIZE": ["Metformin is first-line therapy for type 2 diabetes."]})
    done = run(state("Check FDA warnings for amiodarone", results=(READ_BY_MODEL,)), model)
    update, output = done.update, done.output
    assert "pulmonary toxicity" in update["final_response"]
    assert output["fallback_reason"] == "used none of the findings"


def test_a_grounded_answer_is_kept():
    model = ScriptedModel({"SYNTHESIZE": ["Amiodarone: boxed warning for pulmonary toxicity and hepatic injury."]})
    done = run(state("Check FDA warnings for amiodarone", results=(READ_BY_MODEL,)), model)
    update, output = done.update, done.output
    assert update["final_response"] == "Amiodarone: boxed warning for pulmonary toxicity and hepatic injury."
    assert output["fallback_used"] is False and output["fallback_reason"] is None
