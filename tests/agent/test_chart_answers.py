"""Chart questions (appliance/agent/chart_answers.py): which words ask about which section of
the chart, and code's rendering of the chart's own facts for them."""

from __future__ import annotations

import pytest

from appliance.agent.chart_answers import render
from appliance.agent.reading.chart_topics import ORDER, chart_topics
from appliance.agent.reading.task_patterns import named_steps
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

TOPICS = [
    ("any allergies?", ("allergies",)),
    ("Does she have any drug allergies?", ("allergies",)),
    ("What medications is this patient on?", ("medications",)),
    ("what meds is he taking", ("medications",)),
    ("What is she on?", ("medications",)),
    ("List his active problems", ("problems",)),
    ("What are her diagnoses?", ("problems",)),
    ("last HbA1c?", ("labs",)),
    ("What was the most recent eGFR?", ("labs",)),
    ("Any recent lab results?", ("labs",)),
    ("What's her blood pressure?", ("vitals",)),
    ("latest weight?", ("vitals",)),
    ("What did the last note say?", ("notes",)),
    ("Summarise the chart", ORDER),
    ("Give me an overview of this patient", ORDER),
    ("allergies and current meds please", ("allergies", "medications")),
    # seen answered with no chart read on the shipped model
    ("Is he on any blood thinners?", ("medications",)),
    ("Does he have diabetes?", ("problems",)),
    ("Is he on a statin?", ("medications",)),
    ("Is she pregnant?", ("problems",)),
    ("has he been diagnosed with COPD?", ("problems",)),
    ("Does he have any allergies?", ("allergies",)),
    # not chart questions
    ("Add a penicillin allergy with hives", ()),
    ("Prescribe amoxicillin 500 mg three times daily", ()),
    ("What is hypertension?", ()),
    ("Does metformin cause lactic acidosis?", ()),
    ("Is warfarin safe for him?", ()),
    ("Recruiting trials for mesothelioma?", ()),
    ("Save a note: allergies reviewed, meds unchanged", ()),
]


@pytest.mark.parametrize("words, topics", TOPICS)
def test_the_words_name_the_sections(words, topics):
    assert chart_topics(words) == topics


def test_a_chart_question_names_the_chart_step():
    assert [s.tool for s in named_steps("any allergies?")] == ["get_patient_chart"]
    assert [s.tool for s in named_steps("What is hypertension?")] == []


@pytest.fixture(scope="module")
def chart(tmp_path_factory):
    path = tmp_path_factory.mktemp("ehr") / "ehr.sqlite"
    ensure_database(path)
    return EhrRepository(path).get_patient_chart("abc-123")


def test_render_writes_the_charts_rows_and_nothing_else(chart):
    text = render(chart, ("allergies", "medications"))
    assert "John Smith" in text and "abc-123" in text
    assert "Sulfamethoxazole (Generalised maculopapular rash; moderate)" in text
    for med in chart["medications"]:
        assert med["medication_name"] in text
    assert "Active problems" not in text and "labs" not in text.lower()


def test_render_picks_the_lab_asked_for(chart):
    text = render(chart, ("labs",), "What was his last HbA1c?")
    assert "Hemoglobin A1c" in text and "Creatinine" not in text
    assert "7.9" in text


def test_an_empty_section_is_said_in_words(chart):
    empty = {**chart, "allergies": []}
    assert "No allergies recorded." in render(empty, ("allergies",))
    missing = {k: v for k, v in chart.items() if k != "allergies"}
    assert "not included in the chart that was read" in render(missing, ("allergies",))
