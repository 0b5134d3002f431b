"""The clinician's words, read once per turn (docs/design.md §4.1, §5).

``request.read_turn`` builds one frozen ``RequestReading`` at INPUT_ASSEMBLY (``state.reading``);
nodes, the router, the knowledge routing and the graph read its fields and never parse the
message again. The text-taking functions (``dictation.instruction_text``,
``write_requests.write_requests``, ``chart_topics.chart_topics``, ``task_patterns.named_steps``,
``orders.prescribing_order``) parse the words they are given, for callers outside a turn: the
acceptance run's oracle and tests. ``words`` is the agent's one tokeniser and
``patient_refs`` its one patient-ID rule; outside the agent, the conversation core (the answer
to "which one did you mean?") and ``appliance.screen_text`` (IDs on screen) use them.
"""
