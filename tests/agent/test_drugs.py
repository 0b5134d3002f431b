"""The drug recogniser (appliance/medication/names.py): generic names, combinations, the overlay,
local names, the stop list, agreement with the knowledge server, and the write grounding."""

from __future__ import annotations

import sys

import pytest
import sqlite_utils

from appliance.agent.nodes import input_assembly, tool_execute
from appliance.agent.state import AgentState
from appliance.medication import names as drugs_module
from appliance.medication.names import DrugRecogniser, Mention
from mcp_servers.knowledge import queries as knowledge_queries
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge
from mcp_servers.umls import lookup as umls_lookup
from mcp_servers.umls.store import ensure_database as ensure_umls

DRUGS = DrugRecogniser()


@pytest.mark.parametrize("text, expected", [
    ("Check FDA warnings for dofetilide", ("dofetilide",)),
    ("Start Tylenol today", ("acetaminophen",)),
    ("paracetamol 1 g qds", ("acetaminophen",)),
    ("salbutamol nebs", ("albuterol",)),
    ("adrenaline 1 mg IV", ("epinephrine",)),
    ("Keytruda cycle 3", ("pembrolizumab",)),
    ("start dapagliflozin, hold Jardiance", ("dapagliflozin", "empagliflozin")),
    ("warfarin, aspirin and ibuprofen together", ("warfarin", "aspirin", "ibuprofen")),
    ("insulin glargine 10 units at night", ("insulin glargine",)),
    ("Lantus 10 units", ("insulin glargine",)),
    ("metformin XR 500 mg", ("metformin",)),
    ("propofol and dexmedetomidine overnight, norepinephrine weaned", ("propofol", "dexmedetomidine", "norepinephrine")),
    ("alteplase or tenecteplase for the stroke", ("alteplase", "tenecteplase")),
    ("iohexol contrast", ("iohexol",)),
    ("warfarin-induced bleed", ("warfarin",)),
    ("DOLIPRANE", ()),  # a French brand the dictionary does not hold: nothing, never a guess
])
def test_generic_names(text, expected):
    assert DRUGS.find(text) == expected


@pytest.mark.parametrize("written", [
    "piperacillin-tazobactam", "piperacillin/tazobactam", "tazobactam/piperacillin", "pip-tazo", "Zosyn",
])
def test_piperacillin_tazobactam_is_one_mention(written):
    assert DRUGS.find(f"Start {written} 4.5 g q6h") == ("piperacillin-tazobactam",)


@pytest.mark.parametrize("written, generic", [
    ("amoxicillin/clavulanate", "amoxicillin-clavulanate"),
    ("co-amoxiclav", "amoxicillin-clavulanate"),
    ("Augmentin", "amoxicillin-clavulanate"),
    ("TMP-SMX", "trimethoprim-sulfamethoxazole"),
    ("sulfamethoxazole-trimethoprim", "trimethoprim-sulfamethoxazole"),
    ("Bactrim DS", "trimethoprim-sulfamethoxazole"),
    ("co-trimoxazole", "trimethoprim-sulfamethoxazole"),
    ("ceftazidime-avibactam", "ceftazidime-avibactam"),
    ("Entresto", "sacubitril-valsartan"),
    ("carbidopa/levodopa", "carbidopa-levodopa"),
])
def test_combinations(written, generic):
    assert DRUGS.find(f"Give {written} now") == (generic,)


def test_drugs_joined_but_not_a_known_combination_stay_separate():
    """Both drugs reach the tools (an interaction check needs each), not an unknown compound."""
    assert DRUGS.find("on aspirin/clopidogrel") == ("aspirin", "clopidogrel")


def test_mentions_keep_what_was_written():
    text = "Start Tylenol and amoxicillin/clavulanate"
    assert DRUGS.mentions(text) == [
        Mention("Tylenol", "acetaminophen", 6, 13),
        Mention("amoxicillin/clavulanate", "amoxicillin-clavulanate", 18, 41),
    ]


def test_each_generic_once_in_order_of_first_mention():
    assert DRUGS.find("Tylenol, then paracetamol again, then warfarin, acetaminophen") == ("acetaminophen", "warfarin")


def test_local_names_widen_the_vocabulary_and_never_narrow_it():
    drugs = DrugRecogniser(["Zorblax", "warfarin"])
    assert drugs.find("Zorblax with warfarin and Keytruda") == ("zorblax", "warfarin", "pembrolizumab")
    assert drugs.generic("ZORBLAX") == "zorblax"
    assert DrugRecogniser([]).find("Zorblax") == ()


