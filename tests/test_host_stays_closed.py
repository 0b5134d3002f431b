"""A host that issued terminal tokens never reopens by itself (``mcp_servers.access``): not when
the last token is revoked, not when ``terminals.json`` is deleted; only ``appliance terminal
open-loopback`` reopens a loopback host, recorded with who and when."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from common.locations import PROJECT_ROOT
from mcp_servers import access


def test_deleting_the_tokens_file_leaves_the_host_closed(tmp_path):
    path = tmp_path / "terminals.json"
    token = access.add_terminal("desk-1", "aokafor", path)
    gate = access.Gate(path, open_without_tokens=True)
    path.unlink()
    assert gate.allows(None) is None and gate.allows(token) is None
    with pytest.raises(access.AccessError, match="open-loopback"):
        access.http_policy("127.0.0.1", path)  # a loopback server that would refuse everyone does not start
    record = access.history_path(path)
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and token not in record.read_text()
    [issued] = access.access_history(path)
    assert issued["event"] == access.ISSUED and issued["terminal"] == "desk-1" and issued["by"] and issued["at"]


def test_only_an_explicit_reopening_lets_a_loopback_host_answer_without_tokens(tmp_path):
    path = tmp_path / "terminals.json"
    gate = access.Gate(path, open_without_tokens=True)
    assert gate.allows(None) is access.Gate.LOOPBACK  # never issued: a developer's server
    access.add_terminal("desk-1", "aokafor", path)
    with pytest.raises(access.AccessError, match="still exist"):
        access.open_loopback(path, by="operator")
    access.revoke_terminal("desk-1", path)
    assert gate.allows(None) is None
    entry = access.open_loopback(path, by="operator")
    assert entry["by"] == "operator" and access.access_history(path)[-1] == entry
    assert gate.allows(None) is access.Gate.LOOPBACK
    assert isinstance(access.http_policy("127.0.0.1", path), access.TerminalAuth)
    off_loopback = access.Gate(path, open_without_tokens=False)
    assert off_loopback.allows(None) is None  # reopening is for loopback only
    access.add_terminal("desk-2", "aokafor", path)  # a new token closes it again, for good
    access.revoke_terminal("desk-2", path)
    assert gate.allows(None) is None


def test_a_tokens_file_from_before_the_record_reads_as_issued(tmp_path):
    path = tmp_path / "terminals.json"
    path.write_text('{"terminals": []}')
    assert access.Gate(path, open_without_tokens=True).allows(None) is None


def test_a_damaged_issue_record_refuses_like_a_damaged_tokens_file(tmp_path, capsys):
    path = tmp_path / "terminals.json"
    access.add_terminal("desk-1", "aokafor", path)
    access.revoke_terminal("desk-1", path)
    access.history_path(path).write_text('{"event": "loopback reopened"}\nnot json\n')
    gate = access.Gate(path, open_without_tokens=True)
    with pytest.raises(access.AccessError, match="a line is damaged"):
        gate.allows(None)
    assert capsys.readouterr().err.count("refusing every request") == 1


def _cli(home, *argv, stdin=None):
    env = {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off",
           "APPLIANCE_USER": "site-operator"}
    return subprocess.run([sys.executable, "-m", "appliance.cli", *argv], cwd=PROJECT_ROOT, input=stdin, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_operators_commands(tmp_path):
    never = _cli(tmp_path, "terminal", "open-loopback")
    assert never.returncode == 2 and "not closed" in never.stderr and len(never.stderr.splitlines()) == 1
    assert _cli(tmp_path, "user", "add", "aokafor", stdin="a long enough passphrase\n").returncode == 0
    assert _cli(tmp_path, "terminal", "add", "desk-1", "--account", "AOKAFOR").returncode == 0
    refused = _cli(tmp_path, "terminal", "open-loopback")
    assert refused.returncode == 2 and "revoke them first" in refused.stderr
    assert _cli(tmp_path, "terminal", "revoke", "desk-1").returncode == 0
    (tmp_path / "terminals.json").unlink()
    listed = _cli(tmp_path, "terminal", "list")
    assert listed.returncode == 0 and "refuse every HTTP request" in listed.stdout
    opened = _cli(tmp_path, "terminal", "open-loopback", "--json")
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["by"] == "site-operator"
    assert "loopback only" in _cli(tmp_path, "terminal", "list").stdout
    issued = access.access_history(tmp_path / "terminals.json")
    assert [e["event"] for e in issued] == [access.ISSUED, access.REOPENED]
    assert issued[0]["account"] == "aokafor"  # the account as the store spells it


@pytest.mark.parametrize("account, said", [("nosuch", "no enabled clinician account 'nosuch'"),
                                           ("bnurse", "no enabled clinician account 'bnurse'")])
def test_a_terminal_for_an_account_that_does_not_exist_or_is_disabled_is_refused(tmp_path, account, said):
    for name in ("aokafor", "bnurse"):
        assert _cli(tmp_path, "user", "add", name, stdin="a long enough passphrase\n").returncode == 0
    assert _cli(tmp_path, "user", "disable", "bnurse").returncode == 0
    refused = _cli(tmp_path, "terminal", "add", "desk-1", "--account", account, "--json")
    assert refused.returncode == 2 and said in refused.stderr and not refused.stdout
    assert not (tmp_path / "terminals.json").exists() and not access.history_path(tmp_path / "terminals.json").exists()
