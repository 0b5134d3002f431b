"""The steps a request names (docs/design.md §11), as tables: every inflection of every task
verb, requests naming several steps, and dictated text that names none."""

from __future__ import annotations

import pytest

from appliance.agent.reading.dictation import DICTATED, instruction_text
from appliance.agent.reading.task_patterns import named_steps

SEARCH, CHART, INTERACTION, SAFETY = "patient_search", "patient_chart", "drug_interaction", "drug_safety"
LITERATURE, TRIALS = "literature_search", "clinical_trial"
DETAILS, PRESCREEN = "trial_details", "trial_prescreen"
PRESCRIBE, ALLERGY, NOTE = "prescribe", "allergy", "clinical_note"


@pytest.mark.parametrize("text, expected", [
    ("Save a note: pt asked about interactions with warfarin", f"Save a note: {DICTATED}"),
    ("Write a progress note for pat-017: BP stable, check labs in 3 months", f"Write a progress note for pat-017: {DICTATED}"),
    ("Could you add a note that he wants to join a trial", f"Could you add a note that {DICTATED}"),
    ("Add a telephone note saying she stopped her statin", f"Add a telephone note saying {DICTATED}"),
    ('Log this: "allergic to latex, check safety of gloves"', f"Log this: {DICTATED}"),
    ('He wrote “check interactions” on the referral; what is gout?', f"He wrote {DICTATED} on the referral; what is gout?"),
    # an aside that opens the message is the clinician's own words
    ("Note: she is 30 weeks pregnant. Is labetalol safe?", "Note: she is 30 weeks pregnant. Is labetalol safe?"),
    ("Is nitrofurantoin safe in late pregnancy?", "Is nitrofurantoin safe in late pregnancy?"),
])
def test_instruction_text_leaves_out_only_the_dictated_words(text, expected):
    assert instruction_text(text) == expected


