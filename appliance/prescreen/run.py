"""The prescreen pipeline: chart -> key facts -> trial search -> details -> one judgement per
criterion -> a verdict per trial -> ranked trials, each explained.

Invariants:
- Every tool call goes through the ``ToolBox`` (the same MCP servers the agent uses); the
  calls are bounded: one chart read, at most ``max_searches`` searches, at most ``max_trials``
  detail reads. The model is called once per search proposal and once per criterion code does
  not decide.
- Code decides first: the age and sex a trial takes (its structured limits), then every
  criterion the chart's structured facts decide (``decide``: age, sex, pregnancy, labs with
  units and dates, listed conditions with onsets, current therapy), as of ``today``. The model
  judges only the rest, one at a time (``evaluate.evaluate_criterion``), or, on a clinic host
  (a model with parallel ``slots``), as many side by side as the host has slots
  (``evaluate.evaluate_criteria``), the cancel checked between groups; its judgements keep
  only cited facts that concern the criterion. Each criterion says who decided it
  (``decided_by``).
- The verdicts are ``aggregate``'s rules, never the model's; the result shows the verdicts
  first, then every criterion with its citations, the patient facts used and every search made
  (in clinical words) and why it stopped. The disclaimer is printed once (the terminal shows it
  as the answer's footnote instead).
- Expected failures are ``PrescreenError``s with a clinician-safe message: an unknown patient is
  ``PrescreenPatientNotFound``, unusable arguments ``PrescreenBadArguments`` (the CLI's exit 2).
  A cancelled run raises ``GenerationCancelled``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from appliance.errors import ApplianceError, GenerationCancelled
from appliance.llm.base import LanguageModel
from appliance.prescreen.aggregate import (
    CriterionJudgement,
    TrialVerdict,
    aggregate,
    rank_key,
)
from appliance.prescreen.decide import decide_criterion
from appliance.prescreen.facts import PatientFacts, build_facts
from appliance.prescreen.judge import evaluate_criteria, evaluate_criterion, prepare
from appliance.prescreen.search import MAX_SEARCHES, SearchOutcome, find_candidates
from appliance.tools.base import ToolBox
from common.patient_ids import is_patient_id
from mcp_servers.knowledge.trial_criteria import age_range_text, age_years, trial_sex

DEFAULT_MAX_TRIALS = 5
MAX_TRIALS_LIMIT = 20
Progress = Callable[[str], None] | None
DISCLAIMER = ("Automated prescreen against the chart, not an eligibility decision: confirm every criterion "
              "with the full record and the trial team.")


class PrescreenError(ApplianceError):
    """The prescreen could not run (its message is safe to show)."""


class PrescreenPatientNotFound(PrescreenError):
    """The record holds no patient with that ID."""


class PrescreenBadArguments(PrescreenError):
    """The arguments cannot be used (a malformed patient ID, a trial count out of range)."""


@dataclass
class TrialResult:
    nct_id: str
    title: str
    status: str | None
    verdict: TrialVerdict
    judgements: list[CriterionJudgement]
    search_rank: int
    url: str | None = None
    demo_record: bool = False
    details_error: str | None = None

    def to_json(self, rank: int) -> dict:
        return {
            "rank": rank, "nct_id": self.nct_id, "title": self.title, "status": self.status,
            "verdict": self.verdict.verdict, "explanation": self.verdict.explanation,
            "questions": list(self.verdict.questions), "unknown_count": len(self.verdict.unknown),
            "demo_record": self.demo_record, "details_error": self.details_error,
            "criteria": [j.to_json() for j in self.judgements],
        }


@dataclass
class PrescreenResult:
    facts: PatientFacts
    trials: list[TrialResult]
    search: SearchOutcome
    condition: str | None
    stats: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "patient_facts": self.facts.to_json(),
            "trials": [t.to_json(i + 1) for i, t in enumerate(self.trials)],
            "search": self.search.to_json(), "condition": self.condition, "stats": self.stats,
            "disclaimer": DISCLAIMER,
        }


def read_facts(tools: ToolBox, patient_id: str, deadline: float = 10.0) -> PatientFacts:
    """The patient's chart as key facts; an unknown or malformed ID is a ``PrescreenError``."""
    pid = patient_id.strip()
    if not is_patient_id(pid):
        raise PrescreenBadArguments(f"'{patient_id}' is not a patient ID (letters, digits, '-' and '.' only)")
    outcome = tools.call("get_patient_chart", {"patient_id": pid}, deadline)
    if outcome.error_type == "patient_not_found":
        raise PrescreenPatientNotFound(f"no patient with ID {pid} in the health record")
    if not outcome.ok:
        raise PrescreenError(f"the patient's chart could not be read ({outcome.error_type}: "
                             f"{outcome.message or 'no detail'})")
    return build_facts(outcome.result or {})


