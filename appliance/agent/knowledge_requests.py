"""Knowledge requests: the look-up a clinician's words name, and its arguments, read by code
(docs/design.md §4.3, §11). As for writes (``write_requests``) and chart questions
(``chart_answers.chart_topics``), code decides the route here and the model is not asked.

Rules, on the clinician's instruction only (``dictation.instruction_text``):
- two or more drugs and interaction words ("interact", "together", "combine"), or drugs joined
  by "with" / "and" / "plus" / "on" in a question about giving or safety ("can I give X with Y",
  "is X safe with Y", "X and Y?"): ``check_drug_interactions`` with those drugs;
- a drug and safety, warning, side-effect, contraindication, dose, pregnancy or "what is / used
  for / tell me about" words: ``check_drug_safety``, one call per drug named (at most three);
- literature words (``task_patterns.LITERATURE``): ``search_medical_literature`` with the
  content words of the request;
- trial words (``task_patterns.TRIALS``): ``find_clinical_trials`` with the condition (and a
  drug as the intervention, a phase, a status) from the words; an NCT id ``get_trial_details``;
  a prescreen (``task_patterns.PRESCREEN``, or trial words "for this patient / for her") with a
  patient code settled on (``orders.code_patient``): ``prescreen_for_trials``.

Invariants:
- Never a request to write (``write_requests``), and never a question about the chart of a
  patient code has (``chart_topics``) unless the words also name a knowledge step.
- Drugs are generic names from the recogniser (brands resolved); a word the recogniser does not
  know that is close to a name of the local drug data (``difflib`` ratio >= ``TYPO_CUTOFF``) is
  read as that drug and the answer says "did you mean"; a pronoun ("it", "them", "this drug")
  or an elliptical follow-up ("and in pregnancy?") takes the drugs of the most recent message
  of the clinician that named one.
- All or nothing: when a knowledge step the words name cannot be filled (no drug), no call is
  read at all and the model routes the turn as before.
- ``read_request`` is pure over its inputs (the state, the recogniser, the local vocabulary);
  the one I/O is ``local_drug_data``, which asks a tool box once for the knowledge server's
  names and drug count and keeps them for that tool box's life.
"""

from __future__ import annotations

import difflib
import logging
import re
import weakref
from dataclasses import dataclass, field

from appliance.agent.chart_answers import chart_topics
from appliance.agent.dictation import instruction_text
from appliance.agent.orders import code_patient
from appliance.agent.state import AgentState
from appliance.agent.task_patterns import (
    CHART,
    INTERACTION,
    LITERATURE,
    PRESCREEN,
    SAFETY,
    TRIAL_DETAILS,
    TRIALS,
    Step,
    named_steps,
)
from appliance.agent.write_requests import write_requests
from appliance.medication.names import DrugRecogniser, key_of

log = logging.getLogger(__name__)

SAFETY_TOOL, INTERACTION_TOOL = "check_drug_safety", "check_drug_interactions"
LITERATURE_TOOL, TRIALS_TOOL = "search_medical_literature", "find_clinical_trials"
DETAILS_TOOL, PRESCREEN_TOOL = "get_trial_details", "prescreen_for_trials"
KNOWLEDGE_TOOLS = frozenset({SAFETY_TOOL, INTERACTION_TOOL, LITERATURE_TOOL, TRIALS_TOOL, DETAILS_TOOL, PRESCREEN_TOOL})
STEP_OF_TOOL: dict[str, Step] = {s.tool: s for s in (INTERACTION, SAFETY, LITERATURE, TRIALS, TRIAL_DETAILS, PRESCREEN)}
TYPO_CUTOFF = 0.84
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


def _words(*alternatives: str) -> re.Pattern:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


DRUG_INFO = _words(
    r"doses?", r"dosing", r"dosages?", r"max(?:imum)?\s+dose", r"pregnan\w*", r"breast-?feed\w*", r"lactat\w*",
    r"nursing", r"renal\w*", r"kidneys?", r"hepatic", r"liver", r"monitor\w*", r"used\s+(?:for|to)", r"uses?\s+(?:for|of)",
    r"indications?", r"indicated", r"what\s+(?:is|are)", r"what's", r"tell\s+me\s+about", r"info(?:rmation)?",
    r"about", r"mechanism", r"work", r"class", r"overdose", r"elderly", r"children", r"risks?", r"dangers?",
    r"dangerous", r"boxed", r"black\s+box", r"label", r"cautions?", r"avoid", r"ok", r"okay", r"problems?", r"issues?",
)
INTERACTION_SINGLE = _words(r"interact\w*", r"DDIs?")
_TOGETHER = _words(r"with", r"together", r"alongside", r"plus", r"and", r"on\s+top\s+of", r"while\s+on", r"whilst\s+on")
COMBINE_QUESTION = _words(r"can|could|should|may|safe(?:ly)?|ok|okay|fine|alright|allowed|give|take|use|add",
                          r"start|prescribe|co-?prescribe")
