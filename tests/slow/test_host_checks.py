"""``appliance.selftest.host_checks.run_host_checks`` (the host section of ``appliance selftest``): the real
host record server and model front, on a scratch data home, refuse every request they should."""

from __future__ import annotations

import pytest

from appliance.selftest.host_checks import _Tally, run_host_checks

pytestmark = pytest.mark.timeout(180)


def test_the_host_refuses_what_it_should_and_lets_the_rest_through(tmp_path):
    report = run_host_checks(tmp_path)
    assert report["ok"], report
    assert report["let_through"] == 0 and report["failed"] == []
    assert report["requests"] == report["refused_as_expected"] + report["allowed_as_expected"] >= 12
    cases = {c["case"] for c in report["cases"]}
    assert {"a write without an approval", "a write naming another approver", "an audit event of the client's making",
            "a prescription the host's safety gate blocks, without an override", "a revoked token",
            "the model server with the tokens file's stored value",
            "the model server with a revoked terminal's key"} <= cases
    assert (tmp_path / "host-checks" / "ehr.sqlite").exists()  # its own data home, under the folder given


def test_a_request_that_should_have_been_refused_counts_as_let_through():
    tally = _Tally()
    tally.refused("no token", 401)
    tally.refused("stolen key", 200)
    tally.refused("no approval", 200, {"isError": False}, "invalid_args")
    tally.add("a read", "allowed", "HTTP 200", True)
    report = tally.report(1.0)
    assert (report["requests"], report["refused_as_expected"], report["let_through"],
            report["allowed_as_expected"]) == (4, 1, 2, 1)
    assert report["failed"] == ["stolen key", "no approval"] and report["ok"] is False


def test_with_loopback_down_the_host_checks_say_so_instead_of_a_server_that_did_not_start(tmp_path):
    """Seen under `unshare -rn` (a network namespace, loopback down): "the host check's server
    did not start" although it had started; it could not be reached."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode:
        pytest.skip("unshare -rn is not available here")
    code = ("import json, pathlib, sys; from appliance.selftest.host_checks import run_host_checks\n"
            "print(json.dumps(run_host_checks(pathlib.Path(sys.argv[1]))))\n")
    done = subprocess.run(["unshare", "-rn", sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    import json

    report = json.loads(done.stdout)
    assert not report["ok"] and "loopback is down here" in report["error"], (done.stdout[-2000:], done.stderr[-2000:])
