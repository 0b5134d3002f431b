"""Schema of the EHR database, as named, append-only migrations.

Invariants:
- A migration, once released, is never edited or removed: a schema change is a new function
  appended to ``MIGRATIONS``. Each applied migration is recorded by name under the migration
  set ``ehr`` (``common.sqlite``: sqlite-utils' ``_sqlite_migrations`` table).
- ``migrate`` applies the pending ones in order inside one ``BEGIN IMMEDIATE`` transaction, so
  two processes migrating at once cannot both apply a migration, and a failed migration
  leaves the schema as it was. Running it again is a no-op.
- Tables follow FHIR R4 resources (Patient, Encounter, Condition, MedicationRequest,
  AllergyIntolerance, Observation, DocumentReference); ``id`` is the FHIR resource id.
  Codes: SNOMED CT for conditions, RxNorm for medications, LOINC for observations; a code is
  NULL when it is not known, never guessed.
- ``audit_log`` is append-only, enforced by triggers, and hash-chained (``ehr_db.audit``):
  the chain's head lives in ``audit_head``; triggers refuse a row that does not extend it.
- ``row_digests`` is the ledger of every clinical row's digest (``ehr_db.custody``), written
  with the audit row that accounts for it, append-only like the log.
"""

from __future__ import annotations

from sqlite_utils import Database

from common import sqlite
from common.sqlite import Migration
from ehr_db import audit, custody

STORE = "ehr"  # the migration set's name
MIGRATIONS: list[Migration] = []
migration = sqlite.migration_collector(MIGRATIONS)

NOTE_TYPES = ("progress", "consult", "procedure", "discharge", "telephone", "other")
SEVERITIES = ("mild", "moderate", "severe")
CLINICAL_TABLES = (
    "encounters",
    "conditions",
    "medication_requests",
    "allergy_intolerances",
    "observations",
    "document_references",
)


def _in_list(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


@migration
def m001_patients_and_encounters(db: Database) -> None:
    db.execute(
        """
        CREATE TABLE patients (
            id TEXT PRIMARY KEY,
            mrn TEXT,
            family TEXT NOT NULL,
            given TEXT NOT NULL,
            name_key TEXT NOT NULL,          -- ' given family ', folded, for name search
            birth_date TEXT,
            sex TEXT CHECK (sex IN ('male', 'female', 'other', 'unknown')),
            deceased_date TEXT,
            phone TEXT,
            address_line TEXT,
            city TEXT,
            state TEXT,
            postal_code TEXT,
            source TEXT NOT NULL CHECK (source IN ('demo', 'fhir', 'appliance')),
            updated_at TEXT NOT NULL
        )
        """
    )
    db.execute("CREATE INDEX idx_patients_family ON patients (family)")
    db.execute(
        """
        CREATE TABLE encounters (
            id TEXT PRIMARY KEY,
            patient_id TEXT NOT NULL REFERENCES patients (id),
            status TEXT,
            class_code TEXT,
            type_display TEXT,
            reason_display TEXT,
            period_start TEXT NOT NULL,
            period_end TEXT,
            source TEXT NOT NULL
        )
        """
    )


@migration
def m002_clinical_resources(db: Database) -> None:
    # encounter_id is a soft reference (no foreign key): an imported record may point at an
    # encounter that was not part of the import.
    db.execute(
        """
        CREATE TABLE conditions (
            id TEXT PRIMARY KEY,
            patient_id TEXT NOT NULL REFERENCES patients (id),
            encounter_id TEXT,
            snomed_code TEXT,
            display TEXT NOT NULL,
            clinical_status TEXT NOT NULL CHECK (clinical_status IN
                ('active', 'recurrence', 'relapse', 'inactive', 'remission', 'resolved')),
            verification_status TEXT,
            onset_date TEXT,
            abatement_date TEXT,
            recorded_date TEXT,
            source TEXT NOT NULL
        )
        """
    )
    db.execute(
        """
        CREATE TABLE medication_requests (
            id TEXT PRIMARY KEY,
            patient_id TEXT NOT NULL REFERENCES patients (id),
            encounter_id TEXT,
            rxnorm_code TEXT,
            medication_name TEXT NOT NULL,
            dosage TEXT,
            frequency TEXT,
            status TEXT NOT NULL CHECK (status IN ('active', 'on-hold', 'cancelled',
                'completed', 'entered-in-error', 'stopped', 'draft', 'unknown')),
            intent TEXT NOT NULL DEFAULT 'order',
            notes TEXT,
            author TEXT,
            authored_at TEXT NOT NULL,
            source TEXT NOT NULL
        )
        """
    )
    db.execute(
        f"""
        CREATE TABLE allergy_intolerances (
            id TEXT PRIMARY KEY,
            patient_id TEXT NOT NULL REFERENCES patients (id),
            substance TEXT NOT NULL,
            substance_code TEXT,
            substance_system TEXT,
            category TEXT,
            reaction TEXT,
            severity TEXT CHECK (severity IN {_in_list(SEVERITIES)}),
            clinical_status TEXT NOT NULL DEFAULT 'active'
                CHECK (clinical_status IN ('active', 'inactive', 'resolved')),
            author TEXT,
            recorded_at TEXT NOT NULL,
            source TEXT NOT NULL
        )
        """
    )
    db.execute(
        """
        CREATE TABLE observations (
            id TEXT PRIMARY KEY,
            patient_id TEXT NOT NULL REFERENCES patients (id),
            encounter_id TEXT,
            loinc_code TEXT,
            display TEXT NOT NULL,
            value_num REAL,
            value_text TEXT,
            unit TEXT,
            ref_low REAL,
            ref_high REAL,
            interpretation TEXT CHECK (interpretation IN ('H', 'L', 'N')),
            category TEXT NOT NULL CHECK (category IN ('laboratory', 'vital-signs')),
            status TEXT,
            effective_at TEXT NOT NULL,
            source TEXT NOT NULL,
            CHECK (value_num IS NOT NULL OR value_text IS NOT NULL)
        )
        """
    )
    db.execute(
        f"""
        CREATE TABLE document_references (
            id TEXT PRIMARY KEY,
            patient_id TEXT NOT NULL REFERENCES patients (id),
            encounter_id TEXT,
            note_type TEXT NOT NULL CHECK (note_type IN {_in_list(NOTE_TYPES)}),
            title TEXT,
            text TEXT NOT NULL,
            author TEXT,
            created_at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'current',
            source TEXT NOT NULL
        )
        """
    )
    for table in CLINICAL_TABLES:
        db.execute(f"CREATE INDEX idx_{table}_patient ON {table} (patient_id)")
    db.execute(
        "CREATE INDEX idx_observations_code_time ON observations (patient_id, loinc_code, effective_at)"
    )


@migration
def m003_audit_log(db: Database) -> None:
    db.execute(
        """
        CREATE TABLE audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            actor TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,         -- JSON object
            result TEXT,                     -- JSON object, e.g. {"id": "<new record id>"}
            outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure'))
        )
        """
    )
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"""
            CREATE TRIGGER audit_log_no_{event.lower()} BEFORE {event} ON audit_log
            BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END
            """
        )


