"""`appliance eval trialgpt FILE`: the prescreen's core step (one criterion against one patient,
``judge.evaluate_criteria``) measured on TrialGPT's expert criterion annotations.

Invariants (evaluations as data):
- Every row given is evaluated once, in file order (``--limit N``: the first N); nothing is
  resampled. The six expert labels map to the patient's standing the way the published
  TrialMatch figures score them: included / not excluded -> passes; not included / excluded ->
  fails; not enough information / not applicable -> unknown. ``gpt4_eligibility`` maps the same
  way and is scored on exactly the same rows.
- A run directory holds ``config.json`` (written first: data file and its sha256, rows, model
  profile, file and sha256, prompt version, decoding settings), ``rows.jsonl`` (one line per row,
  appended and flushed in file order as each group of rows finishes) and ``metrics.json``, which
  ``metrics_from_run`` computes from those two files alone.
- ``--resume RUN_DIR`` skips the rows already in ``rows.jsonl`` (a half-written last line from an
  interruption is dropped and that row done again) and refuses a run made with another data
  file, model file, prompt version or limit, so one run's figures never mix two set-ups.
- A row whose model call fails is recorded with its error and counted as ``unknown`` (what the
  prescreen would show); the run goes on. The metrics say how many rows failed.
- The product's citation rule applies (a yes/no that cites no sentence of the note counts as
  unknown); the figures without it are reported beside, from the model's own answers.
- Code decides first, as in the prescreen: what code reads from the note (its age and sex,
  ``subject.from_note``) settles the criteria ``decide.decide_note`` reads whole, with no model
  call. Each row records ``decided_by`` (``code``, ``model`` or ``no_criterion``) and the
  figures are given for each share beside the whole (with GPT-4's on the same rows).
- A row whose criterion is null or empty (a trial that lists no criteria of that type; the
  experts label it "not excluded") is scored as the published figures score every row of the
  file: it counts, with the experts' label. Nothing can fail a criterion that is not there, so
  it is predicted ``passes`` (``decided_by: no_criterion``), and such rows are counted
  (``null_criterion_rows``); the figures without them are reported too (seed 004's harness
  drops them).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from appliance.errors import ApplianceError, GenerationError
from appliance.llm.base import LanguageModel
from appliance.prescreen import decide, judge
from appliance.prescreen.metrics import agreement, overlap
from appliance.prescreen.subject import Subject, from_note
from common.json_files import read_json
from common.locations import PROJECT_ROOT

DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data" / "trialgpt" / "criterion_annotations_dev.json"
CLASSES = ("passes", "fails", "unknown")
LABELS = {"included": "passes", "not excluded": "passes", "not included": "fails", "excluded": "fails",
          "not enough information": "unknown", "not applicable": "unknown"}
FIELDS = ("annotation_id", "patient_id", "note", "trial_id", "criterion_type", "criterion_text",
          "expert_eligibility", "gpt4_eligibility", "expert_sentences", "gpt4_sentences")
# What the model is asked and how its answer is bounded: a change here is a different benchmark.
PROMPT_VERSION = "criterion-" + hashlib.sha256(json.dumps(
    [judge.SYSTEM, judge.QUESTIONS, judge.MAX_TOKENS, judge.TEMPERATURE,
     judge.MAX_CRITERION_CHARS, judge.MAX_NOTE_CHARS]).encode()).hexdigest()[:12]
GROUP = 8  # rows evaluated (and written) together, at least (more when --parallel is larger)
# config.json keys a resumed run must share with the run it continues
SAME_SETUP = ("data_sha256", "limit", "model_sha256", "prompt_version", "require_citation", "code_rules")
SHARES = ("code", "model", "no_criterion")


class TrialGPTDataError(ApplianceError):
    """The annotation file or the run directory is not what the benchmark reads."""


@dataclass(frozen=True)
class Row:
    index: int  # position in the file
    annotation_id: object
    patient_id: str
    note: str
    trial_id: str
    criterion_type: str
    criterion_text: str
    expert: str  # the expert's six-way label
    gpt4: str  # GPT-4's six-way label
    expert_sentences: tuple[str, ...]
    gpt4_sentences: tuple[str, ...]

    @property
    def no_criterion(self) -> bool:
        """A trial that lists no criterion of this type (the file's criterion is null)."""
        return not self.criterion_text.strip()


def _sentences(value, where: str) -> tuple[str, ...]:
    """A sentence-id list, given as a list or as the JSON text of one ("[0, 1, 2]")."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "[]")
        except json.JSONDecodeError:
            raise TrialGPTDataError(f"{where}: not a list of sentence numbers") from None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TrialGPTDataError(f"{where}: not a list of sentence numbers")
    return tuple(str(v) for v in value)


def load_rows(path: Path) -> list[Row]:
    """Every row of a TrialGPT criterion-annotation file, checked; a file that is not that format
    is refused naming the first row and field that is not."""
    data = read_json(path, TrialGPTDataError, "TrialGPT criterion annotations")
    if not isinstance(data, list) or not data:
        raise TrialGPTDataError(f"{path}: expected a non-empty list of TrialGPT criterion-annotation rows")
    rows = []
    for i, raw in enumerate(data):
        where = f"{path}: row {i}"
        if not isinstance(raw, dict):
            raise TrialGPTDataError(f"{where} is not an object")
        missing = [f for f in FIELDS if f not in raw]
        if missing:
            raise TrialGPTDataError(f"{where} has no {missing[0]!r}: not the TrialGPT criterion-annotation format")
        for name in ("patient_id", "note"):
            if not isinstance(raw[name], str) or not raw[name].strip():
                raise TrialGPTDataError(f"{where}: {name} must be non-empty text")
        if raw["criterion_text"] is not None and not isinstance(raw["criterion_text"], str):
            raise TrialGPTDataError(f"{where}: criterion_text must be text or null")
        if raw["criterion_type"] not in ("inclusion", "exclusion"):
            raise TrialGPTDataError(f"{where}: criterion_type must be inclusion or exclusion")
        for name in ("expert_eligibility", "gpt4_eligibility"):
            if raw[name] not in LABELS:
                raise TrialGPTDataError(f"{where}: {name} {raw[name]!r} is not one of {sorted(LABELS)}")
        rows.append(Row(i, raw["annotation_id"], raw["patient_id"], raw["note"], str(raw["trial_id"]),
                        raw["criterion_type"], raw["criterion_text"] or "", raw["expert_eligibility"],
                        raw["gpt4_eligibility"], _sentences(raw["expert_sentences"], f"{where}: expert_sentences"),
                        _sentences(raw["gpt4_sentences"], f"{where}: gpt4_sentences")))
    return rows


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def model_identity(model: LanguageModel) -> dict:
    """Profile, file and sha256 of the model (the profile's known sha256, checked when the model
    loaded, else the file hashed now); a scripted model has no file."""
    path = getattr(model, "path", None)
    known = getattr(getattr(model, "profile", None), "sha256", None)
    return {"model": getattr(model, "profile_name", type(model).__name__),
            "model_path": str(path) if path else None,
            "model_sha256": known or (_sha256(Path(path)) if path else None)}


# -- the run directory -------------------------------------------------------------------------
def _read_rows(run_dir: Path) -> list[dict]:
    """The finished rows; a half-written last line (the run was stopped while writing it) is
    cut off the file, so the row is done again."""
    path = run_dir / "rows.jsonl"
    if not path.exists():
        return []
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    rows, good = [], 0
    for i, line in enumerate(lines):
        if not line.strip():
            good += len(line) + 1
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1 and any(x.strip() for x in lines[i + 1:]):
                raise TrialGPTDataError(f"{path}: line {i + 1} is not JSON (only a last line may be cut short)") from None
            with path.open("r+b") as fh:  # a torn last line: keep what was whole
                fh.truncate(good)
            break
        good += len(line) + 1
    return rows


def read_config(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise TrialGPTDataError(f"{run_dir} is not a trialgpt run directory (no readable config.json)") from None


def _row_record(row: Row, result, decided_by: str) -> dict:
    """One line of rows.jsonl: the row's labels, who decided it, and the judgement or the error.
    ``model_verdict`` is the answer before the citation rule: the model's, or for a row code
    decided, code's (the rule does not apply to it)."""
    record = {
        "row": row.index, "annotation_id": row.annotation_id, "patient_id": row.patient_id, "trial_id": row.trial_id,
        "criterion_type": row.criterion_type, "expert": row.expert, "gold": LABELS[row.expert],
        "gpt4": row.gpt4, "gpt4_class": LABELS[row.gpt4], "expert_sentences": list(row.expert_sentences),
        "gpt4_sentences": list(row.gpt4_sentences), "decided_by": decided_by,
    }
    if isinstance(result, GenerationError):
        return {**record, "predicted": "unknown", "model_verdict": None, "cited": [], "reason": "",
                "note": None, "error": f"{type(result).__name__}: {result}", "seconds": 0.0}
    if decided_by == "no_criterion":
        return {**record, "predicted": "passes", "model_verdict": "passes", "cited": [],
                "reason": "The trial lists no criterion of this type: nothing to fail.", "note": None, "error": None,
                "seconds": 0.0}
    return {**record, "predicted": result.verdict, "model_verdict": result.model_verdict or result.verdict,
            "cited": list(result.cited), "reason": result.reason, "note": result.note, "error": None,
            "seconds": result.seconds}


def _decide(rows: list[Row], subjects: dict[str, Subject]) -> list[tuple[str, object]]:
    """Per row: ("no_criterion", None), ("code", judgement) or ("model", None) still to judge."""
    out = []
    for row in rows:
        if row.no_criterion:
            out.append(("no_criterion", None))
            continue
        subject = subjects.setdefault(row.note, from_note(judge.note_evidence(row.note).text))
        judged = decide.decide_note(subject, row.criterion_text, row.criterion_type)
        out.append(("model", None) if judged is None else ("code", judged))
    return out


Progress = Callable[[int, int, float, float], None]  # (rows done, rows, running accuracy, seconds left)


def run_trialgpt(model: LanguageModel, run_dir: Path, *, data: Path = DEFAULT_DATA, limit: int | None = None,
                 resume: bool = False, require_citation: bool = True, parallel: int = 8,
                 progress: Progress | None = None) -> dict:
    """Evaluate the rows (new or resumed run), write ``metrics.json`` and return the metrics."""
    rows = load_rows(data)
    chosen = rows[:limit] if limit is not None else rows
    setup = {"evaluation": "trialgpt", "data": str(data), "data_sha256": _sha256(data), "rows_in_file": len(rows),
             "limit": limit, "rows": len(chosen), **model_identity(model), "prompt_version": PROMPT_VERSION,
             "temperature": judge.TEMPERATURE, "max_tokens": judge.MAX_TOKENS,
             "require_citation": require_citation, "code_rules": decide.RULES_VERSION, "classes": list(CLASSES),
             "label_map": LABELS, "null_criterion_rows_in_file": sum(r.no_criterion for r in rows)}
    if resume:
        earlier = read_config(run_dir)
        changed = [k for k in SAME_SETUP if earlier.get(k) != setup[k]]
        if changed:
            raise TrialGPTDataError(f"{run_dir} was run with another {changed[0].replace('_', ' ')} "
                                    f"({earlier.get(changed[0])!r}, now {setup[changed[0]]!r}): start a new run")
        earlier_rows = _read_rows(run_dir)
        done = {r["row"] for r in earlier_rows}
    else:
        if (run_dir / "rows.jsonl").exists():
            raise TrialGPTDataError(f"{run_dir} already holds a run: resume it with --resume, or choose a new folder")
        (run_dir / "config.json").write_text(json.dumps(
            {**setup, "started": datetime.now(UTC).isoformat(timespec="seconds")}, indent=2) + "\n",
            encoding="utf-8")
        earlier_rows, done = [], set()
    todo = [r for r in chosen if r.index not in done]
    right = sum(1 for r in earlier_rows if r["predicted"] == r["gold"])
    finished = len(done)
    started = time.perf_counter()
    with (run_dir / "rows.jsonl").open("a", encoding="utf-8") as out:
        size = max(GROUP, parallel)
        subjects: dict[str, Subject] = {}
        for start in range(0, len(todo), size):
            group = todo[start:start + size]
            decided = _decide(group, subjects)
            asked = [r for r, (by, _j) in zip(group, decided) if by == "model"]
            calls = [judge.prepare(judge.note_evidence(r.note), r.criterion_text, r.criterion_type)
                     for r in asked]
            answers = iter(judge.evaluate_criteria(model, calls, require_citation=require_citation,
                                                      parallel=parallel) if calls else [])
            for row, (by, judged) in zip(group, decided):
                record = _row_record(row, next(answers) if by == "model" else judged, by)
                right += record["predicted"] == record["gold"]
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
            finished += len(group)
            if progress:
                done_now = start + len(group)
                left = (time.perf_counter() - started) / done_now * (len(todo) - done_now)
                progress(finished, len(chosen), right / finished, left)
    metrics = metrics_from_run(run_dir)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics


# -- the figures -------------------------------------------------------------------------------
def _headline(block: dict) -> dict:
    return {k: block[k] for k in ("n", "accuracy", "macro_f1", "kappa")}


def metrics_from_run(run_dir: Path) -> dict:
    """The run's figures, from ``config.json`` and ``rows.jsonl`` only."""
    config = read_config(run_dir)
    rows = sorted(_read_rows(run_dir), key=lambda r: r["row"])
    gold = [r["gold"] for r in rows]
    ours = agreement(gold, [r["predicted"] for r in rows], CLASSES)
    gpt4 = agreement(gold, [r["gpt4_class"] for r in rows], CLASSES)
    raw = agreement(gold, [r["model_verdict"] or "unknown" for r in rows], CLASSES)
    by_type = {}
    for kind in ("inclusion", "exclusion"):
        part = [r for r in rows if r["criterion_type"] == kind]
        if part:
            g = [r["gold"] for r in part]
            by_type[kind] = {"ours": agreement(g, [r["predicted"] for r in part], CLASSES),
                             "gpt4": _headline(agreement(g, [r["gpt4_class"] for r in part], CLASSES))}
    shares = {}
    for by in SHARES:
        part = [r for r in rows if r.get("decided_by", "model") == by]
        if part:
            g = [r["gold"] for r in part]
            shares[by] = {**_headline(agreement(g, [r["predicted"] for r in part], CLASSES)),
                          "share": round(len(part) / len(rows), 4),
                          "gpt4": _headline(agreement(g, [r["gpt4_class"] for r in part], CLASSES))}
    with_criterion = [r for r in rows if r.get("decided_by") != "no_criterion"]
    seconds = round(sum(r["seconds"] for r in rows), 3)
    return {
        "evaluation": "trialgpt", "run_dir": str(run_dir), "model": config.get("model"),
        "model_sha256": config.get("model_sha256"), "prompt_version": config.get("prompt_version"),
        "complete": len(rows) == config.get("rows"), "rows_planned": config.get("rows"),
        **ours,
        "seconds": seconds, "rows_per_minute": round(len(rows) / seconds * 60, 2) if seconds else None,
        "errors": sum(1 for r in rows if r["error"]),
        "gpt4": gpt4,
        "by_criterion_type": by_type,
        "without_citation_rule": _headline(raw),
        "code_rules": config.get("code_rules"),
        "decided_by": shares,
        "null_criterion_rows": sum(1 for r in rows if r.get("decided_by") == "no_criterion"),
        "without_null_criterion_rows": _headline(agreement([r["gold"] for r in with_criterion],
                                                           [r["predicted"] for r in with_criterion], CLASSES)),
        "evidence_sentences": {
            "ours": overlap((r["cited"], r["expert_sentences"]) for r in rows),
            "gpt4": overlap((r["gpt4_sentences"], r["expert_sentences"]) for r in rows),
        },
    }


def format_metrics(m: dict) -> str:
    def line(name: str, b: dict) -> str:
        return f"{name:<28} n={b['n']:<4} accuracy {b['accuracy']:.3f}  macro-F1 {b['macro_f1']:.3f}  kappa {b['kappa']:.3f}"

    out = [f"TrialGPT criterion benchmark: {m['model']} (prompt {m['prompt_version']}), "
           f"{m['n']} of {m['rows_planned']} rows{'' if m['complete'] else ' (incomplete: resume it)'}",
           line("ours", m), line("ours, no citation rule", m["without_citation_rule"]), line("GPT-4, same rows", m["gpt4"])]
    for kind, b in m["by_criterion_type"].items():
        out += [line(f"  {kind}: ours", b["ours"]), line(f"  {kind}: GPT-4", b["gpt4"])]
    names = {"code": "decided by code (age, sex)", "model": "judged by the model", "no_criterion": "no criterion (null)"}
    for by, b in m.get("decided_by", {}).items():
        out += [line(f"  {names[by]}", b) + f"  share {b['share']:.3f}", line("    GPT-4, same rows", b["gpt4"])]
    out += [f"null-criterion rows: {m.get('null_criterion_rows', 0)} (a trial listing no criterion of the type; counted "
            "and scored with the experts' label, as published)", line("  without them", m["without_null_criterion_rows"])]
    classes = m["confusion"]["classes"]
    out.append("confusion (rows expert, columns ours): " + " ".join(f"{c:>8}" for c in classes))
    for c, row in zip(classes, m["confusion"]["rows_gold_columns_predicted"]):
        out.append(f"  {c:>8} " + " ".join(f"{v:>8}" for v in row))
    for c, f in m["per_class"].items():
        out.append(f"  {c:<8} precision {f['precision']:.3f} recall {f['recall']:.3f} F1 {f['f1']:.3f} (support {f['support']})")
    ev = m["evidence_sentences"]
    out.append(f"evidence sentences vs experts: ours P {ev['ours']['precision']:.3f} R {ev['ours']['recall']:.3f}; "
               f"GPT-4 P {ev['gpt4']['precision']:.3f} R {ev['gpt4']['recall']:.3f}")
    out.append(f"{m['seconds']:.1f} s model time, {m['rows_per_minute']} rows per minute, {m['errors']} failed calls; "
               f"run directory {m['run_dir']}")
    return "\n".join(out)
