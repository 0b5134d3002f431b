"""One eligibility criterion judged against the patient with one constrained model call.

``evaluate_criterion(model, patient_text_or_facts, criterion_text, criterion_type)`` is the
one entry point, shared by the prescreen and the TrialGPT benchmark: the patient is either the
prescreen's ``PatientFacts`` (cited by fact id: "L3") or a patient note (cited by sentence
number: TrialGPT's notes are numbered "0. ...", "1. ...").

Invariants:
- One call per criterion, never several criteria in one prompt, so a long eligibility text
  never overflows the context; a criterion longer than ``MAX_CRITERION_CHARS`` is shortened
  and the judgement says so.
- The system text (``SYSTEM``) is the same for every call, the static prefix the runtime keeps
  in a KV snapshot; the user message starts with the patient, then the criterion, so the
  calls for one patient also share the patient's tokens.
- Each criterion type asks its own question, with its own critical-first schema: an inclusion
  "is it met?" (``meets_criterion``), an exclusion "is the excluding condition present?"
  (``excluding_condition_present``); code maps the answer to the patient's standing
  (``aggregate.standing_for``). Fields are enums and bounded strings (the fast decoder).
- Citations are checked by code: an id the patient's facts do not hold is dropped and listed
  in ``rejected_citations``. With ``require_citation`` (the prescreen's default) a yes/no answer
  that cites no existing fact counts as unknown, and the note says why.
- For the prescreen's facts, a cited fact that does not concern the criterion, or cannot point
  the way the answer does (``relevance.supports``: an allergy cited for a pregnancy criterion,
  "no allergies recorded" cited for an allergy that is present) is dropped and listed in
  ``irrelevant_citations``; a yes/no answer left with no supporting fact counts as unknown. So
  a model judgement that fails a criterion always rests on a cited fact about it.
- The prescreen asks the model only about criteria code does not decide (``decide``); the
  model's system text is the same either way.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from appliance.errors import GenerationError
from appliance.llm.base import LanguageModel
from appliance.llm.prompt import Message
from appliance.prescreen.aggregate import (
    CriterionJudgement,
    CriterionType,
    standing_for,
)
from appliance.prescreen.facts import PatientFacts
from appliance.prescreen.relevance import supports

NODES = {"inclusion": "CRITERION_INCLUSION", "exclusion": "CRITERION_EXCLUSION"}
TEMPERATURE = 0.0
MAX_TOKENS = 128
MAX_CRITERION_CHARS = 1000
MAX_NOTE_CHARS = 4000  # a patient note beyond this is shortened (and the judgement says so)

Answer = Literal["yes", "no", "unknown"]
# A cited id is short ("L3", "12"): bounded so a weak model cannot run on inside one.
FactId = Annotated[str, Field(min_length=1, max_length=8)]


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InclusionAnswer(_Schema):
    """Is the inclusion criterion met? Decision first, then the evidence, then why."""

    meets_criterion: Answer
    cited_facts: list[FactId] = Field(max_length=6, description="Ids of the patient facts used")
    reason: str = Field(min_length=1, max_length=160)


class ExclusionAnswer(_Schema):
    """Is the condition the exclusion criterion describes present? Decision first."""

    excluding_condition_present: Answer
    cited_facts: list[FactId] = Field(max_length=6, description="Ids of the patient facts used")
    reason: str = Field(min_length=1, max_length=160)


SYSTEM = (
    "You are a clinical research coordinator prescreening a patient for a clinical trial. You are "
    "given the patient's facts, each with an id, and one eligibility criterion of the trial.\n"
    "Judge only from the facts given. Do not assume anything the facts do not say: when they do "
    "not settle the question, answer \"unknown\". A fact recorded as absent (\"no active allergies "
    "recorded\") counts as evidence only for what the record would hold.\n"
    "For an inclusion criterion answer meets_criterion: \"yes\" if the facts show the patient meets "
    "it, \"no\" if the facts show the patient does not.\n"
    "For an exclusion criterion answer excluding_condition_present: \"yes\" if the facts show the "
    "patient has the condition or circumstance it describes (the patient would be excluded), "
    "\"no\" if the facts show the patient does not.\n"
    "cited_facts lists the ids of the facts your answer rests on (for example [\"D1\", \"L2\"]); "
    "reason says why in one short sentence.\n"
    "Answer with JSON only."
)
QUESTIONS = {
    "inclusion": "Does the patient meet this inclusion criterion?",
    "exclusion": "Does the patient have the condition this exclusion criterion describes?",
}


@dataclass(frozen=True)
class Evidence:
    """The patient as the evaluator reads it: a text block and the ids it may cite."""

    text: str
    ids: frozenset[str]
    label: str  # how the prompt introduces it
    note: str | None = None  # shortened, and how
    facts: PatientFacts | None = None  # the prescreen's facts, whose citations code checks for relevance


_NUMBERED = re.compile(r"(?m)^\s*(\d{1,3})\.\s+\S")


def note_evidence(note: str) -> Evidence:
    """A patient note: numbered sentences ("0. A 61-year-old man ...") are cited by number;
    an unnumbered note is split into sentences numbered here."""
    text = note.strip()
    if len(_NUMBERED.findall(text)) < 2:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s]
        text = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences))
    clipped = None
    if len(text) > MAX_NOTE_CHARS:
        text = text[:MAX_NOTE_CHARS].rsplit("\n", 1)[0]
        clipped = f"the patient note was shortened to {MAX_NOTE_CHARS} characters"
    ids = frozenset(m.group(1) for m in _NUMBERED.finditer(text))
    return Evidence(text, ids, "Patient note (cite sentence numbers)", clipped)


def evidence_of(patient: PatientFacts | Evidence | str) -> Evidence:
    if isinstance(patient, Evidence):
        return patient
    if isinstance(patient, PatientFacts):
        return Evidence(patient.text(), patient.ids(), "Patient facts (cite their ids)", facts=patient)
    return note_evidence(str(patient))


def messages_for(evidence: Evidence, criterion_text: str, criterion_type: CriterionType) -> list[Message]:
    """The static system text, then the patient, the criterion and its type's question."""
    user = (
        f"{shared_text(evidence)}"
        f"Trial {criterion_type} criterion: {criterion_text}\n\n"
        f"Question: {QUESTIONS[criterion_type]}\nAnswer with JSON only."
    )
    return [Message("system", SYSTEM), Message("user", user)]


