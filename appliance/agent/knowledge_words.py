"""The words ``knowledge_requests`` reads a clinician's knowledge request by (docs/design.md §11,
"Knowledge requests"): what makes a drug question about its label, what joins two drugs into a
question about giving them together, what a pronoun or a follow-up is, and which words carry no
topic in a search.

Invariants:
- Patterns only, no logic: every pattern is compiled once, case-insensitive, on whole words.
- Label topics (side effects, pregnancy, dosing ...) are apart from the concern words any drug
  question carries ("ok", "risk", "any issue"): with two drugs joined, a concern word is about
  the combination, a label topic is about each drug.
"""

from __future__ import annotations

import re


def words(*alternatives: str) -> re.Pattern:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


# What a label (or the full label the answer points to) says about one drug.
LABEL_TOPIC = words(
    r"doses?", r"dosing", r"dosages?", r"max(?:imum)?\s+dose", r"dose\s+adjust\w*", r"pregnan\w*", r"preg",
    r"breast-?feed\w*", r"lactat\w*", r"nursing", r"child-?bearing", r"conceiv\w*", r"renal\w*", r"kidneys?",
    r"hepatic", r"liver", r"monitor\w*", r"used\s+(?:for|to)", r"uses?\s+(?:for|of)", r"indications?", r"indicated",
    r"what\s+(?:is|are)", r"what's", r"tell\s+me\s+about", r"info(?:rmation)?", r"(?<!what\s)(?<!how\s)about", r"mechanism", r"work",
    r"class", r"overdose", r"elderly", r"children", r"boxed", r"black\s+box", r"label", r"cautions?",
    r"SEs?", r"s/e", r"side\s*fx", r"ADRs?", r"AEs?", r"adverse\s+(?:drug\s+)?(?:reactions?|effects?|events?)",
    r"side[-\s]effects?", r"warnings?", r"contraindicat\w*", r"precautions?", r"toxicity", r"profile",
    r"who\s+(?:shouldn't|should\s+not|can't|cannot|must\s+not)\s+(?:get|take|have|use|receive|be\s+given)",
    # what a prescriber checks before starting ("anything I should know before starting X?")
    r"(?:should|need\s+to|must)\s+know", r"before\s+(?:starting|prescribing|giving|using)", r"counsel\w*",
    r"(?:watch|look)\s+out\s+for", r"max(?:imum)?", r"duration", r"how\s+long", r"limits?",
    # harms a label's warnings name
    r"abuse", r"misuse", r"addict\w*", r"dependence", r"withdrawal", r"QTc?", r"bleed\w*", r"hypoglyc\w*",
    r"hyperkal\w*", r"serotonin\s+syndrome", r"angioedema", r"rash\w*", r"suicid\w*", r"falls?",
)
# Words any question about a drug may carry; with two drugs joined they ask about the pair.
CONCERN = words(r"risks?", r"dangers?", r"dangerous", r"avoid", r"ok", r"okay", r"problems?", r"issues?",
                r"concerns?", r"safe(?:ly|ty)?")
INTERACTION_SINGLE = words(r"interact\w*", r"DDIs?", r"affect(?:s|ed|ing)?", r"interfer\w*")
TOGETHER = words(r"with", r"w/?", r"together", r"alongside", r"plus", r"and", r"on\s+top\s+of", r"while\s+on",
                 r"whilst\s+on")
COMBINE_QUESTION = words(r"can|could|should|may|safe(?:ly)?|ok|okay|fine|alright|allowed|give|take|use|add",
                         r"start|prescribe|co-?prescribe")
ALLERGY_AFTER = re.compile(r"[\s-]*(?:allerg\w*|hypersensitiv\w*|intoleran\w*)", re.IGNORECASE)
_SOMEONE = (r"(?:a\s+|an\s+|my\s+|the\s+|this\s+|our\s+)?(?:patients?|pts?|someone|somebody|anyone|person|people|"
            r"man|woman|lady|guy|child|kid|him|her|them|those|one)")
