"""Read-side queries over the knowledge store; each returns JSON-able dicts for the server.

Invariants:
- Pure reads on a caller-supplied (query_only) connection; nothing here writes.
- An unknown drug is always reported as such (``DrugNotFound``), never as "no warning" or
  "no interaction". A name that maps to several generics raises ``AmbiguousDrugName``.
- Interaction checks cover every unordered pair of distinct recognised drugs; "no known
  interaction" is only ever said about drugs that are in the database, and unrecognised names
  come with the caveat that their absence does not mean the combination is safe.
- Full-text ranking uses FTS5 bm25 over rows matching every query term; only when no row
  does are rows matching some of the terms returned (still ranked by bm25). Long texts are clipped for the model, never silently dropped
  (the result says when it clipped).
- A trial search (``search_trials``) gives each parameter ClinicalTrials.gov's meaning (the
  condition and intervention search areas, the overall-status, phase, sex, age and study-type
  filters); its status defaults to recruiting, its page size is capped at ``MAX_PAGE_SIZE``,
  and the result echoes the filters it applied. A search that finds nothing says which filters
  were applied and how many trials match the words without them.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass

import sqlite_utils

from mcp_servers.contracts import drugs_not_found_text
from mcp_servers.trial_criteria import age_range_text, split_criteria, trial_sex
from mcp_servers.knowledge_store import (
    SEVERITIES,
    AmbiguousDrugName,
    DrugNotFound,
    RecordNotFound,
    lookup_keys,
)

# How the tool's status filter maps onto ClinicalTrials.gov overallStatus values. "active" means
# ongoing (not yet finished), so it includes the recruiting statuses; every result also shows
# its exact status.
STATUS_GROUPS: dict[str, tuple[str, ...]] = {
    "recruiting": ("RECRUITING", "NOT_YET_RECRUITING", "ENROLLING_BY_INVITATION"),
    "active": ("RECRUITING", "NOT_YET_RECRUITING", "ENROLLING_BY_INVITATION", "ACTIVE_NOT_RECRUITING"),
    "completed": ("COMPLETED",),
}
MAX_TEXT = 1500
MAX_LIST_ITEMS = 12
# ClinicalTrials.gov caps eligibility criteria at 20,000 characters: a real record is never cut.
MAX_ELIGIBILITY_TEXT = 20_000

_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it me of on or show tell the this "
    "to what which with about any find latest recent new evidence study studies trial trials "
    "research paper papers article articles literature publication publications review reviews "
    "patient patients there clinical".split()
)
# Common clinical abbreviations, expanded as an alternative phrase (not a replacement).
_ABBREVIATIONS = {
    "afib": "atrial fibrillation", "af": "atrial fibrillation", "t2dm": "type 2 diabetes",
    "t2d": "type 2 diabetes", "t1dm": "type 1 diabetes", "t1d": "type 1 diabetes", "dm": "diabetes",
    "htn": "hypertension", "ckd": "chronic kidney disease", "hf": "heart failure",
    "chf": "heart failure", "hfref": "heart failure reduced ejection fraction",
    "mi": "myocardial infarction", "acs": "acute coronary syndrome", "cad": "coronary artery disease",
    "copd": "chronic obstructive pulmonary disease", "mdd": "major depressive disorder",
    "gdm": "gestational diabetes", "bp": "blood pressure", "mpm": "malignant pleural mesothelioma",
    "nsclc": "non small cell lung cancer", "vte": "venous thromboembolism", "dvt": "deep vein thrombosis",
    "pe": "pulmonary embolism", "ra": "rheumatoid arthritis", "ssri": "serotonin reuptake inhibitor",
    "nsaid": "anti inflammatory", "nsaids": "anti inflammatory", "doac": "oral anticoagulant",
}
_PHASES = {"EARLY_PHASE1": "Early Phase 1", "PHASE1": "Phase 1", "PHASE2": "Phase 2", "PHASE3": "Phase 3",
           "PHASE4": "Phase 4", "NA": "Not applicable"}


# -- helpers ---------------------------------------------------------------------------------
def _clip(text: str | None, limit: int = MAX_TEXT) -> tuple[str | None, bool]:
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit].rsplit(" ", 1)[0] + " ... (clipped)", True


def _clip_list(items: list[str]) -> tuple[list[str], bool]:
    clipped_any = len(items) > MAX_LIST_ITEMS
    out = []
    for item in items[:MAX_LIST_ITEMS]:
        text, clipped = _clip(item, MAX_TEXT // 2)
        clipped_any |= clipped
        out.append(text)
    return out, clipped_any


def _fts_groups(text: str) -> list[str]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    kept = [t for t in tokens if t not in _STOPWORDS] or tokens
    groups, seen = [], set()
    for token in kept:
        if token in seen:
            continue
        seen.add(token)
        alternatives = [f'"{token}"']
        if token in _ABBREVIATIONS:
            alternatives.append(f'"{_ABBREVIATIONS[token]}"')
        groups.append(alternatives[0] if len(alternatives) == 1 else "(" + " OR ".join(alternatives) + ")")
    return groups


def _ranked(db: sqlite_utils.Database, sql: str, text: str, params: list, limit: int) -> list[dict]:
    """Run an FTS query for rows matching every term; only if none do, rows matching any term."""
    groups = _fts_groups(text)
    if not groups:
        return []
    rows = list(db.query(sql, [" AND ".join(groups), *params, limit]))
    if not rows and len(groups) > 1:
        rows = list(db.query(sql, [" OR ".join(groups), *params, limit]))
    return rows


# -- drugs -----------------------------------------------------------------------------------
def resolve_drug(db: sqlite_utils.Database, name: str) -> str:
    """The generic name for a generic, brand or synonym name; raises if unknown or ambiguous."""
    for key in lookup_keys(name):
        rows = db.execute("SELECT DISTINCT generic_name, kind FROM drug_names WHERE name_key = ?", [key]).fetchall()
        generics = sorted({r[0] for r in rows})
        if len(generics) == 1:
            return generics[0]
        if generics:
            exact = sorted({r[0] for r in rows if r[1] == "generic"})
            if len(exact) == 1:
                return exact[0]
            raise AmbiguousDrugName(name, generics)
    raise DrugNotFound([name])


def _drug_row(db: sqlite_utils.Database, generic: str) -> dict:
    return next(db.query("SELECT * FROM drugs WHERE generic_name = ?", [generic]))


def drug_safety(db: sqlite_utils.Database, drug_name: str) -> dict:
    generic = resolve_drug(db, drug_name)
    row = _drug_row(db, generic)
    boxed, clipped_boxed = _clip(row["boxed_warning"])
    contraindications, clipped_c = _clip_list(json.loads(row["contraindications"]))
    warnings, clipped_w = _clip_list(json.loads(row["major_warnings"]))
    return {
        "drug": generic,
        "matched_name": drug_name,
        "brand_names": json.loads(row["brand_names"]),
        "drug_class": row["drug_class"],
        "has_boxed_warning": boxed is not None,
        "boxed_warning": boxed,
        "contraindications": contraindications,
        "major_warnings": warnings,
        "clipped": clipped_boxed or clipped_c or clipped_w,
        "source": row["source"],
        "demo_content": bool(row["demo"]),
    }


def _names_of(db: sqlite_utils.Database, generic: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM drug_names WHERE generic_name = ?", [generic])]


def _label_mentions(db: sqlite_utils.Database, a: str, b: str) -> list[dict]:
    """Sentences of one drug's label interaction section that name the other drug."""
    found = []
    for label_of, other in ((a, b), (b, a)):
        text = db.execute("SELECT label_interactions FROM drugs WHERE generic_name = ?", [label_of]).fetchone()[0]
        if not text:
            continue
        names = sorted(_names_of(db, other), key=len, reverse=True)
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b", re.IGNORECASE)
        for sentence in re.split(r"(?<=[.;])\s+", text):
            if pattern.search(sentence):
                excerpt, _ = _clip(sentence.strip(), 400)
                found.append({"drugs": [a, b], "label_of": label_of, "excerpt": excerpt})
                break
    return found


