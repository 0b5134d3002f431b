"""``appliance model accept --json`` and the acceptance line the other surfaces show, with the
oracle in place of the model (no model file loaded, no server started)."""

from __future__ import annotations

import json

import pytest

from appliance.acceptance import store
from appliance.acceptance.cases import load_cases
from appliance.cli import main
from appliance.config import Settings
from tests.acceptance.conftest import PERFECT, jobs
from tests.acceptance.oracle import Oracle

GEMMA_SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


@pytest.fixture
def oracle_cli(monkeypatch, turn_agent, appliance_home):
    """``model accept`` on the right oracle: its turns over scripted tools, perfect job figures."""
    import appliance.acceptance.run as run_module
    import appliance.cli.acceptance as cli_module
    import appliance.runtime as runtime
    import appliance.setup.home as init_module

    model = Oracle(load_cases(), right=True)
    monkeypatch.setattr(runtime, "load_model", lambda settings: model)
    monkeypatch.setattr(cli_module, "_turn_agent", lambda m, s: turn_agent(model)())
    monkeypatch.setattr(init_module, "init_home", lambda **kw: None)
    monkeypatch.setattr(run_module, "EVALUATIONS", jobs(PERFECT))
    return model


def test_model_accept_json_prints_the_result_and_records_a_complete_run(oracle_cli, capsys):
    assert main(["model", "accept", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"]["accepted"] and result["recorded"] and result["model_sha256"] == GEMMA_SHA
    assert result["figures"]["nodes"]["nodes"]["intent"]["accuracy"] == 1.0
    from appliance.runtime import acceptance_status

    status = acceptance_status(Settings())
    assert status.accepted and status.line.startswith("accepted on ")


def test_model_accept_limit_is_a_quick_check_that_records_nothing(oracle_cli, capsys):
    assert main(["model", "accept", "--json", "--limit", "5"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert not result["verdict"]["accepted"] and not result["recorded"]
    assert result["figures"]["nodes"]["cases"] == 5
    assert store.status_for(GEMMA_SHA).state == "not measured"


def test_model_accept_table_names_every_node_and_the_verdict(oracle_cli, capsys):
    assert main(["model", "accept"]) == 0
    out = capsys.readouterr().out
    for word in ("INTENT_CLASSIFY", "RESULT_CLASSIFY", "ERROR_HANDLER", "TrialGPT", "grounding", "extraction",
                 "95% interval", "p95 s"):
        assert word in out
    assert out.rstrip().splitlines()[-2] == "accepted"


def test_model_accept_refuses_a_bad_limit(appliance_home, capsys):
    assert main(["model", "accept", "--limit", "0"]) == 2
    assert "--limit" in capsys.readouterr().err


def test_the_clinic_host_model_is_not_measured_here(monkeypatch):
    from appliance.runtime import acceptance_status

    status = acceptance_status(Settings(model_server="https://clinic-host:8768"))
    assert status.state == "not measured" and "clinic host" in status.line
