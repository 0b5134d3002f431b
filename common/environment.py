"""Every ``APPLIANCE_*`` environment variable the appliance reads, in one table, and the one place
the process plumbing among them is read and set.

Why the environment: it is how one process's configuration reaches the processes it starts (the
three MCP servers over stdio, llama-server and the host's model front, the commands a check
runs), and how an operator or a unit file configures a command without a file to edit. Two kinds:

- The agent core's settings (``MODEL``, ``MODEL_PATH``, ``MODEL_SERVER``, ``N_THREADS``, the
  loop's limits): ``appliance.config.Settings``, a pydantic-settings model that reads them,
  typed and described there. They are not repeated here (this floor cannot import that one);
  ``tests/test_floor_plan.py`` checks that every ``APPLIANCE_*`` name in the code is one or
  the other.
- The plumbing below: where data lives, who the servers act for, how a terminal reaches and
  proves itself to a clinic host. Read with ``read`` (stripped; empty when unset), from
  ``os.environ`` unless a child's environment is given.

Invariants:
- ``--host URL`` is the one command-line option that sets variables (``point_at_host``), once,
  before a command runs, so every MCP client and the model client the command makes (and the
  servers they start) reach the host; a variable the caller set already wins for the model.
- ``scratch_home`` (``common.locations``) sets ``HOME`` and ``MODELS`` for a check's lifetime
  and restores them; nothing else here writes the environment.
- Sign-in policy is not configurable here or anywhere in the environment (``appliance.accounts``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

HOME = "APPLIANCE_HOME"
MODELS = "APPLIANCE_MODELS"
USER = "APPLIANCE_USER"
MCP_TOKEN = "APPLIANCE_MCP_TOKEN"
MCP_CA = "APPLIANCE_MCP_CA"
MCP_START = "APPLIANCE_MCP_START"
LLAMA_SERVER = "APPLIANCE_LLAMA_SERVER"
MODEL_UPSTREAM_KEY = "APPLIANCE_MODEL_UPSTREAM_KEY"
MODEL_SERVER = "APPLIANCE_MODEL_SERVER"  # a Settings field; named here because --host sets it
SERVERS = ("ehr", "umls", "knowledge")

VARIABLES: dict[str, str] = {
    HOME: "the data home (default: $XDG_DATA_HOME/clinical-appliance)",
    MODELS: "where `appliance model install` puts operator-supplied models (default: models/ in the data home)",
    USER: "who the MCP servers act for: the author of EHR writes (the signed-in clinician; else the OS account)",
    MCP_TOKEN: "this terminal's token for a clinic host (`appliance terminal add` there)",
    MCP_CA: "the clinic host's certificate, when it is not in the system's trust store",
    MCP_START: "set by the MCP client in each stdio server's environment, to find that server's process",
    LLAMA_SERVER: "the llama-server binary (default: beside the Python that runs the appliance)",
    MODEL_UPSTREAM_KEY: "the key `appliance serve` makes for llama-server and the model front (never on disk)",
    **{f"APPLIANCE_MCP_{name.upper()}_URL": f"the {name} MCP server's URL on a clinic host (set by --host)"
       for name in SERVERS},
}


def server_url_variable(server: str) -> str:
    """``APPLIANCE_MCP_<NAME>_URL``: where the named MCP server is reached over HTTP."""
    return f"APPLIANCE_MCP_{server.upper()}_URL"


def read(name: str, env: Mapping[str, str] | None = None) -> str:
    """The variable's value, stripped ("" when unset), from ``env`` or this process's environment."""
    if name not in VARIABLES:  # the Settings fields (MODEL_SERVER among them) are read by Settings
        raise KeyError(f"{name} is not an appliance variable (common.environment.VARIABLES)")
    return (os.environ if env is None else env).get(name, "").strip()


def point_at_host(urls: Mapping[str, str]) -> None:
    """``--host``: every server URL of the host (``appliance.host.serve.host_urls``) into this
    process's environment, which the clients it makes and the servers they start inherit. The
    model server's URL only when the caller has not set one (empty: the model in process)."""
    urls = dict(urls)
    os.environ.setdefault(MODEL_SERVER, urls.pop(MODEL_SERVER))
    unknown = set(urls) - set(VARIABLES)
    if unknown:
        raise KeyError(f"not appliance variables: {sorted(unknown)}")
    os.environ.update(urls)
