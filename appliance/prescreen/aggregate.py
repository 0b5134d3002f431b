"""From criterion judgements to a trial verdict, by rule; and the ranking of trials.

Two meanings are kept apart in names, because they point in opposite directions for an
exclusion criterion:
- ``verdict`` is the patient's standing on a criterion: ``passes`` (the criterion does not
  stand in the way), ``fails`` (it does) or ``unknown``. The patient *passes* an exclusion
  criterion when the excluding condition is absent.
- ``exclusion_condition`` (exclusion criteria only) is whether the condition an exclusion
  criterion describes is ``present``, ``absent`` or ``unknown`` in the patient. Present means the
  patient fails the criterion and the trial's verdict is EXCLUDED.
(Seed 004 calls a present exclusion condition "MET"; that word is not used here.)

Invariants (pure functions; tested as a truth table):
- A criterion counts as failed only on a code decision (``judged_by: code``) or on a model
  judgement that cites a fact (``judge`` keeps only cited facts that concern the criterion);
  a failed judgement with neither counts as unknown. So EXCLUDED and NOT_ELIGIBLE always rest on
  code or on a cited, relevant fact.
- Rules, first match wins: an inclusion criterion failed -> NOT_ELIGIBLE; an exclusion
  condition present -> EXCLUDED; every inclusion passed and every exclusion passed (with at
  least one criterion judged) -> ELIGIBLE; otherwise UNCERTAIN, with every unknown criterion as
  a question to resolve. A trial with no criteria to judge is UNCERTAIN, never ELIGIBLE.
- Ranking: ELIGIBLE, then UNCERTAIN, EXCLUDED, NOT_ELIGIBLE; within each, fewer unknown
  criteria first, then the search's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

CriterionType = Literal["inclusion", "exclusion"]
Standing = Literal["passes", "fails", "unknown"]
Presence = Literal["present", "absent", "unknown"]
Verdict = Literal["ELIGIBLE", "NOT_ELIGIBLE", "EXCLUDED", "UNCERTAIN"]
VERDICT_ORDER: dict[str, int] = {"ELIGIBLE": 0, "UNCERTAIN": 1, "EXCLUDED": 2, "NOT_ELIGIBLE": 3}
MAX_QUOTE = 90


@dataclass(frozen=True)
class CriterionJudgement:
    """One criterion judged against the patient."""

    criterion: str  # the text as judged
    criterion_type: CriterionType
    verdict: Standing  # the patient's standing on this criterion
    exclusion_condition: Presence | None  # exclusions only: is the excluding condition present?
    cited: tuple[str, ...] = ()  # ids of the patient facts used, each checked to exist
    reason: str = ""
    judged_by: Literal["model", "code"] = "model"
    rejected_citations: tuple[str, ...] = ()  # ids the model gave that the facts do not hold
    note: str | None = None  # what code changed or noticed (a clipped text, a verdict without evidence)
    seconds: float = 0.0
    model_verdict: Standing | None = None  # the model's own answer, before code's checks (model judgements)
    irrelevant_citations: tuple[str, ...] = ()  # cited facts that do not concern the criterion (model judgements)

    @property
    def decisive(self) -> bool:
        """Whether a failed standing may stand: decided by code, or resting on a cited fact."""
        return self.judged_by == "code" or bool(self.cited)

    def to_json(self) -> dict:
        out = {
            "type": self.criterion_type, "criterion": self.criterion, "verdict": self.verdict,
            "exclusion_condition": self.exclusion_condition, "cited_facts": list(self.cited),
            "reason": self.reason, "judged_by": self.judged_by, "decided_by": self.judged_by,
        }
        if self.rejected_citations:
            out["rejected_citations"] = list(self.rejected_citations)
        if self.irrelevant_citations:
            out["irrelevant_citations"] = list(self.irrelevant_citations)
        if self.note:
            out["note"] = self.note
        return out


def standing_for(criterion_type: CriterionType, answer: Literal["yes", "no", "unknown"]) -> tuple[Standing, Presence | None]:
    """The patient's standing from the model's answer to the criterion's own question:
    inclusion "is it met?", exclusion "is the excluding condition present?"."""
    if criterion_type == "inclusion":
        return {"yes": "passes", "no": "fails", "unknown": "unknown"}[answer], None
    presence: Presence = {"yes": "present", "no": "absent", "unknown": "unknown"}[answer]
    return {"present": "fails", "absent": "passes", "unknown": "unknown"}[presence], presence


@dataclass(frozen=True)
class TrialVerdict:
    verdict: Verdict
    explanation: str
    failed_inclusions: tuple[int, ...]  # indices into the judgements
    exclusions_present: tuple[int, ...]
    unknown: tuple[int, ...]
    questions: tuple[str, ...]  # an UNCERTAIN trial's unknown criteria, as questions to resolve


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return f"'{text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE - 3].rstrip() + '...'}'"


def _quote_some(judgements: Sequence[CriterionJudgement], indices: tuple[int, ...], shown: int = 3) -> str:
    """The first ``shown`` criteria quoted, and how many more."""
    quoted = "; ".join(_quote(judgements[i].criterion) for i in indices[:shown])
    return quoted + (f" and {len(indices) - shown} more" if len(indices) > shown else "")


def question_for(j: CriterionJudgement) -> str:
    if j.criterion_type == "inclusion":
        return f"Does the patient meet the inclusion criterion {_quote(j.criterion)}?"
    return f"Is the exclusion condition {_quote(j.criterion)} present?"


def aggregate(judgements: Sequence[CriterionJudgement]) -> TrialVerdict:
    """The trial's verdict by the rules of the module docstring."""
    failed = tuple(i for i, j in enumerate(judgements)
                   if j.criterion_type == "inclusion" and j.verdict == "fails" and j.decisive)
    present = tuple(i for i, j in enumerate(judgements) if j.criterion_type == "exclusion" and j.decisive
                    and (j.exclusion_condition == "present" or j.verdict == "fails"))
    unknown = tuple(i for i, j in enumerate(judgements)
                    if j.verdict == "unknown" or (j.verdict == "fails" and not j.decisive))
    inclusions = sum(1 for j in judgements if j.criterion_type == "inclusion")
    exclusions = len(judgements) - inclusions
    if failed:
        return TrialVerdict("NOT_ELIGIBLE", f"Not eligible: the chart fails {len(failed)} inclusion "
                            f"criteri{'on' if len(failed) == 1 else 'a'}: {_quote_some(judgements, failed)}.",
                            failed, present, unknown, ())
    if present:
        return TrialVerdict("EXCLUDED", f"Excluded: {len(present)} exclusion condition"
                            f"{' is' if len(present) == 1 else 's are'} present: {_quote_some(judgements, present)}.",
                            failed, present, unknown, ())
    if not judgements:
        return TrialVerdict("UNCERTAIN", "Uncertain: the trial's eligibility criteria are not in the local cache.",
                            failed, present, unknown, ("Read the trial's eligibility criteria at the source.",))
    if not unknown:
        return TrialVerdict("ELIGIBLE", f"Eligible on the chart: all {inclusions} inclusion criteria met and none "
                            f"of the {exclusions} exclusion conditions present.", failed, present, unknown, ())
    return TrialVerdict("UNCERTAIN", f"Uncertain: no criterion failed, but {len(unknown)} of {len(judgements)} "
                        "could not be decided from the chart.", failed, present, unknown,
                        tuple(question_for(judgements[i]) for i in unknown))


def rank_key(verdict: TrialVerdict, search_rank: int) -> tuple[int, int, int]:
    """Sort key: eligible first, then fewer unknowns, then the search's order."""
    return VERDICT_ORDER[verdict.verdict], len(verdict.unknown), search_rank


__all__ = ["CriterionJudgement", "TrialVerdict", "aggregate", "question_for", "rank_key", "standing_for",
           "VERDICT_ORDER"]
