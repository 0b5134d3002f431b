"""Who may call a server over HTTP: one bearer token per terminal, each tied to an account.

Invariants:
- Only the sha256 of a token is stored (``terminals.json`` in the data home, 0600); the token
  itself is shown once, when the terminal is added. Revoking a terminal takes effect on its next
  request: the file is read at every verification (a few hundred bytes).
- A server bound to an address that is not loopback refuses to start without at least one
  terminal token (``http_policy``). With tokens, every HTTP request needs a valid one, on any
  address; a request without one gets 401 and reaches no tool.
- The account a token belongs to is who the EHR server records as the author of writes made
  with it; a header the caller chooses never overrides it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from fastmcp.server.auth.auth import AccessToken, TokenVerifier

from common.locations import PRIVATE_FILE_MODE, data_home

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


class AccessError(ValueError):
    """A terminal name, account or tokens file that cannot be used; the message says why."""


def tokens_path() -> Path:
    return data_home() / "terminals.json"


def token_digest(token: str) -> str:
    """What is kept of a terminal token, and the model server key a terminal sends (``appliance serve``)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Terminal:
    name: str
    account: str
    token_sha256: str
    created: str


def read_terminals(path: Path | None = None) -> list[Terminal]:
    path = path or tokens_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise AccessError(f"{path} cannot be read as the terminal tokens file ({exc})") from None
    try:
        return [Terminal(**t) for t in data["terminals"]]
    except (KeyError, TypeError):
        raise AccessError(f"{path} is not a terminal tokens file") from None


def _write(terminals: list[Terminal], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"terminals": [asdict(t) for t in terminals]}, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def add_terminal(name: str, account: str, path: Path | None = None) -> str:
    """Add a terminal and return its new token (shown once; only its hash is kept)."""
    path = path or tokens_path()
    if not NAME_RE.fullmatch(name):
        raise AccessError("a terminal name is 1-40 letters, digits, '.', '_' or '-', starting with a letter or digit")
    account = " ".join(account.split())
    if not account or len(account) > 200 or not account.isprintable():
        raise AccessError("the account must be printable text of 1-200 characters")
    terminals = read_terminals(path)
    if any(t.name == name for t in terminals):
        raise AccessError(f"a terminal named {name!r} exists already: revoke it first to issue a new token")
    token = secrets.token_urlsafe(32)
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    _write([*terminals, Terminal(name, account, token_digest(token), created)], path)
    return token


def revoke_terminal(name: str, path: Path | None = None) -> None:
    path = path or tokens_path()
    terminals = read_terminals(path)
    if not any(t.name == name for t in terminals):
        raise AccessError(f"no terminal named {name!r}")
    _write([t for t in terminals if t.name != name], path)


class TerminalTokens(TokenVerifier):
    """fastmcp's bearer-token check against the terminals file."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = token_digest(token)
        for terminal in read_terminals(self.path):
            if secrets.compare_digest(terminal.token_sha256, digest):
                return AccessToken(token=token, client_id=terminal.name, scopes=[], subject=terminal.account)
        return None


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def http_policy(host: str, path: Path | None = None) -> TerminalTokens | None:
    """The auth a server bound to ``host`` runs with: terminal tokens when any exist; none on a
    loopback address without tokens; a non-loopback address without tokens is refused."""
    path = path or tokens_path()
    if read_terminals(path):
        return TerminalTokens(path)
    if is_loopback(host):
        return None
    raise AccessError(f"refusing to serve on {host} without terminal tokens: anyone on the network could read "
                      "and write the record. Add one per terminal with `appliance terminal add NAME --account USER`, "
                      "or serve on 127.0.0.1")
