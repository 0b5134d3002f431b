"""The vocabulary of medication orders (sig language) that ``orders`` reads: units, forms,
routes, frequencies, as-needed words, maxima and durations as clinicians write them, each with
its normalised meaning.

Invariants:
- Every pattern is matched case-insensitively and never inside a word, except the few
  abbreviations that are also English words ("IN", "OD", "OS", "OU"), which must be upper case.
- Tables map lower-cased words to one normalised value; nothing here reads a patient's data.
"""

from __future__ import annotations

import re

# unit as written (lower case) -> normalised unit
UNITS: dict[str, str] = {
    **dict.fromkeys(("g", "gm", "gms", "gram", "grams", "gr"), "g"),
    **dict.fromkeys(("mg", "mgs", "milligram", "milligrams", "mgm"), "mg"),
    **dict.fromkeys(("mcg", "mcgs", "µg", "μg", "ug", "microgram", "micrograms"), "mcg"),
    **dict.fromkeys(("ng", "nanogram", "nanograms"), "ng"),
    **dict.fromkeys(("ml", "mls", "milliliter", "milliliters", "millilitre", "millilitres", "cc"), "mL"),
    **dict.fromkeys(("l", "liter", "liters", "litre", "litres"), "L"),
    **dict.fromkeys(("unit", "units", "u", "iu", "ius", "international units"), "unit"),
    **dict.fromkeys(("meq", "milliequivalents"), "mEq"),
    **dict.fromkeys(("mmol", "millimoles"), "mmol"),
    **dict.fromkeys(("tab", "tabs", "tablet", "tablets", "tbl"), "tablet"),
    **dict.fromkeys(("cap", "caps", "capsule", "capsules"), "capsule"),
    **dict.fromkeys(("puff", "puffs", "inhalation", "inhalations", "actuation", "actuations"), "puff"),
    **dict.fromkeys(("drop", "drops", "gtt", "gtts"), "drop"),
    **dict.fromkeys(("spray", "sprays"), "spray"),
    **dict.fromkeys(("patch", "patches"), "patch"),
    **dict.fromkeys(("suppository", "suppositories", "supp"), "suppository"),
    **dict.fromkeys(("application", "applications", "applicator", "applicators", "applicatorful"), "application"),
    **dict.fromkeys(("lozenge", "lozenges"), "lozenge"),
    **dict.fromkeys(("piece", "pieces"), "piece"),
    **dict.fromkeys(("vial", "vials"), "vial"),
    **dict.fromkeys(("ampule", "ampules", "ampoule", "ampoules", "amp", "amps"), "ampule"),
    **dict.fromkeys(("sachet", "sachets"), "sachet"),
    **dict.fromkeys(("scoop", "scoops"), "scoop"),
    **dict.fromkeys(("teaspoon", "teaspoons", "tsp"), "teaspoon"),
    **dict.fromkeys(("tablespoon", "tablespoons", "tbsp"), "tablespoon"),
    **dict.fromkeys(("dose", "doses"), "dose"),
}
MASS = frozenset({"g", "mg", "mcg", "ng"})
VOLUME_ML = {"mL": 1.0, "L": 1000.0, "teaspoon": 5.0, "tablespoon": 15.0}
FORMS = frozenset({"tablet", "capsule", "puff", "drop", "spray", "patch", "suppository", "application", "lozenge",
                   "piece", "vial", "ampule", "sachet", "scoop"})
# Units a concentration ("250 mg/5 mL", "100 units/mL") can be of.
CONCENTRATED = MASS | {"unit", "mEq", "mmol"}



def _alternatives(words) -> str:
    """A regex alternation of ``words``, longest first (so "mgs" is read before "mg")."""
    return "|".join(sorted((re.escape(u) for u in words), key=len, reverse=True))


UNIT_WORDS = _alternatives(UNITS)
_FORM_WORDS = _alternatives(u for u, n in UNITS.items() if n in FORMS)
# A number: "500", "0.5", ".5", "1,000" (thousands); no signs, no exponents.
NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?|\.\d+)"
# What may follow an amount after "/": per weight or area, per volume, per form, per time, a
# second ingredient ("8 mg/2 mg").
_PER_WORDS = rf"kg|m2|24\s*h(?:ours?|rs?)?|h(?:ours?|rs?)?|min(?:utes?|s)?|day|d|dose|{UNIT_WORDS}"
_TAIL = rf"(?:\s*/\s*(?:{NUMBER}\s*)?(?:{_PER_WORDS})(?![\w]))"
# An amount: a number, a range ("1-2", "5 to 10") or ingredients ("50/1000"), then a unit and
# an optional tail; "1 1/2 tabs" keeps its whole number.
AMOUNT_RE = re.compile(
    rf"(?<![\w.\-/,])(?:(?P<whole>\d+)\s+(?=\d+\s*/\s*\d+\s*(?:{_FORM_WORDS})(?!\w)))?"
    rf"(?P<value>{NUMBER}(?:\s*(?:/|-|–|\bto\b)\s*{NUMBER})*)\s*(?P<unit>{UNIT_WORDS})(?![\w])"
    rf"(?P<per>{_TAIL}{{1,2}})?",
    re.IGNORECASE)
WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "half a": 0.5, "a half": 0.5, "one-half": 0.5, "half": 0.5}
# "one drop", "two tablets": a count written in words, forms only ("one gram" is rare and risky).
WORD_AMOUNT_RE = re.compile(rf"(?<![\w\-])(?P<value>{_alternatives(WORD_NUMBERS)})\s+(?P<unit>{_FORM_WORDS})(?!\w)",
                            re.IGNORECASE)
TIME_TAILS = {"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "min": "min", "mins": "min",
              "minute": "min", "minutes": "min", "day": "day", "d": "day"}

_EYE = r"(?:(?:in|into|to)\s+)?(?:each|both|the affected|the right|the left|right|left|affected)\s+eyes?"
_EAR = r"(?:(?:in|into|to)\s+)?(?:each|both|the affected|the right|the left|right|left|affected)\s+ears?"
ROUTES: tuple[tuple[str, str], ...] = (
    (r"p\.?o\.?|by mouth|orally|oral|per os|swallowed|odt", "oral"),
    (r"s\.?l\.?|sublingual(?:ly)?|under the tongue", "sublingual"),
    (r"i\.?v\.?(?:\s*push|\s*piggyback|pb)?|intravenous(?:ly)?", "IV"),
    (r"i\.?m\.?|intramuscular(?:ly)?", "IM"),
    (r"s\.?c\.?|s\.?q\.?|subcut|sub-?q|subcutaneous(?:ly)?|sub-?cutaneous(?:ly)?", "subcutaneous"),
    (r"inh(?:aled)?|inhale|via inhaler|by inhalation|inhaler|nebuli[sz]ed|(?:via )?nebuli[sz]er|neb", "inhaled"),
    (r"intranasal(?:ly)?|nasal(?:ly)?|(?:(?:in|into)\s+)?(?:each|per|both|the|one) nostrils?"
     r"|(?-i:IN)(?!\s+(?-i:THE|EACH|AM|PM|A|AN)\b)", "intranasal"),
    (r"topical(?:ly)?|apply|to the skin|to (?:the )?affected areas?", "topical"),
    (r"t\.?d\.?|transdermal(?:ly)?", "transdermal"),
    (r"p\.?r\.?|rectal(?:ly)?|per rectum", "rectal"),
    (r"p\.?v\.?|vaginal(?:ly)?|per vagina|intravaginal(?:ly)?", "vaginal"),
    (rf"ophthalmic|eye drops?|{_EYE}|(?-i:OU|OS|O\.U\.|O\.S\.)", "ophthalmic"),
    (rf"otic|ear drops?|{_EAR}", "otic"),
)
ROUTE_RE = re.compile(r"(?<![\w/])(?:" + "|".join(f"(?P<r{i}>{p})" for i, (p, _) in enumerate(ROUTES)) + r")(?![\w/])",
                      re.IGNORECASE)
# "OD" is "once daily" (British) unless it follows drops, where it is the right eye.
EYE_OD_RE = re.compile(r"(?<![\w/])(?-i:OD|O\.D\.)(?![\w/])", re.IGNORECASE)

_TIMES = {"once": 1, "one time": 1, "twice": 2, "two times": 2, "thrice": 3, "three times": 3, "four times": 4,
          "five times": 5, "six times": 6}
_TIMES_RE = (r"(?P<times>once|one time|twice|two times|thrice|three times|four times|five times|six times"
             r"|(?P<n>\d)\s*(?:x|times))")
_DAY = r"(?:daily|a day|per day|each day|every day|/\s*day|/\s*d\b|in 24 hours)"
_WEEK = r"(?:weekly|a week|per week|each week|every week|/\s*w(?:ee)?k)"
_MONTH = r"(?:monthly|a month|per month|every month)"
_COUNT = r"\d+|other|two|three|four|six"
_HOUR_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "twelve": 12, "twenty-four": 24,
               "twenty four": 24, "seventy-two": 72}
