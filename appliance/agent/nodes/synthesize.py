"""Node 7, SYNTHESIZE (LLM, free text, T=0.5, 256 tokens; docs/design.md §4.8, §7, §8).

Invariants:
- The prompt holds the query, the task summary, results with clinical labels, pre-formatted
  errors and image findings, never raw errors or tool names.
- A clarification (ask_user) is code's question, returned verbatim without a model call, so
  the list of candidate patients can never be invented.
- The answer is never empty and never names a tool: internal names are replaced by their
  clinical labels (in the streamed pieces too). An empty generation, one that repeats the
  instructions or the prompt, or one that uses none of the findings it was given falls back
  to the pre-formatted findings (``answer_problem``; the trace says which).
- A request to change the record that ended with no write says "The record was not changed."
- A step the request named that did not run (the loop ended at the step limit, on a repeated
  call or an empty patient search) is named in code's words in the prompt and the fallback
  (``not_done_message``).
- A drug the database does not hold keeps the server's caveat word for word: an answer that
  drops it gets code's message about those drugs appended (``dropped_caveats``).
- An answer cut by the token limit ends at its last whole sentence, and the trace says so.
- The fact guard (``appliance.agent.fact_guard``): an answer that names a drug, allergen,
  condition, value or patient ID that neither the turn's sources nor the clinician's words hold
  is not shown as the answer. The clinician reads one line saying the wording was withheld and
  why, then the facts rendered by code (the chart's sections asked about, or the pre-formatted
  findings); the trace says what was unsupported (``withheld``).
"""

from __future__ import annotations

import json
import re
import threading

from appliance.agent import chart_answers, code_answers
from appliance.agent.fact_guard import sources_text, unsupported_facts
from appliance.agent.grounding import clinician_text
from appliance.agent.nodes.prompting import conversation, shortenable
from appliance.agent.progress import steps_not_done
from appliance.agent.reading.chart_topics import ORDER
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.words import words
from appliance.agent.reading.write_requests import NOT_CHANGED
from appliance.agent.state import AgentState, Node, NodeResult
from appliance.agent.tool_results import not_in_database_message
from appliance.llm.base import LanguageModel, TokenCallback
from appliance.medication.names import DrugRecogniser
from mcp_servers.contracts import (
    NOT_IN_DATABASE_CAVEATS,
    TOOL_LABELS,
    TOOL_SERVERS,
    WRITE_TOOLS,
    ToolSet,
)

TEMPERATURE = 0.5
MAX_TOKENS = 256

SYSTEM_PROMPT = """You are a clinical decision-support assistant. Answer the clinician clearly and concisely from the information below.
- Include only the most critical findings.
- If information was unavailable, say so plainly and do not speculate or fill the gap from memory.
- Do not mention tools, databases or system internals.
- Use standard medical terminology for a clinical audience."""

BRIEF_PREFIX = "Include only the most critical findings.\n\n"
BRIEF_TOOLS = ToolSet(lambda tool: tool.brief)  # on each tool's record: its answer keeps to the critical findings

# Substring match on purpose: a name glued to other word characters ("check_drug_safety_v2")
# is still a leak. Labels contain spaces, so a replacement can never match again.
_TOOL_NAME_RE = re.compile(r"\[?(" + "|".join(TOOL_LABELS) + r")\]?")


def scrub_internal_names(text: str) -> str:
    """Replace every occurrence of an internal tool name with its clinical label."""
    return _TOOL_NAME_RE.sub(lambda m: TOOL_LABELS[m.group(1)], text)


class ScrubbedStream:
    """Passes streamed pieces on with internal names replaced, as the final answer will be.

    A piece can end part-way into a tool name ("check_dr"), so the tail that could still grow
    into a name is held back until the next piece decides it; ``flush`` releases the rest.
    """

    def __init__(self, on_token: TokenCallback):
        self.on_token = on_token
        self.pending = ""

    def __call__(self, piece: str) -> None:
        text = self.pending + piece
        hold = _partial_name_suffix(text)
        self.pending = text[len(text) - hold:]
        if len(text) > hold:
            self.on_token(scrub_internal_names(text[: len(text) - hold]))

    def flush(self) -> None:
        if self.pending:
            text, self.pending = scrub_internal_names(self.pending), ""
            self.on_token(text)