@migration
def m004_audit_hash_chain(db: Database) -> None:
    """Chain the audit log (``ehr_db.audit``): seq, prev_hash, row_hash on every row, existing
    rows chained in id order, the head kept in ``audit_head`` by triggers."""
    db.execute("DROP TRIGGER audit_log_no_update")  # the existing rows get their hashes below
    for column in ("seq INTEGER", "prev_hash TEXT", "row_hash TEXT"):
        db.execute(f"ALTER TABLE audit_log ADD COLUMN {column}")
    seq, head = audit.chain_existing_rows(db)
    db.execute("CREATE UNIQUE INDEX idx_audit_log_seq ON audit_log (seq)")
    db.execute(
        "CREATE TABLE audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL)"
    )
    db.execute("INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)", [seq, head])
    db.execute(
        """CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
           BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"""
    )
    db.execute(
        """CREATE TRIGGER audit_log_chained BEFORE INSERT ON audit_log
           WHEN NEW.seq IS NOT (SELECT seq + 1 FROM audit_head WHERE id = 1)
             OR NEW.prev_hash IS NOT (SELECT hash FROM audit_head WHERE id = 1)
             OR NEW.row_hash IS NULL
           BEGIN SELECT RAISE(ABORT, 'audit_log rows must extend the hash chain'); END"""
    )
    db.execute(
        """CREATE TRIGGER audit_log_head AFTER INSERT ON audit_log
           BEGIN UPDATE audit_head SET seq = NEW.seq, hash = NEW.row_hash WHERE id = 1; END"""
    )
    db.execute(
        """CREATE TRIGGER audit_head_forward BEFORE UPDATE ON audit_head
           WHEN NEW.id IS NOT 1 OR NEW.seq IS NOT OLD.seq + 1
             OR NEW.hash IS NOT (SELECT row_hash FROM audit_log WHERE seq = NEW.seq)
           BEGIN SELECT RAISE(ABORT, 'audit_head only follows the audit log'); END"""
    )
    db.execute(
        """CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head
           BEGIN SELECT RAISE(ABORT, 'audit_head cannot be deleted'); END"""
    )


@migration
def m005_write_idempotency_keys(db: Database) -> None:
    """One row per performed write that came with an idempotency key (``EhrRepository._write``):
    the key, unique, and what it did, so the same key never writes twice."""
    db.execute(
        """
        CREATE TABLE write_keys (
            idempotency_key TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,         -- JSON object, as in the write's audit row
            record_id TEXT NOT NULL,         -- the record the write created
            at TEXT NOT NULL
        )
        """
    )
    db.execute("CREATE UNIQUE INDEX idx_write_keys_key ON write_keys (idempotency_key)")
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"""
            CREATE TRIGGER write_keys_no_{event.lower()} BEFORE {event} ON write_keys
            BEGIN SELECT RAISE(ABORT, 'write_keys is append-only'); END
            """
        )


