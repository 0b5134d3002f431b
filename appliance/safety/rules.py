"""Curated chart-aware rules: pregnancy, renal function, age, and class-level interactions.

Each table is keyed by ingredient (``ing:<name>``) or class (``class:<id>``, from
``appliance.safety.classes``) and says what the gate reports when the chart matches. They
complement the local drug data (whose boxed warnings, contraindications and warnings the gate
also reads); the severity reported is the higher of the two. Curated from the curator's
knowledge of the US labels and the guidance named beside each table; not exhaustive, and to be
reviewed by a pharmacist before clinical use.

Invariants:
- Severities are ``classes.HIGH`` / ``MODERATE`` / ``LOW`` only.
- Renal bands are ``(below_egfr, severity, text)``, most severe first: the first band whose
  bound is above the patient's eGFR applies. eGFR (mL/min/1.73 m2) stands in for creatinine
  clearance, which the labels use; the text says so where the label's unit differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.safety.classes import HIGH, LOW, MODERATE

# -- pregnancy ---------------------------------------------------------------------------------
# Source: US labels' Boxed Warning / Contraindications / Use in Specific Populations sections,
# by the curator's knowledge. High: contraindicated or a known major teratogen; moderate: avoid
# or use only if the benefit justifies the risk.
PREGNANCY: dict[str, tuple[str, str]] = {
    "ing:warfarin": (HIGH, "contraindicated in pregnancy (embryopathy, fetal bleeding) except with mechanical valves"),
    "ing:methotrexate": (HIGH, "contraindicated in pregnancy for non-cancer use (embryo-fetal toxicity, fetal death)"),
    "class:ace_inhibitors": (HIGH, "fetal toxicity (boxed warning): stop when pregnancy is detected"),
    "class:arbs": (HIGH, "fetal toxicity (boxed warning): stop when pregnancy is detected"),
    "ing:isotretinoin": (HIGH, "contraindicated in pregnancy (major teratogen)"),
    "ing:valproate": (HIGH, "major teratogen (neural tube defects, boxed warning)"),
    "ing:mycophenolate": (HIGH, "embryo-fetal toxicity (boxed warning)"),
    "ing:misoprostol": (HIGH, "can cause abortion and birth defects"),
    "ing:leflunomide": (HIGH, "contraindicated in pregnancy (boxed warning)"),
    "ing:thalidomide": (HIGH, "contraindicated in pregnancy (major teratogen)"),
    "ing:finasteride": (HIGH, "contraindicated in pregnancy (male fetal genital abnormalities)"),
    "ing:testosterone": (HIGH, "contraindicated in pregnancy (virilisation of a female fetus)"),
    "class:statins": (MODERATE, "discontinue in most pregnant patients (FDA 2021: no longer contraindicated)"),
    "class:tetracyclines": (MODERATE, "avoid after about 15 weeks (fetal tooth and bone effects)"),
    "class:aromatic_anticonvulsants": (MODERATE, "teratogenic risk: weigh against seizure control, specialist advice"),
    "ing:lithium": (MODERATE, "cardiac malformation risk: specialist advice"),
    "ing:amiodarone": (MODERATE, "fetal harm (fetal thyroid and cardiac effects)"),
    "ing:tamoxifen": (MODERATE, "embryo-fetal toxicity: pregnancy should be excluded"),
    "class:nsaids": (MODERATE, "avoid from about 20 weeks (oligohydramnios, premature ductus closure)"),
    "class:opioids": (MODERATE, "neonatal opioid withdrawal syndrome with prolonged use (boxed warning)"),
    "ing:trimethoprim": (MODERATE, "folate antagonist: avoid in the first trimester"),
    "ing:sulfamethoxazole": (MODERATE, "avoid near term (neonatal kernicterus)"),
    "ing:apixaban": (MODERATE, "direct oral anticoagulants are not recommended in pregnancy (little human data)"),
    "ing:rivaroxaban": (MODERATE, "direct oral anticoagulants are not recommended in pregnancy (little human data)"),
    "ing:dabigatran": (MODERATE, "direct oral anticoagulants are not recommended in pregnancy (little human data)"),
    "ing:edoxaban": (MODERATE, "direct oral anticoagulants are not recommended in pregnancy (little human data)"),
}

# -- renal function ----------------------------------------------------------------------------
# Source: US labels' dosing in renal impairment, KDIGO 2012/2024 CKD guidance (NSAIDs, metformin)
# and AGS Beers Criteria 2023 (renal table), by the curator's knowledge.
RENAL: dict[str, tuple[tuple[float, str, str], ...]] = {
    "ing:metformin": (
        (30, HIGH, "contraindicated below eGFR 30"),
        (45, MODERATE, "starting is not recommended at eGFR 30-45; if already taking, reassess and keep to 1000 mg/day"),
        (60, LOW, "check eGFR every 3-6 months at eGFR below 60"),
    ),
    "class:nsaids": (
        (30, HIGH, "avoid below eGFR 30 (nephrotoxicity, hyperkalaemia)"),
        (60, MODERATE, "nephrotoxic: avoid prolonged use in CKD, monitor creatinine and potassium"),
    ),
    "ing:dofetilide": (
        (20, HIGH, "contraindicated below creatinine clearance 20 mL/min"),
        (60, MODERATE, "dose by creatinine clearance (40-60: 250 mcg twice daily; 20-40: 125 mcg twice daily)"),
    ),
    "class:potassium_sparing": (
        (30, HIGH, "hyperkalaemia risk: not recommended below eGFR 30"),
        (60, MODERATE, "hyperkalaemia risk: monitor potassium and renal function"),
    ),
    "ing:apixaban": ((60, MODERATE, "check the dose-reduction criteria (two of: age 80 or over, weight 60 kg or "
                                    "less, creatinine 1.5 mg/dL or more); little data below creatinine clearance 25"),),
    "ing:rivaroxaban": (
        (15, HIGH, "avoid below creatinine clearance 15 mL/min"),
        (50, MODERATE, "reduce the dose at creatinine clearance 15-50 mL/min (atrial fibrillation: 15 mg daily)"),
    ),
    "ing:dabigatran": (
        (30, HIGH, "avoid below creatinine clearance 30 mL/min"),
        (50, MODERATE, "reduce the dose or avoid with interacting drugs at creatinine clearance 30-50 mL/min"),
    ),
    "ing:enoxaparin": ((30, MODERATE, "reduce the dose below creatinine clearance 30 mL/min"),),
    "class:ace_inhibitors": (
        (30, MODERATE, "start low (lisinopril 5 mg) and monitor creatinine and potassium below eGFR 30"),
        (60, LOW, "monitor creatinine and potassium"),
    ),
    "class:arbs": ((60, LOW, "monitor creatinine and potassium"),),
    "ing:digoxin": ((60, MODERATE, "renally cleared: reduce the dose and check levels"),),
    "ing:gabapentin": ((60, MODERATE, "dose by creatinine clearance"),),
    "ing:pregabalin": ((60, MODERATE, "dose by creatinine clearance"),),
    "ing:trimethoprim": (
        (15, HIGH, "not recommended below creatinine clearance 15 mL/min"),
        (30, MODERATE, "halve the dose at creatinine clearance 15-30 mL/min; hyperkalaemia risk"),
    ),
    "ing:sulfamethoxazole": (
        (15, HIGH, "not recommended below creatinine clearance 15 mL/min"),
        (30, MODERATE, "halve the dose at creatinine clearance 15-30 mL/min"),
    ),
    "ing:nitrofurantoin": ((30, HIGH, "avoid below creatinine clearance 30 mL/min (Beers 2023)"),),
    "ing:methotrexate": (
        (30, HIGH, "renally cleared: avoid below eGFR 30"),
        (60, MODERATE, "renally cleared: reduce the dose and monitor for toxicity"),
    ),
    "ing:allopurinol": ((60, MODERATE, "start low and titrate in CKD"),),
    "ing:tramadol": ((30, MODERATE, "below creatinine clearance 30: every 12 hours, at most 200 mg/day"),),
    "ing:morphine": ((30, MODERATE, "active metabolites accumulate: reduce the dose or choose another opioid"),),
    "ing:codeine": ((30, MODERATE, "active metabolites accumulate: avoid"),),
    "ing:ciprofloxacin": (
        (30, MODERATE, "adjust the dose below creatinine clearance 30 mL/min"),
        (50, LOW, "adjust the dose at creatinine clearance 30-50 mL/min"),
    ),
    "ing:hydrochlorothiazide": ((30, MODERATE, "ineffective below eGFR 30"),),
    "ing:rosuvastatin": ((30, MODERATE, "below creatinine clearance 30: start 5 mg, at most 10 mg daily"),),
    "ing:sitagliptin": ((45, MODERATE, "reduce the dose below eGFR 45"),),
    "ing:lithium": ((60, MODERATE, "renally cleared: reduce the dose and check levels"),),
}
# Renal daily caps: ingredient -> (below this eGFR, at most this many mg a day, source), each
# band read at the patient's eGFR (the lowest bound above it). An order above its band's cap is
# high: the new daily dose is what is compared, so an increase is judged as what it makes.
RENAL_DAILY_CAPS: dict[str, tuple[tuple[float, float, str], ...]] = {
    "metformin": ((45, 1000.0, "FDA 2016 metformin labelling and KDIGO 2022 diabetes in CKD: eGFR 30-44"),),
    "tramadol": ((30, 200.0, "Ultram label, creatinine clearance below 30 mL/min"),),
    "rosuvastatin": ((30, 10.0, "Crestor label, severe renal impairment not on haemodialysis"),),
    "dofetilide": ((40, 0.25, "Tikosyn label, creatinine clearance 20-40 mL/min: 125 mcg twice daily"),
                   (60, 0.5, "Tikosyn label, creatinine clearance 40-60 mL/min: 250 mcg twice daily")),
}
# Members a class's renal bands do not apply to: low-dose aspirin is not a nephrotoxic NSAID dose.
RENAL_EXEMPT: dict[str, frozenset[str]] = {"class:nsaids": frozenset({"aspirin"})}
# Drugs whose renal status matters enough that a chart without any eGFR is worth saying so.
RENAL_NEEDS_EGFR = frozenset({"ing:metformin", "ing:dofetilide", "ing:dabigatran", "ing:rivaroxaban",
                              "ing:nitrofurantoin", "ing:methotrexate", "ing:lithium", "ing:digoxin"})

# -- age -------------------------------------------------------------------------------------
PAEDIATRIC_AGE = 18
OLDER_ADULT_AGE = 65
PAEDIATRIC_NOTE = "paediatric dosing is not covered by the local drug data: check a paediatric reference (weight-based dose)"
# (under this age, severity, text, source): the finding's text ends with the source.
PAEDIATRIC: dict[str, tuple[int, str, str, str]] = {
    "ing:codeine": (12, HIGH, "contraindicated under 12 (life-threatening respiratory depression)",
                    "FDA Drug Safety Communication 2017-04-20 and codeine labels, Contraindications"),
    "ing:tramadol": (12, HIGH, "contraindicated under 12 (life-threatening respiratory depression)",
                     "FDA Drug Safety Communication 2017-04-20 and Ultram label, Contraindications"),
    "ing:promethazine": (2, HIGH, "contraindicated under 2 (fatal respiratory depression)",
                         "Phenergan label, boxed warning"),
    "ing:aspirin": (16, HIGH, "not for children and teenagers (Reye's syndrome)",
                    "aspirin OTC Drug Facts (Reye's syndrome warning) and Surgeon General's advisory 1982/1986"),
    "ing:bismuth subsalicylate": (12, MODERATE, "a salicylate: not for children under 12 (Reye's syndrome)",
                                  "Pepto-Bismol OTC Drug Facts"),
    "ing:loperamide": (2, HIGH, "contraindicated under 2 (ileus, respiratory depression)",
                       "Imodium label, Contraindications"),
    "ing:benzocaine": (2, HIGH, "not for children under 2 (methaemoglobinaemia)",
                       "FDA Drug Safety Communication 2018-05-23 (oral benzocaine)"),
    "class:tetracyclines": (8, MODERATE, "tooth discoloration under 8",
                            "tetracycline-class labels, Warnings (tooth development)"),
    "class:fluoroquinolones": (18, MODERATE, "musculoskeletal adverse events: not first-line under 18",
                               "fluoroquinolone labels, Use in Specific Populations (pediatric use)"),
}
# Under this age with a tonsillectomy or adenoidectomy on the chart (problems or notes):
# (severity, text, source).
AFTER_TONSILLECTOMY_AGE = 18
AFTER_TONSILLECTOMY: dict[str, tuple[str, str, str]] = {
    "ing:codeine": (HIGH, "contraindicated under 18 after tonsillectomy or adenoidectomy (deaths in ultra-rapid "
                          "metabolisers)", "FDA Drug Safety Communication 2017-04-20, codeine labels, boxed warning"),
    "ing:tramadol": (HIGH, "contraindicated under 18 after tonsillectomy or adenoidectomy",
                     "FDA Drug Safety Communication 2017-04-20 and Ultram label, Contraindications"),
}
# AGS Beers Criteria 2023 ("potentially inappropriate in older adults: avoid"), by the curator's
# knowledge of the published list; only unconditional "avoid" entries that can be judged at
# order time (duration-based ones such as PPIs over 8 weeks are left out).
BEERS: dict[str, str] = {
    "ing:diphenhydramine": "strongly anticholinergic first-generation antihistamine",
    "ing:hydroxyzine": "strongly anticholinergic first-generation antihistamine",
    "ing:chlorpheniramine": "strongly anticholinergic first-generation antihistamine",
    "ing:promethazine": "strongly anticholinergic first-generation antihistamine",
    "class:benzodiazepines": "cognitive impairment, delirium, falls and fractures",
    "ing:zolpidem": "Z-drug: delirium, falls and fractures",
    "ing:eszopiclone": "Z-drug: delirium, falls and fractures",
    "ing:amitriptyline": "strongly anticholinergic, sedating tricyclic",
    "ing:imipramine": "strongly anticholinergic, sedating tricyclic",
    "ing:cyclobenzaprine": "muscle relaxant: anticholinergic, sedating, falls",
    "ing:methocarbamol": "muscle relaxant: anticholinergic, sedating, falls",
    "ing:carisoprodol": "muscle relaxant: anticholinergic, sedating, falls",
    "ing:glyburide": "sulfonylurea: prolonged hypoglycaemia",
    "ing:glimepiride": "sulfonylurea: prolonged hypoglycaemia",
    "ing:glipizide": "sulfonylurea: hypoglycaemia",
    "ing:ibuprofen": "NSAID: GI bleeding and kidney injury; avoid chronic use",
    "ing:naproxen": "NSAID: GI bleeding and kidney injury; avoid chronic use",
    "ing:diclofenac": "NSAID: GI bleeding and kidney injury; avoid chronic use",
    "ing:meloxicam": "NSAID: GI bleeding and kidney injury; avoid chronic use",
    "ing:ketorolac": "NSAID: GI bleeding and kidney injury; avoid",
    "ing:indomethacin": "NSAID: GI bleeding, kidney injury and CNS effects; avoid",
    "ing:aspirin": "avoid for primary prevention of cardiovascular disease (bleeding)",
    "ing:warfarin": "avoid starting as first-line for atrial fibrillation or VTE unless a DOAC is unsuitable",
    "ing:rivaroxaban": "avoid for long-term atrial fibrillation or VTE treatment in favour of safer alternatives",
    "ing:digoxin": "avoid as first-line for atrial fibrillation or heart failure; avoid doses above 0.125 mg/day",
    "ing:amiodarone": "avoid as first-line for atrial fibrillation unless heart failure or LV hypertrophy",
    "ing:nifedipine": "avoid the immediate-release form (hypotension, myocardial ischaemia)",
    "ing:doxazosin": "avoid as an antihypertensive (orthostatic hypotension)",
    "ing:prazosin": "avoid as an antihypertensive (orthostatic hypotension)",
    "ing:terazosin": "avoid as an antihypertensive (orthostatic hypotension)",
    "ing:clonidine": "avoid as first-line antihypertensive (CNS effects, bradycardia)",
    "ing:meperidine": "neurotoxic metabolite; safer opioids exist",
    "ing:metoclopramide": "extrapyramidal effects and tardive dyskinesia",
    "ing:megestrol": "thrombosis risk, little benefit on weight",
    "ing:nitrofurantoin": "avoid long-term use and below creatinine clearance 30",
    "ing:oxybutynin": "strongly anticholinergic",
}

# -- class-level interactions ----------------------------------------------------------------
# For pairs the local interaction data has no row for (often because one drug is not in it).
# Sources: the labels of tramadol (serotonin syndrome, seizures), SSRIs/SNRIs/MAOIs,
# anticoagulants (bleeding with NSAIDs and antiplatelets), opioids (boxed warning with
# benzodiazepines), methotrexate (antifolates), dofetilide (trimethoprim contraindicated),
# warfarin (sulfamethoxazole inhibits CYP2C9), trimethoprim (hyperkalaemia), and the
# fluoroquinolone and tetracycline labels (chelation by iron, calcium, magnesium, zinc, aluminium).


@dataclass(frozen=True)
class ClassInteraction:
    a: frozenset[str]  # "ing:x" / "class:y" keys; the pair matches in either order
    b: frozenset[str]
    severity: str
    text: str
    exempt: frozenset[str] = frozenset()  # ingredients the rule never applies to (low-dose aspirin)


def _keys(text: str) -> frozenset[str]:
    return frozenset(text.split())


CLASS_INTERACTIONS: tuple[ClassInteraction, ...] = (
    ClassInteraction(_keys("class:ssris class:snris"), _keys("ing:tramadol"), HIGH,
                     "serotonin syndrome and seizure risk"),
    ClassInteraction(_keys("class:ssris class:snris"), _keys("class:maois"), HIGH,
                     "serotonin syndrome: contraindicated together"),
    ClassInteraction(_keys("class:anticoagulants"), _keys("class:nsaids"), HIGH, "additive bleeding risk"),
    ClassInteraction(_keys("class:anticoagulants"), _keys("class:p2y12_inhibitors"), HIGH, "additive bleeding risk"),
    ClassInteraction(_keys("class:ssris class:snris"), _keys("class:anticoagulants"), MODERATE,
                     "bleeding risk (platelet serotonin depletion)"),
    ClassInteraction(_keys("class:ssris class:snris"), _keys("class:nsaids"), MODERATE, "GI bleeding risk"),
    ClassInteraction(_keys("class:ace_inhibitors class:arbs"), _keys("class:potassium_sparing"), HIGH,
                     "hyperkalaemia risk"),
    ClassInteraction(_keys("class:ace_inhibitors class:arbs"), _keys("class:nsaids"), MODERATE,
                     "reduced antihypertensive effect and kidney injury risk", exempt=frozenset({"aspirin"})),
    ClassInteraction(_keys("class:opioids"), _keys("class:benzodiazepines"), HIGH,
                     "profound sedation and respiratory depression (boxed warning)"),
    ClassInteraction(_keys("ing:methotrexate"), _keys("ing:trimethoprim ing:sulfamethoxazole"), HIGH,
                     "bone-marrow suppression (additive antifolate effect, reduced clearance)"),
    ClassInteraction(_keys("ing:dofetilide"), _keys("ing:trimethoprim"), HIGH,
                     "contraindicated: trimethoprim raises dofetilide levels (torsade de pointes)"),
    ClassInteraction(_keys("ing:warfarin"), _keys("ing:sulfamethoxazole"), HIGH,
                     "INR rise and bleeding (CYP2C9 inhibition)"),
    ClassInteraction(_keys("ing:trimethoprim"), _keys("class:ace_inhibitors class:arbs class:potassium_sparing"),
                     MODERATE, "hyperkalaemia risk (trimethoprim blocks renal potassium excretion)"),
    ClassInteraction(_keys("class:fluoroquinolones class:tetracyclines"), _keys("class:polyvalent_cations"), MODERATE,
                     "chelation reduces the antibiotic's absorption: separate the doses"),
    # Warfarin's label (Drug Interactions: CYP2C9/3A4 inhibitors) and the named drugs' labels.
    ClassInteraction(_keys("ing:warfarin"), _keys("ing:metronidazole ing:tinidazole"), HIGH,
                     "INR rise and bleeding (metronidazole inhibits warfarin's CYP2C9 metabolism): avoid, or cut "
                     "the warfarin dose and check the INR within days (Flagyl and Coumadin labels)"),
    ClassInteraction(_keys("ing:warfarin"), _keys("ing:fluconazole ing:miconazole ing:voriconazole"), HIGH,
                     "INR rise and bleeding (CYP2C9 inhibition), even with a single dose or short course: check the "
                     "INR (Diflucan and Coumadin labels)"),
    ClassInteraction(_keys("ing:warfarin"), _keys("class:fluoroquinolones class:macrolides ing:amiodarone"), MODERATE,
                     "INR rise and bleeding: check the INR (Coumadin label, Drug Interactions)",
                     exempt=frozenset({"azithromycin"})),
    ClassInteraction(_keys("ing:simvastatin ing:lovastatin"),
                     _keys("ing:clarithromycin ing:erythromycin ing:itraconazole ing:ketoconazole ing:posaconazole"),
                     HIGH, "contraindicated: strong CYP3A4 inhibition raises the statin (myopathy, rhabdomyolysis) "
                     "(Zocor label, Contraindications)"),
    ClassInteraction(_keys("ing:sildenafil ing:tadalafil ing:vardenafil"),
                     frozenset({"ing:nitroglycerin", "ing:isosorbide mononitrate", "ing:isosorbide dinitrate"}), HIGH,
                     "contraindicated: profound hypotension (Viagra and Cialis labels, Contraindications)"),
    ClassInteraction(_keys("ing:tizanidine"), _keys("ing:ciprofloxacin ing:fluvoxamine"), HIGH,
                     "contraindicated: tizanidine levels rise tenfold (hypotension, sedation) (Zanaflex label)"),
    ClassInteraction(_keys("ing:allopurinol"), _keys("ing:azathioprine ing:mercaptopurine"), HIGH,
                     "bone-marrow suppression: cut the thiopurine dose to a quarter or a third (Zyloprim label)"),
    ClassInteraction(_keys("ing:lithium"),
                     _keys("class:nsaids class:ace_inhibitors class:arbs ing:hydrochlorothiazide"), MODERATE, "lithium levels rise (toxicity): check the level (Lithium label, Drug Interactions)",
                     exempt=frozenset({"aspirin"})),
)


__all__ = [
    "AFTER_TONSILLECTOMY", "AFTER_TONSILLECTOMY_AGE", "BEERS", "CLASS_INTERACTIONS", "OLDER_ADULT_AGE", "PAEDIATRIC",
    "PAEDIATRIC_AGE", "PAEDIATRIC_NOTE",
    "PREGNANCY", "RENAL", "RENAL_EXEMPT", "RENAL_NEEDS_EGFR", "ClassInteraction",
]