def _partial_name_suffix(text: str) -> int:
    """Length of the longest tail of ``text`` that could still grow into a bracketed name."""
    for size in range(min(len(text), _LONGEST_FORM - 1), 0, -1):
        tail = text[-size:]
        if any(form.startswith(tail) and form != tail for form in _NAME_FORMS):
            return size
    return 0


# A name may be followed by "]", which the replacement swallows, so a complete name at the end
# of a piece is held back too until the next piece shows what follows it.
_NAME_FORMS = [form for name in TOOL_LABELS for form in (name + "]", "[" + name + "]")]
_LONGEST_FORM = max(map(len, _NAME_FORMS))


def user_message(state: AgentState) -> str:
    sections = [f"Clinician's question: {state.user_query}", f"Clinical context: {state.task_summary}"]
    if state.image_findings:
        sections.append(image_section(state.image_findings))
    results = [r.formatted_result for r in state.tool_results if r.error_type is None]
    if results:
        sections.append("Information found:\n" + "\n\n".join(results))
    unavailable = unavailable_messages(state)
    if unavailable:
        sections.append("Unavailable information:\n" + "\n".join(f"- {m}" for m in unavailable))
    text = "\n\n".join(sections)
    successful = {r.tool_name for r in state.tool_results if r.error_type is None}
    if len(successful) == 1 and successful <= BRIEF_TOOLS:
        text = BRIEF_PREFIX + text
    return text


NOT_DONE = "Part of the request was not done: {steps}."


def not_done_message(state: AgentState) -> str | None:
    """Code's sentence naming every step the request named that neither ran nor was skipped
    (skips bring their own message), or None when each was done or no tool was asked for."""
    if state.intent != "TOOL_NEEDED":
        return None
    steps = steps_not_done(state)
    return NOT_DONE.format(steps="; ".join(s.says for s in steps)) if steps else None


def unavailable_messages(state: AgentState) -> list[str]:
    """The pre-formatted errors, once each, then what was not done."""
    messages = list(dict.fromkeys(state.error_messages))
    not_done = not_done_message(state)
    return messages + [not_done] if not_done else messages


def image_section(findings: dict) -> str:
    """INPUT_ASSEMBLY's image findings, labelled as an automated reading of the image."""
    modality = findings.get("modality") or "image"
    confidence = findings.get("confidence") or "unstated"
    items = "\n".join(f"- {item}" for item in findings.get("findings") or ()) or "- none reported"
    return f"Image findings (automated analysis of the attached {modality}; {confidence} confidence):\n{items}"


def found_text(state: AgentState, r) -> str:
    """A successful result as the clinician reads it without the model: a chart in code's
    words (the sections asked about, else all), anything else pre-formatted."""
    return code_answers.render(state, r, state.drug_data_size) or r.formatted_result


def fallback_answer(state: AgentState) -> str:
    parts = [image_section(state.image_findings)] if state.image_findings else []
    parts += [found_text(state, r) for r in state.tool_results if r.error_type is None]
    parts += unavailable_messages(state)
    if not parts:
        return "I could not produce an answer to that question. Please rephrase it or try again."
    return "Here is what was found:\n" + "\n\n".join(parts)


