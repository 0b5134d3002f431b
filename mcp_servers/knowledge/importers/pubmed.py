"""MEDLINE/PubMed XML reader for the knowledge importer.

Invariant: memory stays bounded: the file is parsed with ``xml.etree.ElementTree.iterparse``
and every finished top-level element is cleared from the root before the next one is read, so
a 30,000-article baseline file never sits in memory as a tree.

Each yielded item is ``(action, article, detail)``:
``("article", {...}, None)``, ``("delete", None, pmid)`` for ``DeleteCitation`` entries of
update files, or ``("skip", None, reason)``. ``handle_pubmed`` writes one such item to the store
(a deletion removes only an article imported here, never a starter one).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import IO

from mcp_servers.knowledge.importers.records import KnowledgeImportReport
from mcp_servers.knowledge.writes import upsert_article

_TOP_LEVEL = {"PubmedArticle", "PubmedBookArticle", "DeleteCitation"}


def _text(element: ET.Element | None) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def _year(article: ET.Element, citation: ET.Element) -> int | None:
    pub_date = article.find("Journal/JournalIssue/PubDate")
    candidates = []
    if pub_date is not None:
        candidates += [pub_date.findtext("Year"), pub_date.findtext("MedlineDate")]
    candidates += [article.findtext("ArticleDate/Year"), citation.findtext("DateCompleted/Year")]
    for value in candidates:
        match = re.search(r"\b(1[89]\d\d|20\d\d)\b", value or "")
        if match:
            return int(match.group(1))
    return None


def parse_article(element: ET.Element) -> tuple[dict | None, str | None]:
    """One ``PubmedArticle`` element -> (article, None) or (None, skip reason)."""
    citation = element.find("MedlineCitation")
    if citation is None:
        return None, "no MedlineCitation"
    pmid = (citation.findtext("PMID") or "").strip()
    if not pmid.isdigit():
        return None, "missing or malformed PMID"
    article = citation.find("Article")
    if article is None:
        return None, "no Article element"
    title = _text(article.find("ArticleTitle")) or _text(article.find("VernacularTitle"))
    if not title:
        return None, "no title"
    parts = []
    for node in article.findall("Abstract/AbstractText"):
        text = _text(node)
        if text:
            label = node.get("Label")
            parts.append(f"{label}: {text}" if label else text)
    terms = [_text(n) for n in citation.findall("MeshHeadingList/MeshHeading/DescriptorName")]
    terms += [_text(n) for n in citation.findall("KeywordList/Keyword")]
    journal = (
        _text(article.find("Journal/Title")) or _text(article.find("Journal/ISOAbbreviation"))
        or (citation.findtext("MedlineJournalInfo/MedlineTA") or "").strip()
    )
    return {
        "pmid": pmid,
        "title": title,
        "journal": journal or None,
        "year": _year(article, citation),
        "abstract": "\n".join(parts) or None,
        "keywords": "; ".join(t for t in terms if t) or None,
        "source": f"MEDLINE/PubMed record PMID {pmid} (XML import); published abstract",
        "demo": False,
    }, None


def iter_pubmed_records(stream: IO[bytes]) -> Iterator[tuple[str, dict | None, str | None]]:
    root = None
    for event, element in ET.iterparse(stream, events=("start", "end")):
        if event == "start":
            if root is None:
                root = element
            continue
        if element.tag not in _TOP_LEVEL:
            continue
        if element.tag == "PubmedArticle":
            article, reason = parse_article(element)
            yield ("article", article, None) if article else ("skip", None, reason)
        elif element.tag == "DeleteCitation":
            for pmid in element.findall("PMID"):
                yield "delete", None, (pmid.text or "").strip()
        else:
            yield "skip", None, "book record (PubmedBookArticle) not supported"
        if root is not None and root is not element:
            root.clear()


def handle_pubmed(db, item: tuple[str, dict | None, str | None], report: KnowledgeImportReport) -> None:
    action, article, detail = item
    if action == "skip":
        report.skipped[detail] += 1
    elif action == "delete":
        row = db.execute("SELECT origin FROM articles WHERE pmid = ?", [detail]).fetchone()
        if row and row[0] == "import":
            db.execute("DELETE FROM articles WHERE pmid = ?", [detail])
            report.count("deleted")
        else:
            report.notes["deletion for an article not imported here (ignored)"] += 1
    else:
        if not article.get("abstract"):
            report.notes["imported without an abstract"] += 1
        report.count(upsert_article(db, article, "import"))