def check_interactions(db: sqlite_utils.Database, drug_names: list[str]) -> dict:
    recognised: list[tuple[str, str]] = []  # (input name, generic), in input order
    unknown: list[str] = []
    ambiguous: dict[str, list[str]] = {}
    for name in drug_names:
        try:
            recognised.append((name, resolve_drug(db, name)))
        except DrugNotFound:
            unknown.append(name)
        except AmbiguousDrugName as exc:
            ambiguous[name] = exc.candidates
    if len(recognised) < 2:
        if ambiguous and not unknown:
            first = next(iter(ambiguous))
            raise AmbiguousDrugName(first, ambiguous[first])
        raise DrugNotFound(unknown + list(ambiguous))
    generics = sorted({g for _n, g in recognised})
    same_drug = [
        [n for n, g in recognised if g == generic]
        for generic in generics
        if sum(1 for _n, g in recognised if g == generic) > 1
    ]
    interactions, mentions = [], []
    pairs = list(itertools.combinations(generics, 2))
    for a, b in pairs:
        row = next(db.query("SELECT * FROM interactions WHERE drug_a = ? AND drug_b = ?", [a, b]), None)
        if row:
            interactions.append({
                "drugs": [a, b], "severity": row["severity"], "mechanism": row["mechanism"],
                "management": row["management"], "source": row["source"], "demo_content": bool(row["demo"]),
            })
        else:
            mentions += _label_mentions(db, a, b)
    interactions.sort(key=lambda i: SEVERITIES.index(i["severity"]))
    return {
        "drugs_checked": [{"name": n, "generic_name": g} for n, g in recognised],
        "not_recognised": unknown,
        # Said with the names, so a reader of the result cannot take their absence for safety.
        "not_recognised_note": drugs_not_found_text("check_drug_interactions", unknown) if unknown else "",
        "ambiguous": ambiguous,
        "same_drug_given_twice": same_drug,
        "pairs_checked": len(pairs),
        "interactions": interactions,
        "label_mentions": mentions,
        "note": (
            "No known interaction among the recognised drugs in the local database."
            if not interactions and not mentions and pairs else
            "Interactions are listed most severe first." if interactions else ""
        ),
    }


