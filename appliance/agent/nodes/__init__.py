"""One module per graph node: its prompt, schema and generation settings live beside it."""
