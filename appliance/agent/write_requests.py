"""Whether the clinician's words ask to change the record: ``appliance.agent.reading.write_requests``.

Kept at this path for the modules that still import it here (``knowledge_requests``, the
acceptance run, the medication tests, the line-of-text helpers); the agent reads the request
through ``appliance.agent.reading``.
"""

from appliance.agent.reading.write_requests import (  # noqa: F401
    ALLERGY,
    CHANGE,
    NOT_CHANGED,
    NOTE,
    PRESCRIBE,
    PRESCRIBING_VERB,
    STATUS,
    change_request,
    clauses,
    drug_names,
    read_write_requests,
    write_requests,
)