_HOURS = r"\d+(?:\.\d+)?|" + "|".join(sorted(_HOUR_WORDS, key=len, reverse=True))
_MEALS = r"(?:with|before|after) (?:each )?meals?|with (?:each|every) meal"
# (pattern, administrations per day); None: ``times_per_day`` computes it from the groups.
FREQUENCIES: tuple[tuple[str, float | None], ...] = (
    (rf"{_TIMES_RE}\s+{_DAY}", None),
    (rf"{_TIMES_RE}\s+{_WEEK}", None),
    (rf"{_TIMES_RE}\s+{_MONTH}", None),
    (r"q\.?\s*(?P<h>\d+(?:\.\d+)?)\s*(?:-|–|to)\s*(?P<h2>\d+)\s*h(?:rs?|ours?)?\b", None),
    (rf"every\s+(?P<h>{_HOURS})\s*(?:-|–|to)\s*(?P<h2>{_HOURS})\s*h(?:rs?|ours?)?\b", None),
    (r"q\.?\s*(?P<h>\d+(?:\.\d+)?)\s*h(?:rs?|ours?)?\.?(?!\w)", None),
    (rf"every\s+(?P<h>{_HOURS})\s*h(?:rs?|ours?)?\b", None),
    (r"q\.?\s*(?P<min>\d+)\s*min(?:utes?|s)?\b|every\s+(?P<min2>\d+)\s*min(?:utes?|s)?\b", None),
    (rf"every\s+(?P<d>{_COUNT})\s+days?\b|q\.?\s*(?P<d2>\d+)\s*d(?:ays?)?\b", None),
    (rf"every\s+(?P<w>{_COUNT})\s+weeks?\b|q\.?\s*(?P<w2>\d+)\s*(?:weeks?|wks?)\b", None),
    (rf"every\s+(?P<mo>{_COUNT})\s+months?\b|q\.?\s*(?P<mo2>\d+)\s*(?:months?|mo)\b", None),
    (r"every\s+hour|q\.?\s*h\b|hourly", 24.0),
    (r"b\.?i\.?d\.?|b\.?d\.?|bds", 2.0),
    (r"t\.?i\.?d\.?|t\.?d\.?s\.?", 3.0),
    (r"q\.?i\.?d\.?|q\.?d\.?s\.?", 4.0),
    (_MEALS, 3.0),
    (r"q\.?o\.?d\.?|every other day|on alternate days|alternate days", 0.5),
    (r"once\s+(?:(?:in the|every|each)\s+(?:morning|evening|night)|at (?:night|bedtime)|nightly)", 1.0),
    (r"q\.?d\.?|o\.?d\.?|o\.?m\.?|q\.?a\.?m\.?|q\.?p\.?m\.?|q\.?h\.?s\.?|h\.?s\.?|nightly|at night|at bedtime|"
     r"before bed|every (?:morning|evening|night)|in the (?:morning|evening)|each (?:morning|evening|night)|"
     r"every day|each day|daily|once|a day|per day|(?:before|with|after) (?:breakfast|lunch|dinner|supper)", 1.0),
    (r"weekly|every week|each week|q\.?\s*(?:1\s*)?w(?:ee)?k", 1 / 7),
    (r"biweekly|fortnightly", 1 / 14),
    (r"monthly|every month|q\.?\s*month", 1 / 30),
)
FREQUENCY_RES = tuple((re.compile(rf"(?<![\w/])(?:{p})(?![\w])", re.IGNORECASE), v) for p, v in FREQUENCIES)
ONE_TIME_WORDS = frozenset({"once", "one time"})  # a bare frequency that is a single dose
_WORD_COUNTS = {"other": 2, "two": 2, "three": 3, "four": 4, "six": 6}
ONE_TIME_RE = re.compile(
    r"(?<!\w)(?:stat|now|single dose|one dose|x\s*1|one time only|once only|as a single dose)(?!\w)", re.IGNORECASE)
AS_NEEDED_RE = re.compile(r"(?<!\w)(?:p\.?r\.?n\.?|as needed|as required|when required|if needed|when needed|"
                          r"if required|on demand)(?!\w)", re.IGNORECASE)
MAX_RE = re.compile(
    rf"(?<!\w)(?:max(?:imum)?\.?|not (?:to )?(?:exceed|more than)|no more than|up to|do not exceed)\s*(?:of\s*)?"
    rf"(?P<value>{NUMBER})\s*(?P<unit>{UNIT_WORDS})?(?P<perkg>\s*/\s*kg)?\s*(?:/|per|in|a|each|every)\s*"
    rf"(?:24\s*h(?:ours?|rs?)?|day|d\b|24-hour period)",
    re.IGNORECASE)
# What an as-needed order is for: up to four words after the as-needed words ("prn pain",
# "as needed for severe nausea"), ending before a maximum, a duration, a quantity or a number.
INDICATION_STOP = frozenset("""max maximum not no up do for x dispense disp qty quantity refill refills with then and
    until every q may can to or if daily nightly""".split())
