"""The clinician's instruction apart from dictated text: ``appliance.agent.reading.dictation``.

Kept at this path for the modules that still import it here (``knowledge_requests``, the
acceptance run, the medication tests, the line-of-text helpers); the agent reads the request
through ``appliance.agent.reading``.
"""

from appliance.agent.reading.dictation import (  # noqa: F401
    DICTATED,
    instruction_text,
    read_instruction,
)
