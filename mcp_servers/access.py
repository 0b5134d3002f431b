"""Who may call a server over HTTP: one bearer token per terminal, each tied to an account.

Invariants:
- Nothing stored is itself a usable key. A terminal's token is shown once, when it is added;
  the terminal sends the token to the MCP servers and ``token_digest(token)`` (its sha256) to
  the model server. ``terminals.json`` in the data home (0600) keeps only ``key_check`` of that
  digest (a domain-separated sha256 of it), which neither server accepts. An older file that
  kept the bare sha256 is read as the same check and rewritten by ``upgrade_terminals``.
- The file is read at every request (a few hundred bytes): a terminal added while a server
  runs is asked for from its next request, a revoked one is refused from its next request.
- Once any token exists, every HTTP request needs a valid one, on any address; without one it
  gets 401 and reaches no tool. A loopback server on a host that never issued a token answers
  anyone on the machine (a developer's server); a server bound off loopback refuses to start
  without tokens (``http_policy``) and refuses every request if the last token is revoked while
  it runs.
- The host never reopens by itself: each token issued is recorded in ``host-access.jsonl``
  beside the tokens file (who, when, which terminal; append-only lines), and while the latest
  entry there is an issue, no token left means no access on loopback too, until the operator
  reopens it in one command (``open_loopback``, recorded there with who and when). The record
  is its own file, under another name than ``terminals.json`` and outside ``logs/``, so
  deleting or emptying the tokens file does not remove it; a tokens file that exists with no
  record (written before the record was kept) reads as issued. A record that cannot be read
  refuses like a damaged tokens file (503).
- A tokens file that cannot be read refuses every request with 503 and one line on the
  server's console, never a traceback.
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
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from common.locations import PRIVATE_FILE_MODE, data_home
from common.operator import operator_name

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
_CHECK_DOMAIN = b"clinical-appliance terminal key check v2\x00"
LOOPBACK_CLIENT = "loopback"  # the client_id of a request let in without tokens (loopback, none issued)
ISSUED, REOPENED = "issued", "loopback reopened"  # the events of the issue record


class AccessError(ValueError):
    """A terminal name, account or tokens file that cannot be used; the message says why."""


def tokens_path() -> Path:
    return data_home() / "terminals.json"


def history_path(path: Path) -> Path:
    """Where the issues and reopenings of the tokens file ``path`` are recorded."""
    return path.with_name("host-access.jsonl")


def token_digest(token: str) -> str:
    """The model server key a terminal sends: the sha256 of its token. Never stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def key_check(key: str) -> str:
    """What the tokens file keeps of a model server key (``token_digest``): a one-way function
    of it, so the stored value opens neither server."""
    return hashlib.sha256(_CHECK_DOMAIN + key.encode("utf-8", "surrogateescape")).hexdigest()


def token_check(token: str) -> str:
    return key_check(token_digest(token))


@dataclass(frozen=True)
class Terminal:
    name: str
    account: str
    token_check: str
    created: str


def _terminal(entry: dict) -> tuple[Terminal, bool]:
    """A file entry as a Terminal, and whether it was in the older bare-sha256 form."""
    entry = dict(entry)
    legacy = "token_sha256" in entry
    if legacy:
        entry["token_check"] = key_check(entry.pop("token_sha256"))
    return Terminal(**entry), legacy


def _read(path: Path) -> tuple[list[Terminal], bool]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], False
    except (OSError, ValueError) as exc:
        raise AccessError(f"{path} cannot be read as the terminal tokens file ({exc})") from None
    try:
        pairs = [_terminal(t) for t in data["terminals"]]
    except (KeyError, TypeError):
        raise AccessError(f"{path} is not a terminal tokens file") from None
    return [t for t, _ in pairs], any(legacy for _, legacy in pairs)


def read_terminals(path: Path | None = None) -> list[Terminal]:
    return _read(path or tokens_path())[0]


def upgrade_terminals(path: Path | None = None) -> bool:
    """Rewrite a tokens file that still keeps bare sha256 digests (usable model server keys);
    True when it did."""
    path = path or tokens_path()
    terminals, legacy = _read(path)
    if legacy:
        _write(terminals, path)
    return legacy


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
    """Add a terminal and return its new token (shown once; only ``token_check`` is kept)."""
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
    created = _now()
    _record(path, {"at": created, "event": ISSUED, "terminal": name, "account": account, "by": operator_name()})
    _write([*terminals, Terminal(name, account, token_check(token), created)], path)  # after the record
    return token


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _record(path: Path, entry: dict) -> None:
    """Append one line to the issue record of the tokens file ``path`` (0600, synced)."""
    target = history_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def access_history(path: Path | None = None) -> list[dict]:
    """The issue record of the tokens file ``path``, oldest first (``AccessError`` when damaged)."""
    target = history_path(path or tokens_path())
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise AccessError(f"{target} cannot be read as the host's record of issued tokens ({exc})") from None
    entries = []
    for line in filter(str.strip, lines):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or entry.get("event") not in (ISSUED, REOPENED):
            raise AccessError(f"{target} is not the host's record of issued tokens (a line is damaged)")
        entries.append(entry)
    return entries


def closed_without_tokens(path: Path | None = None) -> bool:
    """True when tokens were issued here and the operator has not reopened the host since: with
    no token left, nobody is let in (loopback included)."""
    path = path or tokens_path()
    history = access_history(path)
    if not history:
        return path.exists()  # a tokens file from before the record was kept
    return history[-1]["event"] == ISSUED


