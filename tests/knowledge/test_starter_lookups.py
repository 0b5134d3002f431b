"""The primary-care starter drugs through the knowledge server's tools (in memory, real fastmcp
Client, real SQLite) and through the safety gate's identification of a prescribed name."""

from __future__ import annotations

import pytest

from appliance.safety.gate import check_prescription
from appliance.safety.knowledge import StoreKnowledge
from mcp_servers.knowledge import starter
from tests.knowledge.knowledge_helpers import call

BY_NAME = [
    # generic, INN / British and salt spellings
    ("metronidazole", "metronidazole"), ("cetirizine hydrochloride", "cetirizine"), ("salbutamol", "albuterol"),
    ("metoprolol succinate", "metoprolol"), ("co-amoxiclav", "amoxicillin-clavulanate"),
    ("amoxicillin/clavulanate", "amoxicillin-clavulanate"), ("sulfamethoxazole/trimethoprim", "trimethoprim-sulfamethoxazole"),
    ("TMP-SMX", "trimethoprim-sulfamethoxazole"), ("potassium chloride 20 mEq", "potassium chloride"),
    ("insulin lispro", "insulin lispro"), ("polyethylene glycol 3350", "polyethylene glycol 3350"), ("senna", "sennosides"),
    ("tenofovir disoproxil/lamivudine/efavirenz", "efavirenz-lamivudine-tenofovir disoproxil"),
    ("levonorgestrel/ethinyl estradiol", "levonorgestrel-ethinyl estradiol"), ("rifampicin", "rifampin"),
    # US brands, single drugs and fixed combinations
    ("Augmentin", "amoxicillin-clavulanate"), ("Bactrim DS", "trimethoprim-sulfamethoxazole"),
    ("Percocet", "oxycodone-acetaminophen"), ("Norco", "hydrocodone-acetaminophen"), ("Zyrtec", "cetirizine"),
    ("Flagyl", "metronidazole"), ("Janumet", "sitagliptin-metformin"), ("Entresto", "sacubitril-valsartan"),
    ("Symbicort", "budesonide-formoterol"), ("Advair Diskus", "fluticasone-salmeterol"),
    ("Suboxone", "buprenorphine-naloxone"), ("Coartem", "artemether-lumefantrine"), ("Sinemet", "carbidopa-levodopa"),
    ("Adderall", "amphetamine-dextroamphetamine"), ("Eliquis", "apixaban"), ("Xarelto", "rivaroxaban"),
    ("Ozempic", "semaglutide"), ("Humulin N", "insulin isophane"), ("MiraLAX", "polyethylene glycol 3350"),
]


@pytest.mark.parametrize("name, generic", BY_NAME)
def test_check_drug_safety_finds_primary_care_drugs_by_generic_and_brand(server, name, generic):
    result, error = call("check_drug_safety", {"drug_name": name})
    assert error is None, error
    assert result["drug"] == generic and result["demo_content"] is True
    assert result["contraindications"] and result["major_warnings"]
    assert "marked for pharmacist review" in result["source"]


def test_a_boxed_warning_and_its_absence_come_from_the_new_data(server):
    flagyl, _ = call("check_drug_safety", {"drug_name": "Flagyl"})
    assert flagyl["has_boxed_warning"] is True and "carcinogenic" in flagyl["boxed_warning"].lower()
    assert any("disulfiram" in c for c in flagyl["contraindications"])
    zyrtec, _ = call("check_drug_safety", {"drug_name": "Zyrtec"})
    assert zyrtec["has_boxed_warning"] is False and zyrtec["boxed_warning"] is None


def test_check_drug_interactions_finds_warfarin_with_metronidazole(server):
    for names in (["warfarin", "metronidazole"], ["Flagyl", "Coumadin"]):
        result, error = call("check_drug_interactions", {"drug_names": names})
        assert error is None, error
        [row] = result["interactions"]
        assert row["drugs"] == ["metronidazole", "warfarin"] and row["severity"] == "major"
        assert "INR" in row["management"] and row["demo_content"] is True


@pytest.mark.parametrize("names, pair, severity", [
    (["Bactrim", "Coumadin"], ["trimethoprim-sulfamethoxazole", "warfarin"], "major"),
    (["Percocet", "Xanax"], ["alprazolam", "oxycodone-acetaminophen"], "major"),
    (["Viagra", "Imdur"], ["isosorbide mononitrate", "sildenafil"], "contraindicated"),
    (["Entresto", "lisinopril"], ["lisinopril", "sacubitril-valsartan"], "contraindicated"),
    (["Lexapro", "Zyvox"], ["escitalopram", "linezolid"], "contraindicated"),
    (["lithium", "Mobic"], ["lithium", "meloxicam"], "major"),
    (["Plavix", "Nexium"], ["clopidogrel", "esomeprazole"], "major"),
])
def test_interactions_of_the_new_table_by_brand_and_generic(server, names, pair, severity):
    result, error = call("check_drug_interactions", {"drug_names": names})
    assert error is None, error
    assert [(r["drugs"], r["severity"]) for r in result["interactions"]] == [(pair, severity)]


def test_the_safety_gate_knows_every_shipped_generic_name(knowledge_db):
    """No shipped generic, prescribed by that name, is reported unknown to the local drug data."""
    knowledge = StoreKnowledge(knowledge_db)
    try:
        unknown = []
        for drug in starter.starter_drugs():
            report = check_prescription(drug["generic_name"], {}, knowledge)
            if any(f.kind == "unknown_drug" for f in report.findings):
                unknown.append(drug["generic_name"])
        assert unknown == []
    finally:
        knowledge.close()


@pytest.mark.parametrize("name", ["Augmentin", "Bactrim DS", "Percocet", "Norco", "Janumet", "Entresto", "Symbicort",
                                  "Advair", "Suboxone", "Coartem", "Sinemet", "Zyrtec", "Flagyl", "K-Tab"])
def test_the_safety_gate_checks_every_ingredient_of_a_combination_brand(knowledge_db, name):
    knowledge = StoreKnowledge(knowledge_db)
    try:
        report = check_prescription(name, {}, knowledge)
    finally:
        knowledge.close()
    assert report.checked["drug_data"] is True
    assert not [f.text for f in report.findings if f.kind == "unknown_drug"]
