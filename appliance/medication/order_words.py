"""The vocabulary of medication orders (sig language) that ``orders`` reads: units, forms,
routes and frequencies as clinicians write them, each with its normalised meaning.

Invariant: every pattern here is matched case-insensitively on word boundaries; tables map the
lower-cased words to one normalised value.
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
    **dict.fromkeys(("application", "applications"), "application"),
    **dict.fromkeys(("lozenge", "lozenges"), "lozenge"),
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
                   "vial", "ampule", "sachet", "scoop"})
_UNIT_ALTERNATIVES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
# A number: "500", "0.5", ".5", "1,000" (thousands), "1 1/2" is not read.
NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?|\.\d+)"
# An amount: number (or range) then a unit; a per-weight or per-volume tail stays with it.
AMOUNT_RE = re.compile(
    rf"(?<![\w.\-/])(?P<low>{NUMBER})\s*(?:-|–|to)\s*(?P<high>{NUMBER})\s*(?P<unit>{_UNIT_ALTERNATIVES})\b"
    rf"(?P<per>\s*/\s*(?:kg|m2|{_UNIT_ALTERNATIVES})(?:\s*/\s*(?:day|d|24\s*h(?:ours?)?|dose))?)?"
    rf"|(?<![\w.\-/])(?P<value>{NUMBER}(?:\s*/\s*{NUMBER})*)\s*(?P<unit2>{_UNIT_ALTERNATIVES})\b"
    rf"(?P<per2>\s*/\s*(?:{NUMBER}\s*)?(?:kg|m2|{_UNIT_ALTERNATIVES})(?:\s*/\s*(?:day|d|24\s*h(?:ours?)?|dose))?)?",
    re.IGNORECASE)

ROUTES: tuple[tuple[str, str], ...] = (
    (r"p\.?o\.?|by mouth|orally|oral|per os", "oral"),
    (r"s\.?l\.?|sublingual(?:ly)?|under the tongue", "sublingual"),
    (r"i\.?v\.?(?:\s*push|\s*piggyback|pb)?|intravenous(?:ly)?", "IV"),
    (r"i\.?m\.?|intramuscular(?:ly)?", "IM"),
    (r"s\.?c\.?|s\.?q\.?|subcut|sub-?q|subcutaneous(?:ly)?", "subcutaneous"),
    (r"inh(?:aled)?|via inhaler|by inhalation|inhaler|nebuli[sz]ed|neb", "inhaled"),
    (r"intranasal(?:ly)?|nasal(?:ly)?|each nostril|per nostril", "intranasal"),
    (r"topical(?:ly)?|apply|to the skin|to affected area", "topical"),
    (r"t\.?d\.?|transdermal(?:ly)?", "transdermal"),
    (r"p\.?r\.?|rectal(?:ly)?|per rectum", "rectal"),
    (r"p\.?v\.?|vaginal(?:ly)?|per vagina", "vaginal"),
    (r"ophthalmic|eye drops?|in (?:each|the affected|both|the right|the left) eyes?", "ophthalmic"),
    (r"otic|in (?:each|the affected|both|the right|the left) ears?", "otic"),
)
ROUTE_RE = re.compile(r"(?<![\w/])(?:" + "|".join(f"(?P<r{i}>{p})" for i, (p, _) in enumerate(ROUTES)) + r")(?![\w/])",
                      re.IGNORECASE)

_TIMES = {"once": 1, "one time": 1, "twice": 2, "two times": 2, "thrice": 3, "three times": 3, "four times": 4,
          "five times": 5, "six times": 6}
_TIMES_RE = r"(?P<times>once|one time|twice|two times|thrice|three times|four times|five times|six times|(?P<n>\d)\s*(?:x|times))"
_DAY = r"(?:daily|a day|per day|each day|every day|/\s*day|/\s*d\b|in 24 hours)"
_WEEK = r"(?:weekly|a week|per week|each week|every week|/\s*w(?:ee)?k)"
_MONTH = r"(?:monthly|a month|per month|every month)"
# (pattern, administrations per day); a pattern with a group "h" (hours) or "h2" (upper) computes it.
FREQUENCIES: tuple[tuple[str, float | None], ...] = (
    (rf"{_TIMES_RE}\s+{_DAY}", None),
    (rf"{_TIMES_RE}\s+{_WEEK}", None),
    (rf"{_TIMES_RE}\s+{_MONTH}", None),
    (r"q\.?\s*(?P<h>\d+(?:\.\d+)?)\s*(?:-|–|to)\s*(?P<h2>\d+)\s*h(?:rs?|ours?)?\b", None),
    (r"every\s+(?P<h>\d+(?:\.\d+)?)\s*(?:-|–|to)\s*(?P<h2>\d+)\s*h(?:rs?|ours?)?\b", None),
    (r"q\.?\s*(?P<h>\d+(?:\.\d+)?)\s*h(?:rs?|ours?)?\.?(?!\w)", None),
    (r"every\s+(?P<h>\d+(?:\.\d+)?)\s*h(?:rs?|ours?)?\b", None),
    (r"every\s+(?P<d>\d+|other|two|three)\s+(?:days?)\b", None),
    (r"every\s+(?P<w>\d+|other|two|three|four)\s+weeks?\b", None),
    (r"q\.?\s*(?P<d>\d)\s*d(?:ays?)?\b", None),
    (r"every\s+hour|q\.?\s*h\b|hourly", 24.0),
    (r"b\.?i\.?d\.?|b\.?d\.?|bds", 2.0),
    (r"t\.?i\.?d\.?|t\.?d\.?s\.?", 3.0),
    (r"q\.?i\.?d\.?|q\.?d\.?s\.?", 4.0),
    (r"q\.?o\.?d\.?|every other day|on alternate days|alternate days", 0.5),
    (r"q\.?d\.?|o\.?d\.?|o\.?m\.?|q\.?a\.?m\.?|q\.?p\.?m\.?|q\.?h\.?s\.?|h\.?s\.?|nightly|at night|at bedtime|"
     r"before bed|every (?:morning|evening|night)|in the (?:morning|evening)|each (?:morning|evening|night)|"
     r"every day|each day|daily|once|a day|per day|(?:before|with|after) (?:breakfast|lunch|dinner|supper)", 1.0),
    (r"weekly|every week|each week|q\.?\s*(?:1\s*)?w(?:ee)?k", 1 / 7),
    (r"biweekly|fortnightly", 1 / 14),
    (r"monthly|every month|q\.?\s*month", 1 / 30),
)
FREQUENCY_RES = tuple((re.compile(rf"(?<![\w/])(?:{p})(?![\w])", re.IGNORECASE), v) for p, v in FREQUENCIES)
_WORD_NUMBERS = {"other": 2, "two": 2, "three": 3, "four": 4}
ONE_TIME_RE = re.compile(r"(?<!\w)(?:stat|now|single dose|one dose|x\s*1|one time only|once only|as a single dose)(?!\w)",
                         re.IGNORECASE)
AS_NEEDED_RE = re.compile(r"(?<!\w)(?:p\.?r\.?n\.?|as needed|as required|when required|if needed|when needed|"
                          r"as directed for|on demand)(?!\w)", re.IGNORECASE)
MAX_RE = re.compile(
    rf"(?<!\w)(?:max(?:imum)?\.?|not (?:to )?(?:exceed|more than)|no more than|up to|do not exceed)\s*(?:of\s*)?"
    rf"(?P<value>{NUMBER})\s*(?P<unit>{_UNIT_ALTERNATIVES})?\s*(?:/|per|in|a|each|every)\s*"
    rf"(?:24\s*h(?:ours?|rs?)?|day|d\b|24-hour period)",
    re.IGNORECASE)
DURATION_RE = re.compile(
    r"(?<!\w)(?:for|x|times|×)\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>d|days?|w|wks?|weeks?|months?|mo)(?!\w)", re.IGNORECASE)
DURATION_DAYS = {"d": 1, "day": 1, "days": 1, "w": 7, "wk": 7, "wks": 7, "week": 7, "weeks": 7, "month": 30,
                 "months": 30, "mo": 30}


def times_per_day(match: re.Match) -> float | None:
    """Administrations per day for a ``FREQUENCY_RES`` match whose value is computed."""
    groups = match.groupdict()
    if groups.get("times"):
        n = int(groups["n"]) if groups.get("n") else _TIMES[groups["times"].lower()]
        text = match.group(0).lower()
        if re.search(_WEEK, text):
            return n / 7
        if re.search(_MONTH, text):
            return n / 30
        return float(n)
    if groups.get("h"):
        hours = float(groups["h"])
        return 24.0 / hours if hours > 0 else None  # q4-6h: the most allowed is every 4 hours
    if groups.get("d"):
        word = groups["d"].lower()
        days = _WORD_NUMBERS.get(word) or (int(word) if word.isdigit() else None)
        return 1.0 / days if days else None
    if groups.get("w"):
        word = groups["w"].lower()
        weeks = _WORD_NUMBERS.get(word) or (int(word) if word.isdigit() else None)
        return 1.0 / (7 * weeks) if weeks else None
    return None
