"""The clinical rows under the chain (``ehr_db.custody``): a row edited, deleted or inserted with
the sqlite3 shell is named by `appliance audit verify` (exit 1); writes, imports and the demo
load record every row's digest; an old record without digests verifies with a note."""

from __future__ import annotations

import json
import sqlite3

import pytest
from ehr_helpers import FIXTURES, audit_rows

from appliance.cli import main
from common import sqlite as common_sqlite
from ehr_db import audit, custody
from ehr_db.fhir_import import import_fhir_bundle
from ehr_db.migrations import CLINICAL_TABLES, MIGRATIONS, migrate
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database


@pytest.fixture
def home_db(appliance_home):
    path = appliance_home / "ehr.sqlite"
    ensure_database(path)
    EhrRepository(path).prescribe_medication("abc-123", "lisinopril", "10 mg", "once daily", author="dr.a")
    return path


def shell(path, *statements: str) -> None:
    """What someone with the file and the sqlite3 shell does (foreign keys off, as by default)."""
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def verify(capsys, *extra: str) -> tuple[int, str]:
    code = main(["audit", "verify", *extra])
    return code, capsys.readouterr().out


def test_the_clinical_tables_are_the_schemas():
    assert custody.TABLES == ("patients", *CLINICAL_TABLES)


def test_an_untouched_record_verifies_every_clinical_row(home_db, capsys):
    code, out = verify(capsys)
    total = sum(sqlite3.connect(home_db).execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in custody.TABLES)
    assert code == 0 and f"{total} clinical row(s) match their digests" in out.splitlines()[0], out


def test_the_issues_edits_are_named(home_db, capsys):
    shell(home_db, "UPDATE medication_requests SET dosage = '50 mg' WHERE medication_name = 'Warfarin'",
          "DELETE FROM allergy_intolerances WHERE patient_id = 'pat-006'")
    code, out = verify(capsys)
    assert code == 1
    assert "medication_requests row pat-005-med-1: no longer matches the digest recorded at seq 1" in out
    assert "allergy_intolerances row pat-006-alg-1: is missing: written at seq 1" in out


def _first_id(path, table) -> str:
    return sqlite3.connect(path).execute(f"SELECT id FROM {table} ORDER BY id LIMIT 1").fetchone()[0]


def _text_column(table: str) -> str:
    return {"patients": "family", "encounters": "status", "conditions": "display",
            "medication_requests": "dosage", "allergy_intolerances": "reaction", "observations": "unit",
            "document_references": "text"}[table]


@pytest.mark.parametrize("table", custody.TABLES)
@pytest.mark.parametrize("how", ["edit", "delete", "insert"])
def test_every_kind_of_change_to_every_table_is_named(home_db, capsys, table, how):
    row_id = _first_id(home_db, table)
    if how == "edit":
        shell(home_db, f"UPDATE {table} SET {_text_column(table)} = {_text_column(table)} || 'x' WHERE id = '{row_id}'")
        named = f"{table} row {row_id}: no longer matches the digest"
    elif how == "delete":
        shell(home_db, f"DELETE FROM {table} WHERE id = '{row_id}'")
        named = f"{table} row {row_id}: is missing"
    else:
        conn = sqlite3.connect(home_db)
        columns = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
        picked = ", ".join("'forged-1'" if c == "id" else c for c in columns)
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM {table} WHERE id = ?", [row_id])
        conn.commit()
        conn.close()
        named = f"{table} row forged-1: no audit row accounts for it"
    code, out = verify(capsys)
    assert code == 1 and named in out, out


def test_a_type_change_alone_is_caught(home_db, capsys):
    row_id = _first_id(home_db, "observations")  # the same bytes, stored as a BLOB instead of text
    shell(home_db, f"UPDATE observations SET unit = CAST(unit AS BLOB) WHERE id = '{row_id}'")
    code, out = verify(capsys)
    assert code == 1 and f"observations row {row_id}: no longer matches" in out


def test_a_ledger_rewritten_to_hide_an_edit_disagrees_with_its_audit_row(home_db, capsys):
    shell(home_db, "DROP TRIGGER row_digests_no_update",
          "UPDATE medication_requests SET dosage = '50 mg' WHERE id = 'pat-005-med-1'")
    conn = sqlite3.connect(home_db)
    cursor = conn.execute("SELECT * FROM medication_requests WHERE id = 'pat-005-med-1'")
    forged = custody.row_digest("medication_requests", [c[0] for c in cursor.description], cursor.fetchone())
    conn.execute("UPDATE row_digests SET digest = ? WHERE row_id = 'pat-005-med-1'", [forged])
    conn.commit()
    conn.close()
    code, out = verify(capsys)
    assert code == 1
    assert "seq 1: its row digests no longer match what its audit row records" in out
    assert "row digests' protective triggers were removed (row_digests_no_update)" in out
    assert "medication_requests row pat-005-med-1: no longer matches" not in out  # the ledger was rewritten too