_ON = r"(?:already\s+|currently\s+|also\s+)?(?:on|taking|using|receiving)"
# Between two drug mentions: they are given together ("X with Y", "X and Y", "Y in a patient on X").
JOIN = re.compile(
    r"^\s*(?:(?:is|it|safe|safely|ok|okay|fine|to|give|given|take|taken|use|used|together|co-?prescribed?)\s+){0,4}"
    r"(?:,|\+|&|with|w/?|and|plus|alongside|vs\.?|on\s+top\s+of|(?:(?:in|to|for)\s+)?" + _SOMEONE + r"\s+" + _ON + r"|"
    r"(?:while|whilst|when|if)\s+(?:on|taking)|on|or)\s*$", re.IGNORECASE)
# Joins that always mean the pair, whatever else the words ask ("X + Y - hyperkalaemia risk?").
STRONG_JOIN = re.compile(r"^\s*(?:\+|&|with|w/?|plus|alongside|on\s+top\s+of|(?:(?:in|to|for)\s+)?" + _SOMEONE
                         + r"\s+" + _ON + r"|(?:while|whilst|when|if)\s+(?:on|taking))\s*$", re.IGNORECASE)
# The same join closing a few words after the first drug ("X QT prolongation with Y"), no clause between.
JOIN_AFTER_WORDS = re.compile(r"^[^,;.?!]{0,40}?\s(?:with|w/|plus|alongside|on\s+top\s+of|(?:in|to|for)\s+" + _SOMEONE
                              + r"\s+" + _ON + r")\s*$", re.IGNORECASE)
# "adding X to Y": the drug after "to" is the one the patient is on.
ADDED_TO = re.compile(r"^\s*to\s+(?:(?:his|her|their|the|a|an)\s+)?$", re.IGNORECASE)
# A drug and a short qualifier, and nothing else ("pradaxa in ESRD", "metformin during Ramadan").
DRUG_IN = re.compile(r"^\s*(?:in|during|for|with)\s+[\w/ -]{1,40}?\s*\??\s*$", re.IGNORECASE)
# Before a drug the patient is on ("pt on X, ...") and before one to be added ("ok to add Y?").
ON_DRUG = re.compile(r"\b" + _ON + r"\s*$", re.IGNORECASE)
NEW_DRUG = re.compile(r"\b(?:add|adding|start|starting|begin|give|giving|prescribe|prescribing|co-?prescribe|try|take|"
                      r"wants?|wanting|needs?|asking\s+for|asks\s+for|requesting|"
                      r"use|switch(?:ing)?\s+to)\s+(?:him|her|them|some|a|an)?\s*$", re.IGNORECASE)
PRONOUN = words(r"it", r"its", r"this\s+(?:drug|medication|medicine|one)", r"that\s+(?:drug|medication|medicine|one)",
                r"the\s+(?:drug|medication|medicine)", r"them", r"both", r"these", r"those", r"they", r"their")
PLURAL = words(r"them", r"both", r"these", r"those", r"they", r"their")
FOLLOW_UP = re.compile(r"^\s*(?:and|also|what\s+about|how\s+about|any|same\s+for)\b", re.IGNORECASE)
# A follow-up that adds a drug to the one just discussed ("and with Flagyl?", "what about with aspirin").
WITH_EARLIER = re.compile(r"^\s*(?:(?:and|also|what\s+about|how\s+about|same)\s+)?(?:with|w/|plus|alongside|"
                          r"together\s+with|on\s+top\s+of)\b", re.IGNORECASE)
# Lab words, said of a drug ("what labs to monitor with methotrexate"), and the words that make
# them a patient's ("her labs", "the patient's bloods").
LAB_WORDS = words(r"labs", r"lab\s+(?:results?|values?|work|tests?)", r"laboratory\s+(?:results?|tests?)", r"bloods",
                  r"blood\s+(?:tests?|work)")
PATIENT_REF = words(r"his", r"her", r"hers", r"their", r"patient'?s", r"pt'?s", r"this\s+(?:patient|pt)", r"charts?",
                    r"records?")
# Words about the patient, not the drug ("what dose is she on?", "did the rash start after X?");
# "they"/"them" are left out: they stand for drugs as often ("are they safe together?").
ABOUT_PATIENT = re.compile(r"^\s*(?:did|has|have|was|were)\b|\b(?:he|she|he's|she's|his|her|hers|him|"
                           r"(?:the|this|my)\s+(?:patient|pt))\b", re.IGNORECASE)
