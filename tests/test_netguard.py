"""The suite's network guard is on, in this process and in the processes the tests start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

NETGUARD_LOG = Path(os.environ["APPLIANCE_NETGUARD_LOG"])  # set by tests/conftest.py


def _clear_log(before: str) -> None:
    """These tests provoke the guard on purpose: leave the log as it was."""
    NETGUARD_LOG.write_text(before)


def test_a_connection_off_loopback_is_refused_here():
    before = NETGUARD_LOG.read_text() if NETGUARD_LOG.exists() else ""
    try:
        with socket.socket() as sock, pytest.raises(OSError, match="network access during tests"):
            sock.connect(("192.0.2.1", 80))  # TEST-NET-1: never routed
        with pytest.raises(OSError, match="name lookup"):
            socket.getaddrinfo("pypi.org", 443)
        assert "192.0.2.1:80" in NETGUARD_LOG.read_text()
    finally:
        _clear_log(before)


def test_loopback_stays_open():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass


def test_a_subprocess_is_guarded_too():
    before = NETGUARD_LOG.read_text() if NETGUARD_LOG.exists() else ""
    try:
        code = "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=1)\nexcept OSError as e:\n    print(e)"
        done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True,
                              timeout=60)
        assert "network access during tests" in done.stdout
        assert "connect to 192.0.2.1:80" in NETGUARD_LOG.read_text() or "192.0.2.1" in NETGUARD_LOG.read_text()
    finally:
        _clear_log(before)
