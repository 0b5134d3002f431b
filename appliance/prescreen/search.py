"""The prescreen's trial search: code-bounded calls to the local trial cache.

The loop follows seed 004's PRESCREEN search with code in charge: the first searches are
code's (the clinician's condition, else the patient's active problems), and only when they
leave room does the model propose the next search terms (one constrained call per proposal).
Code fills in the filters (recruiting by default, the patient's sex and age) and bounds
everything.

Invariants:
- At most ``max_searches`` search calls; the loop stops, and says why in ``stop_reason``, at the
  first of: the budget spent, enough candidates (``max_trials``), the model proposing no
  further search, a search that repeats an earlier one (same arguments), or two model-proposed
  searches in a row that found nothing new. It cannot run on.
- Details are fetched for at most ``max_trials`` candidates: those found by the most searches,
  then the best-ranked.
- Every call is recorded (arguments, outcome, trials new to the list), so the output shows
  what was searched.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from appliance.llm.base import LanguageModel
from appliance.llm.prompt import Message
from appliance.prescreen.facts import PatientFacts
from appliance.tools.base import ToolBox

PROPOSE_NODE = "PRESCREEN_SEARCH"
PROPOSE_TEMPERATURE = 0.0
PROPOSE_MAX_TOKENS = 96
MAX_SEARCHES = 4
MAX_CODE_SEARCHES = 3  # of the patient's problems, when no condition was given
PAGE_SIZE = "10"


class SearchProposal(BaseModel):
    """The model's next search: critical first (search or stop), then the terms."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["search", "stop"]
    condition: str | None = Field(max_length=60)
    intervention: str | None = Field(max_length=60)
    eligibility_keywords: str | None = Field(max_length=120)


PROPOSE_SYSTEM = (
    "You help prescreen a patient for clinical trials in a local trial registry. Given the "
    "patient's facts and the searches already made, propose one more search that could find "
    "trials this patient may qualify for: a condition the patient has (as a trial would name "
    "it), optionally an intervention and words to look for in eligibility criteria. Answer "
    "action \"stop\" when no other search is worth making.\nAnswer with JSON only."
)


@dataclass
class SearchCall:
    args: dict
    source: Literal["code", "model"]
    ok: bool
    found: int = 0
    new: int = 0
    error_type: str | None = None
    message: str | None = None

    def to_json(self) -> dict:
        out = {"args": {k: v for k, v in self.args.items() if v is not None}, "source": self.source,
               "ok": self.ok, "found": self.found, "new": self.new}
        if self.error_type:
            out["error_type"] = self.error_type
            out["message"] = self.message
        return out


@dataclass
class Candidate:
    nct_id: str
    summary: dict
    found_by: list[int] = field(default_factory=list)  # indices of the searches that found it
    best_rank: int = 0


@dataclass
class SearchOutcome:
    candidates: list[Candidate]
    calls: list[SearchCall]
    stop_reason: str
    proposals: int  # model calls made for proposals

    def to_json(self) -> dict:
        return {"calls": [c.to_json() for c in self.calls], "stop_reason": self.stop_reason,
                "model_proposals": self.proposals, "candidates": [c.nct_id for c in self.candidates]}


def search_args(facts: PatientFacts, condition: str, intervention: str | None = None,
                keywords: str | None = None, status: str = "recruiting") -> dict:
    """A find_clinical_trials call with code's filters: status, the patient's sex and age."""
    sex = facts.sex if facts.sex in ("female", "male") else None
    age = str(facts.age) if isinstance(facts.age, int) and 0 <= facts.age <= 130 else None
    return {
        "condition": condition[:60], "intervention": intervention[:60] if intervention else None,
        "eligibility_keywords": keywords[:120] if keywords else None, "status": status, "phase": None,
        "sex": sex, "patient_age": age, "study_type": None, "page_size": PAGE_SIZE,
    }


