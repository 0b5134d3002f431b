"""Changes to a patient's medication orders as record writes: a new dose or frequency, stop,
hold, resume and renew; and an order's whole sig kept beside its text (``sig_columns``).

Invariants:
- A change names the order it changes by drug (``medication_name``: every folded word of it in
  the order's name, so "metformin" finds "Metformin 500 MG Oral Tablet") among the patient's
  orders in the statuses the action applies to (``ACTIONS``), or by ``order_id``. No such
  order is ``OrderNotFound``; two or more are ``AmbiguousOrder`` (never a guess).
- A change of dose or frequency, and a renewal, write a new active order linked to the one it
  replaces (``replaces_id``; the drug, its code and what is not changed are carried over) and
  close the old one (stopped; completed for a renewal). A switch (a change with
  ``new_medication_name``: "switch lisinopril to losartan 50 mg daily") is the same write with
  the new drug: the old order is stopped with the reason "switched to <drug>" (and the
  clinician's reason after it), the new one carries nothing of the old but the encounter and
  needs its own dosage and frequency; both in the one transaction, so there is never a moment
  with both active. Stop, hold and resume change the
  order's own status. Either way the old order keeps its text; its status, the reason, time
  and author of the change are set: never a second active order beside the first.
- Each change is one ``BEGIN IMMEDIATE`` transaction with one audit row naming the order it
  changed (``arguments.order_id``), the action, and in its result the order written or
  changed (``result.id``) and ``result.replaces``; the ledger holds every row it touched. The
  approval and the idempotency key work as for every write (``repository``).
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from typing import Any

from common.sqlite import now_iso, write_transaction
from ehr_db import custody, heads, validation
from ehr_db.codes import rxnorm_for
from ehr_db.errors import AmbiguousOrder, InvalidField, OrderNotFound, PatientNotFound

TABLE = "medication_requests"
TOOL_CHANGE = "change_medication_order"
TOOL_STATUS = "update_medication_status"
# action -> (statuses it applies to, in order of preference; the old order's status after it;
# whether it writes a new order replacing the old one)
ACTIONS: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "change": (("active", "on-hold"), "stopped", True),
    "renew": (("active", "on-hold", "completed"), "completed", True),
    "stop": (("active", "on-hold"), "stopped", False),
    "hold": (("active",), "on-hold", False),
    "resume": (("on-hold",), "active", False),
}
MAX_SIG_JSON = 4000
PAST_ORDERS = 10  # stopped and completed orders a chart shows
_SIG_TEXT = {"as_needed_for": 60, "max_per_period": 60, "duration": 40, "quantity": 40}


_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{8,100}")  # the repository's idempotency key rule


def _words(text: str) -> set[str]:
    """Folded words (lower case, accents and punctuation removed), as the repository folds names."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return set(re.sub(r"[^\w]+", " ", plain).replace("_", " ").split())


