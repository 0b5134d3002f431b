"""Protocol files as documents: pages of plain text.

Invariants:
- Four kinds are read: ``.txt`` and ``.md`` (UTF-8; a form feed starts a new page), ``.pdf``
  (pypdf's text layer, no OCR) and ``.json`` (ClinicalTrials.gov API v2: one study or
  ``{"studies": [...]}``, each study one document whose one page is its eligibility text).
- Anything else, or a file that cannot give text (missing, empty, not UTF-8, encrypted,
  image-only, corrupt, not a CT.gov record, a record without eligibility criteria), raises
  ``DocumentError`` with one line naming the file and the problem; nothing is half-loaded.
- Loading writes nothing and keeps no handle open.
- Size is bounded before the work starts: ``load_documents(path, max_pages=N)`` refuses a PDF of
  more than N pages before its text is extracted; ``check_size`` refuses documents over the
  page or character limits, naming the option that raises them (``--max-pages``,
  ``--max-chars``). ``size`` gives (pages, characters).
"""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from appliance.extraction.errors import DocumentError

Kind = Literal["text", "markdown", "pdf", "ctgov"]
SUFFIXES: dict[str, Kind] = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".pdf": "pdf",
                             ".json": "ctgov"}
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>^|~=])")


@dataclass(frozen=True)
class Page:
    number: int  # 1-based, as the file numbers it (a PDF page, a form-feed page)
    text: str


@dataclass(frozen=True)
class Document:
    name: str  # the file name, or the NCT id of a CT.gov record
    kind: Kind
    pages: tuple[Page, ...]
    title: str | None = None


def unescape_markdown(text: str) -> str:
    """``\\>`` -> ``>`` and the like: CT.gov stores eligibility text as Markdown."""
    return _MD_ESCAPE.sub(r"\1", text)


def size(documents: list[Document]) -> tuple[int, int]:
    """(pages, characters) of ``documents``."""
    return (sum(len(d.pages) for d in documents),
            sum(len(p.text) for d in documents for p in d.pages))


def check_size(name: str, documents: list[Document], max_pages: int, max_chars: int) -> tuple[int, int]:
    """(pages, characters), or ``DocumentError`` naming the limit passed and its option."""
    pages, chars = size(documents)
    if pages > max_pages:
        raise DocumentError(f"{name} has {pages:,} pages, more than the {max_pages:,} allowed; nothing was extracted "
                            "(raise the limit with --max-pages)")
    if chars > max_chars:
        raise DocumentError(f"{name} has {chars:,} characters, more than the {max_chars:,} allowed; nothing was "
                            "extracted (raise the limit with --max-chars)")
    return pages, chars


def load_documents(path: str | Path, max_pages: int | None = None) -> list[Document]:
    """The documents in one protocol file (one, except a CT.gov ``studies`` list); a PDF of more
    than ``max_pages`` pages is refused before its text is read."""
    path = Path(path)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise DocumentError(f"{path.name}: unsupported file type {path.suffix or '(none)'!r}; "
                            "use .txt, .md, .pdf or a ClinicalTrials.gov v2 .json record")
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise DocumentError(f"{path.name} is a directory, not a protocol file") from None
    except OSError as exc:
        raise DocumentError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    if not data.strip():
        raise DocumentError(f"{path.name} is empty")
    if kind == "pdf":
        return [_pdf(path.name, data, max_pages)]
    if kind == "ctgov":
        return _ctgov(path.name, _utf8(path.name, data))
    text = _utf8(path.name, data)
    if kind == "markdown":
        text = unescape_markdown(text)
    pages = tuple(Page(i, p) for i, p in enumerate(text.split("\f"), start=1) if p.strip())
    return [Document(path.name, kind, pages)]


def _utf8(name: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{name} is not UTF-8 text (invalid byte at offset {exc.start}); "
                            "convert it to UTF-8 and try again") from None
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise DocumentError(f"{name} is empty")
    return text


# -- PDF ----------------------------------------------------------------------------------
def _pdf(name: str, data: bytes, max_pages: int | None = None) -> Document:
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise DocumentError(f"{name} is not a PDF file (no %PDF header)")
    from pypdf import PdfReader

    pypdf_log = logging.getLogger("pypdf")
    level = pypdf_log.level
    pypdf_log.setLevel(logging.CRITICAL)  # pypdf warns about every repaired oddity on stderr
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opens_without_password(reader):
            raise DocumentError(f"{name} is encrypted (password-protected); save an unprotected copy and try again")
        count = len(reader.pages)
        if max_pages is not None and count > max_pages:
            raise DocumentError(f"{name} has {count:,} pages, more than the {max_pages:,} allowed; nothing was "
                                "extracted (raise the limit with --max-pages)")
        texts = [page.extract_text() or "" for page in reader.pages]
    except DocumentError:
        raise
    except Exception as exc:  # pypdf raises many kinds on damaged files; a third-party error never escapes
        raise DocumentError(f"{name} is not a readable PDF (damaged or truncated: {type(exc).__name__})") from None
    finally:
        pypdf_log.setLevel(level)
    if not texts:
        raise DocumentError(f"{name} has no pages")
    pages = tuple(Page(i, _tidy_pdf_text(t)) for i, t in enumerate(texts, start=1) if t.strip())
    if not pages:
        raise DocumentError(f"{name} has no extractable text (an image-only or scanned PDF?); "
                            "OCR is not supported: use a PDF with a text layer or a .txt copy")
    return Document(name, "pdf", pages)


def _opens_without_password(reader) -> bool:
    """An owner-password-only PDF opens with the empty user password; anything else does not."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # missing crypto support, unknown algorithm: treat as locked
        return False


def _tidy_pdf_text(text: str) -> str:
    """Bullet glyphs as ``*`` and no trailing spaces, so the structure rules see what a text
    file would show."""
    text = re.sub(r"^[ \t]*[\u2022\u25cf\u25aa\u25e6\u2023\u2043\uf0b7][ \t]*", "* ", text, flags=re.M)
    return "\n".join(line.rstrip() for line in text.split("\n"))


# -- ClinicalTrials.gov API v2 ------------------------------------------------------------
def _ctgov(name: str, text: str) -> list[Document]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{name} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("studies"), list):
        studies = data["studies"]
    elif isinstance(data, dict) and "protocolSection" in data:
        studies = [data]
    else:
        raise DocumentError(f"{name} is not a ClinicalTrials.gov v2 record (expected a study with "
                            "protocolSection, or {\"studies\": [...]})")
    if not studies:
        raise DocumentError(f"{name} holds no studies")
    docs = []
    for i, study in enumerate(studies, start=1):
        protocol = study.get("protocolSection") if isinstance(study, dict) else None
        if not isinstance(protocol, dict):
            raise DocumentError(f"{name}: study {i} is not a ClinicalTrials.gov v2 record (no protocolSection)")
        ident = protocol.get("identificationModule") or {}
        nct = str(ident.get("nctId") or f"{name} study {i}").strip()
        criteria = (protocol.get("eligibilityModule") or {}).get("eligibilityCriteria")
        if not isinstance(criteria, str) or not criteria.strip():
            raise DocumentError(f"{name}: {nct} has no eligibility criteria (eligibilityModule.eligibilityCriteria)")
        title = ident.get("briefTitle") or ident.get("officialTitle")
        docs.append(Document(nct, "ctgov", (Page(1, unescape_markdown(criteria)),),
                             title if isinstance(title, str) else None))
    return docs