def _key(args: dict) -> tuple:
    return tuple(sorted((k, " ".join(str(v).lower().split()) if isinstance(v, str) else v) for k, v in args.items()))


def _propose(model: LanguageModel, facts: PatientFacts, calls: list[SearchCall],
             cancel: threading.Event | None) -> SearchProposal:
    tried = "\n".join(
        f"- condition '{c.args['condition']}'"
        + (f", intervention '{c.args['intervention']}'" if c.args.get("intervention") else "")
        + (f", eligibility words '{c.args['eligibility_keywords']}'" if c.args.get("eligibility_keywords") else "")
        + f": {c.found} trials ({c.new} new)" for c in calls
    ) or "- none yet"
    user = f"Patient facts:\n{facts.text()}\n\nSearches made:\n{tried}\n\nPropose the next search.\nAnswer with JSON only."
    kwargs = {"cancel": cancel} if cancel is not None else {}
    return model.generate_constrained(PROPOSE_NODE, [Message("system", PROPOSE_SYSTEM), Message("user", user)],
                                      SearchProposal, temperature=PROPOSE_TEMPERATURE,
                                      max_tokens=PROPOSE_MAX_TOKENS, **kwargs)


def find_candidates(
    model: LanguageModel, tools: ToolBox, facts: PatientFacts, *, condition: str | None = None,
    max_trials: int = 5, max_searches: int = MAX_SEARCHES, status: str = "recruiting", deadline: float = 10.0,
    cancel: threading.Event | None = None,
) -> SearchOutcome:
    """Search the local cache within the budget (see the module docstring)."""
    queue = [condition] if condition else list(dict.fromkeys(p for p in facts.problems if p))[:MAX_CODE_SEARCHES]
    calls: list[SearchCall] = []
    found: dict[str, Candidate] = {}
    tried: set[tuple] = set()
    proposals = empty_model_searches = 0
    stop = ""
    while not stop:
        if len(calls) >= max_searches:
            stop = f"search budget spent ({max_searches} searches)"
            break
        if len(found) >= max_trials:
            stop = f"enough candidates ({len(found)} for {max_trials} trials)"
            break
        if queue:
            args, source = search_args(facts, queue.pop(0), status=status), "code"
        else:
            proposal = _propose(model, facts, calls, cancel)
            proposals += 1
            if proposal.action == "stop" or not (proposal.condition or "").strip():
                stop = "the model proposed no further search"
                break
            args = search_args(facts, proposal.condition.strip(), (proposal.intervention or "").strip() or None,
                               (proposal.eligibility_keywords or "").strip() or None, status)
            source = "model"
        key = _key(args)
        if key in tried:
            stop = f"a search repeated an earlier one (condition '{args['condition']}')"
            break
        tried.add(key)
        outcome = tools.call("find_clinical_trials", args, deadline)
        call = SearchCall(args, source, outcome.ok, error_type=outcome.error_type, message=outcome.message)
        calls.append(call)
        if outcome.ok:
            trials = (outcome.result or {}).get("trials") or []
            call.found = len(trials)
            for rank, trial in enumerate(trials):
                nct = trial.get("nct_id")
                if not nct:
                    continue
                if nct not in found:
                    found[nct] = Candidate(nct, trial, best_rank=rank)
                    call.new += 1
                found[nct].found_by.append(len(calls) - 1)
                found[nct].best_rank = min(found[nct].best_rank, rank)
        if source == "model":
            empty_model_searches = 0 if call.new else empty_model_searches + 1
            if empty_model_searches >= 2:
                stop = "two proposed searches in a row found nothing new"
    order = sorted(found.values(), key=lambda c: (-len(c.found_by), c.best_rank, min(c.found_by)))
    return SearchOutcome(order[:max_trials], calls, stop, proposals)


__all__ = ["Candidate", "MAX_SEARCHES", "PROPOSE_NODE", "SearchCall", "SearchOutcome", "SearchProposal",
           "find_candidates", "search_args"]