def vocabulary(db: sqlite_utils.Database) -> list[str]:
    """Every generic, brand and synonym name that resolves to exactly one drug, sorted."""
    rows = db.execute(
        "SELECT name_key, MIN(name), COUNT(DISTINCT generic_name) FROM drug_names GROUP BY name_key"
    ).fetchall()
    return sorted((name for _key, name, count in rows if count == 1), key=lambda n: (n.lower(), n))


# -- literature ------------------------------------------------------------------------------
_ARTICLE_SQL = (
    "SELECT a.pmid, a.title, a.journal, a.year, a.demo, a.abstract, "
    "snippet(articles_fts, 2, '', '', ' ... ', 40) AS snippet, bm25(articles_fts, 5.0, 3.0, 1.0) AS score "
    "FROM articles_fts JOIN articles a ON a.rowid = articles_fts.rowid "
    "WHERE articles_fts MATCH ? ORDER BY score LIMIT ?"
)


def search_literature(db: sqlite_utils.Database, query: str, limit: int = 8) -> dict:
    rows = _ranked(db, _ARTICLE_SQL, query, [], limit)
    if not rows:
        total = db["articles"].count
        raise RecordNotFound(f"no articles in the local library ({total} articles) match '{query}'")
    return {
        "query": query,
        "count": len(rows),
        "articles": [
            {
                "pmid": r["pmid"], "title": r["title"], "journal": r["journal"], "year": r["year"],
                "snippet": r["snippet"] or _clip(r["abstract"], 300)[0],
                "demo_paraphrase": bool(r["demo"]),
            }
            for r in rows
        ],
    }


# -- trials ----------------------------------------------------------------------------------
def _phase(phases_json: str) -> str | None:
    phases = json.loads(phases_json or "[]")
    return "/".join(_PHASES.get(p, p) for p in phases) or None


@dataclass(frozen=True)
class TrialSearch:
    """A trial search, with the meaning ClinicalTrials.gov gives each parameter (see
    ``find_trials``). ``status`` None is the default, recruiting; "any" drops the filter."""

    condition: str
    intervention: str | None = None
    eligibility_keywords: str | None = None
    status: str | None = None
    phase: str | None = None
    sex: str | None = None
    patient_age: int | None = None
    study_type: str | None = None
    page_size: int | None = None

    @property
    def status_group(self) -> str | None:
        status = self.status or DEFAULT_STATUS
        return None if status == "any" else status

    @property
    def limit(self) -> int:
        return max(1, min(self.page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE))

    def filters(self) -> dict:
        """The filters as applied, for the result (so a reader sees what was searched)."""
        return {
            "intervention": self.intervention, "eligibility_keywords": self.eligibility_keywords,
            "status": self.status_group or "any", "phase": self.phase, "sex": self.sex,
            "patient_age": self.patient_age, "study_type": self.study_type, "page_size": self.limit,
        }


DEFAULT_STATUS = "recruiting"
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 50
# The tool's phase words -> ClinicalTrials.gov phase values; a phase filter keeps a trial whose
# phases include it (a Phase 1/Phase 2 trial is found by either), as CT.gov's phase filter does.
PHASE_VALUES = {"early_phase1": "EARLY_PHASE1", "phase1": "PHASE1", "phase2": "PHASE2", "phase3": "PHASE3",
                "phase4": "PHASE4", "not_applicable": "NA"}