def code_criteria(facts: PatientFacts, details: dict) -> list[CriterionJudgement]:
    """The trial's age range and sex, checked by code against the chart."""
    out: list[CriterionJudgement] = []
    minimum, maximum = details.get("minimum_age"), details.get("maximum_age")
    lo, hi = age_years(minimum), age_years(maximum)
    if lo is not None or hi is not None:
        text = f"Age {age_range_text(minimum, maximum)}"
        if facts.age is None:
            out.append(CriterionJudgement(text, "inclusion", "unknown", None, ("D1",), "The chart has no age.", "code"))
        else:
            # The patient is somewhere in [age, age + 1) years: in range when the spans overlap.
            ok = (lo is None or lo < facts.age + 1) and (hi is None or hi >= facts.age)
            out.append(CriterionJudgement(text, "inclusion", "passes" if ok else "fails", None, ("D1",),
                                          f"The patient is {facts.age} years old.", "code"))
    sex = trial_sex(details.get("sex"))
    if sex in ("FEMALE", "MALE"):
        text = f"Sex: {sex.lower()} participants only"
        if facts.sex not in ("female", "male"):
            out.append(CriterionJudgement(text, "inclusion", "unknown", None, ("D2",),
                                          "The chart does not record the patient's sex as female or male.", "code"))
        else:
            ok = facts.sex == sex.lower()
            out.append(CriterionJudgement(text, "inclusion", "passes" if ok else "fails", None, ("D2",),
                                          f"The patient is {facts.sex}.", "code"))
    return out


def judge_trial(model: LanguageModel, facts: PatientFacts, details: dict, today: date, *,
                cancel: threading.Event | None = None, progress: Progress = None) -> tuple[list[CriterionJudgement], int]:
    """Every criterion of one trial (``get_trial_details``' result): code first (the trial's age
    and sex limits, then ``decide``), the model for the rest. Returns the judgements, in the
    trial's order, and the number of model calls made."""
    say = progress or (lambda _m: None)
    judgements: list[CriterionJudgement | None] = list(code_criteria(facts, details))
    criteria = [("inclusion", c) for c in details.get("inclusion_criteria") or []]
    criteria += [("exclusion", c) for c in details.get("exclusion_criteria") or []]
    undecided = []  # (place in judgements, criterion number, kind, text)
    for i, (kind, text) in enumerate(criteria, 1):
        judgements.append(decide_criterion(facts, text, kind, today))
        if judgements[-1] is None:
            undecided.append((len(judgements) - 1, i, kind, text))
    side_by_side = max(1, getattr(model, "slots", 1)) if hasattr(model, "generate_constrained_batch") else 1
    for start in range(0, len(undecided), side_by_side):
        group = undecided[start:start + side_by_side]
        numbers = f"{group[0][1]}" if len(group) == 1 else f"{group[0][1]}-{group[-1][1]}"
        say(f"criteri{'on' if len(group) == 1 else 'a'} {numbers} of {len(criteria)}")
        _check(cancel)
        if len(group) == 1:
            (place, _, kind, text), = group
            judgements[place] = evaluate_criterion(model, facts, text, kind, cancel=cancel)
            continue
        answers = evaluate_criteria(model, [prepare(facts, text, kind) for _, _, kind, text in group],
                                    parallel=len(group))
        for (place, *_), answer in zip(group, answers):
            if isinstance(answer, Exception):
                raise answer  # as a single call's error would
            judgements[place] = answer
    return judgements, len(undecided)