def shared_text(evidence: Evidence) -> str:
    """How every user message about this patient starts: the prefix its criteria share."""
    return f"{evidence.label}:\n{evidence.text}\n\n"


def _clip_criterion(text: str) -> tuple[str, str | None]:
    text = " ".join(text.split())
    if len(text) <= MAX_CRITERION_CHARS:
        return text, None
    return (text[:MAX_CRITERION_CHARS].rsplit(" ", 1)[0] + " ...",
            f"the criterion was shortened to {MAX_CRITERION_CHARS} characters for the model")


@dataclass(frozen=True)
class CriterionCall:
    """One criterion's model call, prepared: the prompt and schema, and what code checks after."""

    evidence: Evidence
    criterion: str  # as the model reads it (clipped when long)
    criterion_type: CriterionType
    clipped: str | None

    @property
    def node(self) -> str:
        return NODES[self.criterion_type]

    @property
    def schema(self) -> type[_Schema]:
        return InclusionAnswer if self.criterion_type == "inclusion" else ExclusionAnswer

    @property
    def messages(self) -> list[Message]:
        return messages_for(self.evidence, self.criterion, self.criterion_type)


def prepare(patient_text_or_facts: PatientFacts | Evidence | str, criterion_text: str,
            criterion_type: CriterionType) -> CriterionCall:
    if criterion_type not in NODES:
        raise ValueError(f"criterion_type must be inclusion or exclusion, not {criterion_type!r}")
    text, clipped = _clip_criterion(criterion_text)
    return CriterionCall(evidence_of(patient_text_or_facts), text, criterion_type, clipped)


