"""Recall and precision of the drug recogniser, measured on lists kept as data.

- tests/data/drug_recall.tsv: 962 drugs from public prescribing lists (provenance in its
  header); each name is embedded in "Start {name} today" and counts as recognised when the
  recogniser's mentions cover every word of it. Goal: >= 98 %.
- tests/data/drug_recall_heldout.tsv: 386 further drugs written after the overlay was fitted
  to the first list, no names added from it (its header tells its history): what to expect on
  names nobody tuned for (>= 95 %).
- tests/data/english_words.txt: the 5,000 most frequent English words, clinical words and
  person names: none may be recognised, alone or in a sentence.

The figures print with ``pytest -s``; misses are listed in the assertion message.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest
import sqlite_utils

from appliance.medication.names import TOKEN_RE, DrugRecogniser
from mcp_servers.knowledge import queries as knowledge_queries
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge
from mcp_servers.umls import lookup as umls_lookup
from mcp_servers.umls.store import ensure_database as ensure_umls

DATA = Path(__file__).resolve().parents[1] / "data"
PREFIX = "Start "


def read_list(name: str) -> list[tuple[str, str]]:
    lines = [line for line in (DATA / name).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(lines, delimiter="\t"))
    return [(r["name"], r["category"]) for r in rows]


def recognised(drugs: DrugRecogniser, name: str) -> bool:
    """Every word of ``name`` lies inside a mention, in a short clinical sentence."""
    spans = [(m.start, m.end) for m in drugs.mentions(f"{PREFIX}{name} today")]
    offset = len(PREFIX)
    return all(any(a <= w.start() + offset and w.end() + offset <= b for a, b in spans) for w in TOKEN_RE.finditer(name))


@pytest.fixture(scope="module")
def local_names(tmp_path_factory) -> list[str]:
    """The names the shipped knowledge and UMLS starter data report, as the tool box would."""
    root = tmp_path_factory.mktemp("local")
    ensure_knowledge(root / "knowledge.sqlite")
    ensure_umls(root / "umls.sqlite")
    return sorted(set(knowledge_queries.vocabulary(sqlite_utils.Database(root / "knowledge.sqlite")))
                  | set(umls_lookup.drug_names(sqlite_utils.Database(root / "umls.sqlite"))))


def measure(drugs: DrugRecogniser, rows: list[tuple[str, str]]) -> tuple[float, list[tuple[str, str]]]:
    misses = [(name, category) for name, category in rows if not recognised(drugs, name)]
    by_category = Counter(c for _n, c in rows)
    missed = Counter(c for _n, c in misses)
    print(f"\nrecall {len(rows) - len(misses)}/{len(rows)} = {100 * (1 - len(misses) / len(rows)):.1f} %")
    for category, total in sorted(by_category.items()):
        print(f"  {category:14} {total - missed[category]:4}/{total}")
    print("  misses:", ", ".join(n for n, _c in misses) or "none")
    return 1 - len(misses) / len(rows), misses


def test_the_lists_are_large_and_distinct():
    rows = read_list("drug_recall.tsv")
    held_out = read_list("drug_recall_heldout.tsv")
    names = [n.lower() for n, _c in rows + held_out]
    assert len(rows) >= 500 and len(names) == len(set(names))


def test_recall_on_public_prescribing_lists(local_names):
    recall, misses = measure(DrugRecogniser(local_names), read_list("drug_recall.tsv"))
    assert recall >= 0.98, misses


def test_recall_on_names_nobody_tuned_for(local_names):
    recall, misses = measure(DrugRecogniser(local_names), read_list("drug_recall_heldout.tsv"))
    assert recall >= 0.95, misses


def test_no_common_english_word_clinical_word_or_name_is_a_drug(local_names):
    words = [w for w in (DATA / "english_words.txt").read_text(encoding="utf-8").split("\n") if w and not w.startswith("#")]
    assert len(words) >= 5000
    drugs = DrugRecogniser(local_names)
    found = {w: drugs.find(w) or drugs.find(f"The {w} was noted.") for w in words}
    assert {w: g for w, g in found.items() if g} == {}
