"""The offline clinical assistant: agent core (config, llm runtime, graph, nodes, tools client, CLI)."""
