"""Constrained-output schemas of the LLM nodes (docs/design.md §6).

Invariant: decision-critical fields first; every field required, nullable where it may be
empty (the grammar enforces presence and order, so defaults would only hide fields).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from mcp_servers.contracts import ToolName

TOOL_NAMES: tuple[str, ...] = get_args(ToolName)


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IntentClassification(_Schema):
    """Node 2: DIRECT or TOOL_NEEDED, a short clinical framing, a non-binding tool hint."""

    intent: Literal["DIRECT", "TOOL_NEEDED"]
    task_summary: str = Field(min_length=1, max_length=240, description="Brief clinical summary (~40 words)")
    suggested_tool: ToolName | None


class ToolSelection(_Schema):
    """Node 3 stage 1, first step: one tool, no nullable distractors."""

    tool_name: ToolName


class NextToolSelection(_Schema):
    """Node 3 stage 1 on re-entry: the model may say "none" (checked, not trusted, by code)."""

    tool_name: Literal[ToolName, "none"]  # type: ignore[valid-type]


class ResultAssessment(_Schema):
    """Node 5: what happened, never what to do next."""

    quality: Literal["success_rich", "success_partial", "no_results", "error_retryable", "error_fatal"]
    brief_summary: str = Field(min_length=1, max_length=200)


class RetryStrategy(_Schema):
    """Node 5a LLM part: retry as is, or re-extract different arguments."""

    strategy: Literal["retry_same", "retry_different_args"]
    reasoning: str | None = Field(max_length=100)


LLM_SCHEMAS: tuple[type[BaseModel], ...] = (
    IntentClassification,
    ToolSelection,
    NextToolSelection,
    ResultAssessment,
    RetryStrategy,
)
