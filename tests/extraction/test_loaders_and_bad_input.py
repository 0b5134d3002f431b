"""Protocol files in, pages of text out; every bad file is one line, exit 2, nothing printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from extraction_helpers import PROTOCOL_PAGES, blank_pdf, encrypted_pdf, text_pdf

from appliance.cli import main
from appliance.extraction import DocumentError, load_documents

FIXTURES = Path(__file__).parent.parent / "knowledge" / "fixtures" / "ctgov"


def test_text_markdown_and_pdf_pages(tmp_path):
    txt = tmp_path / "p.txt"
    txt.write_text("\f".join(PROTOCOL_PAGES), encoding="utf-8")
    md = tmp_path / "p.md"
    md.write_text("# Title\n\n* Life expectancy \\<3 months\n", encoding="utf-8")
    pdf = tmp_path / "p.pdf"
    pdf.write_bytes(text_pdf(PROTOCOL_PAGES))
    [t] = load_documents(txt)
    assert (t.kind, [p.number for p in t.pages]) == ("text", [1, 2, 3, 4])
    assert "* Life expectancy <3 months" in load_documents(md)[0].pages[0].text  # Markdown escapes undone
    [p] = load_documents(pdf)
    assert p.kind == "pdf" and len(p.pages) == 4 and "* Age >= 18 years" in p.pages[1].text


def test_ctgov_v2_record_and_studies_list(tmp_path):
    [doc] = load_documents(FIXTURES / "NCT99000001.json")
    assert (doc.name, doc.kind, doc.title) == ("NCT99000001", "ctgov", "Fixture Study of Glucose Sensors in Type 2 Diabetes")
    assert doc.pages[0].text.startswith("Inclusion Criteria:")
    record = json.loads((FIXTURES / "NCT99000001.json").read_text())
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"studies": [record, record]}))
    assert [d.name for d in load_documents(two)] == ["NCT99000001", "NCT99000001"]


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good_pdf = text_pdf(PROTOCOL_PAGES)
    files = {
        "empty txt": ("empty.txt", b"", "empty.txt is empty"),
        "blank md": ("blank.md", b"  \n\n ", "blank.md is empty"),
        "latin-1 txt": ("latin.txt", "Exclusion: gr\u00f6\u00dfer als 5".encode("latin-1"), "is not UTF-8 text"),
        "latin-1 md": ("latin.md", "# Crit\u00e8res".encode("latin-1"), "is not UTF-8 text"),
        "empty pdf": ("empty.pdf", b"", "empty.pdf is empty"),
        "not a pdf": ("fake.pdf", b"Inclusion Criteria: adults\n", "is not a PDF file"),
        "corrupt pdf": ("corrupt.pdf", good_pdf[:60] + b"\x00garbage" * 20, "is not a readable PDF"),
        "encrypted pdf": ("locked.pdf", encrypted_pdf(good_pdf), "is encrypted"),
        "image-only pdf": ("scan.pdf", blank_pdf(), "has no extractable text"),
        "empty json": ("empty.json", b"", "empty.json is empty"),
        "not json": ("bad.json", b"{not json", "is not JSON"),
        "json, not ct.gov": ("bundle.json", json.dumps({"resourceType": "Bundle"}).encode(),
                             "is not a ClinicalTrials.gov v2 record"),
        "ct.gov without criteria": ("nocrit.json", json.dumps({"protocolSection": {
            "identificationModule": {"nctId": "NCT00000001"}}}).encode(), "NCT00000001 has no eligibility criteria"),
        "non-utf8 json": ("latin.json", '{"x": "\u00e9"}'.encode("latin-1"), "is not UTF-8 text"),
        "unsupported type": ("protocol.docx", b"PK\x03\x04", "unsupported file type '.docx'"),
    }
    out = {}
    for case, (name, data, message) in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        out[case] = (path, message)
    return out


CASES = ["empty txt", "blank md", "latin-1 txt", "latin-1 md", "empty pdf", "not a pdf", "corrupt pdf",
         "encrypted pdf", "image-only pdf", "empty json", "not json", "json, not ct.gov", "ct.gov without criteria",
         "non-utf8 json", "unsupported type"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_clear_line_exit_2_and_nothing_written(case, tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    path, message = _bad_files(work)[case]
    with pytest.raises(DocumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_documents(path)
    before = sorted(p.name for p in work.iterdir())
    monkeypatch.chdir(work)
    capsys.readouterr()
    # no --script: a bad file must be refused before any model is loaded
    assert main(["extract", str(path), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("appliance: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err
    assert sorted(p.name for p in work.iterdir()) == before


def test_a_missing_file_and_a_folder(tmp_path, capsys):
    assert main(["extract", str(tmp_path / "nope.txt")]) == 2
    assert "nope.txt does not exist" in capsys.readouterr().err
    folder = tmp_path / "dir.txt"
    folder.mkdir()
    assert main(["extract", str(folder)]) == 2
    assert "is a folder, not a file" in capsys.readouterr().err


def test_an_owner_password_only_pdf_opens(tmp_path):
    from io import BytesIO

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(text_pdf(PROTOCOL_PAGES))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    path = tmp_path / "owner.pdf"
    with open(path, "wb") as handle:
        writer.write(handle)
    assert len(load_documents(path)[0].pages) == 4



def test_a_pdf_over_the_page_limit_is_refused_before_its_text_is_read(tmp_path, monkeypatch, capsys):
    from pypdf import PageObject

    path = tmp_path / "long.pdf"
    path.write_bytes(text_pdf(PROTOCOL_PAGES))
    read: list[int] = []
    real = PageObject.extract_text
    monkeypatch.setattr(PageObject, "extract_text", lambda self, *a, **k: read.append(1) or real(self, *a, **k))
    with pytest.raises(DocumentError, match=r"long.pdf has 4 pages, more than the 3 allowed.*--max-pages"):
        load_documents(path, max_pages=3)
    assert read == []
    assert main(["extract", str(path), "--max-pages", "3"]) == 2
    assert "more than the 3 allowed" in capsys.readouterr().err and read == []