def run(
    state: AgentState,
    model: LanguageModel,
    on_token: TokenCallback | None = None,
    cancel: threading.Event | None = None,
    drugs: DrugRecogniser | None = None,
) -> NodeResult:
    """The answer; the turn ends here. ``drugs`` (the turn's recogniser) turns the fact guard on
    (every agent turn passes it)."""
    if state.clarification_request:  # the request is still being worked out with the clinician
        if on_token:
            on_token(state.clarification_request)
        update = {"final_response": state.clarification_request}
        return NodeResult(update, {"kind": "clarification", "model_call": False}, None, model_call=False)
    code_answer = chart_answer(state)
    if code_answer is None:  # every result is one code reads (code_answers): no model call
        code_answer = code_answers.answer(state, unavailable_messages(state), state.drug_data_size)
        if code_answer is not None and record_unchanged(state) and not code_answer.endswith(NOT_CHANGED):
            code_answer = f"{code_answer}\n\n{NOT_CHANGED}"
    if code_answer is not None:  # the sources' facts need no language: code writes them, no model call
        if on_token:
            on_token(code_answer)
        output = {"kind": "answer", "model_call": False, "by": "code", "characters": len(code_answer)}
        return NodeResult({"final_response": code_answer}, output, None, model_call=False)
    unchanged = record_unchanged(state)
    messages = conversation(SYSTEM_PROMPT, user_message(state), state.conversation_history,
                            results=shortenable(state.tool_results))
    stream = ScrubbedStream(on_token) if on_token else None
    try:
        text = model.generate_free(
            Node.SYNTHESIZE, messages, temperature=TEMPERATURE, max_tokens=MAX_TOKENS, on_token=stream, cancel=cancel
        )
    finally:
        if stream:
            stream.flush()
    answer = scrub_internal_names(text).strip()
    stats = model.last_stats
    cut = stats is not None and stats.finish_reason == "length"
    if cut:
        answer = whole_sentences(answer)
    problem = answer_problem(answer, state)
    withheld = unsupported_in(answer, state, drugs) if drugs is not None and not problem else []
    if problem:
        answer = scrub_internal_names(fallback_answer(state))
    elif withheld:
        answer = scrub_internal_names(withheld_answer(state, withheld))
    if unchanged and not _SAYS_UNCHANGED.search(answer):
        answer = f"{answer}\n\n{NOT_CHANGED}"
    for message in dropped_caveats(answer, state):
        answer = f"{answer}\n\n{message}"
    output = {"kind": "answer", "fallback_used": problem is not None, "fallback_reason": problem,
              "withheld": [u.words() for u in withheld],
              "characters": len(answer), "cut_at_token_limit": cut, "record_unchanged_said": unchanged}
    return NodeResult({"final_response": answer}, output, None)


def chart_answer(state: AgentState) -> str | None:
    """Code's answer to a question about named sections of the chart ("any allergies?", "last
    HbA1c?") when the chart was read this turn and nothing else was asked; None otherwise (a
    summary, or a question that also needed another source, is written by the model)."""
    topics = reading_of(state).chart_topics
    if not topics or topics == ORDER:
        return None
    done = [r for r in state.tool_results if r.error_type is None]
    if not done or any(r.tool_name != "get_patient_chart" for r in done) or not isinstance(done[-1].result, dict):
        return None
    if steps_not_done(state):
        return None
    return chart_answers.render(done[-1].result, topics, state.user_query)


def patient_data_read(state: AgentState) -> bool:
    """The turn read the record (a successful call to the EHR) or answers a chart question."""
    return bool(reading_of(state).chart_topics) or any(
        TOOL_SERVERS.get(r.tool_name) == "ehr" and r.error_type is None for r in state.tool_results)


def unsupported_in(answer: str, state: AgentState, drugs: DrugRecogniser):
    """The facts the answer names that the turn's sources and the clinician's words do not hold."""
    texts = [clinician_text(state), state.selected_patient_id or ""]
    for r in state.tool_results:
        texts += [r.formatted_result or "", r.error or ""]
    if state.image_findings:
        texts.append(json.dumps(state.image_findings, default=str))
    sources = sources_text(texts, [r.result for r in state.tool_results])
    return unsupported_facts(answer, sources, drugs, patient_data=patient_data_read(state))


WITHHELD = "The assistant's wording was withheld: it named {facts}, which could not be found in {looked}."
NOT_READ = " The patient's chart was not read this turn, so what it holds was not checked."
NOTHING_HELD = "No source answered this turn, so there is nothing to show in its place."


def looked_in(state: AgentState) -> str:
    """Where the guard looked, in the clinician's terms: each source that answered, and the question."""
    places = list(dict.fromkeys(f"the {r.tool_label}" for r in state.tool_results if r.error_type is None))
    if state.image_findings:
        places.append("the image findings")
    places.append("your question")
    return places[0] if len(places) == 1 else ", ".join(places[:-1]) + " or " + places[-1]


def withheld_answer(state: AgentState, unsupported) -> str:
    """Code's answer in place of a withheld one: what the guard could not find and where it
    looked (saying so when the chart was not read, so no one takes the notice as the chart's
    word), then the sources' facts in code's words; never an empty list of them."""
    head = WITHHELD.format(facts=", ".join(u.words() for u in unsupported[:4]), looked=looked_in(state))
    chart_read = any(r.tool_name == "get_patient_chart" and r.error_type is None for r in state.tool_results)
    if (state.selected_patient_id or state.extracted_entities.patient_ids) and not chart_read:
        head += NOT_READ
    held = [image_section(state.image_findings)] if state.image_findings else []
    held += [found_text(state, r) for r in state.tool_results if r.error_type is None]
    held += unavailable_messages(state)
    if not held:
        return f"{head}\n\n{NOTHING_HELD}"
    return f"{head}\n\nWhat the sources hold:\n" + "\n\n".join(held)


