"""Fixtures for the safety-gate tests: the real demo EHR, knowledge and UMLS databases, built once
per module in a temporary data home, and charts read on a fixed date so ages do not drift."""

from __future__ import annotations

import pytest

from appliance.safety import StoreKnowledge
from appliance.safety.matrix import (
    AS_OF,  # the demo file's "as_of" date: every age in the tables is taken on it
)
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database as ensure_ehr
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge
from mcp_servers.umls.store import ensure_database as ensure_umls


@pytest.fixture(scope="module")
def data_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    ensure_ehr(home / "ehr.sqlite")
    ensure_knowledge(home / "knowledge.sqlite")
    ensure_umls(home / "umls.sqlite")
    return home


@pytest.fixture(scope="module")
def knowledge(data_home):
    store = StoreKnowledge(data_home / "knowledge.sqlite")
    yield store
    store.close()


@pytest.fixture(scope="module")
def umls_knowledge(data_home):
    """The knowledge lookups with the UMLS subset's synonyms (``drug_synonym``)."""
    store = StoreKnowledge(data_home / "knowledge.sqlite", data_home / "umls.sqlite")
    yield store
    store.close()


@pytest.fixture(scope="module")
def chart_of(data_home):
    repo = EhrRepository(data_home / "ehr.sqlite")
    cache: dict[str, dict] = {}

    def read(patient_id: str) -> dict:
        if patient_id not in cache:
            cache[patient_id] = repo.get_patient_chart(patient_id, today=AS_OF)
        return cache[patient_id]

    return read