NCT_ID = re.compile(r"\bNCT(?:\d{8}|-DEMO-\d+)\b", re.IGNORECASE)
PHASE = re.compile(r"\bphase\s*(1|2|3|4|i{1,3}|iv)\b", re.IGNORECASE)
ROMAN = {"i": "1", "ii": "2", "iii": "3", "iv": "4"}
FOR_PATIENT = words(r"for\s+(?:this|my|the)\s+patient", r"for\s+(?:him|her|them)",
                    r"(?:find|get|search|look\s+for)\s+(?:him|her|them)\s+(?:a|any|some)\s+(?:clinical\s+)?trials?", r"(?:could|can|would)\s+(?:he|she|they)\s+"
                    r"(?:join|enrol\w*|enroll\w*|take\s+part)")
# The words after which a trial request names its condition ("a trial on preeclampsia").
TRIAL_TOPIC = re.compile(r"\b(?:trials?|stud(?:y|ies))\b.*?\b(?:for|on|in|of|about|treating|targeting|into)\s+(.+)$",
                         re.IGNORECASE)
# Dosage-form words a recogniser may keep with a name ("fentanyl patch"): the drug is the rest.
FORM_WORDS = frozenset("""patch patches tablet tablets tab tabs capsule capsules cap caps injection inj infusion
    cream ointment gel inhaler spray drops solution suspension syrup oral iv im sc transdermal pen""".split())
# Words that carry no topic in a literature or trial search ("what is the evidence for X in Y").
FILLER = frozenset("""a an the any some what whats is are was were be there do does did for in on of about with
    to from by and or me show find search look up give list tell latest recent new current newest evidence study studies
    trial trials research paper papers article articles literature publication publications published pubmed
    meta-analysis meta-analyses systematic review reviews rct rcts randomised randomized controlled clinical
    recruiting recruit enrolling enrol enroll open ongoing active completed available that which who patient patients
    please can could you i we us say says show shows showing suggest suggests support supports data good best
    phase nct ctgov clinicaltrials gov on-going currently right now our my this these anyone someone anybody
    running conducting doing happening going base landmark key major known""".split())
# Words that say who, not what, in a prescreen ("any trials she might qualify for?").
PRESCREEN_FILLER = FILLER | frozenset("""he she him her they them his hers their might may would could qualify
    qualifies eligible eligibility candidate candidates match matches prescreen pre-screen screen be fit suitable
    join enter enrol enroll take part get into""".split())
# Words a typo check never reads as a drug: the request's own vocabulary.
NOT_TYPOS = frozenset("""about warning warnings safety effects effect adverse boxed interact interacts interaction
    interactions contraindications contraindicated pregnancy pregnant dosing dosage doses kidney renal hepatic
    liver elderly children evidence studies trials recruiting enrolling literature papers articles there their
    these those which what where could would should patient patients together combine taking given giving
    prescribe prescribing clinical failure cancer disease diabetes heart lung breast atrial fibrillation
    hypertension infection research monitor monitoring indications indicated tell other people""".split())
# Literature said in other words than the task patterns' ("what's the data on X").
LITERATURE_MORE = words(r"the\s+data\s+(?:on|for|behind|about)", r"outcomes?\s+data", r"landmark\s+(?:trials?|studies|papers?)",
                        r"citations?", r"references?")
# Studies still running are trials, not literature ("open hypertension studies?").
OPEN_STUDIES = re.compile(r"\b(?:open|ongoing|on-going|active|enrolling)\s+(?:[\w-]+\s+){0,3}?stud(?:y|ies)\b", re.IGNORECASE)
TRIAL_EVIDENCE = re.compile(r"\btrials?\s+(?:show\w*|found|suggest\w*|say|data|evidence|results?)\b|"
                            r"\b(?:evidence|results?|data)\s+(?:from|of)\s+(?:the\s+)?trials?\b", re.IGNORECASE)
# "Is amoxicillin a penicillin?" asks about the drugs, not for their labels.
QUESTION_START = re.compile(r"\s*(?:is|are|was|were|does|do|did|has|have|which|why|how)\b", re.IGNORECASE)
CLAUSES = re.compile(r"[,;.?!]+|\s+then\s+|\s+and\s+(?=(?:find|check|search|look|review|pull|show|get|list)\b)",
                     re.IGNORECASE)
