"""The steps a clinician's request names: ``appliance.agent.reading.task_patterns``.

Kept at this path for the modules that still import it here (``knowledge_requests``, the
acceptance run, the medication tests, the line-of-text helpers); the agent reads the request
through ``appliance.agent.reading``.
"""

from appliance.agent.reading.task_patterns import (  # noqa: F401
    CHART,
    INTERACTION,
    LITERATURE,
    PRESCREEN,
    READS,
    SAFETY,
    SEARCH,
    TRIAL_DETAILS,
    TRIALS,
    WRITES,
    Step,
    named_steps,
    read_named_steps,
)
