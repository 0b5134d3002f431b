"""The acceptance result as a table for a terminal (``--json`` prints the result itself)."""

from __future__ import annotations

from appliance.acceptance.figures import NODE_FIGURES


def _f(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_result(result: dict) -> str:
    figures, v = result["figures"], result["verdict"]
    lines = [f"model acceptance: {result.get('profile')} (sha256 {str(result['model_sha256'])[:16]}...), "
             f"run {result['run_dir']}", "",
             f"{'node':<42}{'n':>5}{'acc.':>7}{'95% interval':>16}{'valid':>7}{'median s':>10}{'p95 s':>8}{'by code':>9}"]
    for key, node in NODE_FIGURES.items():
        f = figures["nodes"]["nodes"][key]
        ci = f["interval95"]
        interval = f"{_f(ci[0])}-{_f(ci[1])}" if ci else "-"
        lines.append(f"{node:<42}{f['n']:>5}{_f(f['accuracy']):>7}{interval:>16}{_f(f['valid']):>7}"
                     f"{_f(f['median_seconds']):>10}{_f(f['p95_seconds']):>8}{f['decided_by_code']:>9}")
    for source, f in figures["nodes"]["by_source"].items():
        lines.append(f"  all calls, {source} rows: {f['correct']}/{f['n']} ({_f(f['accuracy'])})")
    t = figures["turns"]
    lines += ["", f"whole turns: path {t['path']['correct']}/{t['path']['n']} ({_f(t['path']['accuracy'])}); fact guard: "
              f"{t['fact_guard']['answers_withheld']} withheld of the {t['fact_guard']['n']} model answers it read "
              f"({_f(t['fact_guard']['accuracy'])} clean); {t['fallbacks']} replaced as unusable; shown as written "
              f"{_f(t['shown']['accuracy'])}; {t['errors']} errors; "
              f"median turn {_f(t['median_seconds'], 1)} s"]
    ev = figures["evaluations"]
    if "trialgpt" in ev:
        g = ev["trialgpt"]
        lines.append(f"TrialGPT criterion step: n={g['n']} accuracy {_f(g['accuracy'], 3)} macro-F1 {_f(g['macro_f1'], 3)} "
                     f"kappa {_f(g['kappa'], 3)}; GPT-4 on the same rows {_f(g['gpt4']['accuracy'], 3)} / "
                     f"{_f(g['gpt4']['macro_f1'], 3)} / {_f(g['gpt4']['kappa'], 3)}")
    if "grounding" in ev:
        g = ev["grounding"]
        lines.append(f"grounding: {g['criteria']} criteria, {g['entities']} entities, grounded {_f(g['grounded_share'])}, "
                     f"expert review {_f(g['expert_review_share'])}, {g['extraction_failures']} extractions failed")
    if "extraction" in ev:
        g = ev["extraction"]
        lines.append(f"extraction: {g['records']} records, {g['bullets']} bullets, recall {_f(g['recall'])}, "
                     f"invented {_f(g['invented_share'])}, side errors {_f(g['side_error_rate'])}")
    lines += ["", "thresholds (docs: README \"Model acceptance\"):"]
    for c in v["checks"]:
        sign = ">=" if c["at_least"] else "<="
        lines.append(f"  {'ok  ' if c['met'] else 'FAIL'} {c['short']:<20} {_f(c['value'], 3):>7} {sign} {c['threshold']}")
    lines.append("")
    lines.append("accepted" if v["accepted"] else "not accepted: " + "; ".join(v["reasons"]))
    lines.append("recorded for this model file" if result.get("recorded")
                 else "not recorded (only a complete run is recorded)")
    return "\n".join(lines)
