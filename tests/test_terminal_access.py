"""Terminal bearer tokens (``mcp_servers.access``, ``appliance terminal``): only one-way checks
stored, revocation at once, no server on a non-loopback address without tokens, and every
operator error one line (a certificate and key that do not belong together). The requests
themselves are in test_host_trust.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from common.locations import PROJECT_ROOT
from mcp_servers import access


def test_a_token_is_shown_once_and_only_a_one_way_check_is_kept(tmp_path):
    path = tmp_path / "terminals.json"
    token = access.add_terminal("desk-1", "aokafor", path)
    text = path.read_text()
    assert token not in text and access.token_digest(token) not in text  # neither server's key
    assert access.token_check(token) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [t] = access.read_terminals(path)
    assert (t.name, t.account) == ("desk-1", "aokafor")
    with pytest.raises(access.AccessError, match="exists already"):
        access.add_terminal("desk-1", "someone", path)
    with pytest.raises(access.AccessError, match="terminal name"):
        access.add_terminal("../etc", "someone", path)
    assert access.add_terminal("desk-2", "bnurse", path) != token  # every token is new


def test_the_gate_gives_the_tokens_terminal_and_refuses_revoked_or_unknown_tokens(tmp_path):
    path = tmp_path / "terminals.json"
    token = access.add_terminal("desk-1", "aokafor", path)
    gate = access.Gate(path, open_without_tokens=True)
    found = gate.allows(token)
    assert found is not None and (found.account, found.name) == ("aokafor", "desk-1")
    assert gate.allows(token + "x") is None and gate.allows(None) is None  # open only while no token exists
    access.revoke_terminal("desk-1", path)
    assert gate.allows(token) is None and gate.allows(None) is None  # at once, no restart; closed, not reopened
    with pytest.raises(access.AccessError, match="no terminal named"):
        access.revoke_terminal("desk-1", path)


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("192.168.1.20", False), ("clinic-host", False)])
def test_loopback_addresses(host, loopback):
    assert access.is_loopback(host) is loopback


def test_the_http_policy(tmp_path):
    path = tmp_path / "terminals.json"
    loopback = access.http_policy("127.0.0.1", path)  # a developer's loopback server: checked from the first token
    assert isinstance(loopback, access.TerminalAuth) and loopback.gate.open_without_tokens
    with pytest.raises(access.AccessError, match="refusing to serve on 0.0.0.0 without terminal tokens"):
        access.http_policy("0.0.0.0", path)
    access.add_terminal("desk-1", "aokafor", path)
    for host in ("0.0.0.0", "127.0.0.1"):  # with tokens, every request needs one, on any address
        assert isinstance(access.http_policy(host, path), access.TerminalAuth)
    assert not access.http_policy("0.0.0.0", path).gate.open_without_tokens


def _env(home):
    return {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off"}


def test_a_server_on_every_interface_without_tokens_refuses_to_start(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mcp_servers.ehr.server", "--db", str(tmp_path / "ehr.sqlite"),
                           "--http", "0.0.0.0:8799"], cwd=PROJECT_ROOT, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "without terminal tokens" in done.stderr and "Traceback" not in done.stderr


def test_the_terminal_commands(tmp_path):
    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "appliance.cli", "terminal", *argv], cwd=PROJECT_ROOT,
                              env=_env(tmp_path), capture_output=True, text=True, timeout=60)

    nobody = cli("add", "desk-1", "--account", "aokafor", "--json")
    assert nobody.returncode == 2 and "no clinician account 'aokafor'" in nobody.stderr and not nobody.stdout
    assert subprocess.run([sys.executable, "-m", "appliance.cli", "user", "add", "aokafor"], cwd=PROJECT_ROOT,
                          input="a long enough passphrase\n", env=_env(tmp_path), capture_output=True,
                          text=True, timeout=60).returncode == 0
    added = cli("add", "desk-1", "--account", "aokafor", "--json")
    assert added.returncode == 0, added.stderr
    token = json.loads(added.stdout)["token"]
    listed = cli("list", "--json")
    assert json.loads(listed.stdout)[0]["terminal"] == "desk-1" and token not in listed.stdout
    again = cli("add", "desk-1", "--account", "aokafor")
    assert again.returncode == 2 and "exists already" in again.stderr
    assert cli("revoke", "desk-1").returncode == 0 and json.loads(cli("list", "--json").stdout) == []


def test_with_clinician_accounts_a_terminal_must_name_one_that_is_enabled(tmp_path):
    def cli(*argv, stdin=None):
        return subprocess.run([sys.executable, "-m", "appliance.cli", *argv], cwd=PROJECT_ROOT, input=stdin,
                              env=_env(tmp_path), capture_output=True, text=True, timeout=60)

    assert cli("user", "add", "aokafor", stdin="a long enough passphrase\n").returncode == 0
    refused = cli("terminal", "add", "desk-1", "--account", "nobody")
    assert refused.returncode == 2 and "no enabled clinician account 'nobody'" in refused.stderr
    assert cli("terminal", "add", "desk-1", "--account", "aokafor").returncode == 0


@pytest.mark.parametrize("entry", ["mcp_servers.ehr.server", "appliance.cli", "tui.launcher", "appliance.cli.grounding_serve"])
def test_every_entry_point_turns_off_dependency_update_checks_itself(entry):
    """Started with a clean environment, each entry point's package sets fastmcp's update check
    off before fastmcp is imported (nothing on the network at run time)."""
    env = {k: v for k, v in os.environ.items() if k != "FASTMCP_CHECK_FOR_UPDATES"}
    code = f"import {entry}, fastmcp; print(fastmcp.settings.check_for_updates)"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "off"


def test_tls_needs_both_files_and_http(tmp_path):
    base = [sys.executable, "-m", "mcp_servers.ehr.server", "--db", str(tmp_path / "ehr.sqlite")]
    for extra in (["--http", "127.0.0.1:8799", "--tls-cert", "c.pem"], ["--tls-cert", "c.pem", "--tls-key", "k.pem"]):
        done = subprocess.run(base + extra, cwd=PROJECT_ROOT, env=_env(tmp_path), capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and "--tls-cert and --tls-key go together, with --http" in done.stderr


def test_a_host_url_names_the_four_servers_on_consecutive_ports():
    from appliance.errors import ApplianceError
    from appliance.host.serve import host_urls

    assert host_urls("https://clinic-host:8765") == {
        "APPLIANCE_MCP_EHR_URL": "https://clinic-host:8765/mcp",
        "APPLIANCE_MCP_UMLS_URL": "https://clinic-host:8766/mcp",
        "APPLIANCE_MCP_KNOWLEDGE_URL": "https://clinic-host:8767/mcp",
        "APPLIANCE_MODEL_SERVER": "https://clinic-host:8768"}
    assert host_urls("http://[fd00::5]:9000/")["APPLIANCE_MCP_UMLS_URL"] == "http://[fd00::5]:9001/mcp"
    for bad in ("clinic-host:8765", "ftp://h:1", "http://h", "http://h:8765/mcp"):
        with pytest.raises(ApplianceError, match="--host takes"):
            host_urls(bad)


def test_the_model_servers_command_line_binds_where_told_and_asks_for_keys_only_with_a_key_file(tmp_path):
    from models.llama_server import ServerSettings, command

    base = ServerSettings(model=tmp_path / "m.gguf", alias="gemma3-270m", host="192.168.1.10", port=8768,
                          n_ctx=8192, slots=4)
    argv = command(tmp_path / "llama-server", base)
    assert argv[argv.index("--host") + 1] == "192.168.1.10" and argv[argv.index("--port") + 1] == "8768"
    assert argv[argv.index("--alias") + 1] == "gemma3-270m" and argv[argv.index("--parallel") + 1] == "4"
    assert argv[argv.index("--ctx-size") + 1] == str(8192 * 4)  # every slot gets the profile's whole context
    assert "--api-key-file" not in argv and "--ssl-cert-file" not in argv and "--no-webui" in argv
    from dataclasses import replace

    keyed = command(tmp_path / "llama-server", replace(base, key_file=tmp_path / "keys",
                                                        tls=(tmp_path / "c.pem", tmp_path / "k.pem")))
    assert keyed[keyed.index("--api-key-file") + 1] == str(tmp_path / "keys")
    assert keyed[keyed.index("--ssl-cert-file") + 1] == str(tmp_path / "c.pem")
    assert "--mmproj" not in keyed and "--swa-full" in argv  # every cached token reusable, as in process
    seeing = command(tmp_path / "llama-server", replace(base, mmproj=tmp_path / "mmproj.gguf"))
    assert seeing[seeing.index("--mmproj") + 1] == str(tmp_path / "mmproj.gguf")


def test_serve_passes_the_profiles_projector_only_when_it_is_in_place(tmp_path, monkeypatch):
    """``appliance serve`` gives llama-server the profile's vision projector when
    ``models.projector`` accepts the file, and says in one line whether the host takes images."""
    import dataclasses

    from appliance.host import serve
    from appliance.runtime import ModelFiles
    from models import gguf_info, llama_server, verify
    from models.profiles import get_profile
    from tests.llm.tiny_projector import write_tiny_projector

    binary = tmp_path / "llama-server"
    binary.write_text("")
    profile = dataclasses.replace(get_profile("gemma3-270m"), mmproj_file="mmproj.gguf")
    files = ModelFiles(profile, tmp_path / "m.gguf", None, tmp_path, False)
    monkeypatch.setattr(llama_server, "locate", lambda: binary)
    monkeypatch.setattr("appliance.runtime.model_files", lambda settings: files)
    monkeypatch.setattr(verify, "verify_model_file", lambda *a, **k: None)
    monkeypatch.setattr(gguf_info, "check_identity", lambda *a, **k: None)
    absent = serve.model_server_command("127.0.0.1", 18770, None, 1)
    assert "--mmproj" not in absent.llama_argv and absent.summary.startswith("images: off (")
    write_tiny_projector(tmp_path / "mmproj.gguf")
    present = serve.model_server_command("127.0.0.1", 18770, None, 1)
    assert present.llama_argv[present.llama_argv.index("--mmproj") + 1] == str(tmp_path / "mmproj.gguf")
    assert present.summary.startswith("images: on (mmproj.gguf); priority: ")
    for made in (absent, present):
        made.folder.rmdir()  # the private socket folder, made empty


def test_serve_refuses_clearly_without_a_built_model_server(tmp_path):
    env = {**_env(tmp_path), "APPLIANCE_LLAMA_SERVER": str(tmp_path / "missing" / "llama-server")}
    done = subprocess.run([sys.executable, "-m", "appliance.cli", "serve", "--port", "18765"], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "llama-server is not built here" in done.stderr, done.stderr


def test_the_value_kept_is_not_a_terminals_model_server_key(tmp_path):
    """The issue's case: the value kept in terminals.json was itself a working model server key."""
    from mcp_servers.access import add_terminal, key_check, read_terminals
    from mcp_servers.access import token_digest as terminal_key

    token = add_terminal("desk-1", "operator", tmp_path / "terminals.json")
    [kept] = [t.token_check for t in read_terminals(tmp_path / "terminals.json")]
    assert kept != terminal_key(token) and kept == key_check(terminal_key(token))


def _pair(folder, name):
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=clinic-host",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.mark.parametrize("command", [["appliance.cli", "serve", "--no-model", "--port", "18765"],
                                     ["mcp_servers.ehr.server", "--http", "127.0.0.1:18799"]])
def test_a_certificate_and_a_key_that_do_not_belong_together_are_one_line_before_anything_listens(tmp_path, command):
    """The issue's case: `serve --tls-cert cert.pem --tls-key other-key.pem` announced "serving ...
    https", then printed ssl.SSLError tracebacks."""
    cert, _ = _pair(tmp_path, "host")
    _, other = _pair(tmp_path, "other")
    done = subprocess.run([sys.executable, "-m", *command, "--tls-cert", str(cert), "--tls-key", str(other)],
                          cwd=PROJECT_ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "the key is not the certificate's" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "serving" not in done.stdout and "Traceback" not in done.stderr
    assert not (tmp_path / "ehr.sqlite").exists()  # refused before the data home was touched
