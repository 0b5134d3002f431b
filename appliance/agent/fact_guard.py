"""The fact guard: an answer is shown as the answer only when every clinical fact it names is
in what the turn read (tool results, image findings) or in what the clinician wrote (issue 23).
A weak model invents allergies, doses and other patients' IDs; the appliance must not pass them
on as the chart.

What counts as a fact, and how it is matched (whole words, case-insensitive):
- a patient ID (``patient_refs.find_patient_ids``): the ID itself must occur in the sources;
- a drug (the drug recogniser: brands and salts resolve to generics): its generic must be among
  the generics the sources name, or an ingredient of one;
- an allergen (foods, environmental allergens, drug classes named as allergens) and a condition:
  some word of its group of synonyms ("high blood pressure" / "hypertension") must occur;
- a reaction in a sentence about allergies ("rash", "hives", "anaphylaxis");
- a measured value: a number with a clinical unit ("7.9 %", "50 mg", "42 mL/min") or right after
  a lab or vital name ("HbA1c 7.9", "eGFR of 42"): the number must occur in the sources.

Scope: every answer is checked for patient IDs and for allergy statements; an answer in a turn
that read patient data (or answered a chart question) is checked for all of the above. A general
question with no patient data read ("how does metformin work?") may name drugs and conditions
the clinician did not: medical knowledge is not the chart.

Invariant: pure over its inputs; never raises on any text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from appliance.agent.reading.patient_refs import find_patient_ids, id_words
from appliance.medication.names import DrugRecogniser
from ehr_db.codes import SNOMED_CONDITIONS


@dataclass(frozen=True)
class Unsupported:
    kind: str  # patient ID | drug | allergen | condition | reaction | value
    text: str  # as the answer wrote it

    def words(self) -> str:
        return f"{self.kind} '{self.text}'"


def _groups(*rows: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(term.strip() for term in row.split("|")) for row in rows)


CONDITIONS = _groups(
    "hypertension|hypertensive|high blood pressure|htn", "diabetes|diabetic|t2dm|t1dm|dm2", "prediabetes|pre-diabetes",
    "chronic kidney disease|ckd|kidney disease|renal disease|renal failure|kidney failure|renal impairment",
    "asthma|asthmatic", "copd|chronic obstructive|emphysema|chronic bronchitis", "atrial fibrillation|afib|a-fib",
    "heart failure|chf|hfref|hfpef|cardiac failure", "coronary artery disease|coronary arteriosclerosis|cad|angina",
    "myocardial infarction|heart attack|stemi|nstemi", "hyperlipidemia|hyperlipidaemia|high cholesterol|dyslipidemia|"
    "dyslipidaemia|hypercholesterolemia", "pregnancy|pregnant", "anemia|anaemia|anaemic|anemic",
    "hypothyroidism|hypothyroid", "hyperthyroidism|hyperthyroid|thyrotoxicosis", "depression|depressive|depressed",
    "anxiety|anxious", "rheumatoid arthritis", "osteoporosis", "osteoarthritis", "alzheimer|alzheimer's|dementia",
    "parkinson|parkinson's", "epilepsy|epileptic|seizure|seizures", "adhd|attention deficit",
    "otitis media|ear infection", "pneumonia", "gerd|reflux|gastroesophageal|gastro-oesophageal",
    "deep vein thrombosis|deep venous thrombosis|dvt|venous thromboembolism|vte", "pulmonary embolism|pe",
    "obesity|obese", "gout", "cancer|malignancy|malignant|carcinoma|tumour|tumor|neoplasm|lymphoma|leukemia|leukaemia",
    "stroke|cva|cerebrovascular accident", "cirrhosis|liver disease|hepatic impairment", "hepatitis", "hiv",
    "tuberculosis", "urinary tract infection|uti|cystitis", "sore throat|pharyngitis|strep throat",
    "dermatitis|eczema", "allergic rhinitis|hay fever", "psoriasis", "lupus", "migraine", "schizophrenia",
    "bipolar", "sepsis", "sickle cell", "cystic fibrosis", "multiple sclerosis", "crohn|ulcerative colitis|ibd",
    "peptic ulcer|gastrointestinal bleeding|gi bleed", "glaucoma", "cataract", "sleep apnea|sleep apnoea",
    "hyperkalemia|hyperkalaemia", "hyponatremia|hyponatraemia", "hypoglycemia|hypoglycaemia",
    *(display.lower() for display in SNOMED_CONDITIONS.values()),
)
ALLERGENS = _groups(
    "peanut|peanuts", "tree nut|tree nuts", "shellfish|shrimp|prawn|crab|lobster", "egg|eggs", "milk|dairy|lactose",
    "soy|soya", "wheat|gluten", "sesame", "latex", "pollen|pollens", "dander|cat dander|dog dander",
    "dust mite|dust mites|house dust", "bee sting|bee stings|wasp|venom|insect sting|insect stings",
    "contrast|contrast media|iodinated contrast|iodine", "sulfa|sulpha|sulfonamide|sulfonamides|sulphonamides",
    "penicillin|penicillins", "cephalosporin|cephalosporins", "nsaid|nsaids", "opioid|opioids|opiate|opiates",
    "adhesive|adhesive tape|tape", "mold|mould",
)
REACTIONS = _groups(
    "rash|rashes|maculopapular", "hives|urticaria", "anaphylaxis|anaphylactic", "angioedema|angio-oedema|swelling",
    "itch|itching|itchy|pruritus", "bronchospasm|wheeze|wheezing", "stevens-johnson|sjs|toxic epidermal",
    "nausea|vomiting", "hallucinations|confusion", "dyspepsia|gastrointestinal bleeding|gi bleeding",
    "hypotension|low blood pressure", "sneezing|itchy eyes", "contact dermatitis", "hyperthyroidism", "fever",
)
_ALLERGY_SENTENCE = re.compile(r"\ballerg\w*|\bintoleran\w*|\breacts?\b|\breactions?\b|\bsensitiv\w*", re.I)
_UNITS = (r"%|mg/dl|mmol/l|g/dl|ml/min(?:/1\.73\s?m2)?|mmhg|kg|cm|bpm|beats/min|breaths/min|miu/l|u/l|iu/l|"
          r"pg/ml|ng/ml|mg/g|mg|mcg|µg|micrograms?|milligrams?|units?|g|ml|meq/l|°c|°f")
_VALUE_WITH_UNIT = re.compile(rf"(?<![\w.])(\d+(?:[.,]\d+)?)\s*(?:{_UNITS})(?![\w/])", re.I)
_LAB_NAMES = (r"hba1c|a1c|egfr|gfr|creatinine|potassium|sodium|inr|h(?:a)?emoglobin|hb|tsh|ldl|hdl|cholesterol|"
              r"triglycerides|glucose|platelets?|wbc|alt|ast|bun|urea|uric acid|bnp|nt-probnp|blood pressure|bp|"
              r"weight|heart rate|pulse|temperature|bmi|saturation|spo2|respiratory rate")
_VALUE_AFTER_NAME = re.compile(rf"\b(?:{_LAB_NAMES})\b[^\d\n.;]{{0,24}}?(\d+(?:[.,]\d+)?)", re.I)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# Dates, times and identifiers hold digits that are no measured value ("2026-11-01", "pat-011").
_NOT_VALUES = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?|\b\d{1,2}:\d{2}\b|"
                         r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-\d+[A-Za-z0-9.\-]*")


def _number_key(text: str) -> str:
    try:
        return repr(float(text.replace(",", "")))
    except ValueError:
        return text


def _has(term: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text, re.I) is not None


def _terms(groups, answer: str, sources: str, kind: str) -> list[Unsupported]:
    out = []
    for group in groups:
        said = [t for t in group if _has(t, answer)]
        if said and not any(_has(t, sources) for t in group):
            out.append(Unsupported(kind, said[0]))
    return out


def _generics(drugs: DrugRecogniser, text: str) -> set[str]:
    found = set()
    for generic in drugs.find(text):
        found.add(generic)
        found.update(part for part in re.split(r"[-/]", generic) if part)
    return found


def _numbers(text: str) -> set[str]:
    return {_number_key(n) for n in _NUMBER.findall(_NOT_VALUES.sub(" ", text))}


def _near(name: str, sources: str) -> set[str]:
    """The numbers within ``NEAR`` characters after each occurrence of ``name`` in the sources:
    a value the answer gives a drug or a lab must be that drug's or that lab's own."""
    found: set[str] = set()
    for hit in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sources, re.I):
        found |= _numbers(sources[hit.end():hit.end() + NEAR])
    return found


NEAR = 160  # characters: one chart row as the sources hold it ("medication_name" ... "dosage": "5 mg")


def _values(answer: str, sources: str, drugs: DrugRecogniser) -> list[Unsupported]:
    """Numbers with a unit or after a lab name that the sources do not hold; a number right
    after a drug or lab name must be among the numbers the sources give that name."""
    everywhere = _numbers(sources)
    names = [(m.start, m.end, m.text) for m in drugs.mentions(answer)]
    names += [(m.start(), m.end(), m.group(0)) for m in re.finditer(rf"\b(?:{_LAB_NAMES})\b", answer, re.I)]
    out = []
    for pattern in (_VALUE_WITH_UNIT, _VALUE_AFTER_NAME):
        for match in pattern.finditer(answer):
            number = _number_key(match.group(1))
            owner = [n for n in names if n[1] <= match.start(1) and match.start(1) - n[1] <= 30]
            allowed = _near(owner[-1][2], sources) if owner else everywhere
            if number not in allowed:
                out.append(Unsupported("value", (answer[owner[-1][0]:match.end()] if owner else match.group(0)).strip()))
    return out


def sources_text(texts: list[str], results: list[dict | None]) -> str:
    """What the turn read and the clinician wrote, as one text the guard searches."""
    parts = [t for t in texts if t]
    for result in results:
        if result:
            try:
                parts.append(json.dumps(result, ensure_ascii=False, default=str))
            except (TypeError, ValueError):
                parts.append(str(result))
    return "\n".join(parts)


def unsupported_facts(answer: str, sources: str, drugs: DrugRecogniser, *, patient_data: bool) -> list[Unsupported]:
    """The facts ``answer`` names that ``sources`` does not hold (see the module docstring),
    each once, in the order checked."""
    found: list[Unsupported] = []
    known_ids = set(find_patient_ids(sources)) | set(id_words(sources))
    found += [Unsupported("patient ID", pid) for pid in find_patient_ids(answer) if pid not in known_ids]
    sentences = re.split(r"(?<=[.!?;])\s+|\n", answer)
    allergy_text = " ".join(s for s in sentences if _ALLERGY_SENTENCE.search(s))
    if allergy_text:
        found += _terms(ALLERGENS, allergy_text, sources, "allergen")
        found += _terms(REACTIONS, allergy_text, sources, "reaction")
    if patient_data:
        if not allergy_text:
            found += _terms(ALLERGENS, answer, sources, "allergen")
        found += _terms(REACTIONS, answer, sources, "reaction")
        known = _generics(drugs, sources)
        for mention in drugs.mentions(answer):
            parts = {mention.generic, *re.split(r"[-/]", mention.generic)}
            if not parts & known:
                found.append(Unsupported("drug", mention.text))
        found += _terms(CONDITIONS, answer, sources, "condition")
        found += _values(answer, sources, drugs)
    return list(dict.fromkeys(found))


__all__ = ["ALLERGENS", "CONDITIONS", "REACTIONS", "Unsupported", "sources_text", "unsupported_facts"]