STUDY_TYPES = {"interventional": "INTERVENTIONAL", "observational": "OBSERVATIONAL",
               "expanded_access": "EXPANDED_ACCESS"}
# FTS5 columns of trials_fts each parameter searches (ClinicalTrials.gov's search areas:
# the condition area covers conditions, keywords and titles; the intervention area the
# interventions).
_CONDITION_COLUMNS = "{title conditions keywords}"
_INTERVENTION_COLUMNS = "{interventions}"


def _match(columns: str, groups: list[str], joiner: str) -> str:
    return f"{columns} : (" + f" {joiner} ".join(groups) + ")"


def _filter_sql(search: TrialSearch) -> tuple[str, list]:
    """SQL conditions on ``f`` (the trial's ``trial_filters`` row) for every filter but the text ones."""
    where, params = [], []
    group = search.status_group
    if group:
        statuses = STATUS_GROUPS[group]
        where.append(f"f.status IN ({', '.join('?' for _ in statuses)})")
        params += list(statuses)
    if search.phase:
        where.append("EXISTS (SELECT 1 FROM json_each(f.phases) WHERE json_each.value = ?)")
        params.append(PHASE_VALUES[search.phase])
    if search.sex:
        # A trial takes the patient's sex when it takes all sexes, that sex, or does not say.
        where.append("(f.sex IS NULL OR f.sex IN ('ALL', 'BOTH', ?))")
        params.append(search.sex.upper())
    if search.patient_age is not None:
        # The patient is somewhere in [age, age + 1) years: keep a trial whose age range
        # overlaps that year. A missing bound is no limit, as on ClinicalTrials.gov.
        where.append("(f.min_age_years IS NULL OR f.min_age_years < ?)")
        where.append("(f.max_age_years IS NULL OR f.max_age_years >= ?)")
        params += [search.patient_age + 1, search.patient_age]
    if search.study_type:
        where.append("f.study_type = ?")
        params.append(STUDY_TYPES[search.study_type])
    return "".join(f" AND {w}" for w in where), params


# Ranked on the narrow filter rows first; only the page's trials are then read whole.
_TRIAL_SQL = (
    "SELECT f.rowid AS rid, bm25(trials_fts, 2.0, 10.0, 5.0, 1.0) AS score "
    "FROM trials_fts JOIN trial_filters f ON f.rowid = trials_fts.rowid "
    "WHERE trials_fts MATCH ?{eligibility}{filters} ORDER BY score, f.rowid LIMIT ?"
)
# Matches are counted up to COUNT_CAP (an exact count of a broad search would cost as much as
# ranking it): ``total_matches`` is then a lower bound and ``total_capped`` says so.
COUNT_CAP = 1000
_COUNT_SQL = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM trials_fts JOIN trial_filters f ON f.rowid = trials_fts.rowid "
    "WHERE trials_fts MATCH ?{eligibility}{filters} LIMIT ?)"
)
_ELIGIBILITY_SQL = " AND f.rowid IN (SELECT rowid FROM trials_eligibility_fts WHERE trials_eligibility_fts MATCH ?)"


def _text_query(search: TrialSearch, joiner: str) -> str | None:
    condition = _fts_groups(search.condition)
    if not condition:
        return None
    query = _match(_CONDITION_COLUMNS, condition, joiner)
    intervention = _fts_groups(search.intervention or "")
    if intervention:
        query += " AND " + _match(_INTERVENTION_COLUMNS, intervention, "AND")
    return query


def _summary(r: dict) -> dict:
    locations = json.loads(r["locations"])
    return {
        "nct_id": r["nct_id"], "title": r["title"], "status": r["status"], "phase": _phase(r["phases"]),
        "study_type": r["study_type"], "conditions": json.loads(r["conditions"]),
        "interventions": json.loads(r["interventions"])[:4],
        "ages": age_range_text(r["minimum_age"], r["maximum_age"]), "sex": trial_sex(r["sex"]) or "not stated",
        "locations": locations[:3], "locations_total": len(locations), "demo_record": bool(r["demo"]),
    }