def _key(value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _KEY_RE.fullmatch(value.strip()):
        raise InvalidField("idempotency_key", "must be 8-100 letters, digits, '.', '_', ':' or '-'")
    return value.strip()


def past_orders(db, patient_id: str, limit: int = PAST_ORDERS) -> list[dict[str, Any]]:
    """The patient's stopped, completed and cancelled orders, the most recently changed first."""
    rows = db.query(
        f"""SELECT id, medication_name, dosage, frequency, status, status_reason, status_changed_at, replaces_id,
                   authored_at FROM {TABLE}
            WHERE patient_id = ? AND status IN ('stopped', 'completed', 'cancelled')
            ORDER BY COALESCE(status_changed_at, authored_at) DESC, id LIMIT ?""", [patient_id, limit])
    return [dict(r) for r in rows]


def sig_columns(sig: dict[str, Any] | None) -> dict[str, Any]:
    """The structured columns of an order from its sig (``contracts.SigRecord``: sent by the
    caller's code, read from the order as written); {} for none. Refuses a malformed one."""
    if sig is None:
        return {}
    if not isinstance(sig, dict):
        raise InvalidField("sig", "must be an object")
    out: dict[str, Any] = {}
    as_needed = sig.get("as_needed")
    if as_needed is not None and not isinstance(as_needed, bool):
        raise InvalidField("sig", "as_needed must be true, false or null")
    out["as_needed"] = None if as_needed is None else int(as_needed)
    for key, size in _SIG_TEXT.items():
        out[key] = validation.optional_text(f"sig.{key}", sig.get(key), size)
    refills = sig.get("refills")
    if refills is not None and (not isinstance(refills, int) or isinstance(refills, bool) or not 0 <= refills <= 99):
        raise InvalidField("sig", "refills must be a whole number from 0 to 99")
    out["refills"] = refills
    for key in ("dosage_instruction", "dispense_request"):
        value = sig.get(key)
        if value is not None:
            if not isinstance(value, dict):
                raise InvalidField("sig", f"{key} must be an object")
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
            if len(text) > MAX_SIG_JSON:
                raise InvalidField("sig", f"{key} must be at most {MAX_SIG_JSON} characters as JSON")
            value = text
        out[key] = value
    return out


def find_order(db, patient_id: str, medication_name: str, statuses: tuple[str, ...],
               order_id: str | None = None) -> dict[str, Any]:
    """The one order the change applies to (see the module docstring)."""
    rows = [dict(r) for r in db.query(
        f"SELECT * FROM {TABLE} WHERE patient_id = ? ORDER BY authored_at DESC, id", [patient_id])]
    if order_id:
        found = [r for r in rows if r["id"] == order_id.strip() and r["status"] in statuses]
        if not found:
            raise OrderNotFound(medication_name, statuses)
        return found[0]
    wanted = _words(medication_name)
    for status in statuses:  # the preferred status first: an active order before a completed one
        found = [r for r in rows if r["status"] == status and wanted and wanted <= _words(r["medication_name"])]
        if len(found) > 1 and status != "completed":
            raise AmbiguousOrder(medication_name, len(found))
        if found:
            return found[0]  # for a renewal of a completed course: the most recent
    raise OrderNotFound(medication_name, statuses)


def order_for(repo, patient_id: str, medication_name: str, action: str,
              order_id: str | None = None) -> dict[str, Any]:
    """The order ``action`` would change (a read, before any check or approval runs)."""
    if action not in ACTIONS:
        raise InvalidField("action", "must be change, stop, hold, resume or renew")
    pid = validation.patient_id(patient_id)
    name = validation.required_text("medication_name", medication_name, 200)
    with repo._open_read() as db:
        if db.execute("SELECT 1 FROM patients WHERE id = ?", [pid]).fetchone() is None:
            raise PatientNotFound(pid)
        return find_order(db, pid, name, ACTIONS[action][0], order_id)


def change_order(repo, tool: str, patient_id: str, medication_name: str, action: str, *, author: str,
                 dosage: str | None = None, frequency: str | None = None, reason: str | None = None,
                 order_id: str | None = None, sig: dict | None = None, idempotency_key: str | None = None,
                 approval: dict | None = None, new_medication_name: str | None = None) -> dict[str, Any]:
    """Apply ``action`` to the patient's order of ``medication_name`` (see the module
    docstring); returns {"id", "replaces", "status", "medication_name", "dosage", "frequency"}.
    ``new_medication_name`` (a change only): the drug the order is switched to."""
    if action not in ACTIONS:
        raise InvalidField("action", "must be change, stop, hold, resume or renew")
    statuses, old_status, replaces = ACTIONS[action]
    pid = validation.patient_id(patient_id)
    name = validation.required_text("medication_name", medication_name, 200)
    who = validation.required_text("author", author, 200)
    why = validation.optional_text("reason", reason, 200)
    new_dosage = validation.dosage(dosage) if dosage is not None else None
    new_frequency = validation.frequency(frequency) if frequency is not None else None
    switch_to = _switch_to(action, new_medication_name, new_dosage, new_frequency)
    if action == "change" and new_dosage is None and new_frequency is None:
        raise InvalidField("dosage", "or frequency must be given for a change")
    columns = sig_columns(sig)
    key = _key(idempotency_key)
    approved = validation.approval(approval)
    arguments = {"medication_name": name, "action": action, "dosage": new_dosage, "frequency": new_frequency,
                 "reason": why, "order_id": order_id}
    if switch_to is not None:
        arguments["new_medication_name"] = switch_to
    with repo._open() as db:
        with write_transaction(db):
            if key is not None:
                done = db.execute("SELECT tool, record_id FROM write_keys WHERE idempotency_key = ?", [key]).fetchone()
                if done is not None:
                    if done[0] != tool:
                        raise InvalidField("idempotency_key", "was already used for a different write")
                    return _summary(db, done[1])
            if db.execute("SELECT 1 FROM patients WHERE id = ?", [pid]).fetchone() is None:
                raise PatientNotFound(pid)
            old = find_order(db, pid, name, statuses, order_id)
            arguments["order_id"] = old["id"]
            at = now_iso()
            changes = custody.RowChanges(db)
            changes.before(TABLE, old["id"])
            closed_why = why or ("replaced" if replaces else None)
            if switch_to is not None:
                closed_why = f"switched to {switch_to}" + (f": {why}" if why else "")
            db.execute(f"UPDATE {TABLE} SET status = ?, status_reason = ?, status_changed_at = ?, "
                       "status_changed_by = ? WHERE id = ?",
                       [old_status, closed_why[:200] if closed_why else None, at, who, old["id"]])
            changes.after(TABLE, old["id"])
            written = old["id"]
            if replaces:
                written = str(uuid.uuid4())
                changes.before(TABLE, written)
                carried = {k: old.get(k) for k in ("encounter_id", "rxnorm_code", "medication_name", "notes", "intent")}
                if switch_to is not None:  # a new drug: nothing of the old order's but its encounter
                    carried = {"encounter_id": old.get("encounter_id"), "rxnorm_code": rxnorm_for(switch_to),
                               "medication_name": switch_to, "notes": None, "intent": old.get("intent")}
                # a renewal keeps the sig; a change keeps its words but not the old structure
                kept_sig = columns or ({k: old.get(k) for k, _ in _sig_keys()} if action == "renew" else {})
                db[TABLE].insert({
                    **carried, **kept_sig, "id": written, "patient_id": pid,
                    "dosage": new_dosage or old["dosage"], "frequency": new_frequency or old["frequency"],
                    "status": "active", "author": who, "authored_at": at, "source": "appliance",
                    "replaces_id": old["id"], "status_reason": why,
                })
                changes.after(TABLE, written)
            result = {"id": written, "replaces": old["id"] if replaces else None, "action": action}
            if approved is not None:
                result["approval"] = approved
            custody.append(db, who, tool, {"patient_id": pid, **arguments}, result, changes, at=at)
            if key is not None:
                db["write_keys"].insert({"idempotency_key": key, "tool": tool,
                                         "arguments": json.dumps({"patient_id": pid, **arguments}, sort_keys=True),
                                         "record_id": written, "at": at})
            summary = _summary(db, written)
        heads.keep(db)
    return summary


def _switch_to(action: str, new_name: str | None, dosage: str | None, frequency: str | None) -> str | None:
    """The drug a change switches the order to, checked; None when it is no switch."""
    if new_name is None:
        return None
    if action != "change":
        raise InvalidField("new_medication_name", "is given only with a change of an order")
    switch_to = validation.required_text("new_medication_name", new_name, 200)
    if dosage is None or frequency is None:
        raise InvalidField("dosage", f"and frequency of {switch_to} must be given for a switch")
    return switch_to


def _sig_keys() -> tuple[tuple[str, str], ...]:
    from ehr_db.migrations import ORDER_COLUMNS

    skip = {"replaces_id", "status_reason", "status_changed_at", "status_changed_by"}
    return tuple((k, t) for k, t in ORDER_COLUMNS if k not in skip)


def _summary(db, order_id: str) -> dict[str, Any]:
    row = db.execute(f"SELECT id, replaces_id, status, medication_name, dosage, frequency FROM {TABLE} WHERE id = ?",
                     [order_id]).fetchone()
    keys = ("id", "replaces", "status", "medication_name", "dosage", "frequency")
    return dict(zip(keys, row)) if row else {"id": order_id}


__all__ = ["ACTIONS", "TOOL_CHANGE", "TOOL_STATUS", "change_order", "find_order", "order_for", "past_orders", "sig_columns"]