@pytest.mark.parametrize("word", ["gold", "iron", "oxygen", "water", "glucose", "potassium", "cortisol", "statins",
                                  "antibiotics", "vitamin", "Allegra", "Kendrick", "generics", "luminal"])
def test_stop_list_wins_over_every_source(word):
    """Stop-listed words, laboratory analytes, classes and person names are never drugs, even
    when a local vocabulary lists them (the UMLS subset names Cortisol)."""
    drugs = DrugRecogniser([word])
    assert drugs.find(f"The {word} was noted") == ()
    assert drugs.generic(word) is None


def test_short_names_are_not_matched():
    assert DrugRecogniser(["T4", "AB"]).find("free T4 and AB") == ()


def test_without_the_bundled_dictionary_only_overlay_and_local_names():
    drugs = DrugRecogniser(["dofetilide"], bundled=False)
    assert drugs.find("dofetilide, Keytruda, co-amoxiclav") == ("dofetilide", "amoxicillin-clavulanate")


def test_missing_library_degrades_to_local_names(monkeypatch, caplog):
    def missing():
        raise FileNotFoundError("drug_named_entity_recognition is not installed")

    monkeypatch.setattr(drugs_module, "_load_library", missing)
    assert drugs_module._library_entries() == ({}, {})
    assert "could not be read" in caplog.text


def test_the_library_module_is_never_imported():
    """Its import builds a fuzzy index (over a second, hundreds of MB); only its data is read."""
    assert DRUGS.find("Tylenol") == ("acetaminophen",)
    assert not [m for m in sys.modules if m.startswith("drug_named_entity_recognition")]


@pytest.fixture(scope="module")
def knowledge_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("knowledge") / "knowledge.sqlite"
    ensure_knowledge(path)
    return sqlite_utils.Database(path)


@pytest.fixture(scope="module")
def local_names(knowledge_db, tmp_path_factory):
    umls = tmp_path_factory.mktemp("umls") / "umls.sqlite"
    ensure_umls(umls)
    return knowledge_queries.vocabulary(knowledge_db), umls_lookup.drug_names(sqlite_utils.Database(umls))


def test_every_local_drug_name_is_recognised(local_names):
    knowledge, umls = local_names
    drugs = DrugRecogniser(knowledge + umls)
    missed = [n for n in knowledge + umls if len(n) >= 3 and not drugs.find(f"Start {n} today")
              and drugs_module.key_of(n) not in drugs_module.stoplist()]
    assert missed == []


def test_generics_resolve_to_the_same_drug_in_the_knowledge_server(knowledge_db, local_names):
    """What INPUT_ASSEMBLY offers the tools resolves where the clinician's own word does."""
    knowledge, umls = local_names
    drugs = DrugRecogniser(knowledge + umls)
    differ = []
    for name in knowledge:
        generic = drugs.generic(name)
        try:
            got = knowledge_queries.resolve_drug(knowledge_db, generic)
        except Exception as exc:  # noqa: BLE001 - reported below
            got = repr(exc)
        if got != knowledge_queries.resolve_drug(knowledge_db, name):
            differ.append((name, generic, got))
    assert differ == []
    assert knowledge_queries.drug_safety(knowledge_db, drugs.generic("Tylenol"))["drug"] == "acetaminophen"


def test_input_assembly_offers_generics_and_records_drugs_named_in_the_exchange():
    state = AgentState(user_query="500 mg twice daily for abc-123")
    history = [("user", "Prescribe Tylenol"), ("assistant", "I need more information: dose.")]
    done = input_assembly.run(state, DRUGS, history, 4)
    update, output = done.update, done.output
    assert update["extracted_entities"].drug_mentions == ()
    assert update["extracted_entities"].drugs_named == ("acetaminophen",)
    done = input_assembly.run(AgentState(user_query="Prescribe Tylenol 500 mg bid"), DRUGS, [], 4)
    update, output = done.update, done.output
    assert output["drug_mentions"] == ["acetaminophen"]


@pytest.mark.parametrize("value, grounded", [
    ("acetaminophen", True),    # the generic of the brand the clinician wrote
    ("Tylenol", True),          # their own word
    ("ibuprofen", False),       # a drug nobody named
])
def test_a_write_may_carry_the_generic_of_the_brand_the_clinician_wrote(value, grounded):
    args = {"patient_id": "abc-123", "medication_name": value, "dosage": "500 mg", "frequency": "twice daily"}
    said = "Prescribe Tylenol 500 mg twice daily for abc-123"
    unsaid = tool_execute.ungrounded_fields("prescribe_medication", args, said, DRUGS.find(said))
    assert (unsaid == []) is grounded
    assert tool_execute.ungrounded_fields("prescribe_medication", args, said) == ([] if value == "Tylenol" else ["medication_name"])
