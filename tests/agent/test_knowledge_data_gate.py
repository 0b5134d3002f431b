"""The shipped drug data and the safety gate over all of it: at least 200 drugs with their brands,
every drug checked by the gate under its generic name and under every brand name, and every
interaction pair of the data found by the gate, as severe as the data says, whichever of the two
is prescribed (by generic and by its first brand) against a chart holding the other.

Real SQLite (a fresh knowledge database built from the shipped content, as ``appliance init``
builds it), the real gate and resolver; the chart is the control matrix's built chart with one
active medication added."""

from __future__ import annotations

import pytest

from appliance.safety.data_matrix import run_data_matrix
from mcp_servers.knowledge.starter import starter_drugs
from mcp_servers.knowledge.store import ensure_database

pytestmark = pytest.mark.timeout(300)

DRUGS = starter_drugs()


def test_the_data_holds_at_least_200_drugs_with_their_brands():
    with_brands = [d for d in DRUGS if d.get("brand_names")]
    assert len(DRUGS) >= 200 and len(with_brands) >= 200
    assert len({d["generic_name"] for d in DRUGS}) == len(DRUGS)
    assert all(d.get("label_basis") and d["source"] for d in DRUGS)  # each says what label it paraphrases


def test_the_gate_checks_every_drug_and_brand_and_finds_every_interaction_pair(tmp_path):
    """``appliance selftest``'s drug data matrix, run here on a fresh knowledge database."""
    path = tmp_path / "knowledge.sqlite"
    ensure_database(path)
    result = run_data_matrix(path)
    assert result["drugs"] == len(DRUGS) and result["names"] == sum(1 + len(d.get("brand_names") or ()) for d in DRUGS)
    assert result["not_resolved"] == [] and result["unchecked"] == []
    assert result["interaction_cases"] >= 3000 and result["missed"] == []


def test_the_data_matrix_sees_a_missed_interaction(tmp_path):
    """It can fail: a pair of the data whose second drug the gate cannot resolve (renamed to a
    made-up name) is reported missed."""
    import sqlite3

    path = tmp_path / "knowledge.sqlite"
    ensure_database(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE interactions SET drug_b = 'zzz-not-a-drug' WHERE rowid = (SELECT min(rowid) FROM interactions)")
    conn.close()
    assert run_data_matrix(path)["missed"]