def search_trials(db: sqlite_utils.Database, search: TrialSearch) -> dict:
    """Trials matching ``search``, best first (bm25: title and conditions weigh most).

    Every word of the condition must occur in a trial's conditions, keywords or title; only
    when no trial has them all are trials with some of them returned (``condition_match``
    says which). Every word of the intervention must occur in its interventions, and every
    eligibility keyword in its eligibility criteria text. The filters then keep trials whose
    status is in the status group, whose phases include the phase, that take the patient's
    sex, whose age range overlaps the patient's age, and of the study type.
    """
    filters, params = _filter_sql(search)
    eligibility = _fts_groups(search.eligibility_keywords or "")
    elig_sql = _ELIGIBILITY_SQL if eligibility else ""
    elig_params = [" AND ".join(eligibility)] if eligibility else []
    ranked: list[tuple] = []
    total, matched = 0, "all words"
    for joiner in ("AND", "OR"):
        query = _text_query(search, joiner)
        if query is None:
            break
        args = [query, *elig_params, *params]
        ranked = db.execute(_TRIAL_SQL.format(eligibility=elig_sql, filters=filters), [*args, search.limit]).fetchall()
        if ranked:
            total = db.execute(_COUNT_SQL.format(eligibility=elig_sql, filters=filters), [*args, COUNT_CAP + 1]).fetchone()[0]
            matched = "all words" if joiner == "AND" else "some words"
            break
        if len(_fts_groups(search.condition)) < 2:
            break
    if not ranked:
        raise RecordNotFound(_no_trials_text(db, search))
    order = [rid for rid, _score in ranked]
    rows = {r["rowid"]: r for r in db.query(
        f"SELECT rowid, * FROM trials WHERE rowid IN ({', '.join('?' for _ in order)})", order)}
    return {
        "condition": search.condition, "condition_match": matched, "filters": search.filters(),
        "count": len(order), "total_matches": min(total, COUNT_CAP), "total_capped": total > COUNT_CAP,
        "trials": [_summary(rows[rid]) for rid in order],
    }


def _no_trials_text(db: sqlite_utils.Database, search: TrialSearch) -> str:
    """Why nothing was found: the filters, and how many trials the words match without them."""
    applied = [f"{k.replace('_', ' ')} {v}" for k, v in search.filters().items()
               if v is not None and k != "page_size"]
    text = f"no trials for '{search.condition}'" + (f" with {', '.join(applied)}" if applied else "")
    query = _text_query(search, "OR")
    unfiltered = db.execute(_COUNT_SQL.format(eligibility="", filters=""), [query, COUNT_CAP + 1]).fetchone()[0] if query else 0
    text += f" in the local trial cache ({db['trials'].count} trials"
    if unfiltered:
        many = f"more than {COUNT_CAP}" if unfiltered > COUNT_CAP else str(unfiltered)
        text += f"; {many} match the condition words without these filters"
    return text + ")"


def find_trials(db: sqlite_utils.Database, condition: str, status: str | None, limit: int = 10) -> dict:
    """The condition-and-status search (``search_trials`` with defaults for the rest)."""
    return search_trials(db, TrialSearch(condition, status=status, page_size=limit))


def trial_details(db: sqlite_utils.Database, nct_id: str) -> dict:
    """One trial: the eligibility text whole (up to ClinicalTrials.gov's own limit) and split
    into inclusion and exclusion criteria by code (``trial_criteria.split_criteria``), ages,
    sex, arms, interventions and locations."""
    key = nct_id.strip().upper()
    row = next(db.query("SELECT * FROM trials WHERE nct_id = ?", [key]), None)
    if row is None:
        raise RecordNotFound(f"trial {nct_id} is not in the local trial cache")
    locations = json.loads(row["locations"])
    eligibility, clipped = _clip(row["eligibility_criteria"], MAX_ELIGIBILITY_TEXT)
    criteria = split_criteria(row["eligibility_criteria"])
    return {
        "nct_id": row["nct_id"], "title": row["title"], "status": row["status"], "phase": _phase(row["phases"]),
        "study_type": row["study_type"], "conditions": json.loads(row["conditions"]),
        "minimum_age": row["minimum_age"], "maximum_age": row["maximum_age"],
        "ages": age_range_text(row["minimum_age"], row["maximum_age"]), "sex": row["sex"],
        "inclusion_criteria": criteria["inclusion"], "exclusion_criteria": criteria["exclusion"],
        "eligibility_notes": criteria["notes"],
        "interventions": json.loads(row["interventions"]), "arms": json.loads(row["arms"] or "[]"),
        "keywords": json.loads(row["keywords"]),
        "eligibility_criteria": eligibility, "eligibility_clipped": clipped,
        "locations": locations[:20], "locations_total": len(locations), "last_update": row["last_update"],
        "source": row["source"], "demo_record": bool(row["demo"]),
        "note": "" if row["eligibility_criteria"] else "Eligibility text is not in the local trial cache.",
    }


__all__ = [
    "STATUS_GROUPS", "TrialSearch", "check_interactions", "drug_safety", "find_trials", "resolve_drug",
    "search_literature", "search_trials", "trial_details", "vocabulary",
]
