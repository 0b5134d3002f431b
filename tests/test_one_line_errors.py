"""Every error a user sees is one line, and the exit code is the README's (2: the input or the
request cannot be used): deeply nested scripts, numbers of thousands of digits, FIFOs and
devices named as files, a backups folder that does not exist, an import whose every resource
is malformed, and a tool request the model could not fill. No Python exception text."""

from __future__ import annotations

import json
import os

import pytest

from appliance.cli import main

INTERNALS = ("Traceback", "RecursionError", "set_int_max_str_digits", "Field required", "Args:", "Error:")


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("appliance: "), err
    assert not any(word in err for word in INTERNALS), err
    return err


@pytest.mark.parametrize("depth, said", [(100, "nested too deeply (more than 32 levels)"),
                                         (100_000, "nested too deeply to read")])
def test_a_deeply_nested_script_is_one_line(appliance_home, tmp_path, capsys, depth, said):
    script = tmp_path / "nested.json"
    script.write_text('{"INTENT_CLASSIFY": ' + "[" * depth + "]" * depth + "}")
    assert main(["ask", "hi", "--script", str(script)]) == 2
    assert said in _one_line(capsys.readouterr().err)


def _bundle(path, patient: str) -> None:
    path.write_text('{"resourceType": "Bundle", "type": "collection", "entry": [{"resource": ' + patient + "}]}")


def test_a_birth_date_of_thousands_of_digits_is_one_line(appliance_home, tmp_path, capsys):
    path = tmp_path / "b.json"
    _bundle(path, '{"resourceType": "Patient", "id": "p-1", "name": [{"family": "X"}], "birthDate": ' + "1" * 5000 + "}")
    assert main(["ehr", "import", str(path)]) == 2
    assert "holds a number too long to be a value" in _one_line(capsys.readouterr().err)
    _bundle(path, json.dumps({"resourceType": "Patient", "id": "p-1", "name": [{"family": "X"}], "birthDate": "1" * 5000}))
    assert main(["ehr", "import", str(path)]) == 2  # skipped, and nothing else was in it
    captured = capsys.readouterr()
    assert "skipped 1 (birthDate is not a date (YYYY, YYYY-MM or YYYY-MM-DD)): Patient 1" in captured.out
    assert "nothing was imported" in _one_line(captured.err)


def test_an_import_whose_every_resource_is_malformed_exits_2_and_still_lists_them(appliance_home, tmp_path, capsys):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": {"resourceType": "Patient", "id": "bad-1", "name": "John Smith"}},
        {"resource": {"resourceType": "Patient", "id": "bad-2"}}]}))
    assert main(["ehr", "import", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["skipped"]) == 2
    assert "every resource in it was skipped" in _one_line(captured.err)
    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": {"resourceType": "Patient", "id": "bad-1", "name": "John Smith"}},
        {"resource": {"resourceType": "Patient", "id": "ok-1", "name": [{"family": "Okafor"}]}}]}))
    assert main(["ehr", "import", str(path)]) == 0  # some imported: the skips are reported, not an error


@pytest.mark.parametrize("argv", [["ehr", "import"], ["extract"], ["model", "install"], ["ask", "hi", "--script"],
                                  ["knowledge", "import", "ctgov"], ["ehr", "restore"], ["ehr", "verify-export"]])
def test_a_fifo_is_refused_before_it_is_opened(appliance_home, tmp_path, capsys, argv):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    assert main([*argv, str(fifo)]) == 2
    assert "is a named pipe (FIFO), not a file this command can read" in _one_line(capsys.readouterr().err)


def test_a_device_is_refused_before_it_is_read(appliance_home, capsys):
    assert main(["ehr", "import", "/dev/zero"]) == 2  # read, it would never end
    assert "/dev/zero is a character device" in _one_line(capsys.readouterr().err)


def test_audit_verify_with_a_backups_folder_that_does_not_exist_exits_2(appliance_home, tmp_path, capsys):
    missing = tmp_path / "nonexistent"
    assert main(["audit", "verify", "--backups", str(missing)]) == 2
    assert f"{missing} does not exist" in _one_line(capsys.readouterr().err)


def test_a_tool_request_the_model_left_incomplete_is_one_line_in_clinical_words(appliance_home, tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "search", "suggested_tool": "search_patient"}],
        "TOOL_SELECT": [{"tool_name": "search_patient"}, {}]}))
    assert main(["ask", "find the patient", "--script", str(script)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "the Patient Search request could not be read in full" in err and "nothing was done" in err
