"""How a clinician names a patient in words: ``appliance.agent.reading.patient_refs``.

Kept at this path for the modules that still import it here (``knowledge_requests``, the
acceptance run, the medication tests, the line-of-text helpers); the agent reads the request
through ``appliance.agent.reading``.
"""

from appliance.agent.reading.patient_refs import (  # noqa: F401
    CANDIDATE_LINE_RE,
    ID_WORD_RE,
    MRN_RE,
    QUESTION_RE,
    RECORD_SHAPE_RE,
    UUID_RE,
    Candidate,
    candidates_in,
    choice_from_history,
    choose,
    find_patient_ids,
    id_words,
    short_ids,
    typed_ids,
)
