"""Orders as clinicians write them, on the shipped model (the real llama.cpp runtime with the
embedded 270M model, the real MCP servers over stdio, a fresh data home): 30 rows of the order
phrase table (``tests/medication/order_phrases.tsv``: new orders, changes, stops, holds, renewals,
as-needed orders with their maximum, durations), spread over its kinds, each reach the approval
step in one turn with the right write, patient and fields, whatever the model would have said;
a relative change with no new dose ("increase metformin by 500 mg") gets the question instead.

A change or a status row needs the drug active on a patient's chart: the patient is the first of
the demo record with that generic active (rows whose drug no demo patient takes are left out of
the sample, and the sample is taken evenly from what remains). The approver records what it was
shown and rejects, so nothing is written and the rows do not disturb each other."""

from __future__ import annotations

import sqlite3

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.medication.names import DrugRecogniser
from appliance.runtime import load_model
from appliance.setup.home import init_home
from appliance.tools.base import Approval
from appliance.tools.mcp_client import MCPToolBox
from common import locations
from tests.medication.test_order_phrases import ROWS, Row

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

WRITES = {"prescribe": "prescribe_medication", "change": "change_medication_order",
          "status": "update_medication_status"}
SAMPLE = {"prescribe": 16, "change": 7, "status": 7}
NEW_ORDER_PATIENT = "pat-012"  # no allergy to any drug of the table's new orders


def _active_orders() -> dict[str, list[tuple[str, str]]]:
    """generic -> [(patient, status)] from the demo record as built by init."""
    drugs = DrugRecogniser()
    conn = sqlite3.connect(locations.ehr_db_path())
    try:
        rows = conn.execute("SELECT patient_id, medication_name, status FROM medication_requests "
                            "ORDER BY patient_id").fetchall()
    finally:
        conn.close()
    held: dict[str, list[tuple[str, str]]] = {}
    for patient, name, status in rows:
        generic = drugs.generic(name) or name.lower()
        held.setdefault(generic, []).append((patient, status))
    return held


def _patient_for(row: Row, held: dict[str, list[tuple[str, str]]]) -> str | None:
    if row.tool == "prescribe":
        return NEW_ORDER_PATIENT
    wanted = "on-hold" if row.action == "resume" else "active"
    return next((p for p, status in held.get(row.generic, []) if status == wanted), None)


def _features(row: Row) -> set[tuple[str, str]]:
    return {("action", row.action), ("drug", row.generic), ("prn", row.prn), ("max", str(row.max != "-")),
            ("days", str(row.days != "-")), ("refills", str(row.refills != "-")), ("reason", str(row.reason != "-"))}


def _spread(rows: list, n: int) -> list:
    """``n`` of ``rows`` (row, patient), each next pick the one that adds the most not yet tried:
    an action, a drug, as needed, a maximum, a duration, refills, a reason (ties: table order)."""
    picked, tried, left = [], set(), list(rows)
    while left and len(picked) < n:
        best = max(left, key=lambda item: len(_features(item[0]) - tried))
        picked.append(best)
        tried |= _features(best[0])
        left.remove(best)
    return picked


@pytest.fixture(scope="module")
def agent_parts(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("APPLIANCE_HOME", str(home))
    init_home(progress=lambda message: None, with_model=True)
    settings = Settings()
    held = _active_orders()
    sample = []
    for kind, n in SAMPLE.items():
        eligible = [(row, patient) for row in ROWS if row.tool == kind
                    if (patient := _patient_for(row, held)) is not None]
        sample += _spread(eligible, n)
    model = load_model(settings)
    with MCPToolBox() as tools:
        yield model, tools, settings, sample
    mp.undo()


class Recorder:
    """Rejects every write, keeping what the approval step was shown."""

    def __init__(self):
        self.seen: list[tuple[str, dict]] = []

    def __call__(self, tool, args, safety=None):
        self.seen.append((tool, dict(args)))
        return Approval(False, args, "test: not approved")


def test_thirty_order_phrasings_reach_the_approval_in_one_turn_with_their_fields(agent_parts):
    model, tools, settings, sample = agent_parts
    assert len(sample) >= 30, f"only {len(sample)} rows have a patient to try them on"
    drugs = DrugRecogniser()
    wrong = []
    for row, patient in sample:
        approver = Recorder()
        result = Agent(model, tools, settings, approver).run_turn(row.text, patient_id=patient)
        if row.tool == "change" and row.dosage == row.frequency == "-":  # "increase X by 500 mg": the question
            if approver.seen or not result.response.startswith("To what dose?"):
                wrong.append((row.text, patient, "expected the question", approver.seen, result.response[:160]))
            continue
        if len(approver.seen) != 1:
            wrong.append((row.text, patient, "approvals asked", len(approver.seen), result.response[:160]))
            continue
        tool, args = approver.seen[0]
        want_drug = row.generic
        got_drug = drugs.generic(args["medication_name"]) or args["medication_name"].lower()
        got: tuple = (tool, args["patient_id"], got_drug)
        want: tuple = (WRITES[row.tool], patient, want_drug)
        if row.tool in ("prescribe", "change"):
            got += (args.get("dosage") or "-", args.get("frequency") or "-")
            want += (row.dosage, row.frequency)
        else:
            got += (args["action"],)
            want += (row.action,)
        if got != want:
            wrong.append((row.text, patient, got, want))
    assert not wrong, "\n".join(map(str, wrong))
