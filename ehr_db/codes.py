"""Clinical code catalogs used by the demo data and by new prescriptions.

Invariant: every code here is a real, current code of its system, entered only where its
meaning is certain (SNOMED CT concept IDs for disorders, RxNorm ingredient RxCUIs, LOINC
codes for labs and vitals; displays are short clinical names, the code carries the exact
meaning). Anything not listed is stored with a NULL code rather than a
guessed one. Reference ranges are generic adult ranges for demo display; charts flag values
against them (H/L/N) and are no substitute for the performing laboratory's ranges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SNOMED_SYSTEM = "http://snomed.info/sct"
RXNORM_SYSTEM = "http://www.nlm.nih.gov/research/umls/rxnorm"
LOINC_SYSTEM = "http://loinc.org"

# SNOMED CT disorder concepts: code -> preferred display.
SNOMED_CONDITIONS: dict[str, str] = {
    "38341003": "Hypertensive disorder",
    "59621000": "Essential hypertension",
    "44054006": "Type 2 diabetes mellitus",
    "46635009": "Type 1 diabetes mellitus",
    "15777000": "Prediabetes",
    "49436004": "Atrial fibrillation",
    "84114007": "Heart failure",
    "53741008": "Coronary arteriosclerosis",
    "22298006": "Myocardial infarction",
    "55822004": "Hyperlipidemia",
    "709044004": "Chronic kidney disease",
    "433144002": "Chronic kidney disease stage 3",
    "431857002": "Chronic kidney disease stage 4",
    "195967001": "Asthma",
    "13645005": "Chronic obstructive lung disease",
    "61582004": "Allergic rhinitis",
    "77386006": "Pregnancy",
    "271737000": "Anemia",
    "40930008": "Hypothyroidism",
    "35489007": "Depressive disorder",
    "197480006": "Anxiety disorder",
    "69896004": "Rheumatoid arthritis",
    "64859006": "Osteoporosis",
    "396275006": "Osteoarthritis",
    "239873007": "Osteoarthritis of knee",
    "26929004": "Alzheimer's disease",
    "49049000": "Parkinson's disease",
    "84757009": "Epilepsy",
    "406506008": "Attention deficit hyperactivity disorder",
    "65363002": "Otitis media",
    "43878008": "Streptococcal sore throat",
    "24079001": "Atopic dermatitis",
    "68566005": "Urinary tract infectious disease",
    "233604007": "Pneumonia",
    "235595009": "Gastroesophageal reflux disease",
    "128053003": "Deep venous thrombosis",
    "414916001": "Obesity",
    "90560007": "Gout",
    "254837009": "Malignant neoplasm of breast",
}

# RxNorm ingredient RxCUIs (TTY IN): lower-case ingredient name -> code. The same name carries
# the same code in the UMLS starter subset (tests/ehr/test_codes_match_umls.py checks both).
RXNORM_INGREDIENTS: dict[str, str] = {
    "metformin": "6809",
    "warfarin": "11289",
    "aspirin": "1191",
    "ibuprofen": "5640",
    "naproxen": "7258",
    "amoxicillin": "723",
    "penicillin g": "7980",
    "azithromycin": "18631",
    "ciprofloxacin": "2551",
    "cephalexin": "2231",
    "sulfamethoxazole": "10180",
    "trimethoprim": "10829",
    "sulfasalazine": "9524",
    "lisinopril": "29046",
    "losartan": "52175",
    "amlodipine": "17767",
    "hydrochlorothiazide": "5487",
    "furosemide": "4603",
    "spironolactone": "9997",
    "metoprolol": "6918",
    "carvedilol": "20352",
    "atorvastatin": "83367",
    "simvastatin": "36567",
    "rosuvastatin": "301542",
    "acetaminophen": "161",
    "codeine": "2670",
    "morphine": "7052",
    "clopidogrel": "32968",
    "apixaban": "1364430",
    "rivaroxaban": "1114195",
    "amiodarone": "703",
    "digoxin": "3407",
    "nitroglycerin": "4917",
    "levothyroxine": "10582",
    "insulin glargine": "274783",
    "insulin lispro": "86009",
    "albuterol": "435",
    "fluticasone": "41126",
    "budesonide": "19831",
    "montelukast": "88249",
    "tiotropium": "69120",
    "omeprazole": "7646",
    "pantoprazole": "40790",
    "sertraline": "36437",
    "escitalopram": "321988",
    "fluoxetine": "4493",
    "gabapentin": "25480",
    "carbamazepine": "2002",
    "levetiracetam": "114477",
    "prednisone": "8640",
    "methotrexate": "6851",
    "folic acid": "4511",
    "methylphenidate": "6901",
    "tamoxifen": "10324",
    "cetirizine": "20610",
    "allopurinol": "519",
    "epinephrine": "3992",
}


@dataclass(frozen=True)
class LoincTest:
    code: str
    display: str
    unit: str | None
    low: float | None
    high: float | None
    category: str  # "laboratory" | "vital-signs"
    female: tuple[float, float] | None = None  # sex-specific range, when it differs
    male: tuple[float, float] | None = None

    def range_for(self, sex: str | None) -> tuple[float | None, float | None]:
        specific = {"female": self.female, "male": self.male}.get(sex or "")
        return specific if specific else (self.low, self.high)


def _lab(code, display, unit, low, high, female=None, male=None) -> LoincTest:
    return LoincTest(code, display, unit, low, high, "laboratory", female, male)


def _vital(code, display, unit, low, high) -> LoincTest:
    return LoincTest(code, display, unit, low, high, "vital-signs")


LOINC_TESTS: dict[str, LoincTest] = {
    t.code: t
    for t in (
        _lab("4548-4", "Hemoglobin A1c", "%", 4.0, 5.6),
        _lab("2345-7", "Glucose", "mg/dL", 70, 99),
        _lab("2160-0", "Creatinine", "mg/dL", 0.6, 1.3, (0.5, 1.1), (0.7, 1.3)),
        _lab("33914-3", "eGFR", "mL/min/1.73m2", 60, None),
        _lab("3094-0", "Urea nitrogen (BUN)", "mg/dL", 7, 20),
        _lab("2823-3", "Potassium", "mmol/L", 3.5, 5.1),
        _lab("2951-2", "Sodium", "mmol/L", 136, 145),
        _lab("17861-6", "Calcium", "mg/dL", 8.5, 10.5),
        _lab("14959-1", "Urine albumin/creatinine ratio", "mg/g", None, 30),
        _lab("718-7", "Hemoglobin", "g/dL", 12.0, 17.5, (12.0, 15.5), (13.5, 17.5)),
        _lab("6690-2", "White blood cell count", "10^3/uL", 4.5, 11.0),
        _lab("777-3", "Platelet count", "10^3/uL", 150, 400),
        _lab("6301-6", "INR", None, 0.8, 1.2),
        _lab("3084-1", "Uric acid", "mg/dL", 3.5, 7.2),
        _lab("2093-3", "Total cholesterol", "mg/dL", None, 200),
        _lab("13457-7", "LDL cholesterol (calculated)", "mg/dL", None, 100),
        _lab("2085-9", "HDL cholesterol", "mg/dL", 40, None),
        _lab("2571-8", "Triglycerides", "mg/dL", None, 150),
        _lab("1742-6", "ALT", "U/L", 7, 56),
        _lab("1920-8", "AST", "U/L", 10, 40),
        _lab("3016-3", "TSH", "mIU/L", 0.4, 4.0),
        _lab("33762-6", "NT-proBNP", "pg/mL", None, 125),
        _vital("8480-6", "Systolic blood pressure", "mmHg", 90, 129),
        _vital("8462-4", "Diastolic blood pressure", "mmHg", 60, 79),
        _vital("8867-4", "Heart rate", "beats/min", 60, 100),
        _vital("9279-1", "Respiratory rate", "breaths/min", 12, 20),
        _vital("8310-5", "Body temperature", "°C", 36.1, 37.8),
        _vital("59408-5", "Oxygen saturation (pulse oximetry)", "%", 95, 100),
        _vital("29463-7", "Body weight", "kg", None, None),
        _vital("8302-2", "Body height", "cm", None, None),
        _vital("39156-5", "Body mass index", "kg/m2", 18.5, 24.9),
    )
}

# Values whose interpretation code means "above"/"below"/"normal" in HL7 v3 ObservationInterpretation.
_HIGH_CODES = {"H", "HH", "HU", ">"}
_LOW_CODES = {"L", "LL", "LU", "<"}


def interpretation(value: float | None, low: float | None, high: float | None) -> str | None:
    """H, L or N against a reference range; None when there is nothing to compare."""
    if value is None or (low is None and high is None):
        return None
    if high is not None and value > high:
        return "H"
    if low is not None and value < low:
        return "L"
    return "N"


def interpretation_from_code(code: str | None) -> str | None:
    """Map an HL7 interpretation code to the chart's H/L/N flag (others become None)."""
    if code is None:
        return None
    code = code.upper()
    if code in _HIGH_CODES:
        return "H"
    if code in _LOW_CODES:
        return "L"
    return "N" if code == "N" else None


def rxnorm_for(medication_name: str) -> str | None:
    """The RxNorm ingredient code for a medication name, when the name starts with a known
    ingredient ("Metformin ER" -> 6809); None otherwise."""
    words = re.sub(r"[^a-z0-9 ]+", " ", medication_name.lower()).split()
    for n in range(min(len(words), 3), 0, -1):
        code = RXNORM_INGREDIENTS.get(" ".join(words[:n]))
        if code:
            return code
    return None
