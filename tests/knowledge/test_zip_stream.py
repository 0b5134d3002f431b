"""The streaming zip reader the bulk imports use: same bytes as zipfile, ZIP64, damage detected."""

from __future__ import annotations

import json
import os
import random
import zipfile

import pytest

from mcp_servers.knowledge.importers.driver import import_ctgov_studies
from mcp_servers.knowledge.importers.sources import (
    ImportSourceError,
    ReadPosition,
    iter_sources,
)
from mcp_servers.knowledge.store import connect
from mcp_servers.knowledge.synthetic import synthetic_studies, write_bulk_zip
from mcp_servers.zip_stream import count_members, iter_members, open_member


def _trials(path) -> int:
    db = connect(path, read_only=True)
    try:
        return db.execute("SELECT count(*) FROM trials").fetchone()[0]
    finally:
        db.close()


def test_members_read_back_exactly_as_zipfile_reads_them(tmp_path):
    path = tmp_path / "a.zip"
    rng = random.Random(3)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("folder/", b"")
        for i in range(30):
            data = os.urandom(rng.randrange(0, 150_000)) if i % 3 else b'{"n": %d}' % i * rng.randrange(1, 4000)
            archive.writestr(f"folder/f{i}.json", data, compress_type=zipfile.ZIP_DEFLATED if i % 2 else zipfile.ZIP_STORED)
    members = list(iter_members(path))
    assert [m.name for m in members] == [f"folder/f{i}.json" for i in range(30)]  # the directory entry is skipped
    assert count_members(path) == 31
    with zipfile.ZipFile(path) as reference, open(path, "rb") as raw:
        for member in members:
            assert open_member(raw, member).read() == reference.read(member.name)


def test_zip64_archives_with_more_than_65535_members(tmp_path):
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as archive:  # stored: quick to write
        for i in range(65_600):
            archive.writestr(f"s/{i}.json", b"{}")
    assert count_members(path) == 65_600
    last = None
    for last in iter_members(path):  # noqa: B007 - the loop keeps the last member
        pass
    assert last.name == "s/65599.json"
    with open(path, "rb") as raw:
        assert open_member(raw, last).read() == b"{}"


def test_a_damaged_member_fails_the_whole_import(tmp_path, knowledge_db):
    path = tmp_path / "ctg-studies.json.zip"
    write_bulk_zip(path, 5)
    members = list(iter_members(path))
    data = bytearray(path.read_bytes())
    data[members[2].header_offset + 80] ^= 0xFF  # inside the third member's compressed data
    path.write_bytes(bytes(data))
    with open(path, "rb") as raw, pytest.raises(ValueError):
        open_member(raw, members[2]).read()
    before = _trials(knowledge_db)
    with pytest.raises(ImportSourceError, match=rf"{members[2].name} cannot be read in full .*nothing was imported"):
        import_ctgov_studies(path, knowledge_db)
    assert _trials(knowledge_db) == before  # not the four members before and after it


def test_the_bulk_download_shape_imports_with_byte_progress(tmp_path, knowledge_db):
    path = tmp_path / "ctg-studies.json.zip"
    write_bulk_zip(path, 1200)
    seen: list[tuple[int, int]] = []
    stages: list[str] = []
    report = import_ctgov_studies(path, knowledge_db, byte_progress=lambda d, t: seen.append((d, t)), stage=stages.append)
    assert (report.records, report.inserted) == (1200, 1200) and report.skipped == {}
    assert len(seen) >= 2 and all(t == path.stat().st_size for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == seen[-1][1]
    assert stages[-2:] == ["committing", "done"] and any(s.startswith("reading: 1,000 records") for s in stages)


def test_synthetic_studies_are_deterministic_and_vary(tmp_path):
    first = [json.dumps(s) for s in synthetic_studies(300, seed=5)]
    assert first == [json.dumps(s) for s in synthetic_studies(300, seed=5)]
    modules = [json.loads(s)["protocolSection"] for s in first]
    assert len({m["identificationModule"]["nctId"] for m in modules}) == 300
    assert len({m["statusModule"]["overallStatus"] for m in modules}) >= 5
    assert len({m["eligibilityModule"]["sex"] for m in modules}) == 3
    assert all(m["eligibilityModule"]["eligibilityCriteria"] for m in modules)


def test_read_position_follows_plain_files(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    for i in range(3):
        (folder / f"p{i}.json").write_text(json.dumps({"studies": list(synthetic_studies(5, seed=i))}))
    position = ReadPosition()
    for _name, stream in iter_sources(folder, (".json",), position):
        stream.read()
        assert position.done > 0
    assert position.done == position.total == sum(p.stat().st_size for p in folder.iterdir())
