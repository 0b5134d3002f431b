"""The last check before an answer reaches a screen, the same in the terminal and the line
session: a patient ID that the turn did not read, the clinician did not write and the
conversation is not about is never shown, whatever produced the text (the model's wording or a
notice quoting it).

Invariants:
- Allowed IDs: every token of the turn's sources as the fact guard reads them (the clinician's
  words, the open patient, each call's arguments and results: a search's matches may list other
  patients, and are shown), plus the patients the conversation is about.
- Any other ID (``patient_refs.find_patient_ids``) is replaced by ``HIDDEN``; nothing else in
  the text changes, so checked text passes through untouched.
- Words are read by the agent's one ID rule (``appliance.agent.reading.patient_refs``: the IDs
  in text, every word that could be an ID as written, an ID standing alone), as the fact guard
  reads them; this module has no pattern of its own.
"""

from __future__ import annotations

from appliance.agent.fact_guard import sources_text
from appliance.agent.reading.patient_refs import (
    find_patient_ids,
    id_words,
    standing_alone,
)

HIDDEN = "[another patient's ID, not shown]"


def allowed_patient_ids(state, conversation: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The IDs a screen may show after this turn (see the module docstring); ``state`` None (a
    result made by code alone, e.g. the prescreen) allows the conversation's patients only."""
    if state is None:
        return set(conversation)
    texts = [state.user_query or "", state.selected_patient_id or ""]
    results = [r.args for r in state.tool_results] + [r.result for r in state.tool_results]
    sources = sources_text(texts, results)
    tokens = set(find_patient_ids(sources)) | set(id_words(sources))
    return tokens | {t.lower() for t in tokens} | set(conversation)


def screen_safe(text: str, allowed: set[str]) -> str:
    """``text`` with every patient ID outside ``allowed`` replaced by ``HIDDEN``."""
    for pid in find_patient_ids(text or ""):
        if pid in allowed:
            continue
        text = standing_alone(pid).sub(HIDDEN, text)
    return text
