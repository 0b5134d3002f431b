"""One safety policy at every door: the same orders, with the same clinician's answers, give the
same decision through a headless run (``ask --approve-writes``), the terminal's approval bridge,
the line session's prompt and the clinic host's record server (real EHR and knowledge servers on
real SQLite; the host over HTTP with a terminal token; real accounts and passwords)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from argon2 import PasswordHasher

from appliance.accounts import AccountStore
from appliance.accounts.reauthenticate import reauthenticate
from appliance.agent.nodes.tool_execute import execute
from appliance.line_session.loop import ask_approval
from appliance.safety.chart_gate import ChartSafetyGate
from appliance.safety.headless import HeadlessApprover
from appliance.tools.base import Approval, signed_by
from appliance.tools.in_process import InProcessToolBox
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database as ensure_ehr
from mcp_servers import access
from mcp_servers.ehr import server as ehr
from mcp_servers.knowledge import server as knowledge
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge
from tests.test_host_trust import _host

pytestmark = pytest.mark.timeout(180)
DEADLINE = 30.0
CLINICIAN = "aokafor"
RIGHT = "correct horse battery"
WRONG = "not my password"
GOOD = "allergy delabelled by the allergist last year"
CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)

ORDERS = {
    # penicillin anaphylaxis on record: a HIGH allergy finding
    "high": {"patient_id": "pat-006", "medication_name": "amoxicillin", "dosage": "500 mg",
             "frequency": "three times daily", "notes": None},
    # unknown to the local drug data: nothing about it could be checked
    "unchecked": {"patient_id": "abc-123", "medication_name": "zorbitravine", "dosage": "10 mg",
                  "frequency": "once daily", "notes": None},
    # known, dose within the label's, a moderate renal finding only: no override needed
    "clean": {"patient_id": "abc-123", "medication_name": "apixaban", "dosage": "5 mg",
              "frequency": "twice daily", "notes": None},
}
# What the clinician gives when approving: (reason, password given again).
ANSWERS = {
    "no reason": (None, RIGHT),
    "one letter": ("   x  ", RIGHT),
    "wrong password": (GOOD, WRONG),
    "reason and password": (GOOD, RIGHT),
}


@pytest.fixture(scope="module")
def knowledge_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("knowledge") / "knowledge.sqlite"
    ensure_knowledge(path)
    return path


def _home(tmp_path: Path, door: str) -> Path:
    home = tmp_path / door
    home.mkdir()
    AccountStore(home / "accounts.sqlite", hasher=CHEAP).add(CLINICIAN, RIGHT)
    return home


def _outcome(db: Path, patient: str, drug: str) -> str:
    """'override', 'approval' or 'refused', from the record alone."""
    conn = sqlite3.connect(db)
    written = conn.execute("SELECT count(*) FROM medication_requests WHERE patient_id = ? AND medication_name = ? "
                           "AND author = ?", (patient, drug, CLINICIAN)).fetchone()[0]
    conn.close()
    if not written:
        return "refused"
    last = [r for r in EhrRepository(db).audit_trail(patient) if r["tool"] == "prescribe_medication"][-1]
    return json.loads(last["result"])["approval"]["decision"]


def _in_process(home: Path, knowledge_db: Path, order: dict, approver) -> str:
    db = home / "ehr.sqlite"
    ensure_ehr(db)
    ehr.configure(db)
    knowledge.configure(knowledge_db)
    try:
        with InProcessToolBox() as tools:
            execute("prescribe_medication", dict(order), tools, approver, DEADLINE,
                    safety_gate=ChartSafetyGate(tools, DEADLINE))
    finally:
        ehr.configure(None)
        knowledge.configure(None)
    return _outcome(db, order["patient_id"], order["medication_name"])


def headless_door(home, knowledge_db, order, reason, password, monkeypatch) -> str:
    """``ask --approve-writes [--override-safety REASON]``: the password signs the run in first."""
    try:
        AccountStore(home / "accounts.sqlite", hasher=CHEAP).verify(CLINICIAN, password)
    except Exception:  # noqa: BLE001 - a wrong password: no run, nothing written
        return "refused"
    return _in_process(home, knowledge_db, order, signed_by(HeadlessApprover(reason), CLINICIAN))


class _UiThread:
    def call_from_thread(self, show):
        show()


def terminal_door(home, knowledge_db, order, reason, password, monkeypatch) -> str:
    """The terminal's approval bridge, the dialog answering Approve with the reason and password."""
    from tui.approval import ApprovalBridge

    store = AccountStore(home / "accounts.sqlite", hasher=CHEAP)
    bridge = ApprovalBridge(
        _UiThread(), lambda tool, args, context: args,
        present=lambda args, answer: answer(Approval(True, args, reason, password=password)),
        clinician=lambda: CLINICIAN, reauthenticate=lambda typed: reauthenticate(store, CLINICIAN, typed))
    return _in_process(home, knowledge_db, order, bridge)


def line_door(home, knowledge_db, order, reason, password, monkeypatch) -> str:
    """The line session's prompt: "y", then the reason and the password when it asks for them."""
    store = AccountStore(home / "accounts.sqlite", hasher=CHEAP)
    typed = iter(["y", reason or ""])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    monkeypatch.setattr("appliance.accounts.sign_in.read_password", lambda prompt="", stdin=None: password)
    approver = signed_by(lambda tool, args, safety=None: ask_approval(
        tool, args, None, safety, CLINICIAN, lambda given: reauthenticate(store, CLINICIAN, given)), CLINICIAN)
    return _in_process(home, knowledge_db, order, approver)


def host_door(home, knowledge_db, order, reason, password, monkeypatch) -> str:
    """The clinic host's record server over HTTP with a terminal token: what an honest terminal
    sends for an approval with this reason and password; the host decides by itself."""
    monkeypatch.setenv("APPLIANCE_HOME", str(home))
    with _host(home, gate=True) as host:
        token = access.add_terminal("desk-1", CLINICIAN, host.tokens)
        approval = {"decision": "override" if reason else "approval", "clinician": CLINICIAN,
                    "safety": {"override_reason": reason} if reason else None, "password": password}
        host.call("prescribe_medication", {**order, "approval": approval}, bearer=token)
        return _outcome(host.db, order["patient_id"], order["medication_name"])


DOORS = {"headless": headless_door, "terminal": terminal_door, "line session": line_door, "host": host_door}


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("order", ORDERS)
def test_every_door_gives_the_same_decision(order, answer, tmp_path, knowledge_db, monkeypatch):
    reason, password = ANSWERS[answer]
    monkeypatch.setenv("APPLIANCE_USER", CLINICIAN)  # who the in-process record server names as author
    decided = {name: door(_home(tmp_path, name.replace(" ", "-")), knowledge_db, ORDERS[order], reason, password,
                          monkeypatch)
               for name, door in DOORS.items()}
    if order == "clean":
        # a clean order needs no override: every door writes it as a plain approval (the terminal
        # and the line session ask for no password; a headless run with a wrong one never starts)
        expected = "approval"
        decided = {k: v for k, v in decided.items() if not (k == "headless" and password == WRONG)}
    else:
        expected = "override" if answer == "reason and password" else "refused"
    assert set(decided.values()) == {expected}, decided
