"""The offline clinical assistant: agent core (config, llm runtime, graph, nodes, tools client, CLI)."""

from common.offline import no_phone_home

no_phone_home()
