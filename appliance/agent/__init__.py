"""The v3 code-routed agent (seed 002): the LLM classifies and extracts; code routes."""
