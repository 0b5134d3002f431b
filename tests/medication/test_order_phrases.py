"""Every ordinary order phrasing, read by code (``order_phrases.tsv``, every column checked):
which write the words ask for (``write_requests``), the arguments code sends (``agent.order_calls``:
drug, dosage with an implied unit, the frequency with PRN, what for and the maximum), the sig
read (as needed and what for, maximum, duration, quantity, refills) and, for a change of an
order on the chart, its action and reason."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from appliance.agent.order_calls import change_from_words
from appliance.agent.reading.orders import (
    dosage_arg,
    prescribing_order,
    record_frequency,
)
from appliance.agent.reading.write_requests import (
    CHANGE,
    PRESCRIBE,
    STATUS,
    write_requests,
)
from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import Amount
from tests.agent.helpers import state

TABLE = Path(__file__).with_name("order_phrases.tsv")
TOOLS = {"prescribe": PRESCRIBE, "change": CHANGE, "status": STATUS}


class Row(NamedTuple):
    text: str
    tool: str
    action: str
    generic: str
    dosage: str
    frequency: str
    prn: str
    indication: str
    max: str
    days: str
    quantity: str
    refills: str
    reason: str


ROWS = [Row(*line.split("\t")) for line in TABLE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def drugs() -> DrugRecogniser:
    return DrugRecogniser()


def _s(value) -> str:
    return "-" if value is None else str(value)


def _quantity(amount: Amount | None) -> str:
    return "-" if amount is None else f"{amount.value:g}" + (f" {amount.unit}" if amount.unit else "")


def test_the_table_has_hundreds_of_phrasings_of_every_kind():
    assert len(ROWS) >= 200
    assert {r.action for r in ROWS} == {"new", "change", "stop", "hold", "resume", "renew"}
    assert sum(r.prn == "prn" for r in ROWS) >= 20 and sum(r.max != "-" for r in ROWS) >= 5
    assert sum(r.days != "-" for r in ROWS) >= 20 and sum(r.refills != "-" for r in ROWS) >= 15


@pytest.mark.parametrize("row", ROWS, ids=[r.text for r in ROWS])
def test_phrasing(row: Row, drugs):
    assert write_requests(row.text) == (TOOLS[row.tool],)
    if row.tool == "prescribe":
        order = prescribing_order(row.text, drugs)
        assert order is not None and order.generic == row.generic
        frequency = record_frequency(order)
        got = (dosage_arg(order), frequency, "prn" if order.as_needed else None, order.as_needed_for,
               order.max_per_day.text if order.max_per_day else None,
               f"{order.duration_days:g}" if order.duration_days is not None else None,
               _quantity(order.quantity), order.refills)
        want = (row.dosage, row.frequency, row.prn, row.indication, row.max, row.days, row.quantity, row.refills)
        assert tuple(_s(v) for v in got) == want
        return
    tool, args, change = change_from_words(state(row.text, selected_patient_id="abc-123"), drugs)
    assert tool == TOOLS[row.tool] and args["patient_id"] == "abc-123"
    assert (change.action, args["medication_name"], _s(args["reason"])) == (row.action, row.generic, row.reason)
    if tool == CHANGE:
        assert (_s(args["dosage"]), _s(args["frequency"])) == (row.dosage, row.frequency)
    else:
        assert args["action"] == row.action
