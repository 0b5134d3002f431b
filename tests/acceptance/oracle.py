"""Scripted models for the acceptance tests: ``Oracle(cases, right=True)`` answers every case of
the set right, ``right=False`` every case wrong. Each call is answered from the case whose
request (and, for a finished call, whose result) its prompt holds, so code's own decisions
(a call code makes without the model) cannot put a queue out of step.

Answers still go through the schema (``parse_constrained``), as the scripted model's do."""

from __future__ import annotations

import json
import re

from appliance.acceptance.cases import Case
from appliance.agent.reading.dictation import instruction_text
from appliance.agent.schemas import (
    IntentClassification,
    NextToolSelection,
    ResultAssessment,
    RetryStrategy,
    ToolSelection,
)
from appliance.llm.base import CallStats, parse_constrained
from mcp_servers.contracts import ARG_SCHEMAS

FILLER = {
    "drug_name": "zzdrug", "drug_names": ["zzdrug", "yydrug"], "query": "zz topic", "condition": "zz condition",
    "intervention": None, "eligibility_keywords": None, "status": None, "phase": None, "sex": None,
    "patient_age": None, "study_type": None, "page_size": None, "nct_id": "NCT00000000", "patient_id": "zz-999",
    "name": "Zed Quorn", "medication_name": "zzdrug", "dosage": "1 mg", "frequency": "daily", "notes": None,
    "substance": "zzstuff", "reaction": "zzreaction", "severity": None, "note_type": "other", "note_text": "zz",
}
ANSWER = "This is general medical knowledge, explained in standard clinical references."


def _other_tool(tool: str | None) -> str:
    return "search_patient" if tool == "check_drug_safety" else "check_drug_safety"


class Oracle:
    profile_name = "oracle"

    def __init__(self, cases: list[Case], *, right: bool):
        self.cases, self.right = cases, right
        self.last_stats: CallStats | None = None
        self.calls = 0

    def _case(self, text: str, *, with_result: bool = False, key=lambda c: c.request, tool: str | None = None) -> Case | None:
        found = [c for c in self.cases if key(c) in text and (not with_result or (c.result and c.result["text"] in text))
                 and (tool is None or c.tool == tool)]
        return max(found, key=lambda c: len(key(c)), default=None)

    def generate_constrained(self, node, messages, schema, *, temperature, max_tokens, cancel=None):
        self.calls += 1
        user = messages[-1].content
        answer = self._answer(schema, user)
        self.last_stats = CallStats(node=str(node), completion_tokens=8)
        return parse_constrained(json.dumps(answer), schema)

    def _answer(self, schema, user: str) -> dict:
        right = self.right
        if schema is IntentClassification:
            case = self._case(user)
            want = case.intent if case and case.intent else "TOOL_NEEDED"
            tool = (case.suggested_tool or case.tool) if case else None
            if not right:
                want, tool = ("DIRECT" if want == "TOOL_NEEDED" else "TOOL_NEEDED"), _other_tool(tool)
            return {"intent": want, "task_summary": "Request.", "suggested_tool": tool if want == "TOOL_NEEDED" else None}
        if schema in (ToolSelection, NextToolSelection):
            case = self._case(user, key=lambda c: instruction_text(c.request))
            tool = case.tool if case and case.tool else "check_drug_safety"
            if case and case.turn and "Results so far" in user:  # a whole turn's next step
                done = [t for t in case.turn["tools"] if f"[{t}" in user or t in user]
                rest = [t for t in case.turn["tools"] if t not in done]
                tool = rest[0] if rest else ("none" if schema is NextToolSelection else tool)
            return {"tool_name": tool if right else _other_tool(tool)}
        if schema is ResultAssessment:
            case = self._case(user, with_result=True)
            quality = case.result["quality"] if case else "success_rich"
            if not right:
                quality = "error_fatal" if quality != "error_fatal" else "success_rich"
            return {"quality": quality, "brief_summary": "Result."}
        if schema is RetryStrategy:
            case = self._case(user, with_result=True)
            strategy = case.retry if case and case.retry else "retry_same"
            if not right:
                strategy = "retry_same" if strategy == "retry_different_args" else "retry_different_args"
            return {"strategy": strategy, "reasoning": None}
        tool = next(name for name, s in ARG_SCHEMAS.items() if s is schema)
        case = self._case(user, tool=tool)
        args = {k: FILLER[k] for k in schema.model_fields}
        if right and case and case.tool == tool and case.args:
            args.update(case.args)
        return args

    @staticmethod
    def _summary(user: str) -> str:
        """An answer in the sources' own words (so it names only what they hold)."""
        found = user.split("Information found:\n", 1)
        if len(found) < 2:
            return ANSWER
        words = re.findall(r"[A-Za-z0-9-]+", found[1].split("\n\n")[0])[:30]
        return "The sources say: " + " ".join(words) + "."

    def generate_free(self, node, messages, *, temperature, max_tokens, on_token=None, cancel=None):
        self.calls += 1
        text = self._summary(messages[-1].content) if self.right else \
            "Patient zz-777 is allergic to penicillin with anaphylaxis."
        if on_token:
            on_token(text)
        self.last_stats = CallStats(node=str(node), completion_tokens=12)
        return text
