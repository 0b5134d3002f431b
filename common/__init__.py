"""The small base every layer may use: the root exception, where state lives, how SQLite is opened.

Invariant: this package imports nothing else from the project (the floor plan's ground floor).
"""
