"""The clinic host's model server as terminals reach it: a small HTTP(S) front that checks every
request's key against the terminals file, then passes it to llama-server on a private socket.

Why a front and not llama-server's own keys: llama-server reads its key file once, at start,
and compares keys as plain text, so whatever it holds is a usable key and a revoked terminal
keeps the model until a restart (which drops every running answer and reloads the model).
Here the host decides each request, as the MCP servers do (``mcp_servers.access.Gate``).

Invariants:
- A request is let through only with a key whose ``key_check`` is in ``terminals.json`` at
  that moment (a terminal sends ``token_digest`` of its token; nothing the host stores is such
  a key); with no token issued, only on loopback. Revocation is immediate. ``/health`` (no
  data) answers anyone, as llama-server's does.
- llama-server listens only on a Unix socket in a private (0700) temporary folder and asks for
  a key made for this run, given to it and to this front in their environments, never written
  to a file or a command line.
- The front speaks HTTPS with the operator's certificate when given one, so llama-server needs
  no TLS of its own. A terminal that goes away (cancel, closed connection) closes the upstream
  request at once, so llama-server stops decoding it.
- A damaged tokens file is 503 with one line on the console; llama-server not answering is
  503; no request or answer text is logged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

from common import environment

UPSTREAM_KEY_ENV = environment.MODEL_UPSTREAM_KEY
PUBLIC_PATHS = frozenset({"/health"})
# Hop-by-hop headers, and what the front sets itself.
_DROP_REQUEST = frozenset({"host", "authorization", "connection", "keep-alive", "te", "trailer", "upgrade",
                           "transfer-encoding", "proxy-authorization", "content-length"})
_DROP_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "trailer", "upgrade"})


def _error(status: int, message: str, kind: str):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"code": status, "message": message, "type": kind}}, status_code=status)


def make_app(socket_path: Path, upstream_key: str, gate):
    """The ASGI app: ``gate`` is an ``mcp_servers.access.Gate`` over the terminals file."""
    import httpx2 as httpx  # what fastmcp and the MCP SDK speak HTTP with here
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from mcp_servers.access import AccessError, bearer_token

    state: dict = {}

    @asynccontextmanager
    async def lifespan(_app):
        transport = httpx.AsyncHTTPTransport(uds=str(socket_path))
        async with httpx.AsyncClient(transport=transport, base_url="http://llama-server",
                                     timeout=httpx.Timeout(10.0, read=None)) as client:
            state["client"] = client
            yield

    async def forward(request):
        if request.url.path not in PUBLIC_PATHS:
            try:
                allowed = gate.allows(bearer_token(request.headers))
            except AccessError:
                return _error(503, "the host's terminal tokens file cannot be read; the operator must fix it",
                              "unavailable_error")
            if allowed is None:
                return _error(401, "Invalid API Key", "authentication_error")
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST]
        headers.append(("authorization", f"Bearer {upstream_key}"))
        body = await request.body()
        upstream = state["client"].build_request(request.method, request.url.path, params=request.url.query or None,
                                                 headers=headers, content=body)
        gone = asyncio.ensure_future(request.receive())  # after the body: only the terminal leaving
        sending = asyncio.ensure_future(state["client"].send(upstream, stream=True))
        try:
            done, _ = await asyncio.wait({sending, gone}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # this request cancelled (the host stopping): nothing left running
            _drop(sending)
            _drop(gone)
            raise
        if sending not in done:  # the terminal left while its request waited for a slot
            _drop(sending)
            return _error(499, "the terminal closed the request", "cancelled")
        try:
            response = sending.result()
        except httpx.HTTPError:
            _drop(gone)
            return _error(503, "the model server is not answering (starting, or stopped)", "unavailable_error")
        return StreamingResponse(_relay(response, gone), status_code=response.status_code,
                                 headers={k: v for k, v in response.headers.items() if k.lower() not in _DROP_RESPONSE})

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "OPTIONS", "DELETE", "PUT"])],
                     lifespan=lifespan)


async def _relay(response, gone: asyncio.Future):
    """The upstream answer's bytes until it ends or the terminal leaves; then the upstream
    connection is closed, which ends llama-server's work on it."""
    import httpx2 as httpx

    chunks = response.aiter_raw()
    following: asyncio.Future | None = None
    try:
        while True:
            following = asyncio.ensure_future(chunks.__anext__())
            done, _ = await asyncio.wait({following, gone}, return_when=asyncio.FIRST_COMPLETED)
            if following not in done:
                _drop(following)
                return
            try:
                chunk = following.result()
            except StopAsyncIteration:
                return
            except httpx.HTTPError:  # llama-server went away mid-answer: the terminal sees the stream end early
                return
            yield chunk
    finally:  # also when the response is cancelled mid-wait (Starlette cancels it when the terminal goes)
        if following is not None:
            _drop(following)  # the read in flight fails as the connection closes below
        _drop(gone)
        await response.aclose()


def _drop(task: asyncio.Future) -> None:
    """Cancel a task nobody waits for any more, and take its outcome when it ends: it may have
    finished (or fail as the upstream connection closes under it) before the cancel lands, and
    asyncio would print that unretrieved error as a traceback on the host's console."""
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())


def main(argv: list[str] | None = None) -> int:
    """``python -m appliance.host.model_gate``: run by ``appliance serve``, not by hand."""
    from mcp_servers.access import Gate, is_loopback, tokens_path

    parser = argparse.ArgumentParser(prog="python -m appliance.host.model_gate", description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--socket", type=Path, required=True, help="llama-server's Unix socket")
    parser.add_argument("--tls-cert", type=Path)
    parser.add_argument("--tls-key", type=Path)
    args = parser.parse_args(argv)
    key = os.environ.pop(UPSTREAM_KEY_ENV, "")
    if not key:
        parser.exit(2, f"{parser.prog}: {UPSTREAM_KEY_ENV} is not set (appliance serve sets it)\n")
    import uvicorn

    gate = Gate(tokens_path(), open_without_tokens=is_loopback(args.bind), model_keys=True)
    tls = {"ssl_certfile": str(args.tls_cert), "ssl_keyfile": str(args.tls_key)} if args.tls_cert else {}
    uvicorn.run(make_app(args.socket, key, gate), host=args.bind.strip("[]"), port=args.port, log_level="warning",
                access_log=False, **tls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
