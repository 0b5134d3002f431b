"""One acceptance run as a directory: what was asked, every answer, the figures and the verdict.

Layout (evaluations as data): ``config.json`` (written first: the model's profile, file and
sha256, the case set's sha256, the limit), ``nodes.jsonl`` and ``turns.jsonl`` (one line per
case, appended and fsynced as each finishes), one folder per job evaluation
(``evaluation.py``), and ``result.json`` (figures, verdict) computed from those files alone.

Invariants:
- ``resume=True`` skips the cases already written (a torn last line is done again) and refuses
  a directory made for another model file, case set or limit, so one result never mixes two.
- Only a complete run (no ``--limit``, every job finished) is recorded in the store; a partial
  one is reported and kept in its directory, and never replaces a recorded result.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path

from appliance.acceptance import store
from appliance.acceptance.cases import DEFAULT_CASES, load_cases, set_digest
from appliance.acceptance.evaluation import EVALUATIONS, Evaluation, Progress
from appliance.acceptance.figures import node_figures, turn_figures
from appliance.acceptance.nodes import run_case
from appliance.acceptance.thresholds import verdict
from appliance.acceptance.turns import run_turn_case
from appliance.errors import ApplianceError
from appliance.llm.base import LanguageModel
from appliance.medication.names import DrugRecogniser

SAME_SETUP = ("model_sha256", "cases_sha256", "limit")


class RunDirectoryError(ApplianceError):
    """A run directory that cannot be resumed (another set-up, damaged rows) or is already used."""
TurnAgent = Callable[[], AbstractContextManager]  # enters to an Agent over a read-only tool box


def read_rows(path: Path) -> list[dict]:
    """The finished lines of a JSONL file; a torn last line is cut off (done again)."""
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    rows, good = [], 0
    for i, line in enumerate(lines):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                if any(x.strip() for x in lines[i + 1:]):
                    raise RunDirectoryError(f"{path}: line {i + 1} is not JSON (only a last line may be cut short)") from None
                with path.open("r+b") as fh:
                    fh.truncate(good)
                break
        good += len(line) + 1
    return rows


def _append(out, row: dict) -> None:
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())


def _config(run_dir: Path, setup: dict, resume: bool) -> None:
    path = run_dir / "config.json"
    if resume:
        try:
            earlier = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise RunDirectoryError(f"{run_dir} is not an acceptance run directory (no readable config.json)") from None
        changed = [k for k in SAME_SETUP if earlier.get(k) != setup[k]]
        if changed:
            raise RunDirectoryError(f"{run_dir} was run with another {changed[0].replace('_', ' ')} "
                               f"({earlier.get(changed[0])!r}, now {setup[changed[0]]!r}): start a new run")
        return
    if path.exists():
        raise RunDirectoryError(f"{run_dir} already holds a run: resume it with --resume, or choose a new folder")
    path.write_text(json.dumps({**setup, "started": _now()}, indent=2) + "\n", encoding="utf-8")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_acceptance(model: LanguageModel, run_dir: Path, identity: dict, *, cases_path: Path = DEFAULT_CASES,
                   limit: int | None = None, resume: bool = False, turn_agent: TurnAgent | None = None,
                   evaluations: tuple[Evaluation, ...] | None = None, drugs: DrugRecogniser | None = None,
                   progress: Progress | None = None, record: bool = True) -> dict:
    """Measure ``model`` (whose file ``identity`` names: profile, model_path, model_sha256) and
    return the result; a complete run is recorded in the store when ``record``."""
    progress = progress or (lambda _label, _done, _total: None)
    evaluations = EVALUATIONS if evaluations is None else evaluations
    cases = load_cases(cases_path)
    chosen = cases[:limit] if limit is not None else cases
    setup = {"acceptance": 1, **identity, "cases": str(cases_path), "cases_sha256": set_digest(cases_path),
             "cases_in_set": len(cases), "limit": limit}
    _config(run_dir, setup, resume)
    drugs = drugs or DrugRecogniser()

    rows = read_rows(run_dir / "nodes.jsonl")
    done = {r["id"] for r in rows}
    with (run_dir / "nodes.jsonl").open("a", encoding="utf-8") as out:
        for case in chosen:
            if case.id not in done:
                row = run_case(case, model, drugs)
                rows.append(row)
                _append(out, row)
            progress("agent model calls", len(rows), len(chosen))

    turn_cases = [c for c in chosen if c.turn is not None]
    turn_rows = read_rows(run_dir / "turns.jsonl")
    todo = [c for c in turn_cases if c.id not in {r["id"] for r in turn_rows}]
    if todo and turn_agent is not None:
        with turn_agent() as agent, (run_dir / "turns.jsonl").open("a", encoding="utf-8") as out:
            for case in todo:
                row = run_turn_case(case, agent)
                turn_rows.append(row)
                _append(out, row)
                progress("whole turns", len(turn_rows), len(turn_cases))

    jobs = {}
    for job in evaluations:
        folder = run_dir / job.name
        folder.mkdir(exist_ok=True)
        jobs[job.name] = job.run(model, folder, limit, progress)

    return finish(run_dir, rows, turn_rows, jobs, record=record)


def finish(run_dir: Path, rows: list[dict], turn_rows: list[dict], jobs: dict, *, record: bool = True) -> dict:
    """The figures and verdict from the run's rows; ``result.json``; the store when complete."""
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    planned = config["cases_in_set"] if config.get("limit") is None else min(config["limit"], config["cases_in_set"])
    figures = {"nodes": node_figures(rows), "turns": turn_figures(turn_rows), "evaluations": jobs}
    complete = (config.get("limit") is None and len(rows) == planned and bool(turn_rows)
                and all(j.get("complete", True) for j in jobs.values()) and set(jobs) == {"trialgpt", "grounding", "extraction"})
    result = {"model_sha256": config["model_sha256"], "profile": config.get("model"),
              "model_path": config.get("model_path"), "run_dir": str(run_dir), "limit": config.get("limit"),
              "started": config.get("started"), "finished": _now(), "complete": complete, "figures": figures,
              "verdict": verdict(figures, complete=complete)}
    (run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    result["recorded"] = bool(record and complete and config["model_sha256"])
    if result["recorded"]:
        store.save_result(result)
    return result