STEP_ROWS = [
    # interaction check: every inflection
    ("Does clopidogrel interact with omeprazole?", [INTERACTION]),
    ("Which antibiotic interacts with methotrexate?", [INTERACTION]),
    ("Is the new statin interacting with anything?", [INTERACTION]),
    ("Has tramadol interacted with sertraline in the past?", [INTERACTION]),
    ("Any interaction between lithium and ibuprofen?", [INTERACTION]),
    ("List the interactions of rifampicin", [INTERACTION]),
    ("Can I combine sildenafil and isosorbide mononitrate?", [INTERACTION]),
    ("Combining methotrexate and trimethoprim: a problem?", [INTERACTION]),
    ("What happens when phenytoin is combined with valproate?", [INTERACTION]),
    ("Is the combination of spironolactone and trimethoprim risky?", [INTERACTION]),
    ("Are lisinopril and spironolactone safe together?", [INTERACTION]),
    ("Is it safe to combine tramadol with sertraline?", [INTERACTION]),
    ("Can she take fluconazole and simvastatin together?", [INTERACTION]),
    ("Is it fine to give linezolid alongside citalopram?", [INTERACTION]),
    ("Any DDIs between amiodarone and digoxin?", [INTERACTION]),
    ("Co-administration of linezolid and fluoxetine?", [INTERACTION]),
    ("Can I mix these two eye drops?", [INTERACTION]),
    # safety check
    ("Is dofetilide safe in renal impairment?", [SAFETY]),
    ("What is the safety profile of isotretinoin?", [SAFETY]),
    ("Can a pregnant woman safely take lisinopril?", [SAFETY]),
    ("Is valproate unsafe in pregnancy?", [SAFETY]),
    ("Any warnings on ciprofloxacin?", [SAFETY]),
    ("Does clozapine carry a boxed warning?", [SAFETY]),
    ("Black box warnings for rosiglitazone", [SAFETY]),
    ("What are the side effects of amiodarone?", [SAFETY]),
    ("Side-effects of finasteride in young men", [SAFETY]),
    ("Common adverse effects of metformin", [SAFETY]),
    ("Contraindications to sumatriptan?", [SAFETY]),
    ("Is ibuprofen contraindicated in CKD stage 4?", [SAFETY]),
    ("What precautions apply to lithium?", [SAFETY]),
    ("FDA label information for dofetilide", [SAFETY]),
    ("Hepatic toxicity of ketoconazole", [SAFETY]),
    # literature
    ("What's the evidence for colchicine after MI?", [LITERATURE]),
    ("Any studies on vitamin D in COPD?", [LITERATURE]),
    ("Is there a study comparing apixaban and rivaroxaban?", [LITERATURE]),
    ("Recent papers on semaglutide and kidney outcomes", [LITERATURE]),
    ("Show me a paper about bronchiolitis", [LITERATURE]),
    ("Articles on early mobilisation after hip fracture", [LITERATURE]),
    ("What does the literature say about tight glucose control?", [LITERATURE]),
    ("Search PubMed for tranexamic acid in trauma", [LITERATURE]),
    ("Any research on intermittent fasting in type 2 diabetes?", [LITERATURE]),
    ("Is there a meta-analysis of statins in the elderly?", [LITERATURE]),
    ("Systematic reviews of acupuncture for back pain", [LITERATURE]),
    ("Published data on ketamine for depression", [LITERATURE]),
    ("Find randomized controlled trials of dapagliflozin", [LITERATURE]),
    # trials
    ("Are there trials for glioblastoma?", [TRIALS]),
    ("Any clinical trial for ALS?", [TRIALS]),
    ("Who is recruiting for sickle cell gene therapy?", [TRIALS]),
    ("Which studies are enrolling patients with IPF?", [TRIALS]),
    ("Can he enrol in something for melanoma?", [TRIALS]),
    ("Experimental treatments for Duchenne?", [TRIALS]),
    ("Look up NCT04368728", [DETAILS]),  # one named trial: its details, not a search
    ("Trials for mesothelioma recruiting in Boston", [TRIALS]),
    # one trial's details and criteria
    ("Get trial details for NCT02300883", [DETAILS]),
    ("Eligibility criteria of NCT02300883?", [DETAILS]),
    ("What are the inclusion criteria of this trial?", [DETAILS]),
    ("Show the details of the trial NCT-DEMO-0001", [DETAILS]),
    ("What are the eligibility criteria for mesothelioma trials?", [DETAILS, TRIALS]),
    # prescreening the patient (the prescreen searches itself: no trial search step)
    ("Is this patient eligible for any trials?", [PRESCREEN]),
    ("Is she eligible for a clinical trial for her CKD?", [PRESCREEN]),
    ("Which trials could he qualify for?", [PRESCREEN]),
    ("Is he a candidate for any clinical trial?", [PRESCREEN]),
    ("Prescreen pat-004 for lung cancer trials", [PRESCREEN]),
    ("Find recruiting trials she might be eligible for", [PRESCREEN]),
    # the chart
    ("Pull up his chart", [CHART]),
    ("Pull up the record for pat-201", [CHART]),
    ("Review her chart before clinic", [CHART]),
    ("Show me his record", [CHART]),
    ("Anything in the medical record about asthma?", [CHART]),
    ("Check his meds", [CHART]),
    ("What are her current medications?", [CHART]),
    ("What meds is she on?", [CHART]),
    ("Reconcile the med list", [CHART]),
    ("Latest labs for pat-201", [CHART]),
    ("Her lab results from last week", [CHART]),
    ("Summarise his history", [CHART]),
    ("Review the patient before the visit", [CHART]),
    ("Chart review for pat-201", [CHART]),
    ("Any evidence of bleeding in his labs?", [CHART]),  # "evidence of" is a finding, not literature
    ("Give me the summary of the evidence on statins", [LITERATURE]),  # not the patient's summary
    ("Which meds interact with warfarin?", [INTERACTION]),  # not the patient's meds
    # a patient search
    ("Find John Smith", [SEARCH]),
    ("Look up Maria Garcia", [SEARCH]),
    ("Search for patient James Wilson", [SEARCH]),
    ("Locate the patient named Ana Lopez", [SEARCH]),
    ("How is patient Peter Okafor doing?", [SEARCH]),
    ("Pull up Maria Garcia", [SEARCH, CHART]),
    ("find john smith", []),  # a name is capitalised; the model may still search
    # writes: imperative clauses only
    ("Prescribe amoxicillin 500 mg three times daily for pat-201", [PRESCRIBE]),
    ("Start him on metformin 500 mg twice daily", [PRESCRIBE]),
    ("Should I prescribe amoxicillin?", []),
    ("In order to be careful, check warfarin safety", [SAFETY]),
    ("Document a latex allergy with hives", [ALLERGY]),
    ("Chart a penicillin allergy for pat-201", [ALLERGY]),
    ("Add a note to her record that she declined the vaccine", [NOTE]),
    # several steps, in the order named
    ("Find John Smith, pull his chart and check his meds against warfarin", [SEARCH, CHART, INTERACTION]),
    ("Look up Maria Garcia, review her labs, check metformin safety and find trials for CKD", [SEARCH, CHART, SAFETY, TRIALS]),
    ("Any studies on apixaban in dialysis? Also, what are its side effects?", [LITERATURE, SAFETY]),
    ("Check interactions between warfarin and aspirin, then save a note: reviewed with pharmacy", [INTERACTION, NOTE]),
    ("Prescribe nitrofurantoin 100 mg twice daily and check its boxed warnings", [SAFETY, PRESCRIBE]),
    # dictated text names no step
    ("Save a note: discussed interactions of warfarin and aspirin, FDA warnings reviewed, studies pending", [NOTE]),
    ("Add a note that she asked about trials for her asthma and her chart is out of date", [NOTE]),
    ('He wrote "check her chart and interactions" on the referral. What is gout?', []),
    ("Give her a trial of amoxicillin", []),  # a therapeutic trial, not a trial search
]


@pytest.mark.parametrize("text, expected", STEP_ROWS, ids=[row[0][:60] for row in STEP_ROWS])
def test_named_steps(text, expected):
    assert [step.name for step in named_steps(text)] == expected
