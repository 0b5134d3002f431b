"""Knowledge requests: the look-up a clinician's words name, and its arguments, read by code
(docs/design.md §4.3, §11). As for writes (``write_requests``) and chart questions
(``reading.chart_topics``), code decides the route here and the model is not asked.

Rules, on the turn's reading (``state.reading``, ``reading.request.reading_of``: the
instruction, its write requests, chart topics and named steps; the words are ``knowledge_words``):
- two or more drugs and interaction words ("interact", "affect", "together", "combine"); or
  drugs joined by "with" / "and" / "plus" / "on" in a question about giving or safety, or about
  the pair's risk ("can I give X with Y", "is X safe with Y", "X and Y - any issue?"); or joined
  by words that always mean the pair ("X + Y", "X w/ Y", "X QT prolongation with Y", "X in
  someone on Y", "adding X to Y", "pt on X ... ok to add Y?"): ``check_drug_interactions``;
- a drug and label-topic words (safety, warnings, side effects, contraindications, dose,
  pregnancy, the harms labels warn of, "what is / used for / tell me about"), a drug named alone,
  or a drug and a short qualifier ("pradaxa in ESRD"): ``check_drug_safety``, one call per drug
  named (at most three);
- literature words (``task_patterns.LITERATURE``, "the data on"): ``search_medical_literature``
  with the content words of the request;
- trial words (``task_patterns.TRIALS``): ``find_clinical_trials`` with the condition (after
  "trials for / on / in" when said; a drug as the intervention, a phase, a status); an NCT id
  ``get_trial_details``; a prescreen (``task_patterns.PRESCREEN``, or trial words "for this
  patient / for her") with a patient code settled on (``settled_patient.code_patient``):
  ``prescreen_for_trials``, its condition without the words that say who.

Invariants:
- Never a request to write (``write_requests``), and never a question about the chart of a
  patient code has (``chart_topics``) unless the words also name a knowledge step.
- Drugs are generic names from the recogniser (brands resolved); a word the recogniser does not
  know that is close to a name of the local drug data (``knowledge_vocabulary.typos``) is
  read as that drug and the answer says "did you mean"; a pronoun ("it", "them", "this drug")
  or an elliptical follow-up ("and in pregnancy?") takes the drugs of the most recent message
  of the clinician that named one.
- All or nothing: when a knowledge step the words name cannot be filled (no drug), no call is
  read at all and the model routes the turn as before.
- The clinician's message is never parsed here: its instruction, writes, chart topics and steps
  are the reading's fields (a state built without a reading, in tests, has it read by
  ``reading_of``). Only earlier messages are read, for the drugs a pronoun stands for.
- ``read_request`` is pure over its inputs (the state, the recogniser, the local vocabulary);
  the one I/O is ``local_drug_data``, which asks a tool box once for the knowledge server's
  names and drug count and keeps them for that tool box's life.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from appliance.agent import knowledge_words as kw
from appliance.agent.knowledge_vocabulary import (
    drug_vocabulary_keys,
    local_drug_data,
    typos,
)
from appliance.agent.reading.dictation import read_instruction
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.task_patterns import (
    CHART,
    INTERACTION,
    LITERATURE,
    PRESCREEN,
    SAFETY,
    TRIAL_DETAILS,
    TRIALS,
    Step,
)
from appliance.agent.settled_patient import code_patient
from appliance.agent.state import AgentState
from appliance.medication.names import DrugRecogniser, key_of

SAFETY_TOOL, INTERACTION_TOOL = "check_drug_safety", "check_drug_interactions"
LITERATURE_TOOL, TRIALS_TOOL = "search_medical_literature", "find_clinical_trials"
DETAILS_TOOL, PRESCREEN_TOOL = "get_trial_details", "prescreen_for_trials"
KNOWLEDGE_TOOLS = frozenset({SAFETY_TOOL, INTERACTION_TOOL, LITERATURE_TOOL, TRIALS_TOOL, DETAILS_TOOL, PRESCREEN_TOOL})
STEP_OF_TOOL: dict[str, Step] = {s.tool: s for s in (INTERACTION, SAFETY, LITERATURE, TRIALS, TRIAL_DETAILS, PRESCREEN)}
MAX_SAFETY_CALLS = 3


@dataclass(frozen=True)
class KnowledgeCall:
    tool: str
    args: dict
    why: str  # for the trace: what in the words named this call
    notes: tuple[str, ...] = field(default=())  # for the answer: "did you mean", the drug a pronoun stood for

    def signature(self) -> tuple[str, str]:
        return self.tool, repr(sorted(self.args.items()))

    def to_dict(self) -> dict:
        return {"tool": self.tool, "args": self.args, "why": self.why, "notes": list(self.notes)}


def _without_form(generic: str, drugs: DrugRecogniser, known: set[str]) -> str:
    """"fentanyl patch" as "fentanyl" when only the name without its dosage-form words is in the
    local drug data."""
    kept = [w for w in generic.split() if w.lower() not in kw.FORM_WORDS]
    if not known or key_of(generic) in known or not kept or len(kept) == len(generic.split()):
        return generic
    bare = " ".join(kept)
    return (drugs.generic(bare) or bare) if key_of(bare) in known else generic


def _named_drugs(text: str, drugs: DrugRecogniser, vocabulary: list[str]) -> tuple[list[tuple[int, int, str]], list[str]]:
    """([(start, end, generic)], notes): the drugs in ``text`` in order, typos read as the
    closest known name."""
    known = set(vocabulary)
    # "amoxicillin in penicillin allergy": the drug before "allergy" is the allergy, not the subject.
    spans = [(m.start, m.end, _without_form(m.generic, drugs, known)) for m in drugs.mentions(text)
             if not kw.ALLERGY_AFTER.match(text, m.end)]
    notes = []
    for written, known_name, generic in typos(text, drugs, vocabulary):
        start = text.find(written)
        spans.append((start, start + len(written), generic))
        notes.append(f"'{written}' was read as {known_name} (did you mean {known_name}?)")
    spans.sort()
    return spans, notes


def _history_drugs(history, drugs: DrugRecogniser) -> tuple[str, ...]:
    """The drugs of the clinician's most recent message that named one."""
    for role, text in reversed(tuple(history)):
        if role == "user":
            found = drugs.find(read_instruction(text))  # an earlier message, read for its drugs only
            if found:
                return found
    return ()


