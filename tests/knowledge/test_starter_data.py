"""The shipped drug and interaction tables (``mcp_servers/knowledge/data``) and their loader:
every record is well formed, every interaction names a shipped drug, no name means two drugs,
and the loader reads every ``drugs*.json`` / ``interactions*.json`` with a duplicate generic an
error naming both files."""

from __future__ import annotations

import json
import shutil

import pytest

from mcp_servers.knowledge import queries, starter
from mcp_servers.knowledge.starter import load_starter_content
from mcp_servers.knowledge.store import connect, migrate
from mcp_servers.knowledge.writes import SEVERITIES

REQUIRED = ("generic_name", "brand_names", "synonyms", "drug_class", "label_basis", "boxed_warning",
            "contraindications", "major_warnings")
MIN_DRUGS = 200


def _records() -> list[tuple[str, dict]]:
    return [(name, d) for name in starter.drug_files() for d in starter._load(name)["drugs"]]


def _text_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v.strip() == v and v for v in value)


def test_the_shipped_data_holds_at_least_200_drugs(knowledge_db):
    assert len(starter.starter_drugs()) >= MIN_DRUGS
    db = connect(knowledge_db, read_only=True)
    try:
        assert db.execute("SELECT COUNT(*) FROM drugs WHERE origin = 'starter'").fetchone()[0] >= MIN_DRUGS
    finally:
        db.close()


def test_drug_files_load_drugs_json_first_then_the_others_by_name():
    files = starter.drug_files()
    assert files[0] == "drugs.json" and "drugs_primary_care.json" in files
    assert list(files[1:]) == sorted(files[1:])
    assert starter.interaction_files()[0] == "interactions.json"
    assert set(starter.drug_files() + starter.interaction_files()) <= set(starter.starter_files())


@pytest.mark.parametrize("file_name, record", _records(), ids=lambda v: v["generic_name"] if isinstance(v, dict) else v)
def test_every_drug_record_is_well_formed(file_name, record):
    assert list(record) == list(REQUIRED), f"{file_name}: fields"
    generic = record["generic_name"]
    assert generic == generic.strip().lower() and generic, file_name
    assert _text_list(record["brand_names"]) and _text_list(record["synonyms"])
    assert isinstance(record["drug_class"], str) and record["drug_class"].strip()
    assert isinstance(record["label_basis"], str) and len(record["label_basis"]) > 10
    boxed = record["boxed_warning"]
    assert boxed is None or (isinstance(boxed, str) and len(boxed) > 20)
    assert _text_list(record["contraindications"]) and record["contraindications"]
    assert _text_list(record["major_warnings"]) and len(record["major_warnings"]) >= 3


def test_the_new_files_say_paraphrased_and_marked_for_pharmacist_review():
    for name in starter.drug_files() + starter.interaction_files():
        if name in ("drugs.json", "interactions.json"):
            continue
        provenance = starter._load(name)["provenance"]
        assert "Paraphrased from US labels" in provenance
        assert "marked for pharmacist review" in provenance
    for drug in starter.starter_drugs():
        assert drug["demo"] is True and drug["source_id"] == "demo"
        assert drug["label_basis"] in drug["source"] and "marked for pharmacist review" in drug["source"]


def test_every_interaction_names_shipped_drugs_with_a_known_severity_once():
    generics = {d["generic_name"] for d in starter.starter_drugs()}
    seen: dict[tuple[str, str], str] = {}
    for name in starter.interaction_files():
        for entry in starter._load(name)["interactions"]:
            assert entry["severity"] in SEVERITIES, entry
            assert entry["mechanism"].strip() and entry["management"].strip(), entry
            for a in entry["a"]:
                for b in entry["b"]:
                    assert {a, b} <= generics, (name, a, b)
                    assert a != b, (name, a)
                    pair = tuple(sorted((a, b)))
                    assert pair not in seen, f"{pair} in {seen.get(pair)} and {name}"
                    seen[pair] = name
    assert sum(1 for f in seen.values() if f == "interactions_primary_care.json") >= 80


def test_every_shipped_name_resolves_to_its_own_drug_only(knowledge_db):
    db = connect(knowledge_db, read_only=True)
    try:
        for drug in starter.starter_drugs():
            for name in [drug["generic_name"], *drug["brand_names"], *drug["synonyms"]]:
                assert queries.resolve_drug(db, name) == drug["generic_name"], name
    finally:
        db.close()


# -- the loader on a data directory of the test's own ---------------------------------------
def _data_dir(tmp_path, extra_drugs: list[dict], name: str = "drugs_extra.json"):
    data = tmp_path / "data"
    shutil.copytree(starter.DATA_DIR, data)
    for path in data.glob("*_primary_care.json"):
        path.unlink()
    (data / name).write_text(json.dumps({"provenance": "test", "drugs": extra_drugs}), encoding="utf-8")
    return data


def _drug(generic: str) -> dict:
    return {"generic_name": generic, "brand_names": ["Testbrand"], "synonyms": [], "drug_class": "test class",
            "label_basis": "a test label basis", "boxed_warning": None, "contraindications": ["none known"],
            "major_warnings": ["a", "b", "c"]}


def test_a_generic_name_in_two_drug_files_is_an_error_naming_both(tmp_path):
    data = _data_dir(tmp_path, [_drug("warfarin")])
    with pytest.raises(ValueError, match=r"'warfarin' is in both drugs\.json and drugs_extra\.json"):
        starter.starter_drugs(data)


def test_a_generic_name_twice_in_one_file_is_an_error(tmp_path):
    data = _data_dir(tmp_path, [_drug("zorbitravine"), _drug("zorbitravine")])
    with pytest.raises(ValueError, match=r"'zorbitravine' is in both drugs_extra\.json and drugs_extra\.json"):
        starter.starter_drugs(data)


def test_an_added_drug_file_is_loaded_and_changes_the_starter_hash(tmp_path):
    data = _data_dir(tmp_path, [_drug("zorbitravine")])
    names = [d["generic_name"] for d in starter.starter_drugs(data)]
    assert names[0] == "dofetilide" and names[-1] == "zorbitravine"  # drugs.json first
    before = starter.starter_hash(data)
    (data / "drugs_extra.json").unlink()
    assert starter.starter_hash(data) != before
    assert "zorbitravine" not in {d["generic_name"] for d in starter.starter_drugs(data)}


def test_an_interaction_naming_a_drug_no_file_holds_fails_the_load(tmp_path):
    data = _data_dir(tmp_path, [_drug("zorbitravine")])
    rows = {"provenance": "test", "interactions": [
        {"a": ["zorbitravine"], "b": ["notadrugazine"], "severity": "major", "mechanism": "m", "management": "m"}]}
    (data / "interactions_extra.json").write_text(json.dumps(rows), encoding="utf-8")
    assert starter.interaction_files(data) == ("interactions.json", "interactions_extra.json")
    db = connect(tmp_path / "k.sqlite")
    try:
        migrate(db)
        with pytest.raises(ValueError, match="notadrugazine"):
            load_starter_content(db, data)
    finally:
        db.close()
