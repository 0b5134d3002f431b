"""`appliance eval extraction`: how many of a CT.gov record's bullets the pipeline recovers.

The reference is read from the record text by code, independently of the pipeline's own
structure rules: every line starting with ``*``, ``-`` or a list number ("1.", "2)") is one
bullet, and its side is the last "Inclusion Criteria" / "Exclusion Criteria" heading above it
(none when the record has neither, as in the older NCI-style records).

Matching rule (stated in every report): words are lower-case letters and numbers ("1,500" ->
"1500") without the stop words ``STOP``; a criterion matches a bullet when the two word sets have
Jaccard similarity >= ``JACCARD`` (0.6), or when one set has at least 2 words and >= ``CONTAINED``
(0.8) of them lie in the other (an atomic piece of a bullet, or a bullet under a label such as
"Age: 18 and over"). Each criterion goes to the one bullet it matches best (highest Jaccard,
then containment). A bullet is *recovered* when at least one criterion went to it; a criterion
that matches no bullet is *invented*; a criterion that went to a bullet with a known side and has
the other type (or none) is a *side error*. Where a heading gives the side, the pipeline's type is
the heading's, so the model's own label is scored apart (``model_side_errors``).

Invariant: every figure is computed from the per-record rows, which a run can write as JSON
lines beside its configuration (``--out``), so a reported number can be recomputed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from appliance.extraction.errors import ExtractionError
from appliance.extraction.loaders import Document, Page, unescape_markdown
from appliance.extraction.pipeline import (
    ExtractionConfig,
    ProgressCallback,
    extract_criteria,
)
from appliance.extraction.stages import tokens
from common.json_files import read_json
from common.locations import PROJECT_ROOT

JACCARD = 0.6
CONTAINED = 0.8
STOP = frozenset("a an the of and or to in for with by on at be is are".split())
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data" / "ctgov-sample"
CACHE_FILE = "trial_criteria_cache.json"
RULE = (f"criterion matches bullet: word-set Jaccard >= {JACCARD}, or >= {CONTAINED} of the smaller set "
        f"(>= 2 words) inside the other; stop words {sorted(STOP)} ignored; each criterion goes to its best bullet")

_SIDE = re.compile(r"^\W*(?:key\s+)?(inclusion|exclusion)\s+criteria\W*$", re.I)
_REF_BULLET = re.compile(r"^\s*(?:[*\-]|\d{1,2}[.)])\s+(\S.*)$")


@dataclass(frozen=True)
class RefBullet:
    text: str
    side: str | None


def reference_bullets(text: str) -> list[RefBullet]:
    side = None
    out = []
    for line in unescape_markdown(text).split("\n"):
        m = _SIDE.match(line.strip())
        if m:
            side = m.group(1).lower()
            continue
        b = _REF_BULLET.match(line)
        if b:
            out.append(RefBullet(b.group(1).strip(), side))
    return out


def _words(text: str) -> set[str]:
    return {w for w in tokens(text) if w not in STOP}


def match_score(bullet: set[str], criterion: set[str]) -> tuple[float, float] | None:
    """(Jaccard, containment) when the two match by the rule, else None."""
    if not bullet or not criterion:
        return None
    common = len(bullet & criterion)
    jaccard = common / len(bullet | criterion)
    small = min(len(bullet), len(criterion))
    contained = common / small if small >= 2 else 0.0
    return (jaccard, contained) if jaccard >= JACCARD or contained >= CONTAINED else None


def score_record(bullets: list[RefBullet], criteria: list[dict]) -> dict:
    """The matching of one record: per criterion its bullet (or None), and the counts."""
    bullet_words = [_words(b.text) for b in bullets]
    assigned: list[int | None] = []
    for crit in criteria:
        cw = _words(crit["text"])
        best, best_score = None, None
        for i, bw in enumerate(bullet_words):
            score = match_score(bw, cw)
            if score is not None and (best_score is None or score > best_score):
                best, best_score = i, score
        assigned.append(best)
    recovered = sorted({i for i in assigned if i is not None})
    side_checked = side_errors = model_side_checked = model_side_errors = 0
    for crit, i in zip(criteria, assigned):
        if i is not None and bullets[i].side is not None:
            side_checked += 1
            side_errors += crit.get("type") != bullets[i].side
            model_type = crit.get("provenance", {}).get("model_type")
            if model_type is not None:  # the model's own label, before the heading's wins
                model_side_checked += 1
                model_side_errors += model_type != bullets[i].side
    return {
        "bullets": len(bullets), "recovered": len(recovered), "missed": len(bullets) - len(recovered),
        "criteria": len(criteria), "invented": sum(i is None for i in assigned),
        "side_checked": side_checked, "side_errors": side_errors,
        "model_side_checked": model_side_checked, "model_side_errors": model_side_errors, "assigned": assigned,
        "missed_bullets": [b.text for i, b in enumerate(bullets) if i not in recovered],
        "invented_criteria": [c["text"] for c, i in zip(criteria, assigned) if i is None],
    }


def load_records(data_dir: Path) -> dict[str, dict]:
    path = data_dir / CACHE_FILE
    data = read_json(path, ExtractionError)
    if not isinstance(data, dict):
        raise ExtractionError(f"{path}: expected an object of NCT id -> record")
    return {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("eligibility_criteria"), str)}


TOTAL_KEYS = ("bullets", "recovered", "missed", "criteria", "invented", "side_checked", "side_errors",
              "model_side_checked", "model_side_errors")


def totals(rows: list[dict]) -> dict:
    out = {k: sum(r[k] for r in rows) for k in TOTAL_KEYS}
    out["recall"] = round(out["recovered"] / out["bullets"], 3) if out["bullets"] else None
    out["invented_share"] = round(out["invented"] / out["criteria"], 3) if out["criteria"] else None
    out["side_error_rate"] = round(out["side_errors"] / out["side_checked"], 3) if out["side_checked"] else None
    out["model_side_error_rate"] = (round(out["model_side_errors"] / out["model_side_checked"], 3)
                                    if out["model_side_checked"] else None)
    paths: dict[str, int] = {}
    for r in rows:
        for k, v in r["paths"].items():
            paths[k] = paths.get(k, 0) + v
    out["paths"] = dict(sorted(paths.items()))
    return out


def run_eval(model, *, data_dir: Path = DEFAULT_DATA, limit: int | None = None, config: ExtractionConfig | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Extract every record's criteria and score them; returns {"rule", "config", "records", "total"}."""
    config = config or ExtractionConfig()
    records = list(load_records(data_dir).items())[:limit]
    rows = []
    for n, (nct, rec) in enumerate(records, start=1):
        text = unescape_markdown(rec["eligibility_criteria"])
        doc = Document(nct, "ctgov", (Page(1, text),), rec.get("brief_title"))
        started = time.perf_counter()
        inner: ProgressCallback | None = None
        if progress:
            def inner(p, nct=nct, n=n):
                progress(f"{nct} ({n}/{len(records)})", p.done, p.total)
        result = extract_criteria([doc], model, config, progress=inner)
        criteria = [c.to_json() for c in result.criteria]
        score = score_record(reference_bullets(rec["eligibility_criteria"]), criteria)
        paths: dict[str, int] = {}
        for c in criteria:
            for stage in ("split", "type"):
                key = f"{stage}:{c['provenance'][stage]}"
                paths[key] = paths.get(key, 0) + 1
        rows.append({"nct_id": nct, **{k: score[k] for k in TOTAL_KEYS}, "paths": paths,
                     "seconds": round(time.perf_counter() - started, 2), "model_calls": result.stats["model_calls"],
                     "missed_bullets": score["missed_bullets"], "invented_criteria": score["invented_criteria"],
                     "criteria_detail": [{**c, "bullet": a} for c, a in zip(criteria, score["assigned"])],
                     "warnings": result.warnings})
    return {"rule": RULE, "config": {**asdict(config), "data": str(data_dir), "records": len(records),
                                     "model": getattr(model, "profile_name", "?")},
            "records": rows, "total": totals(rows)}


