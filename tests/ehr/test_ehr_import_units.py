"""Values in another unit are converted to the record's unit before the physiological limits
(``ehr_db.units``): the conversions table, the rows the real importer stores, an impossible
value after conversion refused in one line naming the resource, and the CLI's stop for a gate
input (text and --json) on real SQLite."""

from __future__ import annotations

import json
import sqlite3

import pytest
from ehr_helpers import audit_rows, row_counts

from appliance.cli import main
from ehr_db import units
from ehr_db.codes import LOINC_TESTS
from ehr_db.errors import BundleError
from ehr_db.fhir_import import import_fhir_bundle

LOINC = "http://loinc.org"


def observation(rid, loinc, value, unit=None, code=None, pid="pat-001", when="2020-01-01", category="laboratory",
                ref=None) -> dict:
    quantity = {"value": value, **({"unit": unit} if unit else {}), **({"code": code} if code else {})}
    resource = {"resourceType": "Observation", "id": rid, "status": "final", "subject": {"reference": f"Patient/{pid}"},
                "category": [{"coding": [{"code": category}]}], "effectiveDateTime": when,
                "code": {"coding": [{"system": LOINC, "code": loinc, "display": "test"}]}, "valueQuantity": quantity}
    if ref:
        resource["referenceRange"] = [{"low": {"value": ref[0]}, "high": {"value": ref[1]}}]
    return resource


def bundle(tmp_path, *resources, name="b.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection",
                                "entry": [{"resource": r} for r in resources]}))
    return path


def stored(path, rid) -> tuple:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value_num, unit, ref_low, ref_high, interpretation FROM observations WHERE id = ?",
                            [rid]).fetchone()
    finally:
        conn.close()


# (LOINC, value, unit as given, UCUM code, the exact value in the record's unit, the record's unit)
CONVERSIONS = [
    ("4548-4", 48, "mmol/mol", None, 6.54304, "%"),  # IFCC-NGSP master equation: 0.09148 x 48 + 2.152
    ("4548-4", 31, "mmol/mol", None, 4.98788, "%"),
    ("2345-7", 5.5, "mmol/L", None, 99.088, "mg/dL"),
    ("2160-0", 88.42, "umol/L", None, 1.0, "mg/dL"),
    ("2160-0", 176.84, "µmol/L", None, 2.0, "mg/dL"),
    ("3094-0", 7.14, "mmol/L", None, 19.99914, "mg/dL"),
    ("17861-6", 2.5, "mmol/L", None, 10.02, "mg/dL"),
    ("2093-3", 5.0, "mmol/L", None, 193.35, "mg/dL"),
    ("2571-8", 1.7, "mmol/L", None, 150.569, "mg/dL"),
    ("718-7", 135, "g/L", None, 13.5, "g/dL"),
    ("6690-2", 7.2, "10*9/L", None, 7.2, "10^3/uL"),
    ("29463-7", 180, "lb", None, 81.6466266, "kg"),
    ("29463-7", 180, "pounds", "[lb_av]", 81.6466266, "kg"),
    ("29463-7", 3400, "g", None, 3.4, "kg"),
    ("8302-2", 70, "in", None, 177.8, "cm"),
    ("8310-5", 98.6, "°F", None, 37.0, "°C"),
    ("8310-5", 101.3, None, "[degF]", 38.5, "°C"),
    ("8480-6", 16, "kPa", None, 120.00992, "mmHg"),
]


@pytest.mark.parametrize("loinc,value,unit,code,expected,record_unit", CONVERSIONS)
def test_conversions_table(loinc, value, unit, code, expected, record_unit):
    converted, stored_unit = units.to_record_unit(loinc, value, unit, code)
    assert stored_unit == record_unit
    assert converted == pytest.approx(expected, rel=5e-4)  # the exact conversion, to 4 significant digits
    assert len(f"{converted:g}".replace(".", "").lstrip("0")) <= 4


@pytest.mark.parametrize("loinc,value,unit", [
    ("4548-4", 6.1, "%"), ("2160-0", 1.1, "mg/dL"), ("29463-7", 70, "kg"),  # already the record's unit
    ("4548-4", 6.1, "furlongs"), ("1742-6", 30, "U/L"), (None, 3, "mmol/L"),  # no known conversion: kept
])
def test_values_without_a_conversion_are_kept_as_given(loinc, value, unit):
    assert units.to_record_unit(loinc, value, unit) == (value, unit)


