"""Readers in several threads while one writer writes: nobody sees 'database is locked'."""

from __future__ import annotations

import threading

from ehr_helpers import row_counts

from ehr_db.repository import EhrRepository

WRITES = 40
READERS = 4


def test_concurrent_readers_and_one_writer(ehr_path):
    before = row_counts(ehr_path)
    errors: list[BaseException] = []
    done = threading.Event()
    reads = [0] * READERS

    def writer():
        repo = EhrRepository(ehr_path)  # each call opens its own connection
        try:
            for n in range(WRITES):
                repo.prescribe_medication("abc-123", "Metformin", "500 mg", "BID", f"batch {n}", author="writer")
                repo.save_clinical_note("pat-001", "progress", f"Note {n}", author="writer")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            done.set()

    def reader(slot: int):
        repo = EhrRepository(ehr_path)
        try:
            while not done.is_set() or reads[slot] < 5:
                chart = repo.get_patient_chart("abc-123")
                # A chart is one snapshot: every order it lists is complete.
                assert all(m["dosage"] and m["author"] for m in chart["medications"])
                repo.search_patient("James Wilson")
                reads[slot] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert all(n >= 5 for n in reads)
    after = row_counts(ehr_path)
    assert after["medication_requests"] == before["medication_requests"] + WRITES
    assert after["document_references"] == before["document_references"] + WRITES
    assert after["audit_log"] == before["audit_log"] + 2 * WRITES


def test_two_writers_in_parallel(ehr_path):
    before = row_counts(ehr_path)
    errors: list[BaseException] = []

    def writer(author: str):
        repo = EhrRepository(ehr_path)
        try:
            for n in range(20):
                repo.add_allergy("pat-002", f"Substance {n}", "Rash", "mild", author=author)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert row_counts(ehr_path)["allergy_intolerances"] == before["allergy_intolerances"] + 40