def open_loopback(path: Path | None = None, by: str | None = None) -> dict:
    """Let a loopback server answer without tokens again (the operator's explicit decision,
    recorded with who and when); refused while any token exists. Returns the record's entry."""
    path = path or tokens_path()
    left = read_terminals(path)
    if left:
        raise AccessError(f"{len(left)} terminal token(s) still exist: revoke them first "
                          "(`appliance terminal list` shows them)")
    entry = {"at": _now(), "event": REOPENED, "by": by or operator_name()}
    _record(path, entry)
    return entry


def revoke_terminal(name: str, path: Path | None = None) -> None:
    path = path or tokens_path()
    terminals = read_terminals(path)
    if not any(t.name == name for t in terminals):
        raise AccessError(f"no terminal named {name!r}")
    _write([t for t in terminals if t.name != name], path)


def match(terminals: list[Terminal], check: str) -> Terminal | None:
    """The terminal whose stored check is ``check`` (compared in constant time), or None."""
    found = None
    for terminal in terminals:
        if secrets.compare_digest(terminal.token_check, check):
            found = terminal
    return found


def bearer_token(headers) -> str | None:
    value = headers.get("authorization") or ""
    if value[:7].lower() != "bearer ":
        return None
    return value[7:].strip() or None


class Gate:
    """The per-request decision both kinds of server make: ``allows(presented)`` returns the
    terminal, ``LOOPBACK`` (loopback, no token left, and none issued since the host was last
    open), or None (refused); a damaged tokens file or issue record raises ``AccessError``.
    ``model_keys`` checks what the model server is sent (``token_digest`` of a token) instead
    of the token itself."""

    LOOPBACK = Terminal(LOOPBACK_CLIENT, "", "", "")

    def __init__(self, path: Path, *, open_without_tokens: bool, model_keys: bool = False):
        self.path = path
        self.open_without_tokens = open_without_tokens
        self.model_keys = model_keys
        self._last_fault: str | None = None

    def allows(self, presented: str | None) -> Terminal | None:
        try:
            terminals = read_terminals(self.path)
        except AccessError as exc:
            self._fault(exc)
            raise
        if not terminals:
            if not self.open_without_tokens:
                return None
            try:
                closed = closed_without_tokens(self.path)
            except AccessError as exc:
                self._fault(exc)
                raise
            self._last_fault = None
            return None if closed else self.LOOPBACK
        self._last_fault = None
        if not presented:
            return None
        return match(terminals, key_check(presented) if self.model_keys else token_check(presented))


    def _fault(self, exc: AccessError) -> None:
        if str(exc) != self._last_fault:  # one line on the console per new fault, not per request
            print(f"refusing every request: {exc}; fix or restore it (`appliance terminal list` checks it)",
                  file=sys.stderr, flush=True)
        self._last_fault = str(exc)


class TerminalAuth:
    """The HTTP servers' access check (see the module docstring): Starlette middleware that
    asks the ``Gate`` at every request and puts the token's terminal and account where
    fastmcp's ``get_access_token`` finds them. fastmcp's own bearer auth is not used: it
    cannot let a loopback server without tokens answer, nor refuse a damaged file with 503."""

    def __init__(self, path: Path, *, open_without_tokens: bool = False):
        self.path = path
        self.gate = Gate(path, open_without_tokens=open_without_tokens)

    def middleware(self) -> list:
        from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
        from starlette.middleware import Middleware

        return [Middleware(_AskTheGate, gate=self.gate), Middleware(AuthContextMiddleware)]


class _AskTheGate:
    """ASGI middleware: 401 without a token the gate accepts, 503 when the tokens file cannot be
    read; otherwise the request goes on as the token's terminal."""

    def __init__(self, app, gate: Gate):
        self.app = app
        self.gate = gate

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken
        from starlette.authentication import AuthCredentials
        from starlette.datastructures import Headers

        token = bearer_token(Headers(scope=scope))
        try:
            found = self.gate.allows(token)
        except AccessError:
            await _refuse(send, 503, "temporarily_unavailable",
                          "the host's terminal tokens file cannot be read; the operator must fix it")
            return
        if found is None:
            await _refuse(send, 401, "invalid_token", "a valid terminal token is required (APPLIANCE_MCP_TOKEN)")
            return
        subject = found.account or None  # None: let in without tokens; the EHR falls back to the user header
        scope["auth"] = AuthCredentials([])
        scope["user"] = AuthenticatedUser(AccessToken(token=token or "", client_id=found.name, scopes=[],
                                                      subject=subject))
        await self.app(scope, receive, send)


async def _refuse(send, status: int, error: str, description: str) -> None:
    body = json.dumps({"error": error, "error_description": description}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", f'Bearer error="{error}"'.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def http_policy(host: str, path: Path | None = None) -> TerminalAuth:
    """The auth a server bound to ``host`` runs with: terminal tokens, asked from the first one
    on; a loopback server on a host that never issued one (or was reopened) answers anyone on
    the machine until one is added; without tokens, a non-loopback address, or a host whose
    tokens were issued and all revoked, is refused (``AccessError``)."""
    path = path or tokens_path()
    if read_terminals(path):
        pass
    elif not is_loopback(host):
        raise AccessError(f"refusing to serve on {host} without terminal tokens: anyone on the network could read "
                          "and write the record. Add one per terminal with `appliance terminal add NAME --account "
                          "USER`, or serve on 127.0.0.1")
    elif closed_without_tokens(path):
        raise AccessError(f"refusing to serve on {host}: terminal tokens were issued on this host and none is left, "
                          "so every request would be refused. Add one (`appliance terminal add NAME --account USER`) "
                          "or reopen loopback without tokens (`appliance terminal open-loopback`)")
    return TerminalAuth(path, open_without_tokens=is_loopback(host))
