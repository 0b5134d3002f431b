"""Chart questions in the words: which sections of the chart the clinician asks about ("any
allergies?", "what is she on?", "last HbA1c?").

Invariants: ``chart_topics`` reads the clinician's instruction only (dictated text is data) and
never a request to write: "add a penicillin allergy" is a write, "any allergies?" a chart
question. ``chart_answers.render`` answers the topics from the chart's rows.
"""

from __future__ import annotations

import re

from appliance.agent.reading.dictation import instruction_text
from appliance.agent.reading.write_requests import write_requests

# Topic -> the words that ask for it. "summary" is the whole chart.
_LAB_WORDS = (r"labs?|lab results?|blood (?:work|tests?)|hba1c|a1c|haemoglobin a1c|hemoglobin a1c|egfr|"
              r"creatinine|potassium|sodium|inr|h(?:a)?emoglobin|hb|tsh|cholesterol|ldl|hdl|triglycerides?|glucose|"
              r"platelets?|wbc|white (?:cell|blood cell) count|alt|ast|bun|urea|uric acid|nt-?probnp|bnp|"
              r"albumin|calcium")
TOPICS: dict[str, re.Pattern] = {
    "allergies": re.compile(r"\ballerg\w*|\bintoleran\w*|\banaphyla\w*|\badverse reactions?\b", re.I),
    "medications": re.compile(r"\bmed(?:ication)?s\b|\bmedication\b|\bprescriptions?\b|\btaking\b|"
                              r"\bwhat (?:is|'s) (?:she|he|they|the patient) on\b|\bcurrent therapy\b|"
                              r"\b(?:she|he|they|patient) (?:is|are) on\b|"
                              r"\b(?:is|are) (?:she|he|they|the patient) (?:on|taking|using)\b|"
                              r"\b(?:does|do) (?:she|he|they|the patient) (?:take|use)\b|"
                              r"\bblood thinners?\b|\banticoagula\w*", re.I),
    "problems": re.compile(r"\bproblems?\b|\bconditions?\b|\bdiagnos\w*|\b(?:medical|past) history\b|\bpmh\b|"
                           r"\bcomorbid\w*", re.I),
    "labs": re.compile(rf"\b(?:{_LAB_WORDS})\b", re.I),
    "vitals": re.compile(r"\bvitals?\b|\bvital signs\b|\bblood pressure\b|\bbp\b|\bheart rate\b|\bpulse\b|"
                         r"\bweight\b|\bheight\b|\bbmi\b|\btemperature\b|\boxygen saturation\b|\bsp ?o2\b", re.I),
    "notes": re.compile(r"\b(?:last|recent|latest|clinical|progress) notes?\b|\bnotes? (?:say|said|from)\b", re.I),
    "summary": re.compile(r"\bsummar\w*|\boverview\b|\b(?:review|show|pull up|open|read) (?:the |her |his |their |this )?"
                          r"(?:patient'?s )?chart\b|\bwhat'?s in (?:the|her|his|their) chart\b", re.I),
}
ORDER = ("allergies", "medications", "problems", "labs", "vitals", "notes")
# "Does he have diabetes?", "is she diabetic?": a question about a condition, when the words ask
# about no other section ("does he have any allergies?" is about allergies).
_HAS_CONDITION = re.compile(r"\b(?:does|do) (?:she|he|they|the patient) have\b|\bhas (?:she|he|they|the patient) "
                            r"(?:got|had|been diagnosed)\b|\b(?:is|are) (?:she|he|they|the patient) (?:\w+ )?"
                            r"(?:diabetic|hypertensive|asthmatic|anaemic|anemic|pregnant|epileptic|obese)\b", re.I)


def chart_topics(query: str) -> tuple[str, ...]:
    """The chart sections the words ask about, in ``ORDER`` (all of them for a summary); ()
    for a request to write or words that ask about no section."""
    return read_chart_topics(instruction_text(query), write_requests(query))


def read_chart_topics(text: str, writes: tuple[str, ...]) -> tuple[str, ...]:
    """The parse behind ``chart_topics``: ``text`` is the instruction, ``writes`` its write requests."""
    if writes:
        return ()
    found = {topic for topic, pattern in TOPICS.items() if pattern.search(text)}
    if not found and _HAS_CONDITION.search(text):
        found = {"problems"}
    if "summary" in found:
        return ORDER
    return tuple(t for t in ORDER if t in found)
