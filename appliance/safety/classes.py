"""A small curated table of drug classes, and how drug names and allergen names map onto it.

What this is: a hand-written list of ingredients per pharmacological class, with the two
properties the safety gate needs, the allergy cross-reactivity rule and whether duplicating the
class is a hazard. It is curated, not exhaustive: a drug missing from it is still checked by
ingredient name and against the local drug data; it just gets no class-level finding.

Sources and rationale (standard pharmacology, written from the curator's knowledge, not copied
from any database; to be reviewed by a pharmacist before clinical use):
- Penicillins: the beta-lactam/thiazolidine core is shared; a recorded "penicillin allergy" is
  by convention a class label, so every penicillin is avoided (US penicillin labels: "history of
  a serious hypersensitivity reaction to any penicillin" is a contraindication).
- Cephalosporins: cross-reactivity with penicillin allergy is about 1-2% and mostly follows
  shared R1 side chains (cephalexin, cefadroxil and cefaclor share amoxicillin's/ampicillin's);
  AAAAI/ACAAI drug-allergy practice parameter (2022). The gate cannot see side chains, so it
  raises the severity when the recorded reaction was severe (anaphylaxis and the like).
- Carbapenems: cross-reactivity with penicillin allergy below 1% (same practice parameter):
  reported, at low severity.
- Sulfonamides: the arylamine (N4) sulfonamide antibiotics (sulfamethoxazole, sulfadiazine,
  sulfisoxazole) cross-react with each other. Decision: sulfasalazine is in the same group,
  because its sulfapyridine moiety is itself an arylamine sulfonamide. Non-arylamine
  ("non-antibiotic") sulfonamides (thiazide and loop diuretics, sulfonylureas, celecoxib,
  acetazolamide) show little or no cross-reactivity (Strom et al., NEJM 2003: the excess risk
  reflects a general predisposition to allergy), so they are reported at low severity only.
- NSAIDs including aspirin: COX-1 inhibition causes the class-wide reactions (NSAID-exacerbated
  respiratory disease, urticaria/angioedema), so an NSAID allergy is a class alert; celecoxib
  (COX-2 selective) is usually tolerated in that setting and is flagged at low severity.
- ACE inhibitors: angioedema is a class effect (lisinopril label: contraindicated after
  angioedema with any ACE inhibitor); ARBs after ACE-inhibitor angioedema carry a small risk
  (ARB labels' caution), flagged at moderate severity when the recorded reaction was angioedema.
- Opioids: true allergy is rare; cross-sensitivity is expected within the phenanthrenes
  (morphine, codeine, hydrocodone, hydromorphone, oxycodone, oxymorphone), less across the
  phenylpiperidines (fentanyl, meperidine), methadone and tramadol.
- Aromatic anticonvulsants (carbamazepine, oxcarbazepine, phenytoin, phenobarbital,
  lamotrigine): severe cutaneous reactions cross-react (oxcarbazepine label: 25-30% of patients
  with carbamazepine hypersensitivity react to oxcarbazepine).
- Fluoroquinolones, macrolides, statins: same-class alerts at the severity the reaction implies
  (statins: low, since a statin "allergy" is nearly always intolerance).
- Polyvalent cations (iron, calcium, magnesium, zinc, aluminium salts): a class only for the
  chelation interaction with fluoroquinolones and tetracyclines (their labels).
- Duplicate therapy is a hazard for: anticoagulants and P2Y12 inhibitors (bleeding: high);
  NSAIDs other than aspirin, ACE inhibitors and ARBs together (dual renin-angiotensin blockade,
  ONTARGET/VA NEPHRON-D), statins, opioids, SSRIs/SNRIs (serotonin toxicity), beta blockers,
  benzodiazepines (moderate). Low-dose aspirin with another antiplatelet or an NSAID is a
  combination the interaction checks judge, not a duplicate.

RxNorm ingredient codes are never written here: they come from ``ehr_db.codes``
(``RXNORM_INGREDIENTS``), whose codes are checked, so a code is only matched where the
catalogue has it.

Invariants:
- Every name is lower case, in US spelling, as it appears after ``fold``.
- Every ingredient named in a class or an alias is a key of ``INGREDIENT_CLASSES`` or of the
  RxNorm catalogue, so name recognition and class lookup agree.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ehr_db.codes import RXNORM_INGREDIENTS

HIGH, MODERATE, LOW, INFO = "high", "moderate", "low", "info"

# How an allergy to one member bears on another member of the same class.
CLASS_ALLERGY = "class"  # any member: high (the recorded allergy is a class label by convention)
BY_REACTION = "by_reaction"  # high when the recorded reaction was severe, else moderate
LOW_CROSS = "low"  # low: reported so the clinician can judge


@dataclass(frozen=True)
class DrugClass:
    id: str
    label: str  # clinician-facing, plural ("penicillins")
    members: frozenset[str]
    allergy_cross: str | None = None  # CLASS_ALLERGY / BY_REACTION / LOW_CROSS / None
    duplicate: str | None = None  # severity of a second member, None: not a hazard
    duplicate_exempt: frozenset[str] = frozenset()  # members that never count as a duplicate
    low_cross_members: frozenset[str] = frozenset()  # members only ever at LOW_CROSS


def _class(id_, label, members, **kw) -> DrugClass:
    return DrugClass(id_, label, frozenset(members.split(",")), **kw)


CLASSES: dict[str, DrugClass] = {c.id: c for c in (
    _class("penicillins", "penicillins",
           "penicillin,penicillin g,penicillin v,amoxicillin,ampicillin,dicloxacillin,flucloxacillin,"
           "nafcillin,oxacillin,piperacillin", allergy_cross=CLASS_ALLERGY),
    _class("cephalosporins", "cephalosporins",
           "cephalexin,cefadroxil,cefazolin,cefaclor,cefuroxime,cefprozil,cefdinir,cefpodoxime,cefixime,"
           "ceftriaxone,cefotaxime,ceftazidime,cefepime,ceftaroline", allergy_cross=BY_REACTION),
    _class("carbapenems", "carbapenems", "imipenem,meropenem,ertapenem,doripenem", allergy_cross=BY_REACTION),
    _class("sulfonamide_antibiotics", "sulfonamide antibiotics (arylamine sulfonamides)",
           "sulfamethoxazole,sulfadiazine,sulfisoxazole,sulfacetamide,sulfasalazine", allergy_cross=CLASS_ALLERGY),
    _class("nonantibiotic_sulfonamides", "non-antibiotic sulfonamides",
           "furosemide,bumetanide,torsemide,hydrochlorothiazide,chlorthalidone,indapamide,acetazolamide,"
           "celecoxib,glipizide,glyburide,glimepiride"),
    _class("nsaids", "NSAIDs",
           "aspirin,ibuprofen,naproxen,diclofenac,meloxicam,ketorolac,indomethacin,etodolac,nabumetone,"
           "ketoprofen,piroxicam,celecoxib", allergy_cross=BY_REACTION, duplicate=MODERATE,
           duplicate_exempt=frozenset({"aspirin"}), low_cross_members=frozenset({"celecoxib"})),
    _class("ace_inhibitors", "ACE inhibitors",
           "lisinopril,enalapril,ramipril,captopril,benazepril,quinapril,perindopril,fosinopril,trandolapril",
           allergy_cross=CLASS_ALLERGY, duplicate=MODERATE),
    _class("arbs", "angiotensin receptor blockers",
           "losartan,valsartan,irbesartan,candesartan,olmesartan,telmisartan", allergy_cross=BY_REACTION,
           duplicate=MODERATE),
    _class("statins", "statins",
           "atorvastatin,simvastatin,rosuvastatin,pravastatin,lovastatin,pitavastatin,fluvastatin",
           allergy_cross=LOW_CROSS, duplicate=MODERATE),
    _class("opioids", "opioids",
           "morphine,codeine,oxycodone,hydrocodone,hydromorphone,oxymorphone,fentanyl,methadone,tramadol,"
           "tapentadol,buprenorphine,meperidine", duplicate=MODERATE),
    _class("phenanthrene_opioids", "phenanthrene opioids",
           "morphine,codeine,oxycodone,hydrocodone,hydromorphone,oxymorphone", allergy_cross=BY_REACTION),
    _class("anticoagulants", "anticoagulants",
           "warfarin,apixaban,rivaroxaban,dabigatran,edoxaban,enoxaparin,heparin,dalteparin,fondaparinux",
           duplicate=HIGH),
    _class("p2y12_inhibitors", "P2Y12 inhibitors", "clopidogrel,prasugrel,ticagrelor", duplicate=HIGH),
    _class("antiplatelets", "antiplatelets", "aspirin,clopidogrel,prasugrel,ticagrelor,dipyridamole"),
    _class("ssris", "SSRIs", "sertraline,escitalopram,citalopram,fluoxetine,paroxetine,fluvoxamine",
           duplicate=MODERATE),
    _class("snris", "SNRIs", "venlafaxine,desvenlafaxine,duloxetine,levomilnacipran", duplicate=MODERATE),
    _class("maois", "MAO inhibitors", "phenelzine,tranylcypromine,isocarboxazid,selegiline,linezolid"),
    _class("beta_blockers", "beta blockers",
           "metoprolol,carvedilol,atenolol,bisoprolol,propranolol,nadolol,labetalol,nebivolol", duplicate=MODERATE),
    _class("benzodiazepines", "benzodiazepines",
           "diazepam,lorazepam,alprazolam,clonazepam,temazepam,midazolam,chlordiazepoxide", duplicate=MODERATE),
    _class("potassium_sparing", "potassium-sparing diuretics",
           "spironolactone,eplerenone,amiloride,triamterene"),
    _class("aromatic_anticonvulsants", "aromatic anticonvulsants",
           "carbamazepine,oxcarbazepine,phenytoin,fosphenytoin,phenobarbital,lamotrigine", allergy_cross=BY_REACTION),
    _class("fluoroquinolones", "fluoroquinolones", "ciprofloxacin,levofloxacin,moxifloxacin,ofloxacin",
           allergy_cross=BY_REACTION),
    _class("macrolides", "macrolides", "azithromycin,clarithromycin,erythromycin", allergy_cross=BY_REACTION),
    _class("tetracyclines", "tetracyclines", "doxycycline,minocycline,tetracycline"),
    _class("polyvalent_cations", "iron, calcium, magnesium, zinc or aluminium products",
           "ferrous sulfate,ferrous fumarate,ferrous gluconate,calcium carbonate,calcium acetate,magnesium oxide,"
           "magnesium hydroxide,aluminum hydroxide,zinc sulfate"),
)}

# Classes whose members duplicate each other across the class boundary.
DUPLICATE_GROUPS: tuple[tuple[frozenset[str], str, str], ...] = (
    (frozenset({"ace_inhibitors", "arbs"}), MODERATE, "dual renin-angiotensin blockade (ACE inhibitor with ARB)"),
    (frozenset({"ssris", "snris"}), MODERATE, "two serotonergic antidepressants"),
)


@dataclass(frozen=True)
class CrossClassRule:
    """An allergy to a member of ``allergen_class`` bears on members of ``drug_class``."""

    allergen_class: str
    drug_class: str
    severity: str  # BY_REACTION or LOW_CROSS
    note: str
    reaction_must_match: str | None = None  # a regex the recorded reaction must match


CROSS_CLASS_RULES: tuple[CrossClassRule, ...] = (
    CrossClassRule("penicillins", "cephalosporins", BY_REACTION,
                   "penicillin-cephalosporin cross-reactivity is about 1-2%, mostly through shared side chains"),
    CrossClassRule("cephalosporins", "penicillins", BY_REACTION,
                   "cephalosporin-penicillin cross-reactivity is about 1-2%, mostly through shared side chains"),
    CrossClassRule("penicillins", "carbapenems", LOW_CROSS, "carbapenem cross-reactivity with penicillin allergy is below 1%"),
    CrossClassRule("sulfonamide_antibiotics", "nonantibiotic_sulfonamides", LOW_CROSS,
                   "non-antibiotic sulfonamides rarely cross-react with sulfonamide-antibiotic allergy"),
    CrossClassRule("ace_inhibitors", "arbs", MODERATE,
                   "angioedema with an ACE inhibitor carries a small risk of angioedema with an ARB",
                   reaction_must_match=r"angio|swell"),
)

# Names a recorded allergen may use for a whole class (folded). "penicillin" alone is a class
# label by clinical convention; so are "sulfa" and its spellings.
CLASS_ALIASES: dict[str, tuple[str, ...]] = {
    "penicillin": ("penicillins",), "penicillins": ("penicillins",),
    "beta lactam": ("penicillins", "cephalosporins", "carbapenems"),
    "beta lactams": ("penicillins", "cephalosporins", "carbapenems"),
    "cephalosporin": ("cephalosporins",), "cephalosporins": ("cephalosporins",),
    "carbapenems": ("carbapenems",),
    "sulfa": ("sulfonamide_antibiotics",), "sulfa drugs": ("sulfonamide_antibiotics",),
    "sulpha": ("sulfonamide_antibiotics",), "sulfonamide": ("sulfonamide_antibiotics",),
    "sulfonamides": ("sulfonamide_antibiotics",), "sulphonamides": ("sulfonamide_antibiotics",),
    "sulfonamide antibiotics": ("sulfonamide_antibiotics",),
    "nsaid": ("nsaids",), "nsaids": ("nsaids",),
    "ace inhibitor": ("ace_inhibitors",), "ace inhibitors": ("ace_inhibitors",),
    "opiates": ("phenanthrene_opioids",), "opioids": ("phenanthrene_opioids",),
    "statins": ("statins",), "quinolones": ("fluoroquinolones",), "fluoroquinolones": ("fluoroquinolones",),
    "macrolides": ("macrolides",), "tetracyclines": ("tetracyclines",), "benzodiazepines": ("benzodiazepines",),
}

# Other names for ingredients, and fixed-dose combinations, as clinicians chart them (folded).
INGREDIENT_ALIASES: dict[str, tuple[str, ...]] = {
    "co trimoxazole": ("sulfamethoxazole", "trimethoprim"), "cotrimoxazole": ("sulfamethoxazole", "trimethoprim"),
    "valproic acid": ("valproate",), "divalproex": ("valproate",), "depakote": ("valproate",),
    "tmp smx": ("sulfamethoxazole", "trimethoprim"), "smx tmp": ("sulfamethoxazole", "trimethoprim"),
    "bactrim": ("sulfamethoxazole", "trimethoprim"), "septra": ("sulfamethoxazole", "trimethoprim"),
    "augmentin": ("amoxicillin", "clavulanate"), "co amoxiclav": ("amoxicillin", "clavulanate"),
    "tylenol 3": ("acetaminophen", "codeine"), "tylenol 4": ("acetaminophen", "codeine"),
    "tylenol no 3": ("acetaminophen", "codeine"), "tylenol no 4": ("acetaminophen", "codeine"),
    "amoxycillin": ("amoxicillin",), "benzylpenicillin": ("penicillin g",),
    "phenoxymethylpenicillin": ("penicillin v",), "penicillin vk": ("penicillin v",),
    "acetylsalicylic acid": ("aspirin",), "paracetamol": ("acetaminophen",), "frusemide": ("furosemide",),
    "salbutamol": ("albuterol",), "keflex": ("cephalexin",), "coumadin": ("warfarin",), "jantoven": ("warfarin",),
    "eliquis": ("apixaban",), "xarelto": ("rivaroxaban",), "pradaxa": ("dabigatran",), "plavix": ("clopidogrel",),
    "advil": ("ibuprofen",), "motrin": ("ibuprofen",), "aleve": ("naproxen",), "naprosyn": ("naproxen",),
    "zestril": ("lisinopril",), "prinivil": ("lisinopril",), "cozaar": ("losartan",), "glucophage": ("metformin",),
    "lipitor": ("atorvastatin",), "zocor": ("simvastatin",), "crestor": ("rosuvastatin",), "zoloft": ("sertraline",),
    "prozac": ("fluoxetine",), "lexapro": ("escitalopram",), "ultram": ("tramadol",), "tegretol": ("carbamazepine",),
    "aldactone": ("spironolactone",), "lasix": ("furosemide",), "tikosyn": ("dofetilide",),
}

# Ingredients the curated rules (``appliance.safety.rules``) name that no class or catalogue
# code does; listed so that names are recognised (a test checks every rule key is).
OTHER_INGREDIENTS = frozenset(
    "isotretinoin,valproate,mycophenolate,misoprostol,leflunomide,thalidomide,finasteride,testosterone,lithium,"
    "dofetilide,fluconazole,pregabalin,nitrofurantoin,sitagliptin,promethazine,diphenhydramine,hydroxyzine,"
    "chlorpheniramine,zolpidem,eszopiclone,amitriptyline,imipramine,cyclobenzaprine,methocarbamol,carisoprodol,"
    "nifedipine,doxazosin,prazosin,terazosin,clonidine,metoclopramide,megestrol,oxybutynin,bismuth subsalicylate,"
    "loperamide,benzocaine,metronidazole,tinidazole,miconazole,voriconazole,itraconazole,ketoconazole,posaconazole,"
    "sildenafil,tadalafil,vardenafil,isosorbide mononitrate,isosorbide dinitrate,tizanidine,azathioprine,"
    "mercaptopurine".split(","))

# ingredient -> class ids
INGREDIENT_CLASSES: dict[str, frozenset[str]] = {}
for _c in CLASSES.values():
    for _m in _c.members:
        INGREDIENT_CLASSES[_m] = INGREDIENT_CLASSES.get(_m, frozenset()) | {_c.id}

# Every name recognised as an ingredient: the class members, the RxNorm catalogue, the alias targets.
KNOWN_INGREDIENTS: frozenset[str] = (
    frozenset(INGREDIENT_CLASSES) | frozenset(RXNORM_INGREDIENTS) | OTHER_INGREDIENTS
    | frozenset(i for targets in INGREDIENT_ALIASES.values() for i in targets)
)
# RxNorm code -> ingredient, from the checked catalogue only.
RXNORM_TO_INGREDIENT: dict[str, str] = {code: name for name, code in RXNORM_INGREDIENTS.items()}
_NAME_TABLE: dict[str, tuple[str, ...]] = {**{n: (n,) for n in KNOWN_INGREDIENTS}, **INGREDIENT_ALIASES}
_LONGEST = max(len(k.split()) for k in _NAME_TABLE)


def fold(text: str | None) -> str:
    """Lower case, accents and punctuation removed, single spaces: the form names are matched in."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text or "") if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", plain).split())


