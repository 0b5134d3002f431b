"""The CLI edge: scripted runs, clear errors and exit codes, never a traceback."""

from __future__ import annotations

import io
import json

import pytest

from appliance.cli import main

SCRIPT = {
    "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Safety lookup.", "suggested_tool": "check_drug_safety"}],
    "TOOL_SELECT": [{"tool_name": "check_drug_safety"}, {"drug_name": "amiodarone"}],
    "RESULT_CLASSIFY": [{"quality": "error_retryable", "brief_summary": "Timed out."},
                        {"quality": "success_rich", "brief_summary": "Warnings returned."}],
    "ERROR_HANDLER": [{"strategy": "retry_same", "reasoning": "temporary"}],
    "SYNTHESIZE": ["Amiodarone carries boxed warnings."],
    "tools": {"check_drug_safety": [{"error_type": "timeout", "message": "scripted"},
                                    {"result": {"boxed_warning": "Pulmonary toxicity."}}]},
    "drug_names": ["amiodarone"],
}


def test_scripted_ask_prints_the_path_as_json(tmp_path, capsys, appliance_home):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    assert main(["ask", "Check FDA warnings for amiodarone", "--script", str(script), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["path"] == ["INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE", "RESULT_CLASSIFY",
                           "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "TOOL_SELECT", "TOOL_EXECUTE",
                           "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "SYNTHESIZE"]
    assert [c["classification"] for c in out["tool_calls"]] == ["error_retryable", "success_rich"]
    assert out["tool_calls"][0]["args"] == {"drug_name": "amiodarone"}
    assert out["router"][0]["next"] == "ERROR_HANDLER" and out["router"][0]["reason"]
    assert out["intent"] == "TOOL_NEEDED"  # code routes a named drug's warnings: the model is not asked
    assert out["response"].startswith("Amiodarone: from its label summary.\nBoxed warning: Pulmonary toxicity.")
    assert {t["node"] for t in out["timings"]} == set(out["path"])
    assert out["model_notice"] == "demo model: answers are not clinical advice"
    assert out["disclaimer"] is None  # no patient data was used


def test_plain_ask_prints_the_demo_notice_above_the_answer(tmp_path, capsys, appliance_home):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    assert main(["ask", "Check FDA warnings for amiodarone", "--script", str(script)]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "[demo model: answers are not clinical advice]", "Amiodarone: from its label summary."]


@pytest.mark.parametrize("content,words", [
    ("{not json", "not JSON"),
    (b"\x80\x81 not text", "not UTF-8 text"),  # found by the generated command lines (tests/properties)
    ("[1, 2]", "keyed by node name"),
    (json.dumps({"INTENT_CLASIFY": []}), "unknown key 'INTENT_CLASIFY'"),
    (json.dumps({"INTENT_CLASSIFY": [{"intent": "MAYBE", "task_summary": "x", "suggested_tool": None}]}), "intent"),
    (json.dumps({"INTENT_CLASSIFY": []}), "no reply left"),
    (json.dumps({"tools": {"check_drug_safety": [{"error_type": "gremlins"}]}}), "unknown error_type"),
])
def test_bad_scripts_give_one_clear_line_and_exit_2(tmp_path, capsys, appliance_home, content, words):
    script = tmp_path / "s.json"
    script.write_bytes(content if isinstance(content, bytes) else content.encode())
    code = main(["ask", "hello", "--script", str(script)])
    err = capsys.readouterr().err
    assert code == 2
    assert words in err and "Traceback" not in err and err.count("\n") == 1


def test_missing_production_model_names_the_expected_path(capsys, appliance_home, monkeypatch, tmp_path):
    monkeypatch.setenv("APPLIANCE_MODEL_PATH", str(tmp_path / "medgemma.gguf"))
    code = main(["ask", "hello", "--model", "medgemma-1.5-4b-it"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(tmp_path / "medgemma.gguf") in err and "Traceback" not in err


def test_unknown_profile(capsys, appliance_home):
    assert main(["ask", "hello", "--model", "gpt-9"]) == 2
    assert "unknown model profile" in capsys.readouterr().err


def _prescription_script(tmp_path, drug: str, patient: str):
    args = {"patient_id": patient, "medication_name": drug, "dosage": "500 mg", "frequency": "three times daily",
            "notes": None}
    script = {"INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Prescription.",
                                   "suggested_tool": "prescribe_medication"}],
              "TOOL_SELECT": [{"tool_name": "prescribe_medication"}, args],
              "RESULT_CLASSIFY": [{"quality": "success_rich", "brief_summary": "Done."}],
              "ERROR_HANDLER": [], "SYNTHESIZE": ["Done."]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(script))
    return path


def _medications(home, patient: str, drug: str) -> int:
    import sqlite3

    conn = sqlite3.connect(home / "ehr.sqlite")
    try:
        return conn.execute("SELECT count(*) FROM medication_requests WHERE patient_id = ? AND medication_name = ?",
                            (patient, drug)).fetchone()[0]
    finally:
        conn.close()


def test_a_headless_prescription_against_an_allergy_is_refused_unless_overridden(tmp_path, capsys, appliance_home,
                                                                                monkeypatch):
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    # --approve-writes needs a clinician who signs in (README "Clinician sign-in"): one password line per run
    from appliance.accounts import AccountStore

    AccountStore().add("aokafor", "correct horse battery")
    monkeypatch.setenv("APPLIANCE_USER", "aokafor")
    monkeypatch.setattr("sys.stdin", io.StringIO("correct horse battery\n" * 2))
    script = _prescription_script(tmp_path, "amoxicillin", "pat-006")  # Emily Johnson: penicillin allergy
    question = "Prescribe amoxicillin 500 mg three times daily for pat-006"
    assert main(["ask", question, "--script", str(script), "--approve-writes", "--json"]) == 4  # refused by safety
    out = json.loads(capsys.readouterr().out)
    assert out["tool_calls"][0]["error_type"] == "rejected_by_user"
    execute = [e for e in out["trace"] if e["node"] == "TOOL_EXECUTE"][0]
    assert execute["output"]["safety"]["blocking"] is True
    (report,) = out["safety"]
    assert report["written"] is False and report["blocking"] is True
    assert (report["findings"][0]["severity"], report["findings"][0]["kind"]) == ("high", "allergy")
    assert _medications(appliance_home, "pat-006", "amoxicillin") == 0  # nothing written
    assert main(["ask", question, "--script", str(script), "--approve-writes",
                 "--override-safety", "allergy was a rash in childhood, tolerated amoxicillin since", "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["tool_calls"][0]["error_type"] is None
    assert out["safety"][0]["written"] is True and out["safety"][0]["override_reason"]
    assert _medications(appliance_home, "pat-006", "amoxicillin") == 1
    # The refusal and the override are both on the record's audit log, and the chain verifies.
    assert main(["audit", "show", "--patient", "pat-006"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = printed[:1] + [line for line in printed[1:] if line.startswith("  #")]  # the writes; reads follow
    assert [line.split()[3] for line in shown[1:]] == ["rejection", "prescribe_medication"]
    assert '"clinician": "aokafor"' in shown[1] and '"safety": "1 high (allergy)"' in shown[1]
    assert shown[2].endswith('OVERRIDE by aokafor; safety: 1 high (allergy); override reason: '
                             '"allergy was a rash in childhood, tolerated amoxicillin since"')
    assert main(["audit", "verify"]) == 0


def test_the_record_commands_a_script_calls_answer_in_json(tmp_path, capsys, appliance_home):
    """init, the imports, ehr backup (and --verify) and restore: --json prints one object a
    script can read; a refused import says what it would change, in JSON too."""
    def run(*argv: str, code: int = 0) -> dict:
        assert main([*argv, "--json"]) == code
        return json.loads(capsys.readouterr().out)

    assert run("init", "--no-model")["data_home"] == str(appliance_home)
    pollen = {"resourceType": "AllergyIntolerance", "id": "pat-006-alg-1", "patient": {"reference": "Patient/pat-006"},
              "code": {"text": "Pollen"}, "recordedDate": "2026-01-01",
              "reaction": [{"manifestation": [{"text": "Sneezing"}], "severity": "mild"}]}
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps({"resourceType": "Bundle", "type": "collection", "entry": [{"resource": pollen}]}))
    stopped = run("ehr", "import", str(bundle), code=2)
    assert stopped["imported"] is False and any("Penicillin' -> 'Pollen'" in c for c in stopped["would_change"])
    pollen["id"] = "pat-006-alg-2"
    bundle.write_text(json.dumps({"resourceType": "Bundle", "type": "collection", "entry": [{"resource": pollen}]}))
    assert [k.split("/")[0] for k in run("ehr", "import", str(bundle))["created"]] == ["allergy_intolerances"]
    copy = tmp_path / "copy.sqlite"
    assert run("ehr", "backup", str(copy))["patients"] == 24
    assert run("ehr", "backup", str(copy), "--verify")["ok"] is True
    assert run("ehr", "restore", str(copy))["patients"] == 24


def test_account_commands_answer_in_json(capsys, appliance_home, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("a long enough password\n"))
    assert main(["user", "add", "drx", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "drx"
    assert main(["user", "disable", "drx", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["enabled"] is False
