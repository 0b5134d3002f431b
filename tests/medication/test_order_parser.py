"""The medication-order parser (appliance/medication/orders.py): a table of real-world orders
(``order_strings.tsv``, every column checked), what an order amounts to in milligrams, digits
that are never doses, and properties that hold for any text (never raises; every ``*_text`` is
the clinician's own words)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.medication import orders
from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import MAX_TEXT, Amount, Order, parse_order

TABLE = Path(__file__).with_name("order_strings.tsv")


class Row(NamedTuple):
    text: str
    generic: str
    dose: str
    strength: str
    route: str
    frequency: str
    per_day: str
    flags: str
    max: str
    days: str


def _rows() -> list[Row]:
    lines = TABLE.read_text(encoding="utf-8").splitlines()
    return [Row(*line.split("\t")) for line in lines if line.strip() and not line.startswith("#")]


ROWS = _rows()


@pytest.fixture(scope="module")
def drugs() -> DrugRecogniser:
    return DrugRecogniser()


def _num(x: float) -> str:
    return f"{x:g}"


def render(amount: Amount | None) -> str:
    """An amount in the table's notation: "500 mg", "1-2 tablet", "50/1000 mg", "250 mg/5 mL"."""
    if amount is None:
        return "-"
    if amount.parts:
        number = "/".join(_num(p) for p in amount.parts)
        if amount.value != max(amount.parts):
            number += "(value?)"
    elif amount.low is not None:
        number = f"{_num(amount.low)}-{_num(amount.value)}"
    else:
        number = _num(amount.value)
    rendered = f"{number} {amount.unit}" if amount.unit else number
    return f"{rendered}/{_num(amount.per_ml)} mL" if amount.per_ml is not None else rendered


def _per_day(cell: str) -> float | None:
    return None if cell == "-" else float(Fraction(cell))


def assert_invariants(order: Order, text: str) -> None:
    """What holds for every order read from every text."""
    assert order.text == text
    for name in ("drug_text", "route_text", "frequency_text", "duration_text"):
        value = getattr(order, name)
        assert value is None or (value and value in text), (name, value)
    for amount in (order.strength, order.dose, order.max_per_day):
        if amount is not None:
            assert amount.text and text[amount.span[0]:amount.span[1]] == amount.text
            assert math.isfinite(amount.value) and amount.value >= 0
    assert order.per_day is None or (math.isfinite(order.per_day) and order.per_day > 0)
    for value in (order.mg_per_dose(), order.mg_per_day(), order.duration_days):
        assert value is None or (math.isfinite(value) and value >= 0)
    assert not (order.one_time and order.per_day != 1)


def test_the_table_is_large_and_well_formed():
    assert len(ROWS) >= 220
    assert len({r.text for r in ROWS}) == len(ROWS), "a row is repeated"
    for row in ROWS:
        assert row.flags in ("-", "prn", "once", "prn,once"), row
        assert row.frequency == "-" or row.frequency in row.text, row


@pytest.mark.parametrize("row", ROWS, ids=[f"{i:03d}:{r.text[:40]}" for i, r in enumerate(ROWS)])
def test_order_table(row: Row, drugs):
    order = parse_order(row.text, drugs)
    got = {
        "generic": order.generic or "-",
        "dose": render(order.dose),
        "strength": render(order.strength),
        "route": order.route or "-",
        "frequency": order.frequency_text or "-",
        "flags": ",".join(f for f, on in (("prn", order.as_needed), ("once", order.one_time)) if on) or "-",
        "max": render(order.max_per_day),
        "days": _num(order.duration_days) if order.duration_days is not None else "-",
    }
    assert got == {k: getattr(row, k) for k in got}
    expected_per_day = _per_day(row.per_day)
    assert order.per_day == (pytest.approx(expected_per_day) if expected_per_day is not None else None)
    assert_invariants(order, row.text)