def judge(call: CriterionCall, out: InclusionAnswer | ExclusionAnswer, *, require_citation: bool,
          seconds: float) -> CriterionJudgement:
    """The model's answer checked by code: citations against the evidence's ids, then the
    standing (``aggregate.standing_for``)."""
    answer = out.meets_criterion if call.criterion_type == "inclusion" else out.excluding_condition_present
    cited: list[str] = []
    rejected: list[str] = []
    for raw in out.cited_facts:
        key = raw.strip().upper()
        if key not in call.evidence.ids:
            rejected.append(raw)
        elif key not in cited:
            cited.append(key)
    model_verdict = standing_for(call.criterion_type, answer)[0]
    notes = [n for n in (call.clipped, call.evidence.note) if n]
    irrelevant: list[str] = []
    if call.evidence.facts is not None and cited:
        by_id = {f.id: f for f in call.evidence.facts.facts}
        irrelevant = [c for c in cited if not supports(by_id[c], call.criterion, call.criterion_type, answer)] \
            if answer != "unknown" else []
        cited = [c for c in cited if c not in irrelevant]
        if answer != "unknown" and irrelevant and not cited:
            shown = "; ".join(f"{c} ({_short(by_id[c].text)})" for c in irrelevant)
            notes.append(f"the model answered '{answer}' citing {shown}, which does not show that for this "
                         "criterion: counted as unknown")
            answer = "unknown"
    if require_citation and answer != "unknown" and not cited:
        notes.append(f"the model answered '{answer}' without citing a fact the record holds: counted as unknown")
        answer = "unknown"
    verdict, presence = standing_for(call.criterion_type, answer)
    return CriterionJudgement(
        criterion=call.criterion, criterion_type=call.criterion_type, verdict=verdict, exclusion_condition=presence,
        cited=tuple(cited), reason=out.reason.strip(), judged_by="model", rejected_citations=tuple(rejected),
        note="; ".join(notes) or None, seconds=round(seconds, 3), model_verdict=model_verdict,
        irrelevant_citations=tuple(irrelevant),
    )


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def evaluate_criterion(
    model: LanguageModel,
    patient_text_or_facts: PatientFacts | Evidence | str,
    criterion_text: str,
    criterion_type: CriterionType,
    *,
    require_citation: bool = True,
    cancel: threading.Event | None = None,
) -> CriterionJudgement:
    """Judge one criterion (see the module docstring). Raises the model's ``GenerationError``s
    (``GenerationCancelled`` when ``cancel`` is set)."""
    return _judge_one(model, prepare(patient_text_or_facts, criterion_text, criterion_type),
                      require_citation=require_citation, cancel=cancel)


def _judge_one(model: LanguageModel, call: CriterionCall, *, require_citation: bool,
               cancel: threading.Event | None = None) -> CriterionJudgement:
    """One prepared criterion, one model call, checked by ``judge``."""
    started = time.perf_counter()
    kwargs = {"cancel": cancel} if cancel is not None else {}
    out = model.generate_constrained(call.node, call.messages, call.schema,
                                     temperature=TEMPERATURE, max_tokens=MAX_TOKENS, **kwargs)
    return judge(call, out, require_citation=require_citation, seconds=time.perf_counter() - started)


def evaluate_criteria(model: LanguageModel, calls: Sequence[CriterionCall], *, require_citation: bool = True,
                      parallel: int = 1) -> list[CriterionJudgement | GenerationError]:
    """Judge many prepared criteria, in order: each a judgement, or the ``GenerationError`` its
    call raised. With ``parallel`` > 1 and a model that decodes batches
    (``generate_constrained_batch``), up to ``parallel`` calls decode side by side and the calls
    for one patient share the patient's prefix cells; otherwise one call after another, where the
    runtime's prefix cache reuses the patient's tokens from the call before."""
    batch = getattr(model, "generate_constrained_batch", None)
    if parallel <= 1 or batch is None or len(calls) < 2:
        out: list[CriterionJudgement | GenerationError] = []
        for call in calls:
            try:
                out.append(_judge_one(model, call, require_citation=require_citation))
            except GenerationError as exc:
                out.append(exc)
        return out
    from appliance.llm.batch import BatchJob

    started = time.perf_counter()
    results = batch([BatchJob(c.messages, c.schema, TEMPERATURE, MAX_TOKENS, shared_prefix=shared_text(c.evidence))
                     for c in calls], parallel=parallel)
    each = (time.perf_counter() - started) / len(calls)  # side by side: the batch's time shared out
    return [judge(c, r.value, require_citation=require_citation, seconds=each) if r.error is None
            else (r.error if isinstance(r.error, GenerationError) else GenerationError(str(r.error)))
            for c, r in zip(calls, results)]


__all__ = ["CriterionCall", "ExclusionAnswer", "Evidence", "InclusionAnswer", "NODES", "SYSTEM", "evaluate_criteria",
           "evaluate_criterion", "evidence_of", "judge", "messages_for", "note_evidence", "prepare", "shared_text"]