_ALLERGY_AFTER = re.compile(r"[\s-]*(?:allerg\w*|hypersensitiv\w*|intoleran\w*)", re.IGNORECASE)
_JOIN = re.compile(r"^\s*(?:(?:is|it|safe|safely|ok|okay|fine|to|give|given|take|taken|use|used|together|co-?prescribed?)\s+){0,4}(?:,|\+|&|with|and|plus|alongside|on\s+top\s+of|(?:in\s+)?(?:a\s+)?patients?\s+(?:on|taking)|"
                   r"(?:while|whilst|when)\s+(?:on|taking)|to\s+(?:a\s+|my\s+)?(?:patient|someone|him|her)\s+(?:on|taking)|"
                   r"on|or)\s*$", re.IGNORECASE)
PRONOUN = _words(r"it", r"its", r"this\s+(?:drug|medication|medicine|one)", r"that\s+(?:drug|medication|medicine|one)",
                 r"the\s+(?:drug|medication|medicine)", r"them", r"both", r"these", r"those", r"they", r"their")
FOLLOW_UP = re.compile(r"^\s*(?:and|also|what\s+about|how\s+about|any|same\s+for)\b", re.IGNORECASE)
NCT_ID = re.compile(r"\bNCT(?:\d{8}|-DEMO-\d+)\b", re.IGNORECASE)
PHASE = re.compile(r"\bphase\s*(1|2|3|4|i{1,3}|iv)\b", re.IGNORECASE)
_ROMAN = {"i": "1", "ii": "2", "iii": "3", "iv": "4"}
FOR_PATIENT = _words(r"for\s+(?:this|my|the)\s+patient", r"for\s+(?:him|her|them)", r"(?:could|can|would)\s+(?:he|she|they)\s+"
                     r"(?:join|enrol\w*|enroll\w*|take\s+part)")
# Words that carry no topic in a literature or trial search ("what is the evidence for X in Y").
_FILLER = frozenset("""a an the any some what whats is are was were be there do does did for in on of about with
    to from by and or me show find search look up give list tell latest recent new current newest evidence study studies
    trial trials research paper papers article articles literature publication publications published pubmed
    meta-analysis meta-analyses systematic review reviews rct rcts randomised randomized controlled clinical
    recruiting recruit enrolling enrol enroll open ongoing active completed available that which who patient patients
    please can could you i we us say says show shows showing suggest suggests support supports data good best
    phase nct ctgov clinicaltrials gov on-going currently right now our my this these""".split())
# Words a typo check never reads as a drug: the request's own vocabulary.
_NOT_TYPOS = frozenset("""about warning warnings safety effects effect adverse boxed interact interacts interaction
    interactions contraindications contraindicated pregnancy pregnant dosing dosage doses kidney renal hepatic
    liver elderly children evidence studies trials recruiting enrolling literature papers articles there their
    these those which what where could would should patient patients together combine taking given giving
    prescribe prescribing clinical failure cancer disease diabetes heart lung breast atrial fibrillation
    hypertension infection research monitor monitoring indications indicated tell other people""".split())


def drug_vocabulary_keys(names) -> list[str]:
    """The matching keys of the local drug data's names, for the typo check."""
    return sorted({key_of(n) for n in names if n and len(key_of(n)) >= 4})


_DRUG_DATA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def local_drug_data(tools) -> tuple[list[str], int | None]:
    """(matching keys of the knowledge server's drug names, how many drugs it holds; None when
    it does not say), asked once per tool box. A server that does not answer gives ([], None):
    the typo check is then off, nothing else changes."""
    try:
        return _DRUG_DATA[tools]
    except (KeyError, TypeError):
        pass
    names, count = [], None
    try:
        if hasattr(tools, "call_server"):
            outcome = tools.call_server("knowledge", "drug_vocabulary", {}, 20.0)
            if outcome.ok and isinstance(outcome.result, dict):
                names, count = list(outcome.result.get("names") or []), outcome.result.get("drugs")
        else:
            names = list(tools.drug_names())
    except Exception as exc:  # noqa: BLE001 - a missing hint source must not stop the turn
        log.warning("no drug vocabulary for the typo check (%s)", type(exc).__name__)
    data = (drug_vocabulary_keys(names), count if isinstance(count, int) else None)
    try:
        _DRUG_DATA[tools] = data
    except TypeError:
        pass
    return data


