"""``appliance <area> import`` on the importers' real-format fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.cli import main

FIXTURES = Path(__file__).parent


@pytest.mark.parametrize("argv", [
    ["ehr", "import", str(FIXTURES / "ehr/fixtures/synthea_bundle.json")],
    ["knowledge", "import", "openfda", str(FIXTURES / "knowledge/fixtures/openfda/drug-label-0001-of-0001.json")],
    ["knowledge", "import", "pubmed", str(FIXTURES / "knowledge/fixtures/pubmed/pubmed24n0001-fixture.xml")],
    ["knowledge", "import", "ctgov", str(FIXTURES / "knowledge/fixtures/ctgov/studies-page-1.json")],
])
def test_imports_report_and_are_idempotent(argv, appliance_home, capsys):
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert first.strip() and second.strip()
    assert first != second  # the second run reports nothing new


def test_missing_input_is_a_clear_error(appliance_home, capsys):
    assert main(["ehr", "import", str(appliance_home / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err


def test_malformed_bundle_is_a_clear_error(appliance_home, capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert main(["ehr", "import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "import" in err and "Traceback" not in err
