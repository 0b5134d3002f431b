"""The three job evaluations an acceptance run includes, each through its own command's code
(nothing re-implemented): the TrialGPT criterion step (``appliance eval trialgpt``), concept
grounding (``eval grounding``) and criteria extraction (``eval extraction``), on samples sized
so the whole acceptance run of the shipped 270M model takes under 30 minutes on 2 cores.

Each job writes into its own folder of the run directory and returns its headline figures;
run again on a folder it finished, it returns them without a model call (the TrialGPT job
resumes a stopped run row by row, as ``eval trialgpt --resume`` does; the other two, being
short, start over).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from appliance.llm.base import LanguageModel

# Rows, criteria and records taken by default (``--limit N`` takes fewer). TrialGPT: its whole
# development split (341 rows, about 4 minutes); grounding: the first 20 distinct criteria of
# the same file; extraction: the first 3 CT.gov records of the shipped sample (51 bullets).
SAMPLES = {"trialgpt": None, "grounding": 20, "extraction": 3}

Progress = Callable[[str, int, int], None]  # (label, done, total)


def _done(folder: Path) -> dict | None:
    path = folder / "figures.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _save(folder: Path, figures: dict) -> dict:
    (folder / "figures.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return figures


def _size(job: str, limit: int | None) -> int | None:
    default = SAMPLES[job]
    if limit is None:
        return default
    return limit if default is None else min(default, limit)


def trialgpt_job(model: LanguageModel, folder: Path, limit: int | None, progress: Progress) -> dict:
    from appliance.prescreen import trialgpt

    if (done := _done(folder)) is not None:
        return done
    resume = (folder / "config.json").is_file()
    m = trialgpt.run_trialgpt(model, folder, limit=_size("trialgpt", limit), resume=resume,
                              progress=lambda done, total, _acc, _left: progress("trialgpt", done, total))
    head = ("n", "accuracy", "macro_f1", "kappa")
    return _save(folder, {**{k: m[k] for k in head}, "gpt4": {k: m["gpt4"][k] for k in head},
                          "errors": m["errors"], "complete": m["complete"], "run_dir": str(folder)})


def grounding_job(model: LanguageModel, folder: Path, limit: int | None, progress: Progress) -> dict:
    from appliance.grounding.evaluation import run_grounding_eval
    from appliance.grounding.search import InProcessSearch
    from common.locations import umls_db_path

    if (done := _done(folder)) is not None:
        return done
    with InProcessSearch(umls_db_path()) as search:
        m = run_grounding_eval(model, search, folder, limit=_size("grounding", limit),
                               progress=lambda done, total, _s: progress("grounding", done, total))
    share = m["method_share"]
    return _save(folder, {
        "criteria": m["criteria"], "entities": m["entities"], "grounded_share": round(share["exact"] + share["model_selected"], 4),
        "expert_review_share": share["expert_review"], "extraction_failures": m["extraction_failures"],
        "parse_failures": m["parse_failures"], "rejected_codes": m["rejected_codes"],
        "criteria_with_errors": m["criteria_with_errors"], "run_dir": str(folder)})


def extraction_job(model: LanguageModel, folder: Path, limit: int | None, progress: Progress) -> dict:
    from appliance.extraction.evaluation import run_eval, write_run

    if (done := _done(folder)) is not None:
        return done
    report = run_eval(model, limit=_size("extraction", limit), progress=lambda label, done, total: progress(
        f"extraction {label}"[:24], done, total))
    write_run(report, folder)
    t = report["total"]
    return _save(folder, {"records": len(report["records"]), "bullets": t["bullets"], "recall": t["recall"],
                          "invented_share": t["invented_share"], "side_error_rate": t["side_error_rate"],
                          "run_dir": str(folder)})


@dataclass(frozen=True)
class Evaluation:
    name: str
    run: Callable[[LanguageModel, Path, int | None, Progress], dict]


EVALUATIONS = (Evaluation("trialgpt", trialgpt_job), Evaluation("grounding", grounding_job),
               Evaluation("extraction", extraction_job))