def _strongly_joined(text: str, spans) -> bool:
    """Two of the drugs stand joined by words that always mean the pair ("X + Y", "X w/ Y",
    "X QT prolongation with Y", "adding X to Y")."""
    return any(kw.STRONG_JOIN.match(between) or kw.JOIN_AFTER_WORDS.match(between)
               or (kw.ADDED_TO.match(between) and kw.NEW_DRUG.search(text[:a[0]]))
               for a, b in zip(spans, spans[1:]) for between in (text[a[1]:b[0]],))


def _joined(text: str, spans) -> bool:
    """Two of the drugs stand joined ("X with Y", "X and Y", "Y in a patient on X"), or one is
    the patient's and the other is to be added ("pt on X, K 5.6, ok to add Y?")."""
    if _strongly_joined(text, spans) or any(kw.JOIN.match(text[a[1]:b[0]]) for a, b in zip(spans, spans[1:])):
        return True
    on = [s for s in spans if kw.ON_DRUG.search(text[:s[0]])]
    added = [s for s in spans if kw.NEW_DRUG.search(text[:s[0]])]
    return any(a[2] != b[2] for a in on for b in added)


def _unique(items) -> list:
    return list(dict.fromkeys(items))


def _content_words(text: str, limit: int, filler: frozenset = kw.FILLER) -> str:
    kept = [w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9'\u2019\-+]*", text)
            if re.sub(r"['\u2019]", "", w.lower()) not in filler]
    out = ""
    for w in kept:
        if len(out) + len(w) + 1 > limit:
            break
        out = f"{out} {w}".strip()
    return out


def _clause_of(step: Step, text: str) -> str:
    """The clause of ``text`` that names ``step`` (the whole text when it is one clause):
    "find patient X, review her chart, and find trials for asthma" searches for asthma."""
    for clause in kw.CLAUSES.split(text):
        if clause and step.position(clause) is not None:
            return clause
    return text