def _typos(text: str, drugs: DrugRecogniser, vocabulary: list[str]) -> list[tuple[str, str, str]]:
    """(word as written, known name, generic) for words that are not drugs but close to a name
    of the local drug data."""
    if not vocabulary:
        return []
    taken = [(m.start, m.end) for m in drugs.mentions(text)]
    out = []
    for m in re.finditer(r"[A-Za-z][A-Za-z\-]{4,}", text):
        word = m.group(0).lower()
        if word in _NOT_TYPOS or word in _FILLER or any(s <= m.start() < e for s, e in taken):
            continue
        close = difflib.get_close_matches(word, vocabulary, n=1, cutoff=TYPO_CUTOFF)
        generic = drugs.generic(close[0]) if close else None
        if close and generic and close[0] != word:
            out.append((m.group(0), close[0], generic))
    return out


def _named_drugs(text: str, drugs: DrugRecogniser, vocabulary: list[str]) -> tuple[list[tuple[int, int, str]], list[str]]:
    """([(start, end, generic)], notes): the drugs in ``text`` in order, typos read as the
    closest known name."""
    # "amoxicillin in penicillin allergy": the drug before "allergy" is the allergy, not the subject.
    spans = [(m.start, m.end, m.generic) for m in drugs.mentions(text) if not _ALLERGY_AFTER.match(text, m.end)]
    notes = []
    for written, known, generic in _typos(text, drugs, vocabulary):
        start = text.find(written)
        spans.append((start, start + len(written), generic))
        notes.append(f"'{written}' was read as {known} (did you mean {known}?)")
    spans.sort()
    return spans, notes


def _history_drugs(history, drugs: DrugRecogniser) -> tuple[str, ...]:
    """The drugs of the clinician's most recent message that named one."""
    for role, text in reversed(tuple(history)):
        if role == "user":
            found = drugs.find(instruction_text(text))
            if found:
                return found
    return ()


def _joined(text: str, spans) -> bool:
    """Two of the drugs stand joined ("X with Y", "X and Y", "Y in a patient on X")."""
    return any(_JOIN.match(text[a[1]:b[0]]) for a, b in zip(spans, spans[1:]))


def _unique(items) -> list:
    return list(dict.fromkeys(items))


