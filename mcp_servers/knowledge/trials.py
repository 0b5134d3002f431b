"""Read-side trial queries over the knowledge store: the search with ClinicalTrials.gov's
parameters, and one trial's details.

Invariants:
- Pure reads on a caller-supplied (query_only) connection; nothing here writes.
- A trial search (``search_trials``) gives each parameter ClinicalTrials.gov's meaning (the
  condition and intervention search areas, the overall-status, phase, sex, age and study-type
  filters); its status defaults to recruiting, its page size is capped at ``MAX_PAGE_SIZE``,
  and the result echoes the filters it applied. A search that finds nothing says which filters
  were applied and how many trials match the words without them.
- Ranking is FTS5 bm25 over the matches that pass the filters, read from the narrow
  ``trial_filters`` rows; only the page's trials are read whole. Its cost grows with the number
  of trials the condition words match (every match is scored).
- Details give the eligibility text whole (up to ClinicalTrials.gov's 20,000-character limit)
  and split into inclusion and exclusion criteria by code (``trial_criteria``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlite_utils

from mcp_servers.knowledge.queries import _clip, _fts_groups
from mcp_servers.knowledge.store import RecordNotFound
from mcp_servers.knowledge.trial_criteria import (
    age_range_text,
    split_criteria,
    trial_sex,
)

# How the tool's status filter maps onto ClinicalTrials.gov overallStatus values. "active" means
# ongoing (not yet finished), so it includes the recruiting statuses; every result also shows
# its exact status.
STATUS_GROUPS: dict[str, tuple[str, ...]] = {
    "recruiting": ("RECRUITING", "NOT_YET_RECRUITING", "ENROLLING_BY_INVITATION"),
    "active": ("RECRUITING", "NOT_YET_RECRUITING", "ENROLLING_BY_INVITATION", "ACTIVE_NOT_RECRUITING"),
    "completed": ("COMPLETED",),
}
# ClinicalTrials.gov caps eligibility criteria at 20,000 characters: a real record is never cut.
MAX_ELIGIBILITY_TEXT = 20_000
_PHASES = {"EARLY_PHASE1": "Early Phase 1", "PHASE1": "Phase 1", "PHASE2": "Phase 2", "PHASE3": "Phase 3",
           "PHASE4": "Phase 4", "NA": "Not applicable"}


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
        "last_update": r["last_update"],
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


__all__ = ["MAX_PAGE_SIZE", "STATUS_GROUPS", "TrialSearch", "find_trials", "search_trials", "trial_details"]
