"""The clinic terminal: a Textual front end over the agent core.

Invariant: this package imports the core; the core never imports it (tests/test_import_hygiene.py).
"""