def run_prescreen(
    model: LanguageModel, tools: ToolBox, patient_id: str, *, condition: str | None = None,
    max_trials: int = DEFAULT_MAX_TRIALS, max_searches: int = MAX_SEARCHES, status: str = "recruiting",
    deadline: float = 10.0, progress: Progress = None, cancel: threading.Event | None = None,
    today: date | None = None,
) -> PrescreenResult:
    """Prescreen one patient (see the module docstring); ``today`` is the date criteria with
    dates ("within 3 months") are read against (default: today, UTC)."""
    today = today or datetime.now(UTC).date()
    if not 1 <= max_trials <= MAX_TRIALS_LIMIT:
        raise PrescreenBadArguments(f"--max-trials must be between 1 and {MAX_TRIALS_LIMIT}")
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    facts = read_facts(tools, patient_id, deadline)
    say(f"chart read: {len(facts.facts)} facts")
    condition = " ".join(condition.split()) if condition else None
    search = find_candidates(model, tools, facts, condition=condition, max_trials=max_trials,
                             max_searches=max_searches, status=status, deadline=deadline, cancel=cancel)
    say(f"{len(search.calls)} searches, {len(search.candidates)} candidate trials ({search.stop_reason})")
    results: list[TrialResult] = []
    model_calls = search.proposals
    for rank, candidate in enumerate(search.candidates):
        _check(cancel)
        outcome = tools.call("get_trial_details", {"nct_id": candidate.nct_id}, deadline)
        summary = candidate.summary
        if not outcome.ok:
            verdict = aggregate([])
            results.append(TrialResult(candidate.nct_id, summary.get("title", ""), summary.get("status"), verdict, [],
                                       rank, demo_record=bool(summary.get("demo_record")),
                                       details_error=outcome.error_type))
            continue
        details = outcome.result or {}
        judgements, calls = judge_trial(model, facts, details, today, cancel=cancel,
                                        progress=lambda text, nct=candidate.nct_id: say(f"{nct}: {text}"))
        model_calls += calls
        results.append(TrialResult(candidate.nct_id, details.get("title") or summary.get("title", ""),
                                   details.get("status"), aggregate(judgements), judgements, rank,
                                   demo_record=bool(details.get("demo_record"))))
    results.sort(key=lambda t: rank_key(t.verdict, t.search_rank))
    judged = [j for t in results for j in t.judgements]
    stats = {"seconds": round(time.perf_counter() - started, 2), "model_calls": model_calls,
             "tool_calls": 1 + len(search.calls) + len(search.candidates),
             "criteria_judged": len(judged), "decided_by_code": sum(j.judged_by == "code" for j in judged),
             "decided_by_model": sum(j.judged_by == "model" for j in judged), "as_of": today.isoformat()}
    return PrescreenResult(facts, results, search, condition, stats)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise GenerationCancelled("the prescreen was cancelled")


# -- text output ------------------------------------------------------------------------------
MARKS = {"passes": "+", "fails": "x", "unknown": "?"}
SEARCH_ERRORS = {"not_found": "no matching trial in the local cache", "timeout": "the trial search timed out",
                 "invalid_args": "the search terms were refused", "server_error": "the trial search failed"}


