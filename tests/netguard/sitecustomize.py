"""The test suite's network guard, loaded by every Python process the tests start.

``tests/conftest.py`` puts this folder first on ``PYTHONPATH`` and sets
``APPLIANCE_NETGUARD_LOG``; Python then imports this module at start-up in the test process and
in every subprocess (CLI runs, MCP servers, the TUI). While the variable is set, a socket
connection or datagram to anything but a loopback address or a Unix socket, and a name lookup
of anything but a loopback name, raises ``OSError`` and is appended to the log, so code that
swallows the error still fails the suite (the conftest reads the log at the end).
"""

from __future__ import annotations

import ipaddress
import os
import socket

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", ""}


def _loopback(host) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]").split("%")[0]
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse(what: str) -> None:
    log = os.environ.get("APPLIANCE_NETGUARD_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"pid {os.getpid()}: {what}\n")
    raise OSError(f"network access during tests: {what}")


def install() -> None:
    if getattr(socket, "_appliance_netguard", False):
        return
    socket._appliance_netguard = True
    real_connect, real_connect_ex, real_sendto = socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto
    real_getaddrinfo = socket.getaddrinfo

    def check(sock, address) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
            if not _loopback(address[0]):
                _refuse(f"connect to {address[0]}:{address[1]}")

    def connect(self, address):
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self, address):
        check(self, address)
        return real_connect_ex(self, address)

    def sendto(self, data, *args):
        check(self, args[-1])
        return real_sendto(self, data, *args)

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            _refuse(f"name lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto = connect, connect_ex, sendto
    socket.getaddrinfo = getaddrinfo


if os.environ.get("APPLIANCE_NETGUARD_LOG"):
    install()
