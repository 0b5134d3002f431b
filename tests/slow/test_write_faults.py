"""One approved write must never become two rows.

The case reproduced: a write timed out (the EHR database lock held by another connection past
the deadline, or the server SIGSTOPped), the client dropped that server without stopping it and
retried on a new one; when the lock was released (or the server resumed) the abandoned server
committed too: 2 rows and 2 audit rows. The client kills a server it gives up on and waits for
it before starting another, the agent never retries a write, and a resent request with the same
idempotency key is performed once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from contextlib import suppress

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools import processes
from appliance.tools.base import approve_all
from appliance.tools.mcp_client import MCPToolBox
from common import locations
from ehr_db.setup import ensure_database

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(120)]  # fault drills: the heavy tier

RX = {"patient_id": "abc-123", "medication_name": "sitagliptin", "dosage": "100 mg", "frequency": "once daily",
      "notes": None}
NOTE = {"patient_id": "abc-123", "note_type": "progress", "note_text": "Stable, continue current plan."}
DEADLINE = 2.0


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path))
    ensure_database(locations.ehr_db_path())
    return tmp_path


@pytest.fixture
def box(home):
    with MCPToolBox(env={"APPLIANCE_HOME": str(home)}) as tools:
        assert tools.call("get_patient_chart", {"patient_id": "abc-123"}, 10).ok  # started and warm
        yield tools


def counts(tool: str, where: str) -> tuple[int, int]:
    """(rows, audit rows) of the writes of ``tool`` matching ``where`` (a SQL condition on the
    table and a LIKE pattern on the audit arguments)."""
    table, condition, pattern = where.split("|")
    conn = sqlite3.connect(locations.ehr_db_path())
    try:
        rows = conn.execute(f"SELECT count(*) FROM {table} WHERE {condition}").fetchone()[0]
        audits = conn.execute("SELECT count(*) FROM audit_log WHERE tool = ? AND arguments LIKE ?",
                              [tool, pattern]).fetchone()[0]
        return rows, audits
    finally:
        conn.close()


RX_ROWS = "medication_requests|medication_name = 'sitagliptin'|%sitagliptin%"
NOTE_ROWS = "document_references|text = 'Stable, continue current plan.'|%Stable, continue current plan.%"


def hold_lock():
    """A second connection holding the EHR's write lock (BEGIN IMMEDIATE), as an import or a
    backup would; the server's write waits on its busy timeout (15 s) past the deadline."""
    conn = sqlite3.connect(locations.ehr_db_path(), isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn


@pytest.mark.parametrize("fault", ["database lock held", "server stopped"])
def test_a_write_the_client_gave_up_on_never_commits_later(box, fault):
    pid = box.server_pid("ehr")
    assert pid is not None and processes.alive(pid)
    lock = hold_lock() if fault == "database lock held" else None
    if lock is None:
        os.kill(pid, signal.SIGSTOP)
    try:
        outcome = box.call("prescribe_medication", RX, DEADLINE, idempotency_key="issue15-key-0001")
        assert outcome.error_type == "timeout" and outcome.uncertain
        # Given up on: killed and reaped before the call returned, so it cannot commit later.
        assert not processes.alive(pid)
    finally:
        if lock is not None:
            lock.rollback()
            lock.close()
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    time.sleep(1.0)  # what the abandoned server would have needed to commit
    assert counts("prescribe_medication", RX_ROWS) == (0, 0)
    # The request is resent (by anyone) with the same key: performed once, on a new server.
    first = box.call("prescribe_medication", RX, 10, idempotency_key="issue15-key-0001")
    again = box.call("prescribe_medication", RX, 10, idempotency_key="issue15-key-0001")
    assert first.ok and again.ok and first.result["id"] == again.result["id"]
    assert box.server_pid("ehr") not in (None, pid)
    assert counts("prescribe_medication", RX_ROWS) == (1, 1)


def test_one_key_sent_through_two_servers_at_once_is_performed_once(home, box):
    """Two servers (two terminals, or a server the client could not stop, as over HTTP) both
    holding the same write when the lock is released: the record performs it once."""
    outcomes: list = []
    with MCPToolBox(env={"APPLIANCE_HOME": str(home)}) as other:
        lock = hold_lock()
        try:
            threads = [threading.Thread(target=lambda b=b: outcomes.append(
                b.call("prescribe_medication", RX, 30, idempotency_key="issue15-key-0002"))) for b in (box, other)]
            for t in threads:
                t.start()
            time.sleep(1.5)  # both servers are waiting for the lock now
        finally:
            lock.rollback()
            lock.close()
        for t in threads:
            t.join()
    assert [o.ok for o in outcomes] == [True, True]
    assert outcomes[0].result["id"] == outcomes[1].result["id"]
    assert counts("prescribe_medication", RX_ROWS) == (1, 1)


def note_turn(tools):
    # Code classifies the result and says the answer: no RESULT_CLASSIFY or SYNTHESIZE reply.
    script = {
        "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Save a progress note.",
                             "suggested_tool": "save_clinical_note"}],
        "TOOL_SELECT": [{"tool_name": "save_clinical_note"}, NOTE],
        "ERROR_HANDLER": [{"strategy": "retry_same", "reasoning": "temporary"}],  # must not be used
    }
    model = ScriptedModel(script)
    settings = Settings(tool_deadline_seconds=DEADLINE)
    result = Agent(model, tools, settings, approve_all, drugs=None).run_turn(
        "Save a note for abc-123: Stable, continue current plan.")
    return result, model


def test_a_turn_whose_write_timed_out_never_retries_and_says_check_the_chart(box):
    pid = box.server_pid("ehr")
    lock = hold_lock()
    try:
        result, model = note_turn(box)
    finally:
        lock.rollback()
        lock.close()
    assert [c["tool"] for c in result.tool_calls] == ["save_clinical_note"]  # one call: no retry
    assert result.tool_calls[0]["error_type"] == "timeout"
    assert result.path[-2:] == ["ERROR_HANDLER", "SYNTHESIZE"]
    assert model.pending() == {"ERROR_HANDLER": 1}  # the retry choice was never asked for
    assert "may or may not have been changed: check the chart" in result.response
    assert "The record was not changed" not in result.response
    assert not processes.alive(pid)
    time.sleep(1.0)
    assert counts("save_clinical_note", NOTE_ROWS) == (0, 0)
    # The clinician checks the chart and asks again: a new approval, a new key, one note.
    script = {
        "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Save a progress note.",
                             "suggested_tool": "save_clinical_note"}],
        "TOOL_SELECT": [{"tool_name": "save_clinical_note"}, NOTE],
    }
    again = Agent(ScriptedModel(script), box, Settings(tool_deadline_seconds=10), approve_all, drugs=None).run_turn(
        "Save a note for abc-123: Stable, continue current plan.")
    assert again.tool_calls[0]["error_type"] is None
    assert again.response.startswith("Saved a progress note") and "The record was changed." in again.response
    assert counts("save_clinical_note", NOTE_ROWS) == (1, 1)