INDICATION_RE = re.compile(
    r"(?<!\w)(?:p\.?r\.?n\.?|as needed|as required|when required|if needed|when needed|if required)"
    r"\s*(?:for\s+)?(?P<words>[a-z][a-z\-']*(?:\s+[a-z][a-z\-']*){0,3})", re.IGNORECASE)
# Quantity to dispense ("#30", "disp 30 tabs", "qty: 60") and refills ("2 refills", "RF x3",
# "refills: 5", "no refills").
QUANTITY_RE = re.compile(
    rf"(?<![\w#])(?:#\s*|disp(?:ense)?\.?:?\s*(?:#\s*)?|qty\.?:?\s*|quantity:?\s*)(?P<n>{NUMBER})"
    rf"(?:\s*(?P<unit>{_FORM_WORDS}|mL|ml)(?!\w))?", re.IGNORECASE)
REFILL_COUNTS = {"no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                  "eleven": 11, "twelve": 12}
REFILLS_RE = re.compile(
    rf"(?<!\w)(?:(?P<n>\d{{1,2}}|{_alternatives(REFILL_COUNTS)})\s+refills?"
    r"|(?:refills?|rf)\s*(?::|x|×)?\s*(?P<n2>\d{1,2}))(?!\w)", re.IGNORECASE)
# A dose written without a unit right after the drug ("augmentin 875 bid", "increase metformin
# to 1000 bid"): read in the unit the drug is ordered in, milligrams unless listed here.
BARE_DOSE_RE = re.compile(
    rf"\s*(?:to\s+|at\s+)?(?P<n>{NUMBER})(?![\w.%/\-])"
    r"(?!\s*(?:x\b|×|times|doses?\b|days?\b|d\b|weeks?\b|wks?\b|months?\b|hours?\b|hrs?\b|h\b|refills?\b|%))",
    re.IGNORECASE)
IMPLIED_UNITS = {"levothyroxine": "mcg", "liothyronine": "mcg", "fentanyl": "mcg", "cyanocobalamin": "mcg",
                 "calcitriol": "mcg", "heparin": "unit", "cholecalciferol": "unit", "ergocalciferol": "unit",
                 "vitamin d": "unit", "epoetin alfa": "unit", "insulin": "unit"}


def implied_unit(generic: str | None) -> str:
    """The unit a bare number after ``generic`` is in: "mg" unless the drug is dosed otherwise
    (any insulin in units; levothyroxine in micrograms)."""
    name = (generic or "").lower()
    return IMPLIED_UNITS.get(name) or ("unit" if name.startswith("insulin") else "mg")


DURATION_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                  "ten": 10, "fourteen": 14}
DURATION_RE = re.compile(
    r"(?<!\w)(?:for|x|times|×)\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>d|days?|w|wks?|weeks?|months?|mo)(?!\w)"
    rf"|(?<!\w)for\s+(?P<nw>{_alternatives(DURATION_WORDS)})\s+(?P<unitw>days?|weeks?|months?)(?!\w)"
    rf"|(?<![\w./])(?:(?:for|x|×)\s*)?(?P<n2>\d{{1,2}})\s*/\s*(?P<per>7|52|12)(?![\d/.])(?!\s*(?:{UNIT_WORDS})(?!\w))",
    re.IGNORECASE)
DURATION_DAYS = {"d": 1, "day": 1, "days": 1, "w": 7, "wk": 7, "wks": 7, "week": 7, "weeks": 7, "month": 30,
                 "months": 30, "mo": 30, "7": 1, "52": 7, "12": 30}


def _count(word: str | None) -> int | None:
    if not word:
        return None
    word = word.lower()
    return _WORD_COUNTS.get(word) or (int(word) if word.isdigit() else None)


def times_per_day(match: re.Match) -> float | None:
    """Administrations per day for a ``FREQUENCY_RES`` match whose value is computed (a range
    of hours counts at its shortest interval: the most it allows)."""
    groups = match.groupdict()
    if groups.get("times"):
        n = int(groups["n"]) if groups.get("n") else _TIMES[re.sub(r"\s+", " ", groups["times"].lower())]
        text = match.group(0).lower()
        if re.search(_WEEK, text):
            return n / 7
        if re.search(_MONTH, text):
            return n / 30
        return float(n)
    if groups.get("h"):
        word = groups["h"].lower()
        hours = float(_HOUR_WORDS.get(word) or word)
        return 24.0 / hours if hours > 0 else None
    minutes = _count(groups.get("min") or groups.get("min2"))
    if minutes is not None:
        return 24 * 60.0 / minutes if minutes else None
    for names, days in ((("d", "d2"), 1), (("w", "w2"), 7), (("mo", "mo2"), 30)):
        n = next((_count(groups.get(k)) for k in names if groups.get(k)), None)
        if n is not None:
            return 1.0 / (days * n) if n else None
    return None
