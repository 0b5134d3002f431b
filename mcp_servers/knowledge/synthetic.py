"""Synthetic ClinicalTrials.gov studies for the trial-search benchmark, made from the real
sample records by varying their fields.

No bulk ClinicalTrials.gov download is at hand offline, so ``appliance bench tools`` measures
search latency on studies generated here: each is one of the 126 real records shipped in
``data/trials_ctgov_sample.json`` (the TREC 2022 mesothelioma sample) with a new
``NCT8nnnnnnn`` id and varied fields: its conditions (kept, or swapped for a condition from a
pool of the sample's own and common chronic conditions, with a title to match), overall
status, phases, study type, age limits, sex, sites and arms. Eligibility texts are the sample's
real ones (every generated study carries one). Nothing here is a real study.

Invariants:
- Deterministic: the same ``n`` and ``seed`` give the same studies, byte for byte.
- The studies are API v2 JSON (``protocolSection`` ...), written as the bulk download is (a
  zip of one ``NCT*.json`` file per study) and imported through ``import_ctgov_studies``, so
  the benchmark exercises the import path a real download takes.
"""

from __future__ import annotations

import json
import random
import zipfile
from collections.abc import Iterator
from pathlib import Path

from mcp_servers.knowledge.starter import DATA_DIR

# Common conditions beside the sample's own, so queries differ in how many trials they match.
EXTRA_CONDITIONS = (
    "Type 2 Diabetes Mellitus", "Type 1 Diabetes", "Hypertension", "Chronic Kidney Disease", "Heart Failure",
    "Atrial Fibrillation", "Coronary Artery Disease", "Asthma", "Chronic Obstructive Pulmonary Disease",
    "Major Depressive Disorder", "Generalized Anxiety Disorder", "Schizophrenia", "Bipolar Disorder",
    "Alzheimer Disease", "Parkinson Disease", "Multiple Sclerosis", "Epilepsy", "Migraine", "Stroke",
    "Rheumatoid Arthritis", "Osteoarthritis, Knee", "Psoriasis", "Atopic Dermatitis", "Crohn Disease",
    "Ulcerative Colitis", "Hepatitis C", "HIV Infections", "Tuberculosis", "COVID-19", "Influenza",
    "Obesity", "Nonalcoholic Steatohepatitis", "Osteoporosis", "Hypothyroidism", "Breast Cancer",
    "Prostate Cancer", "Colorectal Cancer", "Pancreatic Cancer", "Non-Small Cell Lung Cancer",
    "Small Cell Lung Cancer", "Melanoma", "Glioblastoma", "Acute Myeloid Leukemia", "Multiple Myeloma",
    "Diffuse Large B-Cell Lymphoma", "Ovarian Cancer", "Cervical Cancer", "Hepatocellular Carcinoma",
    "Renal Cell Carcinoma", "Bladder Cancer", "Sickle Cell Disease", "Cystic Fibrosis", "Preeclampsia",
    "Gestational Diabetes", "Chronic Pain", "Low Back Pain", "Insomnia", "Opioid Use Disorder",
    "Alcohol Use Disorder", "Smoking Cessation",
)
TITLE_TEMPLATES = (
    "A Study of {intervention} in Patients With {condition}",
    "{intervention} Versus Placebo in Adults With {condition}",
    "Safety and Efficacy of {intervention} for {condition}",
    "Observational Registry of Patients With {condition}",
    "{intervention} Compared With Standard Care in {condition}",
)
# ClinicalTrials.gov's overall statuses, roughly as often as the registry holds them.
STATUSES = (("COMPLETED", 45), ("UNKNOWN", 15), ("RECRUITING", 12), ("ACTIVE_NOT_RECRUITING", 6),
            ("TERMINATED", 6), ("NOT_YET_RECRUITING", 5), ("WITHDRAWN", 4), ("ENROLLING_BY_INVITATION", 2),
            ("SUSPENDED", 1))
PHASE_SETS = ((["NA"], 30), ([], 20), (["PHASE2"], 15), (["PHASE1"], 10), (["PHASE3"], 10), (["PHASE4"], 7),
              (["PHASE1", "PHASE2"], 5), (["PHASE2", "PHASE3"], 2), (["EARLY_PHASE1"], 1))
MIN_AGES = ((None, 10), ("18 Years", 60), ("12 Years", 5), ("6 Months", 3), ("2 Years", 3), ("40 Years", 10),
            ("65 Years", 9))
