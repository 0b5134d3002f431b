"""The code-routed agent (docs/design.md): the LLM classifies and extracts; code routes."""
