"""One resolution of a drug name to its ingredients, and the gate reading brands,
combinations and synonyms through it: the six brand names written headless before, each with the
finding a pharmacist would give, on the real demo charts and the real knowledge database."""

from __future__ import annotations

import pytest

from appliance.medication.names import DrugRecogniser
from appliance.safety import Override, check_prescription, decide
from appliance.safety.headless import OVERRIDE_HINT, HeadlessApprover
from appliance.safety.ingredients import DrugResolver, default_resolver, ingredients_of
from appliance.safety.knowledge import ToolBoxKnowledge, synonym_from
from mcp_servers.umls import server as umls_server
from tests.safety.safety_helpers import InMemoryToolBox, codes, make_chart


# -- the resolution ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, expected", [
    ("Zosyn", {"piperacillin", "tazobactam"}),
    ("Excedrin", {"acetaminophen", "aspirin", "caffeine"}),
    ("Excedrin Migraine 2 tabs", {"acetaminophen", "aspirin", "caffeine"}),  # a mention inside the name
    ("MS Contin", {"morphine"}),
    ("Azulfidine", {"sulfasalazine"}),
    ("Janumet", {"metformin", "sitagliptin"}),
    ("Accutane", {"isotretinoin"}),
    ("Augmentin", {"amoxicillin", "clavulanate"}),  # the dictionary's "clavulanic acid", named as classes do
    ("piperacillin/tazobactam 4.5 g", {"piperacillin", "tazobactam"}),
    ("trimethoprim-sulfamethoxazole DS", {"trimethoprim", "sulfamethoxazole"}),
    ("metoprolol succinate", {"metoprolol"}),  # salt dropped
    ("rosuvastatin calcium", {"rosuvastatin"}),
    ("amoxycillin", {"amoxicillin"}),  # spelling
    ("paracetamol", {"acetaminophen"}),
    ("penicillin VK", {"penicillin v"}),  # the dictionary's "phenoxymethylpenicillin", a curated alias
    ("Depakote", {"valproate"}),  # "valproic acid" named as its anion
    ("Duragesic", {"fentanyl"}),  # the dictionary's "fentanyl patch": dose-form word dropped
    ("potassium chloride", {"potassium chloride"}),  # never down to a bare salt word
    ("Carbidopa/levodopa 25/100", {"carbidopa", "levodopa"}),
    ("zorbitravine", set()),
    ("", set()),
])
def test_ingredients_of_names(name, expected):
    assert ingredients_of(name) == frozenset(expected)


def test_a_combination_generic_splits_only_into_drug_names():
    resolver = default_resolver()
    assert resolver.parts("acetaminophen-aspirin-caffeine") == {"acetaminophen", "aspirin", "caffeine"}
    assert resolver.parts("metformin-sitagliptin") == {"metformin", "sitagliptin"}
    assert resolver.parts("interferon alfa-2b") == {"interferon alfa 2b"}  # "2b" is no drug: one name


def test_the_recogniser_is_built_once_per_process():
    assert default_resolver() is default_resolver()


def test_extra_synonyms_and_the_lookup_are_used_only_as_told():
    asked: list[str] = []

    def synonym_of(name: str) -> str | None:
        asked.append(name)
        return "Morphine" if name == "Morphinex" else None

    resolver = DrugResolver(DrugRecogniser(bundled=False), {"Zolbex": "sitagliptin-metformin"})
    assert resolver.ingredients_of("Zolbex") == {"metformin", "sitagliptin"}
    assert resolver.ingredients_of("Morphinex", synonym_of) == {"morphine"}
    assert resolver.ingredients_of("metformin", synonym_of) == {"metformin"}
    assert asked == ["Morphinex"]  # never asked for a name the tables or the recogniser know


