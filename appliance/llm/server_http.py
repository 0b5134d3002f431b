"""HTTP to the clinic host's llama-server for ``ServerModel``: one connection per request, a
cancel that ends a wait, and the server's failures as the appliance's errors.

Invariants:
- Only the standard library speaks HTTP. Each request opens its own connection (connect within
  ``CONNECT_SECONDS``, then up to the caller's timeout for each read) and closes it when done,
  so requests can run side by side.
- A cancel shuts the request's socket, so a read waiting on a busy host ends at once and the
  server stops that request; it is raised as ``GenerationCancelled``.
- A host that cannot be reached, answers an error or sends an unreadable answer raises
  ``ModelServerUnavailable``; a refused key ``ConfigError``; a prompt over the server's context
  ``ContextOverflow``. Messages carry the server's own one-line reason (it names limits and
  parameters) and never prompt text.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

from appliance.errors import (
    ConfigError,
    ContextOverflow,
    GenerationCancelled,
    GenerationError,
)

CONNECT_SECONDS = 5.0
FIRST_BYTE_SECONDS = 600.0  # a busy host queues requests; the caller's cancel ends a wait sooner


class ModelServerUnavailable(GenerationError):
    """The clinic host's model server cannot be reached or failed the request."""


class ServerHttp:
    """Requests to the model server at ``url`` (``http[s]://HOST:PORT``)."""

    def __init__(self, url: str, *, key: str | None = None, context: ssl.SSLContext | None = None,
                 timeout: float = FIRST_BYTE_SECONDS):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
            raise ConfigError(f"the model server is given as http[s]://HOST:PORT, not {url!r}")
        self.url = f"{parts.scheme}://{parts.netloc}"
        self._host, self._port, self._https = parts.hostname, parts.port, parts.scheme == "https"
        self._context = (context or ssl.create_default_context()) if self._https else None
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._timeout = timeout

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=CONNECT_SECONDS, context=self._context)
        return http.client.HTTPConnection(self._host, self._port, timeout=CONNECT_SECONDS)

    def _open(self, method: str, path: str, body: dict | None, cancel: threading.Event | None = None,
              ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, threading.Event]:
        """The connection, its response (status 200) and the event that ends its cancel watch."""
        conn = self._connection()
        done = threading.Event()
        try:
            conn.connect()
            conn.sock.settimeout(self._timeout)
            if cancel is not None:  # a cancel shuts the socket, so a read waiting on a busy host ends too
                threading.Thread(target=_shut_on_cancel, args=(conn.sock, cancel, done), daemon=True).start()
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self._headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            done.set()
            conn.close()
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled("cancelled") from None
            reason = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__
            raise ModelServerUnavailable(f"the model server at {self.url} cannot be reached ({reason})") from None
        if response.status != 200:
            detail = _error_message(response.read())
            done.set()
            conn.close()
            if response.status == 401:
                raise ConfigError(f"the model server at {self.url} refused this terminal's token "
                                  f"(APPLIANCE_MCP_TOKEN; `appliance terminal add` on the host)")
            if response.status == 400 and "context" in detail.lower():
                raise ContextOverflow(f"the prompt does not fit the model server's context ({detail})")
            raise ModelServerUnavailable(f"the model server at {self.url} answered {response.status} ({detail})")
        return conn, response, done

    def request(self, method: str, path: str, body: dict | None = None,
                 cancel: threading.Event | None = None) -> dict:
        conn, response, done = self._open(method, path, body, cancel)
        try:
            return json.loads(response.read())
        except (OSError, http.client.HTTPException, ValueError):
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled("cancelled") from None
            raise ModelServerUnavailable(f"the model server at {self.url} sent an unreadable answer") from None
        finally:
            done.set()
            conn.close()

    def stream(self, body: dict, cancel: threading.Event | None) -> Iterator[dict]:
        """The server-sent events of one completion; closing the connection ends the request."""
        conn, response, done = self._open("POST", "/completion", {**body, "stream": True}, cancel)
        try:
            while True:
                try:
                    line = response.readline()
                except (OSError, http.client.HTTPException):
                    line = None
                if cancel is not None and cancel.is_set():
                    raise GenerationCancelled("cancelled")
                if line is None:
                    raise ModelServerUnavailable(f"the model server at {self.url} stopped answering")
                if not line:
                    raise ModelServerUnavailable(f"the model server at {self.url} ended the answer early")
                if not line.startswith(b"data: "):
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise ModelServerUnavailable(f"the model server failed the request ({_error_message(line[6:])})")
                yield event
                if event.get("stop"):
                    return
        finally:
            done.set()
            conn.close()


def _shut_on_cancel(sock: socket.socket, cancel: threading.Event, done: threading.Event) -> None:
    while not done.is_set():
        if cancel.wait(0.05):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return


def _error_message(raw: bytes) -> str:
    """The server's one-line reason (its messages name limits and parameters, never prompt text)."""
    try:
        error = json.loads(raw).get("error", {})
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        message = ""
    return (message or "no reason given")[:200]
