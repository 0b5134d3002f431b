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
    update, output = run(state("What is hypertension?", quality=None), model)
    assert update["final_response"] == "Hypertension is persistently raised blood pressure."
    assert output["cut_at_token_limit"] is True


def test_a_finished_answer_is_left_whole():
    model = ScriptedModel({"SYNTHESIZE": ["Hypertension is raised blood pressure, treated by"]})
    update, output = run(state("What is hypertension?", quality=None), model)
    assert update["final_response"] == "Hypertension is raised blood pressure, treated by"
    assert output["cut_at_token_limit"] is False
