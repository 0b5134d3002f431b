"""Protocols written for the tests, with known criteria, and small PDFs built by hand."""

from __future__ import annotations

import io

PAGE_1 = """STUDY PROTOCOL PLEURA-01

1. BACKGROUND

Pleural effusion is common in patients with cancer. This study compares two ways of draining it.
"""

PAGE_2 = """2. ELIGIBILITY

Patients must meet all of the following:

Inclusion Criteria:

* Age >= 18 years
* Unilateral pleural effusion confirmed by chest x-ray
* Platelet count at least 100,000/mm3; INR below 1.5

Exclusion Criteria:

* Pregnant or breastfeeding
* Prior pleurodesis within the past 30 days
"""

PAGE_3 = """* Active pleural infection
* Pregnant or breastfeeding

Patients with a known allergy to talc are not eligible.

3. STUDY TREATMENT

* Talc slurry through the chest tube
"""

PAGE_4 = """4. STATISTICS

The sample size gives 80% power to detect a difference of 20%.
"""

PROTOCOL_PAGES = [PAGE_1, PAGE_2, PAGE_3, PAGE_4]

# The criteria a correct run finds, in order, with their side (the duplicate on page 3 goes).
EXPECTED = [
    ("Age >= 18 years", "inclusion"),
    ("Unilateral pleural effusion confirmed by chest x-ray", "inclusion"),
    ("Platelet count at least 100,000/mm3", "inclusion"),
    ("INR below 1.5", "inclusion"),
    ("Pregnant or breastfeeding", "exclusion"),
    ("Prior pleurodesis within the past 30 days", "exclusion"),
    ("Active pleural infection", "exclusion"),
    ("Patients with a known allergy to talc are not eligible.", "exclusion"),
]


def details(type_: str = "inclusion", *, entity: str = "age", relation: str = "greater_or_equal",
            value: str | None = "18", unit: str | None = "years", thresholds: list[str] | None = None,
            temporal: str | None = None, category: str = "demographic", assertion: str = "present") -> dict:
    """One EXTRACT_DETAILS reply."""
    return {"type": type_, "assertion": assertion, "category": category, "entity": entity, "relation": relation,
            "value": value, "unit": unit, "thresholds": thresholds or [], "temporal": temporal}


def protocol_script() -> dict:
    """Scripted replies for the four-page protocol, in call order per node."""
    return {
        "EXTRACT_PAGE_FILTER": [{"holds_criteria": False}, {"holds_criteria": False}],  # pages 1 and 4
        "EXTRACT_PARAGRAPH_FILTER": [{"holds_criteria": True}, {"holds_criteria": False}],  # allergy; treatment list
        "EXTRACT_SPLIT": [{"criteria": ["Platelet count at least 100,000/mm3", "INR below 1.5"]}],
        "EXTRACT_DETAILS": [
            details(thresholds=[">= 18 years"]),
            details(entity="pleural effusion", relation="has", value="unilateral", unit=None, category="condition"),
            details(entity="platelet count", relation="greater_or_equal", value="100,000", unit="/mm3",
                    thresholds=["at least 100000 /mm3"], category="lab_value"),
            details(entity="INR", relation="less_than", value="1.5", unit=None, thresholds=["< 1.5"],
                    category="lab_value"),
            details("exclusion", entity="pregnant", relation="has", value=None, unit=None, category="reproductive"),
            details("exclusion", entity="pleurodesis", relation="within", value="30", unit="days",
                    temporal="within the past 30 days", category="procedure", assertion="historical"),
            details("exclusion", entity="pleural infection", relation="has", value=None, unit=None,
                    category="condition"),
            details("inclusion", entity="talc", relation="has", value=None, unit=None, category="medication"),
        ],
    }


# -- PDFs ---------------------------------------------------------------------------------
def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def text_pdf(pages: list[str]) -> bytes:
    """A minimal PDF (Helvetica, one text object per page, one line per text line)."""
    objects: list[bytes] = []
    n_pages = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, page in enumerate(pages):
        lines = page.split("\n")
        ops = ["BT", "/F1 10 Tf", "12 TL", "50 780 Td"] + [f"{_pdf_string(line)} Tj T*" for line in lines] + ["ET"]
        stream = "\n".join(ops).encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * i} 0 R >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def blank_pdf(pages: int = 2) -> bytes:
    """An image-only stand-in: pages with no text layer at all."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=842)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def encrypted_pdf(source: bytes, password: str = "secret") -> bytes:
    """``source`` encrypted with a user password (RC4, so no crypto library is needed)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(source)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()
