"""The three stages on a protocol written for the test, with a scripted model: which calls the
code shortcuts save, what each stage keeps, and what code checks in the model's answers."""

from __future__ import annotations

import pytest
from extraction_helpers import (
    EXPECTED,
    PROTOCOL_PAGES,
    details,
    protocol_script,
    text_pdf,
)

from appliance.errors import ConstrainedOutputInvalid
from appliance.extraction import ExtractionConfig, extract_criteria, load_documents
from appliance.extraction.chunking import split_to_fit, token_counter
from appliance.extraction.loaders import Document, Page
from appliance.extraction.stages import (
    DETAILS_NODE,
    PAGE_NODE,
    PARAGRAPH_NODE,
    SPLIT_NODE,
    checked_pieces,
)
from appliance.llm.fake import ScriptedModel
from appliance.llm.prompt import render_gemma


@pytest.fixture(params=["txt", "md", "pdf"])
def protocol(request, tmp_path):
    if request.param == "pdf":
        path = tmp_path / "protocol.pdf"
        path.write_bytes(text_pdf(PROTOCOL_PAGES))
    elif request.param == "md":
        path = tmp_path / "protocol.md"
        md = "\f".join(PROTOCOL_PAGES).replace("Inclusion Criteria:", "## Inclusion Criteria").replace(
            "Exclusion Criteria:", "**Exclusion Criteria**").replace(">= 18", "\\>= 18")
        path.write_text(md, encoding="utf-8")
    else:
        path = tmp_path / "protocol.txt"
        path.write_text("\f".join(PROTOCOL_PAGES), encoding="utf-8")
    return path


def test_the_protocol_gives_its_known_criteria_with_the_model_asked_only_where_the_text_is_silent(protocol):
    model = ScriptedModel(protocol_script())
    result = extract_criteria(load_documents(protocol), model)
    assert [(c.text, c.type) for c in result.criteria] == EXPECTED
    assert model.pending() == {}  # every scripted reply used: no call more, no call less
    nodes = [call.node for call in model.history]
    assert nodes.count(PAGE_NODE) == 2  # pages 1 and 4; page 2 by its heading, page 3 as a continuation
    assert nodes.count(PARAGRAPH_NODE) == 2  # the prose under the heading, the list after "STUDY TREATMENT"
    assert nodes.count(SPLIT_NODE) == 1  # the one bullet with a semicolon
    assert nodes.count(DETAILS_NODE) == 8  # the repeated "Pregnant or breastfeeding" is not described twice
    assert result.stats["duplicates_removed"] == 1
    assert result.documents[0]["pages_with_criteria"] == [2, 3]
    by_text = {c.text: c for c in result.criteria}
    age = by_text["Age >= 18 years"]
    assert age.provenance == {"page_filter": "heading", "paragraph_filter": "bullets", "split": "bullet",
                              "type": "heading", "details": "model", "model_type": "inclusion"}
    assert [t.to_json() for t in age.thresholds] == [{"comparator": ">=", "value": 18, "unit": "years"}]
    platelets = by_text["Platelet count at least 100,000/mm3"]
    assert platelets.provenance["split"] == "model"
    assert [t.to_json() for t in platelets.thresholds] == [{"comparator": ">=", "value": 100000, "unit": "/mm3"}]
    assert by_text["Active pleural infection"].provenance["page_filter"] == "continuation"
    pleurodesis = by_text["Prior pleurodesis within the past 30 days"]
    assert pleurodesis.temporal == "within the past 30 days" and pleurodesis.assertion == "historical"
    allergy = by_text["Patients with a known allergy to talc are not eligible."]
    assert allergy.provenance["paragraph_filter"] == "model"
    assert allergy.type == "exclusion"  # the heading above it wins over the model's "inclusion"
    assert any("the model said inclusion" in note for note in allergy.notes)
    assert by_text["INR below 1.5"].triplets[0].entity == "INR"