# -- the UMLS subset's synonyms ---------------------------------------------------------------
@pytest.mark.parametrize("name, concept", [
    ("MS Contin", "Morphine"), ("Azulfidine", "Sulfasalazine"), ("Glynase", "Glyburide"), ("ASA", "Aspirin"),
    ("HTN", None),  # a disease, not a drug
    ("zorbitravine", None),
])
def test_the_umls_subset_maps_synonyms_and_brands_to_drug_concepts(name, concept, umls_knowledge):
    assert umls_knowledge.drug_synonym(name) == concept


class _WithoutBrand:
    """The real lookups, except that the local drug data does not know ``brand`` by name (as
    it did not before the primary-care data named Glynase): only the UMLS subset can resolve it."""

    def __init__(self, store, brand: str):
        self._store, self._brand = store, brand.lower()

    def drug_safety(self, name: str):
        return None if name.lower() == self._brand else self._store.drug_safety(name)

    def __getattr__(self, attr):
        return getattr(self._store, attr)


def test_a_name_only_the_umls_subset_knows_is_checked_by_its_ingredient(chart_of, knowledge, umls_knowledge):
    # Glynase (glyburide) is in no curated table: Beers 2023 for William Anderson, 76.
    assert ingredients_of("Glynase") == frozenset()
    report = check_prescription("Glynase", chart_of("pat-015"), _WithoutBrand(umls_knowledge, "Glynase"))
    assert report.ingredients == ("glyburide",) and ("age", "moderate") in codes(report)
    without_umls = _WithoutBrand(knowledge, "Glynase")
    assert not hasattr(knowledge, "drug_synonym") or knowledge.drug_synonym("Glynase") is None
    assert check_prescription("Glynase", chart_of("pat-015"), without_umls).ingredients == ()


def test_synonyms_need_one_exact_drug_concept():
    drug = {"name": "Morphine", "score": 0.9, "tui": "T121"}
    assert synonym_from([drug]) == "Morphine"
    assert synonym_from([{**drug, "score": 0.875}]) is None  # a word match is not a synonym
    assert synonym_from([{**drug, "tui": "T047"}]) is None  # not a drug
    assert synonym_from([drug, {**drug, "name": "Codeine"}]) is None  # two concepts: no guess


def test_the_tool_lookup_gives_the_same_synonyms_as_the_store(data_home, umls_knowledge):
    umls_server.configure(data_home / "umls.sqlite")
    try:
        tools = ToolBoxKnowledge(InMemoryToolBox(umls_server), deadline=10.0)
        for name in ("MS Contin", "Glynase", "HTN", "zorbitravine"):
            assert tools.drug_synonym(name) == umls_knowledge.drug_synonym(name)
    finally:
        umls_server.configure(None)

    class Broken:
        def call(self, tool, args, deadline):
            raise TimeoutError

    assert ToolBoxKnowledge(Broken(), 1.0).drug_synonym("MS Contin") is None  # unknown, never a crash


# -- the six brand names once written headless with no finding --------------------------------
@pytest.mark.parametrize("drug, patient, kind, words", [
    ("Zosyn", "pat-006", "allergy", "penicillins"),  # penicillin anaphylaxis: piperacillin/tazobactam
    ("Excedrin", "pat-012", "allergy", "aspirin"),  # aspirin allergy
    ("MS Contin", "pat-017", "allergy", "morphine"),  # morphine allergy
    ("Azulfidine", "pat-010", "allergy", "sulfasalazine"),  # sulfasalazine allergy
    ("Janumet", "pat-015", "renal", "contraindicated below eGFR 30"),  # eGFR 24: metformin
    ("Accutane", "pat-008", "pregnancy", "contraindicated in pregnancy"),  # isotretinoin
])
def test_a_brand_gets_the_finding_a_pharmacist_would_give(drug, patient, kind, words, chart_of, umls_knowledge):
    report = check_prescription(drug, chart_of(patient), umls_knowledge)
    high = [f for f in report.by_severity("high") if f.kind == kind]
    assert high and words in high[0].text, report.lines()
    assert report.blocking
    decision = decide(report, True, Override(None, True), how_to_override=OVERRIDE_HINT)
    assert not decision.allowed and "--override-safety" in decision.message


