"""The shipped acceptance set (``data/cases.jsonl``): clinician requests written for this
appliance, each with what the agent's model calls should answer.

One JSON object per line: ``id``, ``source`` ("production": the 11 model-dependent rows of
docs/design.md §15; "written": ours), ``request``, ``open_patient`` (the patient open in the
terminal, or null), ``image`` (an image attached), and the expectations, each null where the
case does not test that node:
- ``intent`` DIRECT/TOOL_NEEDED (and ``suggested_tool``, checked only where given);
- ``tool`` (TOOL_SELECT stage 1) and ``args``, the key arguments of that tool (stage 2; the
  matching rule is ``nodes.args_match``);
- ``result``: a finished call (``tool``, ``text``, ``error_type``) and the ``quality``
  RESULT_CLASSIFY should give it;
- ``retry``: the ERROR_HANDLER strategy for that failed call;
- ``turn``: run as a whole turn too, with the ``tools`` the turn should call in order.

Invariant: ``load_cases`` refuses a set whose rows name an unknown tool, argument or label, so
a typo can never count as a wrong answer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from appliance.agent.schemas import ResultAssessment, RetryStrategy
from appliance.errors import ApplianceError
from mcp_servers.contracts import ARG_SCHEMAS, ERROR_TYPES

DEFAULT_CASES = Path(__file__).resolve().parent / "data" / "cases.jsonl"
QUALITIES = get_args(ResultAssessment.model_fields["quality"].annotation)
STRATEGIES = get_args(RetryStrategy.model_fields["strategy"].annotation)
KEYS = ("id", "source", "request", "open_patient", "image", "intent", "suggested_tool", "tool", "args", "result",
        "retry", "turn")


class CaseSetError(ApplianceError):
    """The acceptance set is not what the acceptance run reads."""


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    request: str
    open_patient: str | None
    image: bool
    intent: str | None
    suggested_tool: str | None
    tool: str | None
    args: dict | None
    result: dict | None
    retry: str | None
    turn: dict | None


def _check(raw: dict, where: str) -> Case:
    missing = [k for k in KEYS if k not in raw]
    if missing:
        raise CaseSetError(f"{where}: no {missing[0]!r}")
    if not isinstance(raw["request"], str) or not raw["request"].strip():
        raise CaseSetError(f"{where}: request must be non-empty text")
    if raw["intent"] not in (None, "DIRECT", "TOOL_NEEDED"):
        raise CaseSetError(f"{where}: intent {raw['intent']!r}")
    for key in ("suggested_tool", "tool"):
        if raw[key] is not None and raw[key] not in ARG_SCHEMAS:
            raise CaseSetError(f"{where}: {key} {raw[key]!r} is not a tool")
    if raw["args"] is not None:
        if raw["tool"] is None:
            raise CaseSetError(f"{where}: args without a tool")
        unknown = set(raw["args"]) - set(ARG_SCHEMAS[raw["tool"]].model_fields)
        if unknown:
            raise CaseSetError(f"{where}: {raw['tool']} has no argument {sorted(unknown)[0]!r}")
    result = raw["result"]
    if result is not None:
        if result.get("tool") not in ARG_SCHEMAS or result.get("quality") not in QUALITIES or not result.get("text"):
            raise CaseSetError(f"{where}: result needs a tool, a text and one of {QUALITIES}")
        if result.get("error_type") is not None and result["error_type"] not in ERROR_TYPES:
            raise CaseSetError(f"{where}: error type {result['error_type']!r}")
    if raw["retry"] is not None and (raw["retry"] not in STRATEGIES or not (result and result.get("error_type"))):
        raise CaseSetError(f"{where}: retry must be one of {STRATEGIES}, for a failed result")
    turn = raw["turn"]
    if turn is not None and not all(t in ARG_SCHEMAS for t in turn.get("tools", [None])):
        raise CaseSetError(f"{where}: turn tools must be tool names")
    return Case(**{k: raw[k] for k in KEYS})


def load_cases(path: Path = DEFAULT_CASES) -> list[Case]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseSetError(f"cannot read the acceptance set {path}: {exc}") from None
    cases, seen = [], set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            raise CaseSetError(f"{path}: line {n} is not JSON") from None
        case = _check(raw, f"{path}: line {n}")
        if case.id in seen:
            raise CaseSetError(f"{path}: line {n}: id {case.id!r} twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise CaseSetError(f"{path}: no cases")
    return cases


def set_digest(path: Path = DEFAULT_CASES) -> str:
    """The set's sha256: a run resumes only on the set it started with."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