def dropped_caveats(answer: str, state: AgentState) -> list[str]:
    """Code's messages about drugs the database does not hold whose caveat the answer lacks."""
    messages: dict[str, None] = {}
    for r in state.tool_results:
        caveat = NOT_IN_DATABASE_CAVEATS.get(r.tool_name)
        if caveat is None:
            continue
        if r.error_type == "drug_not_in_database":
            message = r.error
        elif r.error_type is None and r.result and r.result.get("not_recognised_note"):
            message = not_in_database_message(r.tool_name, r.args, r.result["not_recognised_note"])
        else:
            message = None
        if message and caveat in message and caveat.lower() not in answer.lower():
            messages.setdefault(message, None)
    return list(messages)


_SAYS_UNCHANGED = re.compile(r"\b(not changed|nothing was (written|saved|changed|recorded)|was not (written|saved|"
                             r"recorded|prescribed)|no changes? (was|were) made)\b", re.IGNORECASE)


def record_unchanged(state: AgentState) -> bool:
    """The clinician asked to change the record and no write went through this turn (a write
    whose outcome is unknown may have: its own message says so, and nothing here contradicts it)."""
    if not reading_of(state).writes:
        return False
    return not any(r.tool_name in WRITE_TOOLS and (r.error_type is None or r.outcome_unknown)
                   for r in state.tool_results)


# -- the answer guard: a base model may echo its instructions or ignore what was found ------
_SHINGLE = 6  # words in a run that counts as echoed
_SCAFFOLD = ("clinician's question:", "clinical context:", "information found:", "unavailable information:",
             "image findings (automated analysis", "include only the most critical findings")
_STOPWORDS = frozenset("""a an and are as at be been but by for from has have in is it its of on or that the this
to was were will with not no this these those their there which who what when where how patient patients""".split())


def _shingles(found: list[str]) -> set[tuple[str, ...]]:
    return {tuple(found[i:i + _SHINGLE]) for i in range(len(found) - _SHINGLE + 1)}


_INSTRUCTION_SHINGLES = _shingles(words(SYSTEM_PROMPT))


def _repeats_itself(answer: str) -> bool:
    """A sentence or line said three times or more (a base model looping: "If the patient is an
    adult, do not provide a medical history." over and over)."""
    parts = [" ".join(words(p)) for p in re.split(r"(?<=[.!?])\s+|\n+", answer)]
    counts: dict[str, int] = {}
    for part in parts:
        if len(part.split()) >= 3:
            counts[part] = counts.get(part, 0) + 1
    return any(n >= 3 for n in counts.values())


def answer_problem(answer: str, state: AgentState) -> str | None:
    """Why an answer must not be shown (then the pre-formatted findings are), or None:
    empty; repeats the instructions or the prompt's scaffolding; says one sentence three times
    or more; or, when sources returned findings, shares not one content word with them."""
    if not answer.strip():
        return "empty"
    lowered = answer.lower()
    if any(marker in lowered for marker in _SCAFFOLD) or _shingles(words(answer)) & _INSTRUCTION_SHINGLES:
        return "repeated the instructions"
    if _repeats_itself(answer):
        return "repeated itself"
    # What reads found (a write's confirmation needs no repeating of its record id).
    findings = " ".join(r.formatted_result for r in state.tool_results
                        if r.error_type is None and r.tool_name not in WRITE_TOOLS)
    if state.image_findings:
        findings += " " + " ".join(map(str, state.image_findings.get("findings") or ()))
    content = {w for w in words(findings) if len(w) > 3 and w not in _STOPWORDS}
    if content and not content & set(words(answer)):
        return "used none of the findings"
    return None


_SENTENCE_END = re.compile(r"[.!?][)\]\"']*(?=\s|$)")


def whole_sentences(text: str) -> str:
    """Text cut at the token limit, ended at its last complete sentence (or line), so the
    clinician never reads half a sentence as if it were the whole of it."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    line = text.rfind("\n")
    cut = max(ends[-1] if ends else 0, line if line > 0 else 0)
    return text[:cut].rstrip() if cut > 0 else text.rstrip() + " …"