@migration
def m006_read_log(db: Database) -> None:
    """Who read which chart, with which tool, when (``EhrRepository.log_read``): one row per
    chart read and per patient a search listed (a search's text is never kept; a search that
    listed no one is one row without a patient). Append-only, like the audit log; apart from
    the hash chain, because reads are many and change nothing."""
    db.execute(
        """
        CREATE TABLE read_log (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            actor TEXT NOT NULL,
            terminal TEXT,                   -- the token's terminal over the clinic host; NULL locally
            tool TEXT NOT NULL,
            patient_id TEXT,                 -- NULL: a search that listed no one
            matches INTEGER                  -- a search's total matches; NULL for a chart read
        )
        """
    )
    db.execute("CREATE INDEX idx_read_log_patient ON read_log (patient_id, id)")
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"""
            CREATE TRIGGER read_log_no_{event.lower()} BEFORE {event} ON read_log
            BEGIN SELECT RAISE(ABORT, 'read_log is append-only'); END
            """
        )


@migration
def m007_row_digests(db: Database) -> None:
    """The clinical rows under the chain (``ehr_db.custody``): the ledger of row digests, each
    entry written with the audit row (same seq) whose result records the entries' digest. A
    record that already has rows gets them taken as they stand (one ``custody_baseline``
    event). Also an index on the log's tool, for the restores that mark a record's timelines."""
    db.execute(
        """
        CREATE TABLE row_digests (
            seq INTEGER NOT NULL,            -- the audit row (audit_log.seq) that wrote the entry
            tbl TEXT NOT NULL,               -- the clinical table
            row_id TEXT NOT NULL,
            before TEXT,                     -- the digest the write replaced (NULL: a new row)
            digest TEXT                      -- the digest it wrote (NULL: the row was removed)
        )
        """
    )
    db.execute("CREATE UNIQUE INDEX idx_row_digests_seq ON row_digests (seq, tbl, row_id)")
    db.execute("CREATE INDEX idx_audit_log_tool ON audit_log (tool)")
    for event in ("UPDATE", "DELETE"):
        db.execute(
            f"""
            CREATE TRIGGER row_digests_no_{event.lower()} BEFORE {event} ON row_digests
            BEGIN SELECT RAISE(ABORT, 'row_digests is append-only'); END
            """
        )
    db.execute(
        """CREATE TRIGGER row_digests_current BEFORE INSERT ON row_digests
           WHEN NEW.seq IS NOT (SELECT seq FROM audit_head WHERE id = 1)
           BEGIN SELECT RAISE(ABORT, 'row_digests entries belong to the audit row just written'); END"""
    )
    custody.baseline(db)


# Columns of an order's whole sig and of its changes (``m008_order_sig_and_changes``).
ORDER_COLUMNS = (
    ("as_needed", "INTEGER"),            # 1: as needed (PRN); 0: scheduled; NULL: not read
    ("as_needed_for", "TEXT"),           # what it is needed for, as written ("pain")
    ("max_per_period", "TEXT"),          # the maximum as written ("max 4 g/day")
    ("duration", "TEXT"),                # as written ("x 7 days")
    ("quantity", "TEXT"),                # to dispense, as written ("#30")
    ("refills", "INTEGER"),
    ("dosage_instruction", "TEXT"),      # JSON: FHIR MedicationRequest.dosageInstruction[0]
    ("dispense_request", "TEXT"),        # JSON: FHIR MedicationRequest.dispenseRequest
    ("replaces_id", "TEXT"),             # the order this one replaced (a change or renewal)
    ("status_reason", "TEXT"),           # why the status last changed ("bleeding", "replaced")
    ("status_changed_at", "TEXT"),
    ("status_changed_by", "TEXT"),
)


@migration
def m008_order_sig_and_changes(db: Database) -> None:
    """An order's whole sig kept as read (as needed and what for, the maximum, duration,
    quantity, refills, and the FHIR-shaped dosage instruction and dispense request), and its
    changes: the order a change or renewal replaced, and why and when a status changed (held,
    stopped, completed). Added as NULL columns, so rows written before keep their digests."""
    for name, kind in ORDER_COLUMNS:
        db.execute(f"ALTER TABLE medication_requests ADD COLUMN {name} {kind}")
    db.execute("CREATE INDEX idx_medication_requests_patient_status ON medication_requests (patient_id, status)")


def applied_migrations(db: Database) -> list[str]:
    return sqlite.applied_migrations(db, STORE)


def migrate(db: Database) -> list[str]:
    """Apply every pending migration; returns the names applied (empty when up to date)."""
    return sqlite.migrate(db, STORE, MIGRATIONS)
