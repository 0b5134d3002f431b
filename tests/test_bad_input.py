"""Bad input at the command line ends in one clear line and a safe store, never a traceback:
a one-line UMLS release, malformed FHIR resources, a damaged database at `appliance init`."""

from __future__ import annotations

import json

import pytest

from appliance.cli import main
from mcp_servers.umls.foundation import connect as umls_connect

ONE_LINE = "C0011849|ENG|P|L0011849|PF|S0013404|Y|A0013404||||MSH|MH|D003920|Diabetes Mellitus|0|N|256|\n"


def _concepts(path) -> int:
    db = umls_connect(path, read_only=True)
    try:
        return db.execute("SELECT COUNT(*) FROM concepts").fetchone()[0]
    finally:
        db.close()


def test_a_one_line_umls_release_does_not_replace_the_curated_concepts(appliance_home, tmp_path, capsys):
    assert main(["init", "--no-model"]) == 0
    db = appliance_home / "umls.sqlite"
    curated = _concepts(db)
    assert curated >= 356
    rrf = tmp_path / "META"
    rrf.mkdir()
    (rrf / "MRCONSO.RRF").write_text(ONE_LINE)
    (rrf / "MRSTY.RRF").write_text("C0011849|T047|B2.2.1.2.1|Disease or Syndrome|AT17683839|256|\n")
    capsys.readouterr()
    assert main(["umls", "import", str(rrf)]) == 2
    err = capsys.readouterr().err
    assert f"would replace the store's {curated} concepts with 1" in err and "--replace" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert _concepts(db) == curated
    assert main(["umls", "import", str(rrf), "--replace"]) == 0
    assert f"the store held {curated} concepts before, 1 now" in capsys.readouterr().out
    assert _concepts(db) == 1


def test_malformed_fhir_resources_are_skipped_with_the_field_named(appliance_home, tmp_path, capsys):
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": {"resourceType": "Patient", "id": "bad-1", "name": "John Smith"}},
        {"resource": {"resourceType": "Patient", "id": "ok-1", "name": [{"family": "Okafor", "given": ["Ada"]}]}},
        {"resource": {"resourceType": "Condition", "id": "c-1", "subject": {"reference": "Patient/ok-1"},
                      "code": [{"text": "asthma"}]}},
        {"resource": {"resourceType": "Patient", "id": "bad-2", "name": [{"family": "X", "given": "Yo"}],
                      "birthDate": ["1990-01-01"]}},
    ]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle))
    assert main(["ehr", "import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "patients: 1 created" in out
    assert "skipped 1 (malformed: Patient.name is not a list): Patient 1" in out
    assert "skipped 1 (malformed: Condition.code is not an object): Condition 1" in out
    assert "skipped 1 (malformed: Patient.name[0].given is not a list): Patient 1" in out


def test_init_on_a_damaged_database_is_one_clear_line(appliance_home, capsys):
    # The first init of this process already ran the integrity check on the file, so the damage
    # is found by a later statement: the case that used to end in a traceback.
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    with open(appliance_home / "ehr.sqlite", "r+b") as handle:
        handle.seek(4096 * 4)
        handle.write(b"\xff" * 4096 * 4)
    assert main(["init", "--no-model"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("appliance: ehr.sqlite ") and err.count("\n") == 1 and "Traceback" not in err
    assert "restore it from a backup, or move it aside and run `appliance init`" in err



def test_an_import_path_too_long_for_the_file_system_is_one_clear_line(appliance_home, tmp_path, capsys):
    # Found by the generated command lines (tests/properties): stat() fails with ENAMETOOLONG,
    # which Path.exists() does not swallow, and the import ended in a traceback.
    path = tmp_path / ("n" * 300)
    assert main(["ehr", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("appliance: cannot read ") and err.rstrip().endswith("File name too long")
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_a_backup_path_too_long_for_the_file_system_is_one_clear_line(appliance_home, tmp_path, capsys, command):
    # Found by the generated command lines (tests/properties): the same ENAMETOOLONG, from
    # ehr backup's and ehr restore's checks of the path.
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    assert main(["ehr", command, str(tmp_path / ("n" * 300))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("appliance: cannot use ") and err.rstrip().endswith("File name too long")
    assert "Traceback" not in err and err.count("\n") == 1


def test_an_empty_model_name_is_refused_not_read_as_the_default(appliance_home, capsys, monkeypatch):
    # Found by the generated command lines: `--model ""` was falsy, so `ask` loaded the default model.
    import appliance.runtime
    from tests.properties.cli_argv import refuse_real_models

    monkeypatch.setattr(appliance.runtime, "load_model", refuse_real_models(appliance.runtime.load_model))
    assert main(["ask", "hello", "--model", ""]) == 2
    err = capsys.readouterr().err
    assert err.startswith("appliance: unknown model profile ''") and err.count("\n") == 1