def _content_words(text: str, limit: int) -> str:
    kept = [w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9'\-+]*", text) if w.lower().strip("'") not in _FILLER]
    out = ""
    for w in kept:
        if len(out) + len(w) + 1 > limit:
            break
        out = f"{out} {w}".strip()
    return out


_TRIAL_EVIDENCE = re.compile(r"\btrials?\s+(?:show\w*|found|suggest\w*|say|data|evidence|results?)\b|"
                             r"\b(?:evidence|results?|data)\s+(?:from|of)\s+(?:the\s+)?trials?\b", re.IGNORECASE)
# "Is amoxicillin a penicillin?" asks about the drugs, not for their labels.
_QUESTION_START = re.compile(r"\s*(?:is|are|was|were|does|do|did|has|have|which|why|how)\b", re.IGNORECASE)
_CLAUSES = re.compile(r"[,;.?!]+|\s+then\s+|\s+and\s+(?=(?:find|check|search|look|review|pull|show|get|list)\b)", re.IGNORECASE)


def _clause_of(step: Step, text: str) -> str:
    """The clause of ``text`` that names ``step`` (the whole text when it is one clause):
    "find patient X, review her chart, and find trials for asthma" searches for asthma."""
    for clause in _CLAUSES.split(text):
        if clause and step.position(clause) is not None:
            return clause
    return text


def _trial_args(text: str, generics: list[str], drugs: DrugRecogniser) -> dict | None:
    """find_clinical_trials' arguments from the words: the condition (what remains of the
    request without drugs and filler), a drug as the intervention, a phase, a status."""
    phase = PHASE.search(text)
    phase_value = f"phase{_ROMAN.get(phase.group(1).lower(), phase.group(1))}" if phase else None
    lowered = text.lower()
    status = ("completed" if re.search(r"\bcompleted\b", lowered) else "any" if re.search(r"\b(?:any status|all trials|closed)\b", lowered)
              else "active" if re.search(r"\b(?:active|ongoing|on-going)\b", lowered) else None)
    without_drugs = text
    for m in reversed(drugs.mentions(text)):
        without_drugs = without_drugs[:m.start] + " " + without_drugs[m.end:]
    condition = _content_words(PHASE.sub(" ", without_drugs), 60)
    intervention = generics[0] if generics else None
    if not condition:
        if not intervention:
            return None
        condition, intervention = intervention, None
    return {"condition": condition, "intervention": intervention, "eligibility_keywords": None, "status": status,
            "phase": phase_value, "sex": None, "patient_age": None, "study_type": None, "page_size": None}


def read_request(state: AgentState, drugs: DrugRecogniser, vocabulary: list[str] = ()) -> tuple[KnowledgeCall, ...]:
    """The knowledge look-ups the clinician's words name, with code's arguments, in order;
    () when the words name none or one cannot be filled (see the module docstring)."""
    query = state.user_query
    if write_requests(query):
        return ()
    text = instruction_text(query)
    steps = [s for s in named_steps(query) if s.tool in STEP_OF_TOOL]
    patient = code_patient(state)
    has_patient = bool(patient)
    spans, notes = _named_drugs(text, drugs, list(vocabulary))
    generics = _unique(g for _s, _e, g in spans)
    tools = [s.tool for s in steps]
    if TRIALS_TOOL in tools and _TRIAL_EVIDENCE.search(text):  # "do trials show ...": what trials found
        tools = [t for t in tools if t != TRIALS_TOOL] + ([] if LITERATURE_TOOL in tools else [LITERATURE_TOOL])
    if chart_topics(query) and has_patient and not steps:
        return ()  # a question about this patient's chart: the chart answers it
    interaction_words = bool(INTERACTION_TOOL in tools or INTERACTION_SINGLE.search(text))
    together = bool(COMBINE_QUESTION.search(text) and _TOGETHER.search(text))
    # A literature or trial search about a drug is not a question about its label.
    searches = bool({LITERATURE_TOOL, TRIALS_TOOL, PRESCREEN_TOOL, DETAILS_TOOL} & set(tools))
    drug_words = bool({SAFETY_TOOL, INTERACTION_TOOL} & set(tools) or interaction_words
                      or (DRUG_INFO.search(text) and not searches))
    need = 2 if interaction_words or together else 1
    from_history = False
    if drug_words and len(generics) < need and (PRONOUN.search(text) or FOLLOW_UP.match(text)):
        earlier = [g for g in _history_drugs(state.conversation_history, drugs) if g not in generics]
        plural = re.search(r"\b(?:them|both|these|those|they|their)\b", text, re.IGNORECASE)
        taken = earlier if plural else earlier[:need - len(generics)]
        if taken:
            notes.append(f"{' and '.join(taken)}, named earlier in this conversation")
            generics, from_history = _unique([*taken, *generics]), True
    if INTERACTION_TOOL in tools and len(generics) < 2:
        return ()  # "check his meds against X": the other drugs are the chart's, the model's to fill
    calls: list[KnowledgeCall] = []
    joined = _joined(text, spans) or from_history
    if len(generics) >= 2 and (interaction_words or (joined and (COMBINE_QUESTION.search(text) or not (
            DRUG_INFO.search(text) or SAFETY_TOOL in tools)))):
        calls.append(KnowledgeCall(INTERACTION_TOOL, {"drug_names": generics[:6]},
                                   "two or more drugs named with words about giving them together", tuple(notes)))
    elif generics and (drug_words or (not searches and not _QUESTION_START.match(text)
                                      and len(_content_words(text, 200).split()) <= len(generics))):
        for g in generics[:MAX_SAFETY_CALLS]:
            calls.append(KnowledgeCall(SAFETY_TOOL, {"drug_name": g}, "a drug named with words about its label",
                                       tuple(notes)))
    elif {SAFETY_TOOL, INTERACTION_TOOL} & set(tools):
        return ()  # a drug step with no drug code can read: the model routes the turn
    nct = NCT_ID.search(text)
    if nct:
        calls.append(KnowledgeCall(DETAILS_TOOL, {"nct_id": nct.group(0).upper()}, "an NCT id"))
    prescreen = PRESCREEN_TOOL in tools or (TRIALS_TOOL in tools and FOR_PATIENT.search(text))
    if prescreen and has_patient:
        trial = _trial_args(text, [], drugs)
        condition = trial["condition"] if trial and not re.fullmatch(r"(?i)(?:him|her|them|eligible|prescreen\w*)(?:\s+\w+)*",
                                                                       trial["condition"]) else None
        calls.append(KnowledgeCall(PRESCREEN_TOOL, {"patient_id": patient, "condition": condition},
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
    others = {s.tool for s in named_steps(state.user_query)} - KNOWLEDGE_TOOLS
    if chart_only_implied(state):
        others.discard("get_patient_chart")
    return others <= ({"get_patient_chart"} if code_patient(state) else set())


def chart_only_implied(state: AgentState) -> bool:
    """The chart step comes only from chart words read beside a look-up ("amoxicillin in
    penicillin allergy") with no patient known: no chart is asked for."""
    return bool(state.knowledge_calls) and not code_patient(state) and CHART.position(
        instruction_text(state.user_query)) is None


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


__all__ = ["KNOWLEDGE_TOOLS", "KnowledgeCall", "call_done", "calls_not_done", "next_call", "read_request",
           "routed_by_code", "summary"]