# (order, milligrams per dose, milligrams per day)
MILLIGRAMS = [
    ("amoxicillin 500 mg PO TID", 500, 1500),
    ("Zosyn 4.5 g IV every 8 hours", 4500, 13500),
    ("levothyroxine 100 mcg PO daily", 0.1, 0.1),
    ("methotrexate 15 mg once weekly", 15, 15 / 7),
    ("warfarin 5 mg", 5, None),  # no frequency: no daily amount
    ("ondansetron 4 mg IV stat", 4, 4),
    ("oxycodone 5-10 mg PO q4h prn", 10, 60),  # a range counts at its most
    ("ibuprofen 400 mg q4-6h prn", 400, 2400),  # so does a frequency range
    ("senna 8.6 mg 2 tabs PO qHS", 17.2, 17.2),  # tablets times strength
    ("Tylenol 500 mg tablets, take 2 tabs q6h prn, max 8 tabs/24h", 1000, 4000),
    ("Tylenol 500 mg tablets, take 2 tabs q4h prn, max 6 tabs/24h", 1000, 3000),  # capped by the maximum
    ("acetaminophen 1,000 mg PO q6h prn, maximum 3 g per day", 1000, 3000),
    ("acetaminophen 650 mg q4h prn, max 4 doses in 24 hours", 650, 2600),  # a count of doses
    ("acetaminophen 160 mg/5 mL, 15 mL PO q4h prn, max 5 doses/24h", 480, 2400),  # volume x concentration
    ("lactulose 10 g/15 mL 30 mL PO BID", 20000, 40000),
    ("amoxicillin 250 mg/5 mL, 10 mL PO TID x 10 days", 500, 1500),
    ("albuterol 90 mcg/actuation 2 puffs q4h prn, max 8 puffs/day", 0.18, 0.72),  # puffs capped
    ("Imodium 2 mg after each loose stool, max 8 mg per day", 2, 8),  # the maximum bounds the day
    ("paracetamol 1-2 tablets every 4-6 hours, max 4 g/day", None, 4000),
    ("Janumet 50/1000 mg PO BID", None, None),  # which ingredient? code cannot tell
    ("amoxicillin 90 mg/kg/day divided BID", None, None),  # per weight
    ("fentanyl 25 mcg/hr patch q72h", None, None),  # per hour
    ("albuterol 2 puffs q4-6h prn max 8 puffs/day", None, None),  # puffs of an unknown strength
    ("insulin glargine 10 units SC at bedtime", None, None),
    ("nystatin 100,000 units/mL 5 mL QID", None, None),
    ("KCl 20 mEq PO BID", None, None),
    ("amoxicillin 500 mg/tab 2 tabs PO BID", 1000, 2000),
    ("0 mg aspirin daily", 0, 0),
]


@pytest.mark.parametrize("text,per_dose,per_day", MILLIGRAMS, ids=[m[0][:40] for m in MILLIGRAMS])
def test_milligrams(text, per_dose, per_day, drugs):
    order = parse_order(text, drugs)
    assert order.mg_per_dose() == (pytest.approx(per_dose) if per_dose is not None else None)
    assert order.mg_per_day() == (pytest.approx(per_day) if per_day is not None else None)


def test_amount_mg_is_a_single_mass_only():
    assert Amount("1 g", 1.0, None, "g").mg == 1000
    assert Amount("100 mcg", 100.0, None, "mcg").mg == pytest.approx(0.1)
    assert Amount("50/1000 mg", 1000.0, None, "mg", parts=(50.0, 1000.0)).mg is None
    assert Amount("2 tabs", 2.0, None, "tablet").mg is None
    assert Amount("1 mg/kg", 1.0, None, "mg/kg").mg is None


# Digits that are never doses: patient IDs, dates, times, ages, record numbers.
NOT_DOSES = [
    "Prescribe amoxicillin for pat-006",
    "Prescribe amoxicillin for pat-500 mg",
    "abc-123 mg warfarin",
    "warfarin started 2026-11-02",
    "warfarin 2026-11-02 mg",
    "give metformin at 8 pm",
    "give metformin at 10:30 mg",
    "68-year-old on lisinopril",
    "lisinopril for the 68-year-old mg",
    "MRN 12345678 mg on aspirin",
    "aged 72 mg, on digoxin",
    "seen 12/03/2026 mg, on prednisone",
]


@pytest.mark.parametrize("text", NOT_DOSES)
def test_ids_dates_times_and_ages_are_never_doses(text, drugs):
    order = parse_order(text, drugs)
    assert order.dose is None and order.strength is None and order.max_per_day is None
    assert order.mg_per_dose() is None and order.mg_per_day() is None
    assert order.generic is not None  # the drug is still read


