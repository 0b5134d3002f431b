"""Why a clinic host's HTTP server turned this terminal away, in one line for the clinician.

The MCP client library reports a refused request as a generic error ("Server returned an error
response") and a certificate that does not verify as a connection error wrapped in task groups,
so after a failed call to an HTTP server ``refusal`` asks the server once more itself, with the
same headers and trust, and names what it finds.

Invariants:
- ``refusal`` returns one line naming the cause the terminal can act on (the host refused the
  token, the host cannot read its tokens file, the certificate did not match the trusted one),
  or None when the probe finds none of these (the caller keeps its own outcome). It never
  raises and never returns exception text.
- The probe is one request bounded by ``PROBE_TIMEOUT``; it carries the terminal's own token
  and nothing else of the call (no patient data).
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

PROBE_TIMEOUT = 5.0
TOKEN_REFUSED = ("the clinic host refused this terminal's token (APPLIANCE_MCP_TOKEN): it was revoked, mistyped or "
                 "never issued; ask the operator for this terminal's token (`appliance terminal add` on the host)")
NO_TOKEN = ("the clinic host asks for a terminal token and this terminal has none: set APPLIANCE_MCP_TOKEN to the "
            "token the operator issued (`appliance terminal add` on the host)")
TOKENS_UNREADABLE = "the clinic host cannot read its terminal tokens file: the operator must fix it on the host"
CERTIFICATE = ("the clinic host's certificate did not match the one this terminal trusts (APPLIANCE_MCP_CA, or the "
               "system's trust store when it is unset): check the certificate file this terminal was given")
TLS_FAILED = "the secure connection to the clinic host failed (TLS): check the host's URL and APPLIANCE_MCP_CA"


def _is_certificate_error(exc: BaseException | None) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLCertVerificationError):
            return True
        exc = getattr(exc, "reason", None) if isinstance(exc, urllib.error.URLError) else exc.__cause__
    return False


def refusal(url: str, headers: dict[str, str], trust: ssl.SSLContext | None) -> str | None:
    """Why the server at ``url`` refuses this terminal (see the module docstring), or None."""
    request = urllib.request.Request(url, method="GET", headers={**headers, "Accept": "text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT, context=trust) as response:
            response.read(0)
        return None
    except urllib.error.HTTPError as exc:
        status = exc.code
        exc.close()
        if status == 401:
            return TOKEN_REFUSED if "Authorization" in headers else NO_TOKEN
        return TOKENS_UNREADABLE if status == 503 else None
    except urllib.error.URLError as exc:
        if _is_certificate_error(exc):
            return CERTIFICATE
        return TLS_FAILED if isinstance(exc.reason, ssl.SSLError) else None
    except ssl.SSLCertVerificationError:
        return CERTIFICATE
    except ssl.SSLError:
        return TLS_FAILED
    except Exception:  # noqa: BLE001 - a probe that fails tells nothing more than the call did
        return None

HOST_REFUSALS = frozenset({TOKEN_REFUSED, NO_TOKEN, TOKENS_UNREADABLE, CERTIFICATE, TLS_FAILED})