def test_a_converted_value_keeps_four_significant_digits():
    assert units.to_record_unit("29463-7", 178.6, "lb") == (81.01, "kg")
    assert units.to_record_unit("29463-7", 178.5742, "lb") == (81.0, "kg")


def test_the_stored_units_are_the_records_units():
    for code, unit in units.STORED_UNITS.items():
        if code in LOINC_TESTS:
            assert LOINC_TESTS[code].unit == unit, code


def test_the_importer_stores_the_converted_value_range_and_flag(ehr_path, tmp_path):
    report = import_fhir_bundle(ehr_path, bundle(tmp_path, observation("a1c-ifcc", "4548-4", 53, "mmol/mol",
                                                                       ref=(20, 42))))
    assert dict(report.created) == {"observations": 1}
    value, unit, low, high, flag = stored(ehr_path, "a1c-ifcc")
    assert (value, unit, low, high, flag) == (7.0, "%", 3.982, 5.994, "H")  # 0.09148 x 53 + 2.152 = 7.00044


@pytest.mark.parametrize("resource,words", [
    (observation("a1c-bad", "4548-4", 900_000, "mmol/mol"),
     "Observation a1c-bad: valueQuantity.value \\(given in mmol/mol, converted to %\\) is outside physiological "
     "limits for LOINC 4548-4 \\(2-25 %\\); nothing was imported"),
    (observation("wt-bad", "29463-7", 2000, "lb", category="vital-signs"),
     "Observation wt-bad: valueQuantity.value \\(given in lb, converted to kg\\) is outside physiological limits "
     "for LOINC 29463-7 \\(0.2-700 kg\\)"),
    (observation("crea-bad", "2160-0", 9000, "umol/L"),
     "Observation crea-bad: valueQuantity.value \\(given in umol/L, converted to mg/dL\\) is outside"),
])
def test_an_impossible_value_after_conversion_is_refused_naming_the_resource(ehr_path, tmp_path, resource, words):
    before = row_counts(ehr_path)
    with pytest.raises(BundleError, match=words) as refused:
        import_fhir_bundle(ehr_path, bundle(tmp_path, observation("ok", "4548-4", 6.1, "%"), resource))
    assert "\n" not in str(refused.value) and "900000" not in str(refused.value)  # one line, the value unrepeated
    assert row_counts(ehr_path) == before  # the plausible observation before it was not kept either


# -- the command line ------------------------------------------------------------------------------------------
def _one_line_failure(capsys) -> tuple[str, str]:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1 and err.startswith("appliance: "), err
    return out, err


EGFR_95 = observation("pat-015-obs-4", "33914-3", 95, "mL/min/1.73m2", pid="pat-015", when="2026-10-06")


def test_cli_stops_on_a_gate_input_and_accepts_it_audited(appliance_home, capsys, tmp_path):
    path = bundle(tmp_path, EGFR_95)
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    db = appliance_home / "ehr.sqlite"
    before = row_counts(db)
    assert main(["ehr", "import", str(path)]) == 2
    out, err = _one_line_failure(capsys)
    assert "stopped before writing" in out
    assert ("patient pat-015: observations pat-015-obs-4: latest eGFR 24 mL/min/1.73m2 (2026-10-06) -> "
            "95 mL/min/1.73m2 (2026-10-06)") in out
    assert "--accept-changes" in err and row_counts(db) == before
    assert main(["ehr", "import", str(path), "--json"]) == 2
    out, _ = _one_line_failure(capsys)
    shown = json.loads(out)
    assert shown["imported"] is False and any("latest eGFR 24 mL/min/1.73m2 (2026-10-06) -> 95" in c
                                              for c in shown["would_change"])
    assert main(["ehr", "import", str(path), "--accept-changes", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(d["field"], d["before"], d["after"]) for d in report["differences"]] == [
        ("latest eGFR", "24 mL/min/1.73m2 (2026-10-06)", "95 mL/min/1.73m2 (2026-10-06)")]
    assert json.loads(audit_rows(db)[-1]["arguments"])["accepted_changes"][0]["row_id"] == "pat-015-obs-4"
    assert main(["audit", "verify"]) == 0


def test_cli_refuses_an_impossible_converted_value_in_one_line(appliance_home, capsys, tmp_path):
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    path = bundle(tmp_path, observation("a1c-bad", "4548-4", 900_000, "mmol/mol"))
    assert main(["ehr", "import", str(path)]) == 2
    _, err = _one_line_failure(capsys)
    assert "Observation a1c-bad" in err and "converted to %" in err and "nothing was imported" in err
