"""The clinician's words, read once per turn (docs/design.md §4.1, §5).

``request.read`` builds one frozen ``RequestReading`` at INPUT_ASSEMBLY; nodes, the router and
the graph read its fields and never parse the message again. ``words`` is the agent's one
tokeniser. ``current`` holds the turn's reading so the parse functions, asked again about the
same message (by modules that take the text, not the state), answer from it.
"""