def _trial_args(text: str, generics: list[str], drugs: DrugRecogniser, filler: frozenset = kw.FILLER) -> dict | None:
    """find_clinical_trials' arguments from the words: the condition (what remains of the
    request, after "trials for / on / in" when it says so, without drugs and filler), a drug as
    the intervention, a phase, a status."""
    phase = kw.PHASE.search(text)
    phase_value = f"phase{kw.ROMAN.get(phase.group(1).lower(), phase.group(1))}" if phase else None
    lowered = text.lower()
    status = ("completed" if re.search(r"\bcompleted\b", lowered) else "any" if re.search(r"\b(?:any status|all trials|closed)\b", lowered)
              else "active" if re.search(r"\b(?:active|ongoing|on-going)\b", lowered) else None)
    without_drugs = text
    for m in reversed(drugs.mentions(text)):
        without_drugs = without_drugs[:m.start] + " " + without_drugs[m.end:]
    words = kw.PHASE.sub(" ", without_drugs)
    topic = kw.TRIAL_TOPIC.search(words)
    condition = _content_words(topic.group(1), 60, filler) if topic else ""
    condition = condition or _content_words(words, 60, filler)
    intervention = generics[0] if generics else None
    if not condition:
        if not intervention:
            return None
        condition, intervention = intervention, None
    return {"condition": condition, "intervention": intervention, "eligibility_keywords": None, "status": status,
            "phase": phase_value, "sex": None, "patient_age": None, "study_type": None, "page_size": None}


def _with_earlier(state: AgentState, text: str, drugs: DrugRecogniser, generics: list[str], need: int,
                  notes: list[str]) -> list[str]:
    """The drugs with those of the clinician's last message that named one, when a pronoun or a
    follow-up stands for them ("is it safe in pregnancy?", "and with Flagyl?")."""
    earlier = [g for g in _history_drugs(state.conversation_history, drugs) if g not in generics]
    taken = earlier if kw.PLURAL.search(text) else earlier[:need - len(generics)]
    if taken:
        notes.append(f"{' and '.join(taken)}, named earlier in this conversation")
    return _unique([*taken, *generics])


def _drug_calls(state: AgentState, text: str, tools: list[str], drugs: DrugRecogniser,
                vocabulary: list[str], patient: str | None) -> list[KnowledgeCall] | None:
    """The label or interaction calls the words name; None when a drug step cannot be filled."""
    spans, notes = _named_drugs(text, drugs, vocabulary)
    generics = _unique(g for _s, _e, g in spans)
    interaction_words = bool(INTERACTION_TOOL in tools or kw.INTERACTION_SINGLE.search(text))
    # "and with Flagyl?"; "what about lisinopril?" after a question about a pair: the pair's first drug with it
    adds_to_earlier = len(generics) == 1 and bool(kw.WITH_EARLIER.match(text) or kw.FOLLOW_UP.match(text) and not (
        kw.LABEL_TOPIC.search(text) or SAFETY_TOOL in tools) and len(_history_drugs(state.conversation_history, drugs)) >= 2)
    together = bool(kw.COMBINE_QUESTION.search(text) and kw.TOGETHER.search(text)) or adds_to_earlier
    # A literature or trial search about a drug is not a question about its label.
    searches = bool({LITERATURE_TOOL, TRIALS_TOOL, PRESCREEN_TOOL, DETAILS_TOOL} & set(tools))
    drug_info = bool(kw.LABEL_TOPIC.search(text) or kw.CONCERN.search(text))
    drug_words = bool({SAFETY_TOOL, INTERACTION_TOOL} & set(tools) or interaction_words or together
                      or (drug_info and not searches))
    need = 2 if interaction_words or together else 1
    from_history = False
    if drug_words and len(generics) < need and (kw.PRONOUN.search(text) or kw.FOLLOW_UP.match(text) or adds_to_earlier):
        before = len(generics)
        generics = _with_earlier(state, text, drugs, generics, need, notes)
        from_history = len(generics) > before
    if INTERACTION_TOOL in tools and len(generics) < 2:
        return None  # "check his meds against X": the other drugs are the chart's, the model's to fill
    label_topic = bool(kw.LABEL_TOPIC.search(text) or SAFETY_TOOL in tools and not kw.CONCERN.search(text))
    # "papers on apixaban vs warfarin": a search compares the drugs, it does not give them together
    joined = not searches and (_joined(text, spans) or from_history)
    if len(generics) >= 2 and (interaction_words or joined and (_strongly_joined(text, spans)
                                                                or kw.COMBINE_QUESTION.search(text) or not label_topic)):
        return [KnowledgeCall(INTERACTION_TOOL, {"drug_names": generics[:6]},
                              "two or more drugs named with words about giving them together", tuple(notes))]
    alone = not searches and not kw.QUESTION_START.match(text) and bool(spans) and (
        len(_content_words(text, 200).split()) <= len(generics)  # "dofetilide"
        or not text[:spans[0][0]].strip() and kw.DRUG_IN.match(text[spans[0][1]:]))  # "pradaxa in ESRD"
    # "how long has she been on metformin?": about the open patient, the chart's (or the model's) to answer
    of_patient = bool(patient) and SAFETY_TOOL not in tools and bool(kw.ABOUT_PATIENT.search(text))
    if generics and (drug_words or alone) and not of_patient:
        return [KnowledgeCall(SAFETY_TOOL, {"drug_name": g}, "a drug named with words about its label", tuple(notes))
                for g in generics[:MAX_SAFETY_CALLS]]
    return None if {SAFETY_TOOL, INTERACTION_TOOL} & set(tools) else []


