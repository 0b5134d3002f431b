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
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from appliance.acceptance.thresholds import LINE_FIGURES
from common.locations import data_home, private_dir
from models.verify import sha256_of

NOT_MEASURED = "not measured (appliance model accept)"
LINE_REASONS = 4  # reasons a status line names; a banner stays one line


def acceptance_dir() -> Path:
    return data_home() / "acceptance"


def _write(path: Path, data: dict) -> None:
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def save_result(result: dict) -> Path:
    """Record a finished run's result under its model's sha256."""
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
    """The status of the file with this sha256 (None: the file is unknown, so not measured)."""
    return status_of(load_result(sha256))