def write_run(report: dict, out_dir: Path) -> None:
    """The run as data: ``config.json`` and one JSON line per record in ``rows.jsonl``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps({"rule": report["rule"], **report["config"]}, indent=2) + "\n")
    with open(out_dir / "rows.jsonl", "w", encoding="utf-8") as handle:
        for row in report["records"]:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def summary_json(report: dict) -> dict:
    """The report without the per-criterion detail (that stays in the rows)."""
    keep = ("nct_id", *TOTAL_KEYS, "paths", "seconds", "model_calls", "missed_bullets", "invented_criteria")
    return {"rule": report["rule"], "config": report["config"],
            "records": [{k: r[k] for k in keep} for r in report["records"]], "total": report["total"]}


def format_table(report: dict) -> str:
    lines = [f"rule: {report['rule']}", "",
             f"{'record':<13}{'bullets':>8}{'recov.':>8}{'missed':>8}{'crit.':>7}{'invent.':>9}{'side err.':>11}"]
    for r in report["records"] + [{"nct_id": "TOTAL", **report["total"]}]:
        lines.append(f"{r['nct_id']:<13}{r['bullets']:>8}{r['recovered']:>8}{r['missed']:>8}{r['criteria']:>7}"
                     f"{r['invented']:>9}{r['side_errors']:>6}/{r['side_checked']:<4}")
    t = report["total"]
    lines += ["", f"recall {t['recall']}, invented share {t['invented_share']}, side error rate {t['side_error_rate']}",
              f"the model's own side label (before the heading's wins): {t['model_side_errors']} wrong of "
              f"{t['model_side_checked']} (rate {t['model_side_error_rate']})",
              "paths: " + ", ".join(f"{k} {v}" for k, v in t["paths"].items())]
    return "\n".join(lines)
