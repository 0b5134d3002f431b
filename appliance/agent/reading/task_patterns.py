"""Task patterns: the steps a clinician's request names (docs/design.md §11).

The model cannot tell when it has done enough, so code reads the request for the steps it
names ("find John Smith, pull his chart and check his meds against warfarin": a patient
search, the chart and an interaction check) and the router continues until each has run.

Invariants:
- Patterns read the instruction only (``dictation.instruction_text``): a dictated note that
  mentions "interactions" or a drug never names a step.
- Each step needs exactly one tool; ``named_steps`` gives each named step once, reads in the
  order the request names them, then the writes.
- Whole words, case-insensitive, every inflection a clinician types (interact, interacts,
  interacting, interaction between ...; the table in tests/agent/test_task_patterns.py).
  ``unless`` blanks text that looks like a step but is another ("safe together" is an
  interaction, not a safety question; "randomised trials" are literature, not a trial search).
- The write steps are ``write_requests``': imperative clauses only, so a question that
  mentions a drug or "prescribe" never requires a write.
- A patient search is named by a search verb before a capitalised name ("find John Smith",
  "look up patient Ana Lopez"); whether it is still needed (no patient ID known) is the
  router's rule.
- Trials: a search names clinical_trial; an NCT id, "trial details" or a trial's eligibility
  criteria name trial_details; "is she eligible for any trials?" names trial_prescreen, which
  then does not also require the trial search (the prescreen searches itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.agent.reading.chart_topics import chart_topics
from appliance.agent.reading.dictation import instruction_text
from appliance.agent.reading.write_requests import (
    ALLERGY,
    CHANGE,
    NOTE,
    PRESCRIBE,
    STATUS,
    write_requests,
)


@dataclass(frozen=True)
class Step:
    name: str
    tool: str
    says: str  # the step in the clinician's terms, for "not done" text
    phrases: re.Pattern | None = None  # None: the step comes from write_requests
    unless: re.Pattern | None = None

    def position(self, text: str) -> int | None:
        """Where the request first names this step, or None."""
        if self.phrases is None:
            return None
        if self.unless is not None:
            text = self.unless.sub(lambda m: " " * len(m.group(0)), text)
        match = self.phrases.search(text)
        return match.start() if match else None


def _words(*alternatives: str) -> re.Pattern:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


_NAME = r"[A-Z][a-z'’\-]+(?:\s+[A-Z][a-z'’\-]+){1,2}\b"  # case matters: names are capitalised
_THEIRS = r"(?:his|her|their|(?:the\s+)?patient'?s)"  # the patient's, not the trial's
_POSSESSIVE = rf"(?:{_THEIRS}|the|this|that|[a-z]+'s)"
_SAFE_TOGETHER = r"together|combine[ds]?|combining|with\s+each\s+other|with\s+one\s+another|alongside"

SEARCH = Step(
    "patient_search", "search_patient", "find the patient",
    re.compile(r"\b(?i:find|search(?:\s+for)?|look\s+up|looking\s+up|locate|pull\s+up|open)\s+"
               r"(?:(?i:the)\s+)?(?:(?i:patient)\s+(?:(?i:named|called)\s+)?)?" + _NAME
               + r"|\b(?i:patient)\s+(?:(?i:named|called)\s+)?" + _NAME),
)
CHART = Step(
    "patient_chart", "get_patient_chart", "review the patient's chart",
    _words(
        r"charts?", rf"(?<!to )(?<!into )(?<!onto ){_POSSESSIVE}\s+(?:medical\s+|health\s+|full\s+)?records?",
        r"medical\s+records?", r"health\s+records?", r"(?:patient|clinical|chart)\s+summary",
        rf"{_THEIRS}\s+summary", rf"(?:{_THEIRS}|current|active)\s+(?:meds|medications|medication\s+list|med\s+list)",
        r"(?:what|which)\s+(?:meds|medications|drugs)\s+(?:is|are)\s+(?:he|she|they)", r"med(?:ication)?\s+list", r"med\s+rec", r"medication\s+reconciliation",
        r"labs", r"lab\s+(?:results?|values?|work|tests?)", r"laboratory\s+results?", r"bloods",
        rf"{_THEIRS}\s+(?:vitals|allergies|allergy\s+list|problems|problem\s+list|(?:medical\s+)?history|results|notes)",
        r"problem\s+list", r"pull(?:ing)?\s+up", r"pull\s+(?:his|her|their|the)\s+(?:chart|record|file)",
        r"review(?:ing)?\s+(?:him|her|them|the\s+patient|patient)",
    ),
    # "chart" as a verb ("chart a penicillin allergy") is a write, not the chart.
    unless=re.compile(r"(?:^|(?<=[.;,!?])|\b(?:and|then|please|also)\b)\s*chart(?=\s+(?:a|an|the|that|this|his|her|their|it)\b)",
                      re.IGNORECASE),
)
INTERACTION = Step(
    "drug_interaction", "check_drug_interactions", "check the drugs against each other for interactions",
    _words(
        r"interact(?:s|ed|ing|ion|ions)?", r"DDIs?", r"co-?administ(?:er|ered|ering|ration)",
        r"combines?", r"combining", r"combined\s+with", r"(?:in\s+)?combination\s+(?:of|with)",
        r"(?:safe|okay|ok|fine|take|takes|taken|taking|give|given|giving|use|used|using|prescribed?|co-?prescribed?|start(?:ed)?)\b[^.?!;]{0,60}?\btogether",
        r"together\s+with", r"with\s+each\s+other", r"with\s+one\s+another", r"alongside", r"mix(?:ing)?",
        r"(?:check|checking|compare|comparing|screen|screening|cross-check)\b[^.?!;]{0,60}?\bagainst",
    ),
)
SAFETY = Step(
    "drug_safety", "check_drug_safety", "check the drug's safety warnings",
    _words(
        r"safety", r"safe", r"safely", r"unsafe", r"warnings?", r"boxed\s+warnings?", r"black[-\s]box", r"FDA",
        r"side[-\s]effects?", r"adverse\s+(?:effects?|events?)", r"contraindicat(?:ed|ion|ions)", r"precautions?",
        r"toxicity", r"toxicities",
    ),
    # "is it safe to give them together" asks about the combination (INTERACTION), not one drug.
    unless=re.compile(rf"\bsafe(?:ly)?\b(?=[^.?!;]{{0,60}}?\b(?:{_SAFE_TOGETHER})\b)", re.IGNORECASE),
)
LITERATURE = Step(
    "literature_search", "search_medical_literature", "search the medical literature",
    _words(
        r"stud(?:y|ies)", r"research", r"evidence", r"literature", r"PubMed", r"papers?", r"articles?",
        r"publications?", r"published", r"meta-?analys[ie]s", r"systematic\s+reviews?", r"RCTs?",
        r"randomi[sz]ed",
    ),
    # Tests called studies, studies that enrol (trials), and "evidence of bleeding" in the
    # chart are not the literature.
    unless=re.compile(r"\b(?:sleep|imaging|nerve\s+conduction|urodynamic|swallow(?:ing)?|stress)\s+stud(?:y|ies)\b"
                      r"|\bstud(?:y|ies)\b(?=[^.?!;]{0,40}?\b(?:recruit|enrol)\w*)"
                      r"|\b(?:no\s+)?evidence\s+of\b", re.IGNORECASE),
)
TRIALS = Step(
    "clinical_trial", "find_clinical_trials", "find clinical trials",
    _words(r"trials?", r"recruit(?:s|ing|ment)?", r"enroll?(?:s|ed|ing|ment)?", r"experimental",
           r"clinicaltrials(?:\.gov)?"),
    # Randomised trials are evidence (literature); "a trial of amoxicillin" is a treatment; the
    # details or criteria of one trial are TRIAL_DETAILS.
    unless=re.compile(r"\brandomi[sz]ed(?:\s+controlled)?\s+trials?\b|\b(?:a|another)\s+trial\s+of\b"
                      r"|\btrial\s+details?\b|\bdetails\s+(?:of|for|on|about)\s+(?:the\s+|this\s+|that\s+)?trial\b"
                      r"|\bcriteria\s+(?:of|for|in)\s+(?:the\s+|this\s+|that\s+)?trial\b", re.IGNORECASE),
)
TRIAL_DETAILS = Step(
    "trial_details", "get_trial_details", "get the trial's details",
    _words(r"NCT\d{8}", r"NCT-DEMO-\d+", r"(?:trial|study)\s+details?",
           r"details\s+(?:of|for|on|about)\s+(?:the\s+|this\s+|that\s+)?(?:trial|study)",
           r"(?:eligibility|inclusion|exclusion|entry)\s+criteria"),
)
PRESCREEN = Step(
    "trial_prescreen", "prescreen_for_trials", "prescreen the patient for clinical trials",
    _words(r"pre-?screen(?:s|ed|ing)?", r"eligib(?:le|ility)\b[^.?!;]{0,40}?\btrials?",
           r"trials?\b[^.?!;]{0,40}?\beligib(?:le|ility)", r"qualif(?:y|ies|ied)\b[^.?!;]{0,30}?\btrials?",
           r"trials?\b[^.?!;]{0,40}?\bqualif(?:y|ies)",
           r"candidate\s+for\s+(?:a\s+|any\s+|the\s+|some\s+)?(?:clinical\s+)?trials?",
           r"match(?:es|ed|ing)?\s+(?:him|her|them|(?:the\s+|this\s+)?patient)\s+(?:to|with)\s+(?:a\s+|any\s+)?(?:clinical\s+)?trials?"),
    # A trial's eligibility criteria are its details, not a question about this patient.
    unless=re.compile(r"\b(?:eligibility|inclusion|exclusion|entry)\s+criteria\b", re.IGNORECASE),
)
READS = (SEARCH, CHART, INTERACTION, SAFETY, LITERATURE, TRIALS, TRIAL_DETAILS, PRESCREEN)
WRITES = {
    PRESCRIBE: Step("prescribe", PRESCRIBE, "write the prescription"),
    CHANGE: Step("change_order", CHANGE, "change the medication order"),
    STATUS: Step("order_status", STATUS, "stop, hold, resume or renew the medication order"),
    ALLERGY: Step("allergy", ALLERGY, "record the allergy"),
    NOTE: Step("clinical_note", NOTE, "save the note"),
}


def named_steps(query: str) -> tuple[Step, ...]:
    """The steps the clinician's instruction names: reads in the order named, then writes (in a
    turn, the reading's ``steps``)."""
    return read_named_steps(instruction_text(query), chart_topics(query), write_requests(query))


def read_named_steps(text: str, topics: tuple[str, ...], writes: tuple[str, ...]) -> tuple[Step, ...]:
    """The parse behind ``named_steps``: ``text`` is the instruction, with its chart topics and
    write requests."""
    found = sorted((pos, i, step) for i, step in enumerate(READS) if (pos := step.position(text)) is not None)
    reads = tuple(step for _pos, _i, step in found)
    if topics and all(step is SEARCH for step in reads):
        # "any allergies?", "last HbA1c?", "allergies of patient Aisha Patel?": the chart (of the
        # patient found, when one is named) answers the whole question
        reads += (CHART,)
    if PRESCREEN in reads:  # the prescreen searches the trials itself
        reads = tuple(step for step in reads if step is not TRIALS)
    return reads + tuple(WRITES[tool] for tool in writes)
