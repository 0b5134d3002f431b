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


def test_tool_readers_while_a_tool_writer_writes(ehr_path):
    """The same through the MCP tools: fastmcp Clients in several threads (each its own event
    loop and session) read charts while another writes; no call fails, nothing says 'locked'."""
    import asyncio

    from fastmcp import Client

    from mcp_servers.ehr import server as ehr

    ehr.configure(ehr_path)
    before = row_counts(ehr_path)
    failures: list[str] = []
    done = threading.Event()
    reads = [0] * READERS

    async def write_all():
        async with Client(ehr.mcp) as client:
            for n in range(WRITES):
                for tool, args in (
                    ("prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin",
                                              "dosage": "500 mg", "frequency": "BID", "notes": f"batch {n}"}),
                    ("save_clinical_note", {"patient_id": "pat-001", "note_type": "progress", "note_text": f"Note {n}"}),
                ):
                    result = await client.call_tool(tool, args, raise_on_error=False)
                    if result.is_error:
                        failures.append(f"{tool}: {result.content[0].text}")

    async def read_until_done(slot: int):
        async with Client(ehr.mcp) as client:
            while not done.is_set() or reads[slot] < 5:
                chart = await client.call_tool("get_patient_chart", {"patient_id": "abc-123"}, raise_on_error=False)
                found = await client.call_tool("search_patient", {"name": "James Wilson"}, raise_on_error=False)
                for result in (chart, found):
                    if result.is_error:
                        failures.append(result.content[0].text)
                if not chart.is_error:
                    assert all(m["dosage"] and m["author"] for m in chart.structured_content["medications"])
                reads[slot] += 1

    def writer():
        try:
            asyncio.run(write_all())
        except BaseException as exc:  # collected and asserted below
            failures.append(repr(exc))
        finally:
            done.set()

    def reader(slot: int):
        try:
            asyncio.run(read_until_done(slot))
        except BaseException as exc:
            failures.append(repr(exc))

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        ehr.configure(None)
    assert not any(t.is_alive() for t in threads)
    assert failures == [], failures[:3]
    assert not any("locked" in f or "busy" in f for f in failures)
    assert all(n >= 5 for n in reads)
    after = row_counts(ehr_path)
    assert after["medication_requests"] == before["medication_requests"] + WRITES
    assert after["document_references"] == before["document_references"] + WRITES
    assert after["audit_log"] == before["audit_log"] + 2 * WRITES