def _windows(words: list[str], table: dict[str, tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Whole-word matches against ``table``, longest first, without overlaps."""
    found, i = [], 0
    while i < len(words):
        for n in range(min(_LONGEST, len(words) - i), 0, -1):
            hit = table.get(" ".join(words[i:i + n]))
            if hit:
                found.append(hit)
                i += n
                break
        else:
            i += 1
    return found


def ingredients_in(name: str | None) -> frozenset[str]:
    """Ingredients named anywhere in a drug or allergen name ("Carbidopa/levodopa 25/100",
    "trimethoprim-sulfamethoxazole DS", "Metoprolol succinate" -> the known ingredients)."""
    return frozenset(i for hit in _windows(fold(name).split(), _NAME_TABLE) for i in hit)


def ingredients_named(name: str | None) -> tuple[str, ...]:
    """The curated ingredient(s) a whole name stands for: itself when it is a known ingredient,
    an alias's targets ("paracetamol" -> acetaminophen), else () (no partial matches)."""
    return _NAME_TABLE.get(fold(name), ())


def classes_named_in(name: str | None) -> frozenset[str]:
    """Classes an allergen name stands for as a whole ("Penicillin", "Sulfa drugs", "NSAIDs")."""
    key = fold(name)
    key = re.sub(r"\b(allergy|allergic|class|antibiotics?|drugs?|medications?)\b", " ", key)
    key = " ".join(key.split())
    return frozenset(CLASS_ALIASES.get(key, ()))


def classes_of(ingredients: frozenset[str] | set[str]) -> frozenset[str]:
    return frozenset(c for i in ingredients for c in INGREDIENT_CLASSES.get(i, ()))


__all__ = [
    "BY_REACTION", "CLASSES", "CLASS_ALIASES", "CLASS_ALLERGY", "CROSS_CLASS_RULES", "DUPLICATE_GROUPS", "HIGH",
    "INFO", "INGREDIENT_ALIASES", "INGREDIENT_CLASSES", "KNOWN_INGREDIENTS", "LOW", "LOW_CROSS", "MODERATE",
    "OTHER_INGREDIENTS", "RXNORM_TO_INGREDIENT", "CrossClassRule", "DrugClass", "classes_named_in", "classes_of", "fold",
    "ingredients_in", "ingredients_named",
]
