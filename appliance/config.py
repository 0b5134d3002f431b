"""One settings object for the agent core, read from ``APPLIANCE_*`` environment variables.

The other ``APPLIANCE_*`` variables (the data home, who the servers act for, how a terminal
reaches a clinic host) are process plumbing, listed in ``common.environment`` (docs/design.md
§17, "Configuration by environment").

Invariant: nothing here reaches the network; every path is under ``data_home()`` or the
project's ``models/`` folder unless the operator sets it explicitly.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APPLIANCE_", extra="ignore")

    model: str = Field("gemma3-270m", description="Model profile name (see models/profiles.py).")
    model_path: str | None = Field(None, description="Absolute path of the GGUF, overriding the profile's file.")
    model_sha256: str | None = Field(None, description="Expected sha256 of model_path, when the operator knows it.")
    model_server: str | None = Field(None, description="URL of the clinic host's model server (llama-server, "
                                     "started by `appliance serve`); set by `--host`. None: the model runs in this process.")
    n_threads: int | None = Field(None, description="llama.cpp threads, fixed (the operator's override); default: "
                                  "per call, the cores free now (appliance/llm/threads.py).")
    tool_deadline_seconds: float = Field(10.0, description="Deadline for one MCP tool call (docs/design.md §4.4, §11).")
    max_steps: int = Field(4, description="Tool-loop iterations per turn before synthesis (docs/design.md §11).")
    max_retries: int = Field(2, description="Retries of one tool before it is skipped (docs/design.md §9.2, §11).")
    max_total_retries: int = Field(4, description="Retries across all tools in one turn (docs/design.md §9.2, §11).")
    history_turns: int = Field(4, description="Prior exchanges given to the model (docs/design.md §4.1).")
    override_min_words: int = Field(3, ge=1, le=50, description="Words (of two or more letters) an override of a "
                                    "safety finding needs in its reason, at every door (appliance/safety/policy.py).")
    idle_lock_minutes: float = Field(10.0, description="Minutes without a key or click before the clinic terminal "
                                     "locks (0: never); only when clinician accounts exist.")
    # The sign-in lock-out policy is not a setting: it is the operator's, in the data home
    # (``appliance.accounts.read_policy``, ``appliance user policy``), so no caller's environment
    # can loosen it.
