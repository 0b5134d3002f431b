"""What every server module shares: where its database is, and its command line.

Invariants:
- A server's tools use the database path they were given (``configure``); only the launcher
  (``serve``, run by each server's ``main``) falls back to the data home. Importing a server
  module touches no file; a missing database is built at first use, once per process, by the
  store's own ``ensure_database``. A tool call on a server given no path is
  ``service_unavailable``.
- ``serve`` runs stdio by default or streamable HTTP with ``--http HOST:PORT``; a malformed
  address is a usage error, not a traceback. Over HTTP it runs with ``access.http_policy``:
  terminal bearer tokens from the first one on (added before or while it runs), and never on a
  non-loopback address without them; HTTPS with the operator's certificate
  (``--tls-cert``/``--tls-key``, loaded once before listening: a key that is not the
  certificate's is one line, exit 2), and a warning on stderr when a non-loopback address is
  served without it.
- ``ArgumentErrors`` (attached to every server) turns fastmcp's argument-validation failure
  into the contract's ``ToolError("<error_type>: ...")``, naming fields but never echoing values.
- An agent tool's server function takes its record's argument model (``serves``): fastmcp reads
  the input schema from a signature made of the model's fields (then the hidden parameters of a
  write), so what the server checks is what the model fills, field for field.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_args

from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import Middleware
from pydantic import ValidationError as PydanticValidationError

from common.locations import PRIVATE_UMASK
from mcp_servers.access import AccessError, http_policy, is_loopback
from mcp_servers.contracts import Tool, tool_error_message

# Pydantic error types that mean "nothing was given" rather than "something wrong was given".
_MISSING = frozenset({"missing", "missing_argument", "missing_keyword_only_argument", "string_too_short"})


def signature(tool: Tool) -> inspect.Signature:
    """The server function's signature for ``tool``: each field of its argument model, in order,
    annotated with the field itself (type, bounds, description), required as in the model (or
    defaulting to null when ``tool.nulls_optional`` and the field is nullable); then the hidden
    parameters of a write, each defaulting to null."""
    params = []
    for name, field in tool.args.model_fields.items():
        optional = tool.nulls_optional and type(None) in get_args(field.annotation)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        default=None if optional else inspect.Parameter.empty,
                                        annotation=Annotated[field.annotation, field]))
    for name, annotation in tool.hidden_params.items():
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))
    return inspect.Signature(params, return_annotation=dict)


def serves(mcp, tool: Tool) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """Register the decorated function as ``tool`` on ``mcp``. The function takes the validated
    argument model, then the write's hidden parameters by name: ``fn(args, **hidden)``. fastmcp
    sees ``signature(tool)`` (so the input schema is the model's) and validates the call against
    it; the function's own docstring is the tool's description for generic MCP clients."""
    def register(fn: Callable[..., dict]) -> Callable[..., dict]:
        hidden = tuple(tool.hidden_params)

        def call(**given: Any) -> dict:
            extra = {name: given.pop(name) for name in hidden if name in given}
            return fn(tool.args.model_validate(given), **extra)

        call.__name__ = call.__qualname__ = tool.name
        call.__doc__ = fn.__doc__
        call.__module__ = fn.__module__
        call.__signature__ = signature(tool)  # type: ignore[attr-defined]
        call.__annotations__ = {p.name: p.annotation for p in call.__signature__.parameters.values()}
        call.__annotations__["return"] = dict
        mcp.tool(name=tool.name, annotations=tool.annotations)(call)
        return fn

    return register


class ArgumentErrors(Middleware):
    """Turn fastmcp's argument-validation failure into the contract's ToolError, naming the
    fields but never echoing their values."""

    async def on_call_tool(self, context, call_next):
        try:
            return await call_next(context)
        except ValidationError as exc:
            cause = exc.__cause__
            details = cause.errors(include_input=False) if isinstance(cause, PydanticValidationError) else []
            fields = sorted({str(d["loc"][0]) for d in details if d.get("loc")}) or ["arguments"]
            kind = "missing_required_args" if details and all(d["type"] in _MISSING for d in details) \
                else "invalid_args"
            raise ToolError(tool_error_message(kind, "check " + ", ".join(fields))) from None


class LazyDatabase:
    def __init__(self, ensure: Callable[[Path], None]):
        self._ensure = ensure
        self._override: Path | None = None
        self._ready: set[Path] = set()
        self._lock = threading.Lock()

    def configure(self, path: Path | str | None) -> None:
        self._override = Path(path) if path is not None else None

    def ready(self) -> Path:
        """The path, after building the database if it does not exist yet."""
        path = self._override
        if path is None:
            raise ToolError(tool_error_message("service_unavailable", "this server was given no database"))
        with self._lock:
            if path not in self._ready:
                if not path.exists():
                    self._ensure(path)
                self._ready.add(path)
        return path


def tls_problem(cert: Path, key: Path) -> str | None:
    """Why the certificate and key cannot serve HTTPS together (missing, unreadable, not PEM,
    or a key that is not the certificate's), or None: loaded here so a bad pair is one line
    before anything listens, never a handshake traceback per connection."""
    import ssl

    for path in (cert, key):
        if not path.is_file():
            return f"{path} is not a file"
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(cert), str(key))
    except ssl.SSLError as exc:
        why = "the key is not the certificate's" if "KEY_VALUES_MISMATCH" in str(exc) or "mismatch" in str(exc) \
            else "they are not a PEM certificate and its private key"
        return f"--tls-cert {cert} and --tls-key {key} cannot serve HTTPS: {why}"
    except OSError as exc:
        return f"--tls-cert {cert} and --tls-key {key} cannot be read ({exc.strerror or exc})"
    return None


def serve(mcp, argv: list[str] | None, *, name: str, doc: str, configure: Callable[[Path], None],
          default_db: Callable[[], Path]) -> int:
    """The server's command line: ``--db`` or ``default_db()`` (the data home's file), then run.
    Files the server creates are private (``common.locations.PRIVATE_UMASK``)."""
    os.umask(PRIVATE_UMASK)
    parser = argparse.ArgumentParser(prog=f"python -m mcp_servers.{name}", description=doc.strip().splitlines()[0])
    parser.add_argument("--db", type=Path, help="database file (default: the appliance data home)")
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--tls-cert", type=Path, metavar="PEM", help="with --http: serve HTTPS with this certificate")
    parser.add_argument("--tls-key", type=Path, metavar="PEM", help="the certificate's private key")
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None) or (args.tls_cert and not args.http):
        parser.error("--tls-cert and --tls-key go together, with --http")
    if not args.http:
        configure(args.db if args.db is not None else default_db())
        mcp.run(transport="stdio", show_banner=False)
        return 0
    host, _, port = args.http.rpartition(":")
    if not host or not port.isdigit():
        parser.error("--http needs HOST:PORT, for example 127.0.0.1:8765")
    try:
        access = http_policy(host)
    except AccessError as exc:
        parser.exit(2, f"{parser.prog}: {exc}\n")
    tls = {}
    if args.tls_cert:
        problem = tls_problem(args.tls_cert, args.tls_key)
        if problem:
            parser.exit(2, f"{parser.prog}: {problem}\n")
        tls = {"ssl_certfile": str(args.tls_cert), "ssl_keyfile": str(args.tls_key)}
    elif not is_loopback(host):
        print(f"{parser.prog}: warning: serving {host} without TLS: terminal tokens and patient data cross "
              "the network in clear text (give --tls-cert and --tls-key)", file=sys.stderr, flush=True)
    configure(args.db if args.db is not None else default_db())  # after every refusal: a refused start opens nothing
    mcp.run(transport="http", host=host, port=int(port), show_banner=False, uvicorn_config=tls,
            middleware=access.middleware())
    return 0