def test_writes_imports_and_the_demo_load_record_each_rows_digest(home_db):
    rows = audit_rows(home_db)
    loaded = json.loads(rows[0]["result"])["rows"]
    conn = sqlite3.connect(home_db)
    demo_rows = sum(conn.execute(f"SELECT count(*) FROM {t} WHERE source = 'demo'").fetchone()[0]
                    for t in custody.TABLES)
    assert rows[0]["tool"] == "load_demo_patients" and loaded["n"] == demo_rows
    report = import_fhir_bundle(home_db, FIXTURES / "synthea_bundle.json")
    last = audit_rows(home_db)[-1]
    assert last["tool"] == "fhir_import" and json.loads(last["result"])["rows"]["n"] == sum(report.created.values())
    ledger = conn.execute("SELECT count(*) FROM row_digests WHERE seq = ?", [last["seq"]]).fetchone()[0]
    assert ledger == sum(report.created.values())
    assert EhrRepository(home_db).verify_audit().ok


def test_an_import_over_a_row_changed_outside_the_record_shows_the_gap(home_db, tmp_path):
    import_fhir_bundle(home_db, FIXTURES / "synthea_bundle.json")
    obs = "a1000000-0000-4000-8000-000000000001"
    shell(home_db, f"UPDATE observations SET value_num = 9.9 WHERE id = '{obs}'")
    bundle = json.loads((FIXTURES / "synthea_bundle.json").read_text())
    for entry in bundle["entry"]:
        if entry["resource"]["id"] == obs:
            entry["resource"]["valueQuantity"]["value"] = 6.8
    (tmp_path / "again.json").write_text(json.dumps(bundle))
    import_fhir_bundle(home_db, tmp_path / "again.json")  # the row now matches what the import wrote
    verdict = EhrRepository(home_db).verify_audit()
    assert not verdict.ok
    assert f"observations row {obs}: was changed outside the record after seq" in verdict.first_bad.describe()


def _record_before_row_digests(path) -> None:
    db = common_sqlite.connect(path)
    common_sqlite.migrate(db, "ehr", [m for m in MIGRATIONS if m.__name__ < "m007"])
    db["patients"].insert({"id": "abc-001", "family": "F", "given": "G", "name_key": " g f ", "source": "demo",
                           "updated_at": "2026"})
    audit.append(db, "a", "load_demo_patients", {}, None)
    db.conn.commit()
    db.close()


def test_an_old_record_without_digests_verifies_with_a_note(tmp_path):
    path = tmp_path / "old.sqlite"
    _record_before_row_digests(path)
    verdict = EhrRepository(path).verify_audit()  # read only: not migrated
    assert verdict.ok and verdict.clinical_rows is None
    assert any("has no row digests yet" in n and "`appliance init` adds them" in n for n in verdict.notes)
    db = common_sqlite.connect(path)
    assert migrate(db) == ["m007_row_digests", "m008_order_sig_and_changes"]
    db.close()
    verdict = EhrRepository(path).verify_audit()
    assert verdict.ok and verdict.clinical_rows == 1 and verdict.rows == 2
    assert any("1 clinical row(s) were taken as they stood" in n for n in verdict.notes)
    shell(path, "UPDATE patients SET family = 'X'")  # from now on, covered
    assert not EhrRepository(path).verify_audit().ok


def test_a_fresh_record_has_no_baseline_event(tmp_path):
    db = common_sqlite.connect(tmp_path / "blank.sqlite")
    migrate(db)
    assert db["audit_log"].count == 0 and db["row_digests"].count == 0
    db.close()


@pytest.mark.parametrize("statement,message", [
    ("UPDATE row_digests SET digest = 'x'", "append-only"),
    ("DELETE FROM row_digests", "append-only"),
    ("INSERT INTO row_digests (seq, tbl, row_id, digest) VALUES (0, 'patients', 'x', 'y')", "just written"),
])
def test_the_ledger_is_append_only(home_db, statement, message):
    conn = sqlite3.connect(home_db)
    with pytest.raises(sqlite3.IntegrityError, match=message):
        conn.execute(statement)
    conn.close()


def test_the_bench_builds_a_record_of_the_size_asked_and_verifies_it():
    from appliance.bench.tools import bench_audit_verify

    figures = bench_audit_verify(3000)
    assert figures["ok"] is True and figures["clinical_rows"] == 3000
    assert figures["seconds"] >= 0 and figures["cpu_seconds"] >= 0
