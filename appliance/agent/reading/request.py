"""One reading of the clinician's message per turn (docs/design.md §4.1, §5).

``read_words`` parses the message once: its instruction (dictated text apart), the write tools
it asks for, the chart sections it asks about, the steps it names, the words that are or may
be patient IDs, and the order, the change of an order or the misspelt drug it gives.
``read_turn`` adds what INPUT_ASSEMBLY reads beside the words: the entities (patient IDs and
names, drugs, the answer to code's several-matches question) and the recent exchanges.
INPUT_ASSEMBLY then reads the knowledge look-ups code routes (``knowledge_requests``) with this
reading, so that parses nothing again.

Invariants:
- Every parse function runs once per turn on the message: each takes what an earlier one
  read (the instruction, the write requests) instead of reading the text again.
- ``RequestReading`` is frozen; nodes, the router and the graph read its fields
  (``state.reading``) and never parse the message. A state built without one (tests, the
  acceptance run) has its words read where they are needed.
- Dictated text is data: routing reads the instruction only; patient names come from it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from appliance.agent.reading.chart_topics import read_chart_topics
from appliance.agent.reading.dictation import read_instruction
from appliance.agent.reading.orders import (
    read_misspelt_drug,
    read_order_change,
    read_prescribing_order,
)
from appliance.agent.reading.patient_refs import (
    Candidate,
    choice_from_history,
    find_patient_ids,
    short_ids,
    typed_ids,
)
from appliance.agent.reading.task_patterns import Step, read_named_steps
from appliance.agent.reading.write_requests import drug_names, read_write_requests
from appliance.agent.state import AgentState, ExtractedEntities
from appliance.medication.changes import OrderChange
from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import Order

# A person named in the words: "patient Maria Garcia", "patient named John Smith", "Aisha
# Patel's labs", "what allergies does Aisha Patel have", "labs for John Smith". Names are two or
# three capitalised words; a named person is never answered from another patient's chart.
_PERSON = r"((?:[A-Z][a-z'\-]+)(?:\s+[A-Z][a-z'\-]+){1,2})"
PATIENT_NAME_RE = re.compile(
    r"\bpatient(?:\s+named)?\s+" + _PERSON
    + r"|\b(?:does|did|is|was|has|had|for|of|about)\s+" + _PERSON + r"(?![A-Za-z'’])"
    + r"|" + _PERSON + r"['’]s\b")
# Capitalised words that open a phrase but name nobody: titles, sentence openers, days, months.
_NOT_A_NAME = frozenset("""mr mrs ms dr doctor the this that what which who when where how why is are does did
can could would should please show give tell list find check any all his her their my our
monday tuesday wednesday thursday friday saturday sunday january february march april may june july
august september october november december""".split())


def person_names(instruction: str, drugs: DrugRecogniser) -> tuple[str, ...]:
    """The people the instruction names (``PATIENT_NAME_RE``), in order, without a leading title
    or opener and never a drug's name (brands are capitalised too)."""
    found: list[str] = []
    for m in PATIENT_NAME_RE.finditer(instruction):
        words = next(g for g in m.groups() if g).split()
        while words and words[0].lower() in _NOT_A_NAME:
            words = words[1:]
        if len(words) >= 2 and not any(w.lower() in _NOT_A_NAME for w in words) and not drugs.find(" ".join(words)):
            found.append(" ".join(words))
    return tuple(dict.fromkeys(found))
ACTION_VERBS = (
    "prescribe", "order", "start", "document", "record", "note", "save", "write", "check",
    "search", "find", "look up", "review", "verify", "add",
)


