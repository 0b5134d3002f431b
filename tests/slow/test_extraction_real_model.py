"""`appliance extract` on the shipped small model (never a download): a short two-page PDF
protocol gives its bullets as criteria, with the sides of their headings, and every model call
(page filter, descriptions) returns a schema-valid object."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "extraction"))

from extraction_helpers import text_pdf  # noqa: E402

from appliance.cli import main  # noqa: E402
from common.locations import models_dir  # noqa: E402
from models.assemble import assemble_default_model  # noqa: E402

PAGES = [
    "1. BACKGROUND\n\nMalignant pleural effusion causes breathlessness in many patients with cancer.\n",
    "2. ELIGIBILITY\n\nInclusion Criteria:\n\n* Age >= 18 years\n* Unilateral pleural effusion\n\n"
    "Exclusion Criteria:\n\n* Pregnancy\n",
]


def test_extract_a_short_pdf_protocol_on_the_real_model(tmp_path, capsys):
    assemble_default_model(models_dir())
    path = tmp_path / "protocol.pdf"
    path.write_bytes(text_pdf(PAGES))
    assert main(["extract", str(path), "--json", "--no-split"]) == 0
    data = json.loads(capsys.readouterr().out)
    found = {c["text"]: c for c in data["criteria"]}
    expected = {"Age >= 18 years": "inclusion", "Unilateral pleural effusion": "inclusion", "Pregnancy": "exclusion"}
    for text, side in expected.items():
        assert found[text]["type"] == side and found[text]["provenance"]["type"] == "heading"
    for crit in data["criteria"]:
        assert crit["provenance"]["details"] == "model"  # the constrained call always gave a valid object
        assert crit["category"] and crit["assertion"]
    assert {"comparator": ">=", "value": 18, "unit": "years"} in found["Age >= 18 years"]["thresholds"]
    assert data["stats"]["model_calls"] >= 4 and data["warnings"] == []