def test_result_json_has_text_and_type_on_every_criterion(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("\f".join(PROTOCOL_PAGES))
    out = extract_criteria(load_documents(path), ScriptedModel(protocol_script())).to_json()
    assert list(out)[0] == "criteria" and len(out["criteria"]) == len(EXPECTED)
    for crit in out["criteria"]:
        assert crit["text"] and crit["type"] in ("inclusion", "exclusion")
        assert {"category", "assertion", "thresholds", "temporal", "triplets", "provenance"} <= set(crit)
        for t in crit["triplets"]:
            assert set(t) == {"entity", "relation", "value", "unit"}


def test_what_the_text_does_not_say_is_dropped():
    doc = Document("d", "ctgov", (Page(1, "Inclusion Criteria:\n\n* Age 18 years or older\n"),))
    model = ScriptedModel({DETAILS_NODE: [details(
        entity="hemoglobin", thresholds=["< 50000 /mm3", ">= 18 years"], temporal="within 4 weeks")]})
    crit = extract_criteria([doc], model).criteria[0]
    assert [t.to_json() for t in crit.thresholds] == [{"comparator": ">=", "value": 18, "unit": "years"}]
    assert crit.temporal is None and crit.triplets == []
    assert "threshold '< 50000 /mm3'" in crit.notes[0] and "entity 'hemoglobin'" in crit.notes[0]


def test_a_side_the_text_does_not_give_comes_from_the_model():
    doc = Document("d", "ctgov", (Page(1, "* No prior chest surgery\n* Able to consent\n"),))
    model = ScriptedModel({DETAILS_NODE: [
        details("exclusion", entity="chest surgery", relation="has_not", value=None, unit=None),
        details("inclusion", entity="consent", relation="has", value=None, unit=None)]})
    result = extract_criteria([doc], model)
    assert [(c.type, c.provenance["type"]) for c in result.criteria] == [("exclusion", "model"), ("inclusion", "model")]


def test_split_pieces_must_be_the_passages_own_words():
    passage = "Platelet count at least 100,000/mm3; INR below 1.5"
    assert checked_pieces(passage, ["Platelet count at least 100,000/mm3", "INR below 1.5"])[1] == "model"
    # an invented piece is dropped; too little left of the passage keeps it whole
    assert checked_pieces(passage, ["Hemoglobin above 9 g/dL", "INR below 1.5"]) == ([passage], "passage")
    # words dropped from the middle, fragments, and pieces inside other pieces do not count
    assert checked_pieces(passage, ["Platelet count 100,000/mm3", "INR below 1.5"])[1] == "passage"
    assert checked_pieces(passage, [passage, "INR below 1.5"]) == ([passage], "passage")
    assert checked_pieces(passage, ["Platelet count at least 100,000/mm3", "INR below", "INR below 1.5"]) == (
        ["Platelet count at least 100,000/mm3", "INR below 1.5"], "model")


def test_a_failed_model_output_costs_one_decision_with_a_warning():
    doc = Document("d", "ctgov", (Page(1, "Exclusion Criteria:\n\n* Heart failure; renal failure\n"),))
    model = ScriptedModel({SPLIT_NODE: [ConstrainedOutputInvalid("AtomicSplit: output is not JSON")],
                           DETAILS_NODE: [ConstrainedOutputInvalid("CriterionDetails: output is not JSON")]})
    result = extract_criteria([doc], model)
    [crit] = result.criteria
    assert crit.text == "Heart failure; renal failure" and crit.type == "exclusion"
    assert crit.provenance["split"] == "passage" and crit.provenance["details"] == "failed"
    assert len(result.warnings) == 2 and result.stats["model_failures"] == 2


def test_without_model_calls_the_bullets_and_headings_still_give_criteria():
    doc = Document("d", "ctgov", (Page(1, "Inclusion Criteria:\n\n* Age >= 18 years; ECOG 0-1\n\n"
                                          "Exclusion Criteria:\n\n* Pregnancy\n"),))
    model = ScriptedModel()
    result = extract_criteria([doc], model, ExtractionConfig(split=False, details=False))
    assert [(c.text, c.type) for c in result.criteria] == [("Age >= 18 years; ECOG 0-1", "inclusion"),
                                                          ("Pregnancy", "exclusion")]
    assert model.history == []
    assert [t.to_json()["value"] for t in result.criteria[0].thresholds] == [18, 0, 1]


def _long_protocol(n: int) -> str:
    background = "\n\n".join(f"Background paragraph {i} about pleural disease and its drainage in adults." * 3
                             for i in range(40))
    bullets = "\n".join(f"* Criterion number {i} about a lab value at least {i} mg/dL" for i in range(n))
    return f"{background}\n\nInclusion Criteria:\n\n{bullets}\n"


def test_a_long_protocol_is_cut_to_the_context_and_no_prompt_overflows(tmp_path):
    n_ctx = 700
    path = tmp_path / "long.txt"
    path.write_text(_long_protocol(60))
    docs = load_documents(path)
    assert len(docs[0].pages) == 1
    model = ScriptedModel({PAGE_NODE: [{"holds_criteria": False}] * 50,
                           PARAGRAPH_NODE: [{"holds_criteria": False}] * 50})
    progress = []
    result = extract_criteria(docs, model, ExtractionConfig(n_ctx=n_ctx, details=False), progress=progress.append)
    count = token_counter(model)
    assert model.history  # the background windows went to the model
    for call in model.history:
        assert count(render_gemma(call.messages)) + call.max_tokens <= n_ctx
    assert result.documents[0]["windows"] > 3
    assert len(result.criteria) == 60 and all(c.type == "inclusion" for c in result.criteria)
    # the list ran over several windows: the heading's side carried over with it
    assert "continuation" in {c.provenance["page_filter"] for c in result.criteria}
    pages = [p for p in progress if p.stage == "pages"]
    assert pages[-1].done == pages[-1].total == result.documents[0]["windows"]
    assert [p for p in progress if p.stage == "criteria"][-1].criteria == 60


def test_split_to_fit_keeps_every_word_in_order():
    count = token_counter(ScriptedModel())
    text = " ".join(f"word{i}" for i in range(500)) + "\n\n" + "x" * 900
    pieces = split_to_fit(text, 60, count)
    assert all(count(p) <= 60 for p in pieces)
    assert "".join("".join(pieces).split()) == "".join(text.split())