def read_request(state: AgentState, drugs: DrugRecogniser, vocabulary: list[str] = ()) -> tuple[KnowledgeCall, ...]:
    """The knowledge look-ups the clinician's words name, with code's arguments, in order;
    () when the words name none or one cannot be filled (see the module docstring)."""
    reading = reading_of(state, drugs)  # the turn's reading: the words are not parsed again here
    if reading.writes:
        return ()
    text = reading.instruction
    steps = [s for s in reading.steps if s.tool in STEP_OF_TOOL]
    patient = code_patient(state)
    tools = [s.tool for s in steps]
    if LITERATURE_TOOL not in tools and kw.LITERATURE_MORE.search(text):  # "what's the data on X"
        tools.append(LITERATURE_TOOL)
    if LITERATURE_TOOL in tools and TRIALS_TOOL not in tools and kw.OPEN_STUDIES.search(text):
        tools = [TRIALS_TOOL if t == LITERATURE_TOOL else t for t in tools]
    if TRIALS_TOOL in tools and kw.TRIAL_EVIDENCE.search(text):  # "do trials show ...": what trials found
        tools = [t for t in tools if t != TRIALS_TOOL] + ([] if LITERATURE_TOOL in tools else [LITERATURE_TOOL])
    if reading.chart_topics and patient and not steps:
        return ()  # a question about this patient's chart: the chart answers it
    calls = _drug_calls(state, text, tools, drugs, list(vocabulary), patient)
    if calls is None:
        return ()  # a drug step with no drug code can read: the model routes the turn
    nct = kw.NCT_ID.search(text)
    if nct:
        calls.append(KnowledgeCall(DETAILS_TOOL, {"nct_id": nct.group(0).upper()}, "an NCT id"))
    # trial words about the patient ("for her"), or with nothing but who they are for ("find her a trial")
    prescreen = PRESCREEN_TOOL in tools or (TRIALS_TOOL in tools and not nct and (kw.FOR_PATIENT.search(text) or _trial_args(
        _clause_of(TRIALS, text), [], drugs, kw.PRESCREEN_FILLER) is None))
    if prescreen and patient:
        trial = _trial_args(text, [], drugs, kw.PRESCREEN_FILLER)
        calls.append(KnowledgeCall(PRESCREEN_TOOL, {"patient_id": patient, "condition": trial and trial["condition"]},
                                   "trial words about this patient"))
    elif prescreen:
        return ()  # which patient is the model's (or the clinician's) to say
    elif TRIALS_TOOL in tools and not nct:
        clause = _clause_of(TRIALS, text)
        trial = _trial_args(clause, list(drugs.find(clause)), drugs)
        if trial is None:
            return ()
        calls.append(KnowledgeCall(TRIALS_TOOL, trial, "trial words"))
    if LITERATURE_TOOL in tools:
        query_words = _content_words(_clause_of(LITERATURE, text), 120) or _content_words(text, 120)
        if not query_words:
            return ()
        calls.append(KnowledgeCall(LITERATURE_TOOL, {"query": query_words}, "literature words"))
    order = {t: i for i, t in enumerate(tools)}
    return tuple(sorted(calls, key=lambda c: order.get(c.tool, -1)))


