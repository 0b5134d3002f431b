"""The local clinical-knowledge MCP server: drug safety, interactions, literature and trials.

Invariants:
- Every tool is read-only (``readOnlyHint``) and opens its own query-only SQLite connection,
  so calls are safe from fastmcp's worker threads.
- The tools use the database path given to ``configure`` (tests; ``main`` passes ``--db`` or
  ``common.locations.knowledge_db_path()``). A missing database is built from the shipped
  starter content at the first call (``ensure_database`` is idempotent).
- Each agent tool is its record's (``contracts.catalogue``): the function takes the record's
  argument model and ``serving.serves`` makes the MCP signature from it. The agent always sends
  every field; for other MCP clients a nullable field may default to null here (a record with
  ``nulls_optional``: ``find_clinical_trials``' filters) without changing the agent's schema.
- Expected failures are ``ToolError("<error_type>: <text>")`` with clinician-safe text; anything
  unexpected is masked by ``mask_error_details``. An unknown drug is ``drug_not_in_database``,
  never an empty result.

Run: ``python -m mcp_servers.knowledge [--db PATH] [--http HOST:PORT]`` (stdio by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

from mcp_servers.contracts import (
    READ_ONLY,
    ClinicalTrialsArgs,
    DrugInteractionArgs,
    DrugSafetyArgs,
    LiteratureSearchArgs,
    TrialDetailsArgs,
    drugs_not_found_text,
    tool_error_message,
    tool_record,
)
from mcp_servers.knowledge import queries, trials
from mcp_servers.knowledge.store import (
    AmbiguousDrugName,
    DrugNotFound,
    RecordNotFound,
    connect,
    ensure_database,
)
from mcp_servers.serving import ArgumentErrors, LazyDatabase, serve, serves

mcp = FastMCP(
    "knowledge",
    instructions=(
        "Local clinical reference: drug boxed warnings and contraindications, drug-drug "
        "interactions, a small library of published studies, and a clinical-trial cache. "
        "Records marked demo are starter content, not authoritative sources."
    ),
    mask_error_details=True,
    middleware=[ArgumentErrors()],
)


_db = LazyDatabase(ensure_database)


def configure(db_path: Path | str | None) -> None:
    """Point the server at a database file (``None``: none; its tools then report the service unavailable)."""
    _db.configure(db_path)


@contextmanager
def _read(tool: str = "check_drug_safety") -> Iterator:
    """A read-only connection; expected failures become ToolErrors worded for ``tool`` (an
    unknown drug's caveat is the tool's, from ``contracts.NOT_IN_DATABASE_CAVEATS``)."""
    path = _db.ready()
    db = connect(path, read_only=True)
    try:
        yield db
    except DrugNotFound as exc:
        raise ToolError(tool_error_message("drug_not_in_database", drugs_not_found_text(tool, exc.names))) from None
    except AmbiguousDrugName as exc:
        raise ToolError(tool_error_message(
            "ambiguous_drug_name", f"'{exc.name}' matches several drugs: {', '.join(exc.candidates)}; name the generic"
        )) from None
    except RecordNotFound as exc:
        raise ToolError(tool_error_message("not_found", str(exc))) from None
    finally:
        db.close()


@serves(mcp, tool_record("check_drug_safety"))
def check_drug_safety(args: DrugSafetyArgs) -> dict:
    """Look up the boxed warning, contraindications and major warnings for one drug.

    Accepts a generic or brand name (for example "warfarin" or "Coumadin"). Returns the generic
    name, whether there is a boxed warning and its text, contraindications, major warnings and
    the source of the information. Fails with drug_not_in_database when the drug is unknown.
    """
    with _read("check_drug_safety") as db:
        return queries.drug_safety(db, args.drug_name)


@serves(mcp, tool_record("check_drug_interactions"))
def check_drug_interactions(args: DrugInteractionArgs) -> dict:
    """Check two or more drugs against each other for known interactions.

    Every pair is checked. Returns each interacting pair with severity (contraindicated, major,
    moderate, minor), mechanism and management, plus names that were not recognised. An empty
    interaction list means no known interaction among the recognised drugs.
    """
    with _read("check_drug_interactions") as db:
        return queries.check_interactions(db, args.drug_names)


@serves(mcp, tool_record("search_medical_literature"))
def search_medical_literature(args: LiteratureSearchArgs) -> dict:
    """Search the local library of published studies and reviews.

    Returns the best-matching articles with title, journal, year, PMID and a short snippet.
    Fails with not_found when nothing matches.
    """
    with _read() as db:
        return queries.search_literature(db, args.query)


@serves(mcp, tool_record("find_clinical_trials"))
def find_clinical_trials(args: ClinicalTrialsArgs) -> dict:
    """Find clinical trials for a condition, best match first, as ClinicalTrials.gov filters them.

    condition: words that must occur in a trial's conditions, keywords or title.
    intervention: words that must occur in its interventions (a drug, device or procedure).
    eligibility_keywords: words that must occur in its eligibility criteria text.
    status: "recruiting" (open or about to open; the default when null or omitted), "active"
    (ongoing: recruiting or running), "completed", or "any".
    phase: keeps trials whose phases include it (a Phase 1/Phase 2 trial has both).
    sex: the patient's sex; keeps trials open to it (all sexes, or that sex).
    patient_age: the patient's age in whole years; keeps trials whose minimum and maximum ages
    (no limit where the record gives none) admit it.
    study_type: interventional, observational or expanded_access.
    page_size: trials returned, 10 by default, at most 50.
    Returns NCT id, title, status, phase, study type, conditions, interventions, ages, sex and
    locations, with the filters applied and the number of matches. Records marked demo_record
    are demonstration entries, not real studies.
    """
    search = trials.TrialSearch(
        args.condition, intervention=args.intervention, eligibility_keywords=args.eligibility_keywords,
        status=args.status, phase=args.phase, sex=args.sex,
        patient_age=int(args.patient_age) if args.patient_age else None, study_type=args.study_type,
        page_size=int(args.page_size) if args.page_size else None,
    )
    with _read("find_clinical_trials") as db:
        return trials.search_trials(db, search)


@serves(mcp, tool_record("get_trial_details"))
def get_trial_details(args: TrialDetailsArgs) -> dict:
    """Get one trial's details by NCT id: the eligibility criteria text, and the same text split
    into inclusion and exclusion criteria (one entry per criterion); minimum and maximum age,
    sex, status, phase, arms, interventions and locations. Fails with not_found for an unknown id."""
    with _read("get_trial_details") as db:
        return trials.trial_details(db, args.nct_id)


@mcp.tool(annotations=READ_ONLY)
def drug_vocabulary() -> dict:
    """Every generic, brand and synonym drug name the database knows, sorted (for name matching),
    and how many drugs the database holds."""
    with _read() as db:
        names = queries.vocabulary(db)
        drugs = db["drugs"].count
    return {"names": names, "count": len(names), "drugs": drugs}


def main(argv: list[str] | None = None) -> int:
    from common.locations import (
        knowledge_db_path,  # the launcher resolves the default; the tools take a path
    )

    return serve(mcp, argv, name="knowledge", doc=__doc__, configure=configure, default_db=knowledge_db_path)


if __name__ == "__main__":
    raise SystemExit(main())
