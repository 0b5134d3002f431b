"""The words code reads eligibility criteria with: conditions, drug classes, lab analytes and
the topics a criterion and a chart fact can share.

Invariants:
- Data only (patterns as text, compiled once); no decisions here (``decide`` and ``relevance``
  use it).
- A condition, class or analyte is listed only when code can tell it apart on the chart: by a
  SNOMED code or a display pattern for a problem, an ingredient pattern for a drug, a LOINC code
  or display pattern and its unit for a lab. What is not listed is left to the model.
- Criterion patterns match lowercase text whose symbols ``decide.normalise`` has spelled out
  (">=" for "≥", "m2" for "m²").
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Concept:
    """A condition: how criteria name it, and how the problem list records it."""

    name: str  # as a clinician reads it
    criterion: re.Pattern
    snomed: frozenset[str]
    display: re.Pattern
    near: re.Pattern | None = None  # a problem like it that may or may not count: the chart does not settle it


def _c(name: str, criterion: str, snomed: str, display: str, near: str | None = None) -> Concept:
    return Concept(name, re.compile(rf"\b(?:{criterion})\b"), frozenset(snomed.split()), re.compile(display, re.I),
                   re.compile(near, re.I) if near else None)


# Order matters: a longer phrase before a shorter one it contains ("type 1 or type 2 diabetes"
# before "type 2 diabetes" before "diabetes").
CONCEPTS: tuple[Concept, ...] = (
    _c("type 1 or type 2 diabetes", r"(?:type (?:1|i) (?:or|and|and/or) (?:type )?(?:2|ii)|type (?:1|i)/(?:2|ii)) "
       r"diabetes(?: mellitus)?", "46635009 44054006", r"type (1|2|i|ii) diabetes", r"diabet"),
    _c("type 2 diabetes", r"type (?:2|ii) diabetes(?: mellitus)?|t2dm|non-insulin[- ]dependent diabetes(?: mellitus)?",
       "44054006", r"type (2|ii) diabetes", r"diabet"),
    _c("type 1 diabetes", r"type (?:1|i) diabetes(?: mellitus)?|t1dm|insulin[- ]dependent diabetes(?: mellitus)?",
       "46635009", r"type (1|i) diabetes", r"diabet"),
    _c("diabetes mellitus", r"diabetes mellitus|diabetes", "73211009 46635009 44054006",
       r"^(?!.*(gestational|insipidus|pre-?diabet)).*(diabetes mellitus|^diabetes$)", r"diabet"),
    _c("hypertension", r"(?:essential |primary |arterial )?hypertension|high blood pressure",
       "38341003 59621000", r"essential hypertension|hypertensive disorder|^hypertension$", r"hypertens"),
    _c("asthma", r"asthma", "195967001", r"asthma"),
    _c("COPD", r"copd|chronic obstructive pulmonary disease", "13645005", r"chronic obstructive|copd"),
    _c("atrial fibrillation", r"atrial fibrillation", "49436004", r"atrial fibrillation"),
    _c("heart failure", r"(?:congestive )?heart failure|chf", "84114007", r"heart failure", r"cardiomyopath|ventricular"),
    _c("chronic kidney disease", r"chronic kidney disease|ckd", "709044004 433144002 431857002 431855005 431856006",
       r"chronic kidney disease", r"kidney|renal|nephr"),
    _c("coronary heart disease", r"coronary (?:heart|artery) disease|coronary arteriosclerosis|cad|chd",
       "53741008", r"coronary"),
    _c("dementia", r"dementia|alzheimer'?s disease", "52448006 26929004", r"dementia|alzheimer", r"cognitive"),
    _c("depression", r"depression|depressive disorder", "35489007", r"depressi", r"bipolar|mood"),
    _c("bipolar disorder", r"bipolar disorder", "13746004", r"bipolar"),
    _c("psychosis", r"psychosis|psychotic disorder", "69322001", r"psychos|psychotic|schizophreni"),
    _c("hyperlipidemia", r"hyperlipid(?:a)?emia|dyslipid(?:a)?emia|hypercholesterol(?:a)?emia", "55822004",
       r"hyperlipid|dyslipid|hypercholesterol"),
    _c("hypothyroidism", r"hypothyroidism", "40930008", r"hypothyroid"),
    _c("rheumatoid arthritis", r"rheumatoid arthritis", "69896004", r"rheumatoid arthritis"),
    _c("epilepsy", r"epilepsy|seizure disorder", "84757009", r"epilep|seizure disorder"),
    _c("Parkinson's disease", r"parkinson'?s disease", "49049000", r"parkinson"),
    _c("osteoporosis", r"osteoporosis", "64859006", r"osteoporosis"),
    _c("gout", r"gout", "90560007", r"gout"),
    _c("obesity", r"obesity", "414916001", r"obesity"),
    _c("anemia", r"an(?:a)?emia", "271737000", r"an(a)?emia"),
    _c("lactic acidosis", r"lactic acidosis", "91273001", r"lactic acidosis"),
    _c("metabolic acidosis", r"metabolic acidosis", "59455009", r"acidosis"),
    _c("stroke", r"stroke|cerebrovascular accident", "230690007", r"stroke|cerebrovascular accident|cerebral infarct",
       r"transient ischa?emic|cerebrovascular"),
    _c("myocardial infarction", r"myocardial infarction|heart attack", "22298006", r"myocardial infarction"),
)


@dataclass(frozen=True)
class DrugClass:
    name: str
    criterion: re.Pattern  # how a criterion names the class
    member: re.Pattern  # an active order's medication name in the class


def _d(name: str, criterion: str, member: str) -> DrugClass:
    return DrugClass(name, re.compile(rf"\b(?:{criterion})\b"), re.compile(rf"\b(?:{member})", re.I))


_DOAC = r"apixaban|rivaroxaban|dabigatran|edoxaban"
DRUG_CLASSES: tuple[DrugClass, ...] = (
    _d("insulin", r"insulin(?: therapy| treatment)?",
       r"insulin|glargine|lispro|aspart|detemir|degludec|glulisine|isophane|nph\b|lantus|levemir|tresiba|toujeo|"
       r"humalog|novolog|humulin|novolin|basaglar"),
    _d("direct oral anticoagulant", r"direct oral anticoagulants?|doacs?|noacs?", _DOAC),
    _d("anticoagulant", r"anticoagulants?|anticoagulation|oral anticoagulants?",
       _DOAC + r"|warfarin|heparin|enoxaparin|dalteparin|fondaparinux"),
    _d("ACE inhibitor", r"ace inhibitors?|ace-inhibitors?|angiotensin[- ]converting enzyme inhibitors?|acei",
       r"\w*pril\b"),
    _d("ARB", r"arbs?|angiotensin (?:ii )?receptor blockers?", r"\w*sartan\b"),
    _d("metformin", r"metformin", r"metformin"),
    _d("statin", r"statins?", r"\w*statin\b"),
    _d("SGLT2 inhibitor", r"sglt-?2 inhibitors?", r"\w*gliflozin\b"),
    _d("GLP-1 receptor agonist", r"glp-?1 (?:receptor )?agonists?", r"\w*glutide\b|exenatide"),
    _d("beta-blocker", r"beta[- ]blockers?", r"\w*olol\b|carvedilol"),
    _d("antiplatelet", r"antiplatelets?(?: agents?| therapy)?", r"aspirin|clopidogrel|ticagrelor|prasugrel"),
    _d("systemic corticosteroid", r"systemic (?:cortico)?steroids?|oral (?:cortico)?steroids?",
       r"prednisone|prednisolone|methylprednisolone|dexamethasone|hydrocortisone"),
    _d("methotrexate", r"methotrexate", r"methotrexate"),
)


@dataclass(frozen=True)
class Analyte:
    name: str  # as a clinician reads it
    criterion: re.Pattern
    loinc: frozenset[str]
    display: re.Pattern
    unit: str  # the unit the chart and criteria use, as ``unit_key`` writes it
    kind: str = "lab"  # or "vital"


def _a(name: str, criterion: str, loinc: str, display: str, unit: str, kind: str = "lab") -> Analyte:
    return Analyte(name, re.compile(rf"\b(?:{criterion})(?![\w/-])"), frozenset(loinc.split()),
                   re.compile(display, re.I), unit, kind)


ANALYTES: tuple[Analyte, ...] = (
    _a("HbA1c", r"hba1c|hb a1c|a1c|hemoglobin a1c|haemoglobin a1c|glycated ha?emoglobin|glycosylated ha?emoglobin",
       "4548-4 17856-6", r"a1c|glycated", "%"),
    _a("eGFR", r"egfr|gfr|estimated glomerular filtration rate", "33914-3 62238-1 98979-8 48642-3 48643-1",
       r"egfr|glomerular", "ml/min/1.73m2"),
    _a("urine albumin-to-creatinine ratio", r"(?:urine |urinary )?albumin[- ]?(?:to[- ]?)?creatinine ratio|u?acr",
       "14959-1 9318-7", r"albumin/creatinine|albumin-to-creatinine", "mg/g"),
    _a("creatinine", r"(?:serum )?creatinine", "2160-0", r"^creatinine$", "mg/dl"),
    _a("potassium", r"(?:serum )?potassium", "2823-3", r"^potassium", "mmol/l"),
    _a("sodium", r"(?:serum )?sodium", "2951-2", r"^sodium", "mmol/l"),
    _a("hemoglobin", r"ha?emoglobin|hb|hgb", "718-7", r"^ha?emoglobin$", "g/dl"),
    _a("platelet count", r"platelets?(?: count)?", "777-3", r"platelet", "10^3/ul"),
    _a("white cell count", r"white (?:blood )?cell count|wbc", "6690-2", r"white blood cell|leukocyte", "10^3/ul"),
    _a("LDL cholesterol", r"ldl(?: cholesterol)?|ldl-c", "13457-7 18262-6", r"ldl", "mg/dl"),
    _a("glucose", r"(?:fasting )?(?:plasma |blood )?glucose", "2345-7", r"^glucose", "mg/dl"),
    _a("ALT", r"alt|alanine aminotransferase", "1742-6", r"^alt\b|alanine", "u/l"),
    _a("AST", r"ast|aspartate aminotransferase", "1920-8", r"^ast\b|aspartate", "u/l"),
    _a("TSH", r"tsh|thyroid[- ]stimulating hormone", "3016-3", r"tsh|thyrotropin", "miu/l"),
    _a("INR", r"inr", "6301-6", r"inr|international normali", ""),
    _a("body-mass index", r"body[- ]mass index|bmi", "39156-5", r"body mass index|bmi", "kg/m2", "vital"),
)

# Units written differently that mean the same (keys as ``unit_key`` writes them).
SAME_UNIT = {"meq/l": "mmol/l", "ml/min/1.73 m2": "ml/min/1.73m2", "ml/min/1.73m^2": "ml/min/1.73m2",
             "ml/min per 1.73m2": "ml/min/1.73m2", "10^9/l": "10^3/ul", "x10^9/l": "10^3/ul", "x 10^9/l": "10^3/ul",
             "k/ul": "10^3/ul", "x10^3/ul": "10^3/ul", "g/l": "g/l", "mu/l": "miu/l", "uiu/ml": "miu/l",
             "kg/m^2": "kg/m2", "iu/l": "u/l", "mg/mmol": "mg/mmol"}


def unit_key(unit: str | None) -> str:
    """A unit as one comparable key ("mL/min/1.73 m²" -> "ml/min/1.73m2")."""
    text = " ".join(str(unit or "").lower().replace("²", "2").replace("µ", "u").replace("μ", "u").split())
    text = text.replace("ml/min/1.73 m2", "ml/min/1.73m2")
    return SAME_UNIT.get(text, text)


# Topics a criterion and a chart fact can share (``relevance``): the criterion's words, the
# fact's words. A fact concerns a criterion when they share a topic or a specific word.
TOPICS: dict[str, tuple[str, str]] = {
    "kidney": (r"kidney|renal|egfr|gfr|glomerul|creatinine|albuminuria|proteinuria|nephr|dialysis|ckd|uacr|acr",
               r"kidney|renal|egfr|glomerul|creatinine|albumin|nephr|dialysis"),
    "glycaemia": (r"diabet|a1c|glyc|glucose|insulin|metformin|t1dm|t2dm|hypoglyc|hyperglyc|sglt|glp-?1",
                  r"diabet|a1c|glucose|insulin|glargine|lispro|aspart|detemir|degludec|metformin|gliflozin|glutide"),
    "blood pressure": (r"hypertens|blood pressure|systolic|diastolic|mm ?hg|antihypertens",
                       r"hypertens|blood pressure|amlodipine|\w+pril\b|\w+sartan\b|thiazide|\w+olol\b"),
    "lipids": (r"lipid|cholesterol|ldl|hdl|triglycer|statin", r"lipid|cholesterol|ldl|hdl|triglycer|statin"),
    "anticoagulation": (r"anticoag|bleed|warfarin|inr|doac|thrombo|embol|atrial fibrillation|haemorrh|hemorrh",
                        r"warfarin|apixaban|rivaroxaban|dabigatran|edoxaban|heparin|inr|atrial fibrillation|"
                        r"platelet|clopidogrel|aspirin|thrombo|embol"),
    "heart": (r"heart|cardi|coronary|myocard|angina|arrhythm|fibrillation|valv|ejection|nt-?probnp|bnp",
              r"heart|cardi|coronary|myocard|angina|fibrillation|valv|natriuretic|nitroglycerin|\w+olol\b"),
    "lung": (r"asthma|copd|pulmonar|lung|respirat|inhal|bronch|smok|pack-?years|oxygen|exacerbation",
             r"asthma|chronic obstructive|pulmonar|lung|respirat|inhaler|bronch|albuterol|tiotropium|fluticasone|"
             r"montelukast|oxygen"),
    "blood count": (r"an(a)?emi|ha?emoglobin|platelet|white (blood )?cell|neutrophil|leuko|thrombocyt|iron|ferritin",
                    r"an(a)?emi|ha?emoglobin|platelet|white blood cell|ferrous|iron"),
    "liver": (r"liver|hepat|cirrho|alt\b|ast\b|bilirubin|transaminase|aminotransferase",
              r"liver|hepat|cirrho|alt\b|ast\b|bilirubin|aminotransferase"),
    "thyroid": (r"thyroid|tsh|levothyrox", r"thyroid|tsh|levothyrox"),
    "mental health": (r"depress|anxiety|bipolar|psychos|psychiatr|suicid|phq|schizo|mental",
                      r"depress|anxiety|bipolar|psychos|sertraline|escitalopram|fluoxetine|citalopram"),
    "neurology": (r"dementia|alzheimer|cognit|parkinson|epilep|seizure|stroke|neurolog",
                  r"dementia|alzheimer|donepezil|parkinson|levodopa|epilep|seizure|levetiracetam|stroke"),
    "body size": (r"body[- ]mass|bmi|obes|weight|kg/m2", r"body mass|obes|weight"),
    "cancer": (r"cancer|carcinoma|malignan|tumou?r|neoplas|oncolog|metasta|chemotherapy|lymphoma|leuk(a)?emia",
               r"cancer|carcinoma|malignan|tumou?r|neoplas|tamoxifen|lymphoma"),
    "immunity": (r"immunosupp|steroid|rheumat|autoimmun|methotrexate|biologic", r"prednis|methotrexate|rheumat"),
}
# Kinds of condition that a problem on the list must itself name to show that the criterion's
# condition is present (``relevance.supports``): chronic kidney disease shares the "kidney" topic
# with "kidney transplant" but is no transplant; hypertensive heart disease is no heart failure.
CONDITION_KINDS = r"transplant|dialysis|failure|cancer|carcinoma|malignan|tumou?r|neoplas|metasta|lymphoma|leuk(?:a)?emi|" \
                  r"infarct|stroke|amputat|resect|surgery|stent|bypass|pacemaker|implant|cirrho|ulcer|fractur|" \
                  r"h(?:a)?emorrhag|bleed|thrombos|embol|aneurysm|sepsis|hiv|hepatitis|tubercul"
# Topics that only some kinds of fact can carry.
AGE_WORDS = r"\bage[sd]?\b|\byears? old\b|\byear-old\b|\byears? of age\b|\badults?\b|\bchild(?:ren|hood)?\b(?!-)|\belderly\b|\bolder\b|" \
            r"\byounger\b|\binfants?\b|\bpa?ediatric|\bneonat|\bjuvenile|\d+\s*(?:\+|years?|yrs?)\b"
SEX_WORDS = r"\bm[ae]n\b|\bwom[ae]n\b|\bmales?\b|\bfemales?\b|\bsex\b|\bgender\b|pregnan|breast|lactat|\bnursing\b|" \
            r"childbearing|contracept|menopaus|menstrua|conceiv|\bboys?\b|\bgirls?\b|prostat|ovar|uter|cervi|gestation"
ALLERGY_WORDS = r"allerg|hypersensitiv|intoleran|anaphyla|\breactions? to\b|\bsensitivity to"
MEDICATION_WORDS = r"therap|treat|medication|\bdrugs?\b|\btak(?:e|es|ing)\b|receiv|prescri|\bdos(?:e|es|ing|age)\b|" \
                   r"\buse of\b|\busing\b|inhibitor|agonist|antagonist|blocker|\bon (?:a |an )?\w+ (?:therapy|regimen)|" \
                   r"regimen|agents?\b"
LAB_WORDS = r"\blevels?\b|\bcounts?\b|mg/dl|mmol|\bratio\b|clearance|ml/min|\blab|\btest\b|serum|plasma|\burine\b|" \
            r"\bvalues?\b|%|g/dl"
VITAL_WORDS = r"blood pressure|mm ?hg|systolic|diastolic|heart rate|pulse|temperature|fever|saturation|spo2|" \
              r"respiratory rate|body[- ]mass|\bbmi\b|weight|kg/m2|vital"
LIFE_WORDS = r"life expectancy|alive|death|deceased|terminal|palliative|hospice"
# Words too common to tie a fact to a criterion on their own.
GENERIC = frozenset("""
    disease disorder disorders chronic acute history active problem problems recorded stage type since severe
    other syndrome patient patients condition conditions finding clinical diagnosis diagnosed known current
    currently medication medications daily twice once times needed every hours ordered reference result results
    previous level levels value values years months weeks days with without from that this have been were which
    their there after before during under over than more less least most high higher low lower normal total
    mellitus none allergies allergy reaction labs vitals mild moderate""".split())
