"""A terminal turned away by the clinic host says why in one line (``appliance.tools.host_refusal``,
``appliance.tools.mcp_client``): the host refused its token, the host cannot read its tokens
file, or the host's certificate is not the one the terminal trusts; never the MCP library's
exception ("RuntimeError during get_patient_chart")."""

from __future__ import annotations

import http.server
import json
import ssl
import subprocess
import threading
from contextlib import contextmanager

import pytest

from appliance.tools import host_refusal
from appliance.tools.mcp_client import MCPToolBox


class _Refusing(http.server.BaseHTTPRequestHandler):
    status = 401

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        body = json.dumps({"error": "invalid_token", "error_description": "a valid terminal token is required"})
        self.send_response(self.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args) -> None:  # the test's console stays quiet
        pass


@contextmanager
def _server(status: int, tls: tuple | None = None):
    handler = type("Handler", (_Refusing,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def _pair(folder, name):
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)], check=True,
                   capture_output=True, timeout=60)
    return cert, key


@pytest.mark.parametrize("status, token, said", [(401, "wrong", host_refusal.TOKEN_REFUSED),
                                                 (401, None, host_refusal.NO_TOKEN),
                                                 (503, "any", host_refusal.TOKENS_UNREADABLE),
                                                 (500, "any", None)])
def test_the_probe_names_what_the_host_refused(status, token, said):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with _server(status) as url:
        assert host_refusal.refusal(url, headers, None) == said


def test_a_certificate_the_terminal_does_not_trust_is_named(tmp_path):
    host = _pair(tmp_path, "host")
    other, _ = _pair(tmp_path, "other")
    with _server(401, tls=host) as url:
        assert host_refusal.refusal(url, {}, ssl.create_default_context(cafile=str(other))) == host_refusal.CERTIFICATE
        trusted = ssl.create_default_context(cafile=str(host[0]))
        assert host_refusal.refusal(url, {"Authorization": "Bearer x"}, trusted) == host_refusal.TOKEN_REFUSED


@pytest.mark.parametrize("case", ["token", "certificate"])
def test_a_chart_read_turned_away_says_why_in_one_line(tmp_path, case, monkeypatch, caplog):
    tls = _pair(tmp_path, "host") if case == "certificate" else None
    other, _ = _pair(tmp_path, "other") if tls else (None, None)
    with _server(401, tls=tls) as url:
        env = {"APPLIANCE_MCP_EHR_URL": url, "APPLIANCE_MCP_TOKEN": "revoked-token", "APPLIANCE_HOME": str(tmp_path)}
        if other:
            env["APPLIANCE_MCP_CA"] = str(other)
        with MCPToolBox(env) as tools:
            outcome = tools.call("get_patient_chart", {"patient_id": "abc-123"}, 10.0)
            refused = dict(tools.refused)  # what a status display can show
    want = host_refusal.CERTIFICATE if tls else host_refusal.TOKEN_REFUSED
    assert outcome.error_type == "service_unavailable" and outcome.message == want and refused == {"ehr": want}
    assert "Error" not in outcome.message and "\n" not in outcome.message
    assert not [r for r in caplog.records if r.levelname == "WARNING" and "giving up" in r.getMessage()]