@dataclass(frozen=True)
class RequestReading:
    """The clinician's message as code read it, once."""

    text: str  # the message as typed
    instruction: str  # the words that may route: dictated text replaced (``dictation``)
    writes: tuple[str, ...]  # write tools asked for, in order (``write_requests``)
    chart_topics: tuple[str, ...]  # chart sections asked about (``chart_answers``)
    steps: tuple[Step, ...]  # the steps named: reads in order, then writes (``task_patterns``)
    typed_ids: frozenset[str]  # words with a digit that are well-formed patient IDs (``patient_refs``)
    short_ids: tuple[str, ...]  # record-shaped words too short to be recognised as IDs ("pat-7")
    order: Order | None  # the prescribing clause's order, when a prescription is asked for
    change: tuple[str, dict, OrderChange] | None  # a change of a chart order: tool, arguments (no patient)
    misspelt_drug: tuple[str, str] | None  # (word, drug meant) when an order names no drug code knows


def read_words(text: str, drugs: DrugRecogniser) -> RequestReading:
    """The message's words, each parse run once (see the module docstring)."""
    instruction = read_instruction(text)
    writes = read_write_requests(text, instruction)
    topics = read_chart_topics(instruction, writes)
    return RequestReading(
        text=text, instruction=instruction, writes=writes, chart_topics=topics,
        steps=read_named_steps(instruction, topics, writes),
        typed_ids=typed_ids(text), short_ids=short_ids(instruction),
        order=read_prescribing_order(text, instruction, writes, drugs),
        change=read_order_change(instruction, writes, drugs),
        misspelt_drug=read_misspelt_drug(instruction, writes, drugs),
    )


def extract_entities(query: str, drugs: DrugRecogniser, has_image: bool = False,
                     instruction: str | None = None) -> ExtractedEntities:
    """Patient IDs (the rule: ``patient_refs``), patient names after "patient" in the
    instruction, drug generics, action verbs and the image flag."""
    lowered = query.lower()
    verbs = tuple(v for v in ACTION_VERBS if re.search(rf"\b{re.escape(v)}\b", lowered))
    names_in = instruction if instruction is not None else read_instruction(query)
    return ExtractedEntities(
        patient_ids=find_patient_ids(query),
        # Names route (a named patient needs a search), so dictated text cannot supply one.
        patient_names=person_names(names_in, drugs),
        drug_mentions=drugs.find(query),
        action_verbs=verbs,
        has_image=has_image,
    )


@dataclass(frozen=True)
class TurnReading:
    """What INPUT_ASSEMBLY reads: the words, the entities, the recent exchanges, the answer to
    code's several-matches question (the candidate and the cues)."""

    reading: RequestReading
    entities: ExtractedEntities
    history: tuple[tuple[str, str], ...]
    choice: tuple[Candidate, str] | None


def read_turn(state: AgentState, drugs: DrugRecogniser, history: list[tuple[str, str]], max_turns: int) -> TurnReading:
    """The turn's reading: the message (``read_words``), its entities and the last ``max_turns`` exchanges."""
    reading = read_words(state.user_query, drugs)
    entities = extract_entities(state.user_query, drugs, has_image=state.image_path is not None,
                                instruction=reading.instruction)
    # The answer to code's "which one did you mean?" names one candidate (patient_refs.choose);
    # a reply holding an ID speaks for itself.
    choice = None if entities.patient_ids else choice_from_history(state.user_query, history, typed=())
    if choice is not None:
        entities = replace(entities, patient_ids=(choice[0].patient_id,))
    recent = tuple(history[-2 * max_turns:]) if max_turns > 0 else ()
    earlier = [g for role, text in recent if role == "user" for g in drugs.find(text)]
    entities = replace(entities, drugs_named=tuple(dict.fromkeys([*earlier, *entities.drug_mentions])))
    return TurnReading(reading, entities, recent, choice)


def reading_of(state: AgentState, drugs: DrugRecogniser | None = None) -> RequestReading:
    """The turn's reading; for a state built without one (tests, the acceptance run), the
    message read now with ``drugs`` (the bundled recogniser when None)."""
    if state.reading is not None:
        return state.reading
    return read_words(state.user_query, drugs if drugs is not None else drug_names())
