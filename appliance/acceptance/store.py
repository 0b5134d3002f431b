"""Acceptance results in the data home, keyed by the model file's sha256, and the line every
surface shows for the installed model.

Layout: ``<data home>/acceptance/<sha256>.json``, the latest finished run for that file
(verdict, figures, date, profile, run directory), replaced atomically; ``hashes.json`` remembers
the sha256 of a model file no profile or install pins, by the file's stamp (device, inode, size,
modification and status-change times, as ``models.verify`` trusts them), so the status of an
unpinned file is hashed once, not at every start.

Invariants:
- A file whose sha256 has no result is "not measured"; another file (another sha256) never
  inherits a result, whatever its profile or name.
- Reading never raises for a damaged or missing result: it is "not measured".
- A result is a verdict only when signed by this data home: ``save_result`` adds an
  HMAC-SHA256 of the result's canonical JSON under a 32-byte key kept in ``keys/acceptance.key``
  (0600, made at the first save), and every read checks it. A result written by hand, altered
  after it was saved, or saved under another key (another data home, a key deleted and made
  again) reads as "not accepted" with one line saying so, never as accepted. The key stops a
  file edited or copied by hand; it does not stop someone who reads the key from the data home.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from appliance.acceptance.thresholds import LINE_FIGURES
from common.locations import data_home, private_dir
from models.verify import sha256_of

NOT_MEASURED = "not measured (appliance model accept)"
NOT_SIGNED = ("not accepted: the recorded result for this model file is not signed by this appliance (written by "
              "hand or altered); run `appliance model accept` again")
LINE_REASONS = 4  # reasons a status line names; a banner stays one line
SIGNATURE = "signature"  # the result's field holding its HMAC-SHA256 (hex)
KEY_BYTES = 32


def acceptance_dir() -> Path:
    return data_home() / "acceptance"


def key_path() -> Path:
    return data_home() / "keys" / "acceptance.key"


def _key(*, create: bool) -> bytes | None:
    """The data home's signing key; made (0600) when ``create`` and missing; None when missing
    or not a key."""
    path = key_path()
    if create and not path.exists():
        private_dir(path.parent)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # made meanwhile by another process: use that one
            pass
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
    try:
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) == KEY_BYTES else None


def _signature(key: bytes, result: dict) -> str:
    body = {k: v for k, v in result.items() if k != SIGNATURE}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, canonical.encode("ascii"), hashlib.sha256).hexdigest()


def signed(result: dict) -> bool:
    """Whether ``result`` carries this data home's signature over exactly its content."""
    key = _key(create=False)
    mark = result.get(SIGNATURE)
    return key is not None and isinstance(mark, str) and hmac.compare_digest(mark, _signature(key, result))


def _write(path: Path, data: dict) -> None:
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def save_result(result: dict) -> Path:
    """Record a finished run's result under its model's sha256."""
    key = _key(create=True)
    if key is None:
        raise OSError(f"the acceptance signing key {key_path()} cannot be read")
    result = json.loads(json.dumps(result))  # as it will read back, so the signature covers that
    result[SIGNATURE] = _signature(key, result)
    path = acceptance_dir() / f"{result['model_sha256']}.json"
    _write(path, result)
    return path


def load_result(sha256: str | None) -> dict | None:
    if not sha256:
        return None
    try:
        data = json.loads((acceptance_dir() / f"{sha256.lower()}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("model_sha256") == sha256.lower() else None


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def file_sha256(path: Path, known: str | None = None) -> str:
    """The model file's sha256: ``known`` (pinned by its profile or install, checked when it
    loads), else remembered for this very file, else hashed now and remembered."""
    if known:
        return known.lower()
    path = Path(path).resolve()
    cache_path = acceptance_dir() / "hashes.json"
    try:
        cache = json.loads(cache_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    stamp = _stamp(path)
    entry = cache.get(str(path))
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        return entry["sha256"]
    digest = sha256_of(path)
    if _stamp(path) == stamp:  # not changed while it was hashed
        cache[str(path)] = {"stamp": stamp, "sha256": digest}
        _write(cache_path, cache)
    return digest


@dataclass(frozen=True)
class Status:
    """What the appliance knows of a model file's acceptance at this site."""

    state: str  # "accepted" | "not accepted" | "not measured"
    line: str  # the sentence every surface shows
    result: dict | None = None

    @property
    def accepted(self) -> bool:
        return self.state == "accepted"


def summary(result: dict) -> str:
    """"intent 0.93, tools 0.90, ...": the line's figures, from the result's checks."""
    values = {c["short"]: c["value"] for c in result.get("verdict", {}).get("checks", [])}
    return ", ".join(f"{name} {values[name]:.2f}" for name in LINE_FIGURES if isinstance(values.get(name), (int, float)))


def status_of(result: dict | None) -> Status:
    if result is None:
        return Status("not measured", NOT_MEASURED)
    day = str(result.get("finished", ""))[:10]
    if result.get("verdict", {}).get("accepted"):
        return Status("accepted", f"accepted on {day} ({summary(result)})", result)
    listed = result.get("verdict", {}).get("reasons", [])
    reasons = "; ".join(listed[:LINE_REASONS]) or "no verdict recorded"
    if len(listed) > LINE_REASONS:  # the rest are in the run's result.json
        reasons += f"; and {len(listed) - LINE_REASONS} more"
    return Status("not accepted", f"not accepted: {reasons} (measured {day})", result)


def status_for(sha256: str | None) -> Status:
    """The status of the file with this sha256 (None: the file is unknown, so not measured); a
    result without this data home's signature is not accepted (``NOT_SIGNED``)."""
    result = load_result(sha256)
    if result is not None and not signed(result):
        return Status("not accepted", NOT_SIGNED)
    return status_of(result)