# -- what the loop asks of the calls ---------------------------------------------------------
def call_done(state: AgentState, call: KnowledgeCall) -> bool:
    """The call answered; or it was tried and its tool was skipped by the error handler; or it
    failed and a retry of the same tool with other arguments (the model's) answered."""
    sig = call.signature()
    tried = [i for i, r in enumerate(state.tool_results) if (r.tool_name, repr(sorted(r.args.items()))) == sig]
    if not tried:
        return False
    if any(state.tool_results[i].error_type is None for i in tried) or call.tool in state.skipped_tools:
        return True
    return any(r.tool_name == call.tool and r.error_type is None for r in state.tool_results[tried[0]:])


def calls_not_done(state: AgentState) -> tuple[KnowledgeCall, ...]:
    return tuple(c for c in state.knowledge_calls if not call_done(state, c))


def next_call(state: AgentState, pending_tools: tuple[str, ...]) -> KnowledgeCall | None:
    """Code's next knowledge call: the first not done, unless another step the words name
    comes first (``pending_tools``: the router's steps not done, in order)."""
    todo = calls_not_done(state)
    if not todo:
        return None
    if pending_tools and pending_tools[0] not in KNOWLEDGE_TOOLS:
        return None
    return todo[0]


def routed_by_code(state: AgentState) -> bool:
    """Every step the words name is one code makes: the knowledge calls, and the chart of the
    patient code settled on. Then no model is asked for the intent."""
    if not state.knowledge_calls:
        return False
    others = {s.tool for s in reading_of(state).steps} - KNOWLEDGE_TOOLS
    if chart_only_implied(state):
        others.discard("get_patient_chart")
    return others <= ({"get_patient_chart"} if code_patient(state) else set())


def chart_only_implied(state: AgentState) -> bool:
    """The chart step comes only from chart words read beside a look-up ("amoxicillin in
    penicillin allergy"), or from lab words said of a drug and of no patient ("what labs to
    monitor with methotrexate"), with no patient known: no chart is asked for."""
    if not state.knowledge_calls or code_patient(state):
        return False
    text = reading_of(state).instruction
    return CHART.position(text) is None or (not kw.PATIENT_REF.search(text)
                                            and CHART.position(kw.LAB_WORDS.sub(" ", text)) is None)


def summary(calls: tuple[KnowledgeCall, ...]) -> str:
    """Code's one-sentence task summary for the later prompts."""
    parts = []
    for c in calls:
        if c.tool == SAFETY_TOOL:
            parts.append(f"look up the label warnings for {c.args['drug_name']}")
        elif c.tool == INTERACTION_TOOL:
            parts.append("check " + ", ".join(c.args["drug_names"]) + " for interactions")
        elif c.tool == LITERATURE_TOOL:
            parts.append(f"search the literature for {c.args['query']}")
        elif c.tool == TRIALS_TOOL:
            parts.append(f"find clinical trials for {c.args['condition']}")
        elif c.tool == DETAILS_TOOL:
            parts.append(f"get the details of trial {c.args['nct_id']}")
        else:
            parts.append("prescreen the open patient for clinical trials")
    return ("The clinician asks to " + "; ".join(_unique(parts)) + ".")[:240]


__all__ = ["KNOWLEDGE_TOOLS", "KnowledgeCall", "call_done", "calls_not_done", "drug_vocabulary_keys",
           "local_drug_data", "next_call", "read_request", "routed_by_code", "summary"]