def search_line(call, asked: str | None = None) -> str:
    """One search in a clinician's words: what was searched, why, and what it found
    ("Asthma (from the problem list, recruiting trials): no matching trial in the local cache")."""
    args = call.args
    why = ("as asked" if asked else "from the problem list") if call.source == "code" else "proposed by the model"
    what = f"{args['condition']} ({why}"
    if args.get("status") and args["status"] != "any":
        what += f", {args['status']} trials"
    what += ")"
    if not call.ok:
        return f"{what}: {SEARCH_ERRORS.get(call.error_type or '', 'the trial search failed')}"
    found = f"{call.found} trial{'s' if call.found != 1 else ''}"
    return f"{what}: {found}" + (f", {call.new} new" if call.new != call.found else "")


def _trial_lines(i: int, t: TrialResult, criteria: bool) -> list[str]:
    lines = [f"{i}. {t.verdict.verdict.replace('_', ' ')}  {t.nct_id}  {t.title}"
             + (f" [{t.status}]" if t.status else "") + (" (demo record)" if t.demo_record else ""),
             f"   {t.verdict.explanation}"]
    if t.details_error:
        lines.append(f"   The trial's details could not be read ({SEARCH_ERRORS.get(t.details_error, t.details_error)}).")
    if t.verdict.questions:
        lines.append("   To resolve:")
        lines += [f"   - {q}" for q in t.verdict.questions]
    if criteria:
        for j in t.judgements:
            exclusion = f" (condition {j.exclusion_condition})" if j.exclusion_condition else ""
            cited = f" [{', '.join(j.cited)}]" if j.cited else ""
            lines.append(f"   {MARKS[j.verdict]} {j.criterion_type}{exclusion}, decided by {j.judged_by}: "
                         f"{j.criterion}{cited}" + (f" - {j.reason}" if j.reason else "")
                         + (f" ({j.note})" if j.note else ""))
    return lines


def render_text(result: PrescreenResult, *, criteria: bool = True, disclaimer: bool = True) -> str:
    """The result for a clinician: the verdicts first (one line per trial), then each trial with
    its explanation, questions and (``criteria``) every criterion judged, then the patient facts
    used and the searches made; the disclaimer last, once (``disclaimer=False`` leaves it to the
    caller, as the terminal shows it apart)."""
    f = result.facts
    lines = [f"Prescreen for {f.name or f.patient_id} ({f.patient_id})"
             + (" - synthetic demo record" if f.synthetic_demo_record else "")]
    if not result.trials:
        lines += ["", "No candidate trials were found in the local trial cache."]
    else:
        lines += ["", "Verdicts:"]
        lines += [f"  {i}. {t.verdict.verdict.replace('_', ' ')}  {t.nct_id}  {t.title}"
                  for i, t in enumerate(result.trials, 1)]
    for i, t in enumerate(result.trials, 1):
        lines += [""] + _trial_lines(i, t, criteria)
    lines += ["", "Patient facts used:"]
    lines += [f"  {fact.line()}" for fact in f.facts]
    lines += [f"  (trimmed: {note})" for note in f.trimmed]
    searched = "; ".join(search_line(c, result.condition) for c in result.search.calls) or "none"
    lines += ["", f"Searches: {searched}. Stopped: {result.search.stop_reason}."]
    stats = result.stats
    lines += ["", f"{stats.get('criteria_judged', 0)} criteria judged ({stats.get('decided_by_code', 0)} decided by "
              f"code from the chart, {stats.get('decided_by_model', 0)} by the model), {stats.get('model_calls', 0)} "
              f"model calls, {stats.get('tool_calls', 0)} tool calls, {stats.get('seconds', 0)} s."]
    if disclaimer:
        lines.append(DISCLAIMER)
    return "\n".join(lines)


__all__ = ["DEFAULT_MAX_TRIALS", "DISCLAIMER", "PrescreenBadArguments", "PrescreenError", "PrescreenPatientNotFound",
           "PrescreenResult", "TrialResult", "code_criteria", "judge_trial", "read_facts", "render_text", "run_prescreen", "search_line"]