def test_every_ingredient_of_a_combination_is_looked_up(chart_of, knowledge):
    # Excedrin: the data knows aspirin and acetaminophen, not caffeine; the name as a whole not at all.
    report = check_prescription("Excedrin", chart_of("pat-012"), knowledge)
    assert report.resolved == ("acetaminophen", "aspirin")
    assert report.unchecked and report.unchecked[0].startswith("caffeine in 'Excedrin' not checked")
    assert ("duplicate", "high") in codes(report)  # already on acetaminophen: a double dose


def test_a_brand_of_known_ingredients_is_fully_checked(knowledge, umls_knowledge):
    # Moxatag is a UMLS brand of amoxicillin, which the data knows: nothing is left unchecked.
    report = check_prescription("Moxatag", make_chart(40), umls_knowledge)
    assert report.resolved == ("amoxicillin",) and report.unchecked == [] and report.checked["drug_data"]
    assert not decide(report, True).audit["unchecked"]


# -- charted brands count too ------------------------------------------------------------------
def test_metformin_for_a_patient_on_janumet_is_a_high_duplicate(knowledge):
    report = check_prescription("metformin", make_chart(60, meds=["Janumet 50/1000"]), knowledge)
    duplicate = [f for f in report.findings if f.kind == "duplicate"]
    assert duplicate and duplicate[0].severity == "high" and "same ingredient (metformin)" in duplicate[0].text


def test_a_charted_combination_is_looked_up_in_the_interaction_data_by_its_ingredients(knowledge):
    report = check_prescription("warfarin", make_chart(60, meds=["Excedrin"]), knowledge)
    data = [f for f in report.findings if f.kind == "interaction" and f.source == "local interaction data"]
    assert data and data[0].severity == "high" and "Excedrin" in data[0].text  # warfarin with its aspirin


def test_class_rules_judge_the_ingredient_the_data_does_not_know(knowledge):
    # Dyazide: the data knows hydrochlorothiazide, not triamterene (potassium-sparing) -> hyperkalaemia.
    report = check_prescription("Dyazide", make_chart(60, meds=["Lisinopril"]), knowledge)
    assert any(f.kind == "interaction" and f.severity == "high" and "hyperkalaemia" in f.text
               for f in report.findings), report.lines()


def test_a_charted_brand_allergen_counts_by_its_ingredients(knowledge):
    chart = make_chart(40, allergies=[("Zosyn", "Anaphylaxis", "severe")])
    report = check_prescription("amoxicillin", chart, knowledge)
    assert ("cross_reactivity", "high") in codes(report)  # piperacillin and amoxicillin: penicillins


def test_class_duplicates_keep_their_curated_severity(knowledge):
    report = check_prescription("Advil", make_chart(40, meds=["Naprosyn"]), knowledge)
    assert {(f.kind, f.severity) for f in report.findings if f.kind == "duplicate"} == {("duplicate", "moderate")}


# -- the control: a safe brand ------------------------------------------------------------------
@pytest.mark.parametrize("patient", ["pat-003", "pat-011", "pat-019"])
def test_a_safe_brand_gets_no_high_finding(patient, chart_of, umls_knowledge):
    # Zithromax (azithromycin) for patients without a macrolide allergy or a QT-prolonging drug:
    # known to the local data, its dose within the label's: written headless, no override needed.
    report = check_prescription("Zithromax", chart_of(patient), umls_knowledge, dosage="500 mg",
                                frequency="once daily")
    assert report.ingredients == ("azithromycin",) and not report.blocking, report.lines()
    assert not report.unchecked and report.checked["dose"], report.lines()
    assert HeadlessApprover()("prescribe_medication", {}, report).approved