"""Ending an output the token limit cut (appliance.llm.closing), for every output schema the
appliance decodes: every prefix of a text the grammar accepts gets an ending that makes the
whole text accepted, within the bound the server keeps back."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.agent.schemas import LLM_SCHEMAS
from appliance.extraction.schemas import (
    AtomicSplit,
    CriterionDetails,
    PageFilter,
    ParagraphFilter,
)
from appliance.llm.closing import closing, closing_reserve
from appliance.llm.grammar import accepts, output_schema
from appliance.llm.vision import ImageFindings
from appliance.prescreen.search import SearchProposal
from mcp_servers.contracts import ARG_SCHEMAS

SCHEMAS = list(LLM_SCHEMAS) + list(ARG_SCHEMAS.values()) + [
    PageFilter, ParagraphFilter, AtomicSplit, CriterionDetails, ImageFindings, SearchProposal]

def values(schema: dict, defs: dict):
    """A strategy for values the grammar accepts (strings kept short: prefixes are what count)."""
    if "$ref" in schema:
        return values(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return st.one_of([values(option, defs) for option in schema["anyOf"]])
    if "enum" in schema or "const" in schema:
        return st.sampled_from(schema.get("enum", [schema.get("const")]))
    kind = schema.get("type")
    if kind == "object":
        props = schema["properties"]
        return st.fixed_dictionaries({k: values(v, defs) for k, v in props.items()}).map(
            lambda d: {k: d[k] for k in props})  # in declared order
    if kind == "string":
        lo, hi = int(schema.get("minLength", 0)), int(schema.get("maxLength", 2000))
        text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters='"\\'),
                       min_size=lo, max_size=min(hi, lo + 12))
        return text.filter(lambda s: lo == 0 or not s[:1].isspace())
    if kind == "array":
        lo, hi = int(schema.get("minItems", 0)), int(schema.get("maxItems", 16))
        return st.lists(values(schema.get("items") or {}, defs), min_size=lo, max_size=min(hi, lo + 3))
    if kind == "integer":
        return st.integers(-999, 99999)
    if kind == "number":
        return st.floats(-1000, 1000, allow_nan=False).map(lambda x: round(x, 3))
    if kind == "boolean":
        return st.booleans()
    return st.none()


def compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_cut_of_an_accepted_output_can_be_ended(schema, data):
    derived = output_schema(schema)
    text = compact(data.draw(values(derived.json_schema, derived.defs)))
    assert accepts(schema, text), text
    reserve = closing_reserve(schema)
    for cut in range(len(text)):
        prefix = text[:cut]
        ending = closing(derived, prefix)
        assert ending is not None, f"no ending for {prefix!r}"
        assert accepts(schema, prefix + ending.example), (prefix, ending.example)
        assert len(ending.example) <= ending.longest < reserve, (prefix, ending.longest, reserve)
    assert closing(derived, text) is None  # a whole output needs no ending


def test_a_cut_string_is_closed_where_it_stopped_and_choices_stay_open():
    from appliance.agent.schemas import IntentClassification, ResultAssessment

    derived = output_schema(ResultAssessment)
    ending = closing(derived, '{"quality":"success_rich","brief_summary":"a long and rambling summ')
    assert ending.example == '"}' and ending.grammar == 'root ::= "\\"" "}"\n'
    ending = closing(derived, '{"quality":"success_rich","brief_summary":"')  # one character is required
    assert accepts(ResultAssessment, '{"quality":"success_rich","brief_summary":"' + ending.example)
    assert ending.example != '"}'
    # cut in the middle of a choice: every option that fits stays open
    ending = closing(derived, '{"quality":"success_')
    assert "rich" in ending.grammar and "partial" in ending.grammar and "no_results" not in ending.grammar
    # a later nullable choice is the model's, not code's
    derived = output_schema(IntentClassification)
    ending = closing(derived, '{"intent":"TOOL_NEEDED","task_summary":"check the chart of')
    assert "null" in ending.grammar and "get_patient_chart" in ending.grammar


def test_text_that_is_no_prefix_of_the_language_gets_no_ending():
    derived = output_schema(LLM_SCHEMAS[0])
    assert closing(derived, '{"nonsense":') is None
    assert closing(derived, "[") is None


def test_llama_cpp_parses_the_ending_grammars():
    """A malformed grammar crashes llama.cpp: parse a spread of endings in a child process."""
    code = textwrap.dedent("""
        import json, sys
        from llama_cpp import LlamaGrammar
        for grammar in json.load(sys.stdin):
            LlamaGrammar.from_string(grammar, verbose=False)
        print("ok")
    """)
    grammars = []
    for schema in SCHEMAS:
        derived = output_schema(schema)
        text = closing(derived, "").example  # the shortest whole output
        grammars += [closing(derived, text[:cut]).grammar for cut in range(0, len(text), 3)]
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(grammars), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