def test_the_dose_beside_an_id_is_still_the_dose(drugs):
    order = parse_order("Prescribe pat-006 warfarin 5 mg daily on 2026-11-02 at 8 pm (68-year-old)", drugs)
    assert render(order.dose) == "5 mg" and order.per_day == 1 and order.frequency_text == "daily"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["pat", "abc", "PAT", "mrn"]), number=st.integers(0, 99_999),
       unit=st.sampled_from(["mg", "g", "mcg", "units", "tabs", "mL"]))
def test_a_patient_id_never_becomes_a_dose(prefix, number, unit, drugs):
    order = parse_order(f"Prescribe warfarin for {prefix}-{number:03d} {unit} daily", drugs)
    assert order.dose is None and order.strength is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(day=st.dates(), unit=st.sampled_from(["mg", "g", "mcg", "units"]))
def test_a_date_never_becomes_a_dose(day, unit, drugs):
    order = parse_order(f"metformin started {day.isoformat()} {unit}", drugs)
    assert order.dose is None and order.strength is None


EDGE_TEXTS = [
    "", " ", "\x00", "mg mg mg", "0 mg", "-5 mg", "1e30 mg", "1" + "0" * 400 + " mg daily", "q0h", "every 0 days",
    "0/0 tabs", "1/0 tabs", "5-1 mg", "max 0/day", "x0d", "💊 amoxicillin 500 mg 💊 TID 🙂", "\u202e500 mg\u202c",
    "amoxicillin\t500\nmg\r\nTID", "\x07\x1b[31mwarfarin 5 mg\x1b[0m", "mg/kg/day/5 mL", "1-2-3 tabs", "½ tab",
    "٥ mg", "１０ mg", "ｍｇ", "amoxicillin " * 2000, "500 mg " * 3000, "q" * 10_000, ("1/" * 5000) + "1 mg",
    "warfarin " + "x" * (MAX_TEXT + 100) + " 5 mg",
]


@pytest.mark.parametrize("text", EDGE_TEXTS, ids=range(len(EDGE_TEXTS)))
def test_edge_texts_never_raise(text, drugs):
    assert_invariants(orders._parse(text, drugs), text)  # the reader itself, without parse_order's safety net


def test_specific_edges(drugs):
    assert parse_order("-5 mg aspirin", drugs).dose is None
    assert parse_order("1e30 mg aspirin", drugs).dose is None
    assert parse_order("1" + "0" * 400 + " mg aspirin", drugs).dose is None  # not a finite number
    assert render(parse_order("0 mg aspirin", drugs).dose) == "0 mg"
    assert parse_order("mg mg mg", drugs).dose is None
    assert parse_order("", drugs) == parse_order("", None)
    beyond = parse_order("warfarin " + "x " * MAX_TEXT + "5 mg", drugs)
    assert beyond.generic == "warfarin" and beyond.dose is None  # only the first MAX_TEXT characters are read
    assert parse_order(None, drugs).text == ""  # not text: an empty order, no exception


FRAGMENTS = [
    "amoxicillin", "Tylenol", "Zosyn", "warfarin", "Janumet", "insulin glargine", "500", "0.5", "1,000", "1-2", "5/325",
    "mg", "g", "mcg", "µg", "units", "mL", "tabs", "puffs", "drops", "/5 mL", "/kg/day", "/hr", "PO", "IV", "SC", "IN",
    "OD", "OU", "q4-6h", "q8h", "BID", "three times daily", "once", "stat", "x1", "prn", "max", "8/day", "for",
    "7 days", "x5d", "5/7", "pat-006", "2026-11-02", "at 8 pm", "68-year-old", "every", "4", "hours", "weeks", "/",
    "-", " ", ",", "\n", "💊", "\x00", "to",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(FRAGMENTS), max_size=25).map(" ".join)
       | st.lists(st.sampled_from(FRAGMENTS), max_size=25).map("".join))
def test_any_sig_like_text_parses_within_the_invariants(text, drugs):
    assert_invariants(orders._parse(text, drugs), text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_any_text_parses_within_the_invariants(text, drugs):
    assert_invariants(orders._parse(text, drugs), text)


def test_text_fields_hold_no_stray_spaces(drugs):
    """The words handed to a tool start and end with the clinician's words, not the gaps between."""
    for row in ROWS:
        order = parse_order(row.text, drugs)
        texts = [order.drug_text, order.route_text, order.frequency_text, order.duration_text, order.dosage_text]
        texts += [a.text for a in (order.dose, order.strength, order.max_per_day) if a is not None]
        assert all(t == t.strip() for t in texts if t is not None), row.text