MAX_AGES = ((None, 55), ("65 Years", 12), ("75 Years", 12), ("80 Years", 8), ("17 Years", 5), ("99 Years", 8))
SEXES = (("ALL", 88), ("FEMALE", 8), ("MALE", 4))
CITIES = ("Boston, Massachusetts, United States", "Toronto, Ontario, Canada", "Lyon, France", "Leeds, United Kingdom",
          "Melbourne, Victoria, Australia", "Seoul, Korea, Republic of", "Sao Paulo, Brazil", "Madrid, Spain",
          "Houston, Texas, United States", "Chicago, Illinois, United States", "Utrecht, Netherlands",
          "Copenhagen, Denmark")


def _weighted(rng: random.Random, options):
    values, weights = zip(*options)
    return rng.choices(values, weights)[0]


def sample_records() -> list[dict]:
    """The real sample records shipped with the starter content (126 studies)."""
    return json.loads((DATA_DIR / "trials_ctgov_sample.json").read_text(encoding="utf-8"))["trials"]


def _ages(rng: random.Random) -> tuple[str | None, str | None]:
    while True:
        lo, hi = _weighted(rng, MIN_AGES), _weighted(rng, MAX_AGES)
        lo_years = 0.0 if lo is None else float(lo.split()[0]) / (12 if "Month" in lo else 1)
        hi_years = 200.0 if hi is None else float(hi.split()[0])
        if lo_years < hi_years:
            return lo, hi


def synthetic_studies(n: int, seed: int = 17) -> Iterator[dict]:
    """``n`` API v2 studies varied from the real sample (see the module docstring)."""
    rng = random.Random(seed)
    base = sample_records()
    texts = [t["eligibility_criteria"] for t in base if t.get("eligibility_criteria")]
    pool = sorted({c for t in base for c in t.get("conditions") or []} | set(EXTRA_CONDITIONS))
    for i in range(n):
        record = base[i % len(base)]
        conditions = list(record.get("conditions") or [])
        interventions = list(record.get("interventions") or []) or ["Standard care"]
        title = record["title"]
        if rng.random() < 0.7 or not conditions:  # most studies get another condition
            conditions = rng.sample(pool, k=rng.choice((1, 1, 2)))
            title = rng.choice(TITLE_TEMPLATES).format(intervention=interventions[0], condition=conditions[0])
        minimum, maximum = _ages(rng)
        sites = rng.randrange(0, 6)
        nct = f"NCT8{i:07d}"
        yield {"protocolSection": {
            "identificationModule": {"nctId": nct, "briefTitle": title},
            "statusModule": {"overallStatus": _weighted(rng, STATUSES),
                             "lastUpdatePostDateStruct": {"date": f"20{rng.randrange(10, 25)}-0{rng.randrange(1, 10)}-15"}},
            "conditionsModule": {"conditions": conditions, "keywords": list(record.get("keywords") or [])[:4]},
            "designModule": {"studyType": record.get("study_type") or rng.choice(("INTERVENTIONAL", "OBSERVATIONAL")),
                             "phases": _weighted(rng, PHASE_SETS)},
            "armsInterventionsModule": {
                "interventions": [{"name": name} for name in interventions],
                "armGroups": [{"label": f"Arm {k + 1}: {name}", "type": "EXPERIMENTAL",
                               "interventionNames": [name]} for k, name in enumerate(interventions[:3])],
            },
            "eligibilityModule": {"eligibilityCriteria": texts[rng.randrange(len(texts))],
                                  "sex": _weighted(rng, SEXES), "minimumAge": minimum, "maximumAge": maximum},
            "contactsLocationsModule": {"locations": [
                {"facility": f"Synthetic site {rng.randrange(1, 400)}", "city": city}
                for city in rng.sample(CITIES, k=sites)]},
        }}


def write_bulk_zip(path: Path, n: int, seed: int = 17) -> Path:
    """The studies as ClinicalTrials.gov's bulk download lays them out: one JSON file each."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for study in synthetic_studies(n, seed):
            nct = study["protocolSection"]["identificationModule"]["nctId"]
            archive.writestr(f"ctg-studies/{nct}.json", json.dumps(study))
    return path


__all__ = ["EXTRA_CONDITIONS", "sample_records", "synthetic_studies", "write_bulk_zip"]
