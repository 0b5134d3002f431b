"""Knowledge imports are one transaction and refuse to shrink the store by more than
``MAX_SHRINK`` unless told to (``--replace``)."""

from __future__ import annotations

import re

import pytest
from knowledge_helpers import FIXTURES

from mcp_servers.knowledge.importers.driver import (
    MAX_SHRINK,
    ImportRefused,
    import_pubmed_xml,
)
from mcp_servers.knowledge.store import connect

ARTICLE = re.search(r"<PubmedArticle>.*?</PubmedArticle>",
                    (FIXTURES / "pubmed" / "pubmed24n0001-fixture.xml").read_text(), re.S).group(0)
PMIDS = [str(98000000 + n) for n in range(40)]


def _articles(path) -> int:
    db = connect(path, read_only=True)
    try:
        return db.execute("SELECT COUNT(*) FROM articles").fetchone()[0]
    finally:
        db.close()


def _write(path, body: str):
    path.write_text(f'<?xml version="1.0" ?>\n<PubmedArticleSet>\n{body}\n</PubmedArticleSet>\n')
    return path


@pytest.fixture
def with_imports(tmp_path, knowledge_db):
    """The starter articles plus 40 imported ones, so deleting the imported ones is a big loss."""
    many = "\n".join(re.sub(r"<PMID Version=\"1\">\d+</PMID>", f'<PMID Version="1">{p}</PMID>', ARTICLE, count=1)
                     for p in PMIDS)
    report = import_pubmed_xml(_write(tmp_path / "many.xml", many), knowledge_db)
    assert report.inserted == 40
    return knowledge_db


def test_a_shrinking_import_is_refused_and_changes_nothing(tmp_path, with_imports):
    before = _articles(with_imports)
    deletions = _write(tmp_path / "delete.xml", "<DeleteCitation>" + "".join(f"<PMID>{p}</PMID>" for p in PMIDS)
                       + "</DeleteCitation>")
    with pytest.raises(ImportRefused, match=rf"would leave {before - 40} of the store's {before} articles.*--replace"):
        import_pubmed_xml(deletions, with_imports)
    assert _articles(with_imports) == before  # rolled back as a whole
    report = import_pubmed_xml(deletions, with_imports, replace=True)
    assert report.deleted == 40 and _articles(with_imports) == before - 40
    assert f"articles {before} -> {before - 40}" in report.summary()


def test_a_small_loss_is_accepted_without_replace(tmp_path, with_imports):
    before = _articles(with_imports)
    few = PMIDS[: int(before * MAX_SHRINK) - 1]
    report = import_pubmed_xml(_write(tmp_path / "d.xml", "<DeleteCitation>" + "".join(
        f"<PMID>{p}</PMID>" for p in few) + "</DeleteCitation>"), with_imports)
    assert report.deleted == len(few)
