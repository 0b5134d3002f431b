"""How the EHR server reports faults: permanent ones (missing, damaged, read-only database) as
``permanent_failure`` with one clear sentence, a busy database as retryable, and every failed
write with "The record was not changed."; bad text and names are refused by the record."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from ehr_helpers import row_counts
from fastmcp import Client
from fastmcp.exceptions import ToolError

from ehr_db.errors import InvalidField
from ehr_db.repository import EhrRepository
from mcp_servers.contracts import parse_tool_error
from mcp_servers.ehr import server as ehr

WRITE = ("prescribe_medication", {"patient_id": "abc-123", "medication_name": "lisinopril", "dosage": "10 mg",
                                  "frequency": "once daily", "notes": None})
READ = ("search_patient", {"name": "Smith"})


def call_error(tool, args) -> tuple[str, str]:
    async def go():
        async with Client(ehr.mcp) as client:
            await client.call_tool(tool, args)
    with pytest.raises(ToolError) as exc:
        asyncio.run(go())
    return parse_tool_error(str(exc.value))


def _genuine(make) -> sqlite3.Error:
    """A real sqlite3 exception (with SQLite's error code), not a hand-made one."""
    try:
        make()
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("no error")


def _readonly(tmp_path) -> sqlite3.Error:
    path = tmp_path / "ro.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t (a)").connection.commit()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    return _genuine(lambda: conn.execute("INSERT INTO t VALUES (1)"))


def _locked(tmp_path) -> sqlite3.Error:
    path = tmp_path / "busy.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    return _genuine(lambda: other.execute("BEGIN IMMEDIATE"))


def _malformed(tmp_path) -> sqlite3.Error:
    path = tmp_path / "bad.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    return _genuine(lambda: sqlite3.connect(path).execute("SELECT * FROM sqlite_master"))


@pytest.mark.parametrize("tool,args", [READ, WRITE], ids=["read", "write"])
@pytest.mark.parametrize("fault,kind,words", [
    (_readonly, "permanent_failure", "its database is read-only. An administrator must repair it"),
    (_malformed, "permanent_failure", "its database is damaged"),
    (_locked, "service_unavailable", "busy; try again"),
    (lambda _: sqlite3.OperationalError("no such column: x"), "server_error", None),
], ids=["read-only", "damaged", "busy", "other"])
def test_database_faults_are_classified(server, monkeypatch, tmp_path, tool, args, fault, kind, words):
    error = fault(tmp_path)

    def fail(*a, **kw):
        raise error

    monkeypatch.setattr(EhrRepository, tool, fail)
    got, text = call_error(tool, args)
    assert got == kind
    if words:
        assert words in text
    write = tool == WRITE[0]
    assert text.endswith("The record was not changed.") == write
    if kind == "server_error":
        assert text == ("The health record could not be written to. The record was not changed." if write
                        else "The health record could not be read.")


def test_a_damaged_database_file_is_permanent_from_the_first_call(tmp_path):
    path = tmp_path / "ehr.sqlite"
    path.write_bytes(b"\x00" * 100 + b"garbage" * 1000)
    ehr.configure(path)
    try:
        kind, text = call_error(*WRITE)
    finally:
        ehr.configure(None)
    assert kind == "permanent_failure"
    assert text == ("The health record cannot be used: its database is damaged. An administrator must repair it "
                    "or restore it from a backup. The record was not changed.")


def test_the_server_reports_a_damaged_database_in_one_line_at_start_up(tmp_path, capsys, monkeypatch):
    path = tmp_path / "ehr.sqlite"
    path.write_bytes(b"garbage" * 1000)
    monkeypatch.setattr(ehr.mcp, "run", lambda **kwargs: None)
    try:
        assert ehr.main(["--db", str(path)]) == 0
    finally:
        ehr.configure(None)
    err = capsys.readouterr().err
    assert err.startswith("ehr server: ehr.sqlite is damaged") and err.count("\n") == 1


@pytest.mark.parametrize("field,value", [
    ("medication_name", "metformin\x00"), ("medication_name", "\u200b\u200b"), ("medication_name", "\u202eniwrofmet"),
    ("dosage", "500\x07 mg"), ("notes", "take\nwith food"),
])
def test_control_and_invisible_text_is_refused(repo, ehr_path, field, value):
    args = {"medication_name": "metformin", "dosage": "500 mg", "frequency": "twice daily", "notes": None, field: value}
    before = row_counts(ehr_path)
    with pytest.raises(InvalidField) as exc:
        repo.prescribe_medication("abc-123", author="dr", **args)
    assert exc.value.field == field
    assert row_counts(ehr_path) == before


def test_a_note_may_hold_line_breaks_but_no_nul(repo):
    assert repo.save_clinical_note("abc-123", "progress", "Seen today.\n\tStable.", author="dr")
    with pytest.raises(InvalidField, match="control characters"):
        repo.save_clinical_note("abc-123", "progress", "Seen\x00today.", author="dr")


@pytest.mark.parametrize("name", ["John Smith", "smith", "SMITH, JOHN", "John"])
def test_the_patients_own_name_is_not_a_medication(repo, ehr_path, name):
    before = row_counts(ehr_path)
    with pytest.raises(InvalidField, match="is the patient's name, not a medication"):
        repo.prescribe_medication("abc-123", name, "500 mg", "twice daily", author="dr")
    assert row_counts(ehr_path) == before
