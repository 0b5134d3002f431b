"""Lab and vital-sign values converted to the unit the record stores for their LOINC code.

Invariants:
- ``to_record_unit`` returns the value in the record's unit for its code (``STORED_UNITS``:
  the unit of ``codes.LOINC_TESTS``, the one the chart shows and ``import_checks.LIMITS`` are in)
  when the value came in another unit with a known standard conversion; otherwise it returns
  the value and unit unchanged. A conversion never guesses: a unit it does not list is kept.
- Every conversion is a standard, published factor (or the IFCC-NGSP master equation for
  HbA1c), monotonic increasing, so a reference range converts with the same function and an
  H/L flag keeps its meaning. A converted value is rounded to 4 significant digits (no more
  precision than the laboratory reported: 178.6 lb is 81.01 kg, not 81.0116...).
- Units are compared case-insensitively, without spaces, with micro written as "u"; the UCUM
  code of a quantity counts as well as its human-readable unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SIGNIFICANT_DIGITS = 4  # a converted value keeps no more precision than a lab reports


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` rounded to ``digits`` significant digits (0 stays 0)."""
    return float(f"{value:.{digits}g}") if value else 0.0


@dataclass(frozen=True)
class Conversion:
    given: str  # the unit converted from, as UCUM-like text
    stored: str  # the unit the record keeps
    formula: Callable[[float], float]
    rule: str  # the factor or equation, as a reader checks it

    def convert(self, value: float) -> float:
        """``value`` in ``stored``, to ``SIGNIFICANT_DIGITS`` significant digits."""
        return significant(self.formula(value))


def _times(factor: float) -> Callable[[float], float]:
    return lambda value: value * factor


def _unit_key(unit: str | None) -> str:
    return "".join((unit or "").split()).lower().replace("µ", "u").replace("μ", "u")


# The conversions, by the codes they serve. Sources: NGSP/IFCC master equation (Hoelzel et al.,
# Clin Chem 2004; NGSP = 0.09148 x IFCC + 2.152); SI conversion factors as tabulated by the AMA
# Manual of Style (SI units) and the JCTLM: glucose 18.016, creatinine 88.42, urea nitrogen 2.801,
# calcium 4.008, cholesterol 38.67, triglycerides 88.57, uric acid 59.48, haemoglobin 10 (g/L)
# and 1.6114 (mmol/L, monomer); NIST SP 811 for the pound (0.45359237 kg), the ounce, the inch
# (2.54 cm), the foot, kPa -> mmHg (7.50062) and degrees Fahrenheit.
_GROUPS: list[tuple[tuple[str, ...], str, dict[tuple[str, ...], tuple[Callable[[float], float], str]]]] = [
    (("4548-4", "17856-6", "4549-2"), "%", {
        ("mmol/mol",): (lambda v: 0.09148 * v + 2.152, "NGSP % = 0.09148 x IFCC mmol/mol + 2.152"),
    }),
    (("2345-7", "2339-0"), "mg/dL", {("mmol/L",): (_times(18.016), "mg/dL = mmol/L x 18.016")}),
    (("2160-0", "38483-4"), "mg/dL", {("umol/L",): (_times(1 / 88.42), "mg/dL = umol/L / 88.42")}),
    (("3094-0",), "mg/dL", {("mmol/L",): (_times(2.801), "mg/dL urea nitrogen = mmol/L urea x 2.801")}),
    (("17861-6",), "mg/dL", {("mmol/L",): (_times(4.008), "mg/dL = mmol/L x 4.008")}),
    (("2093-3", "13457-7", "2085-9"), "mg/dL", {("mmol/L",): (_times(38.67), "mg/dL = mmol/L x 38.67")}),
    (("2571-8",), "mg/dL", {("mmol/L",): (_times(88.57), "mg/dL = mmol/L x 88.57")}),
    (("3084-1",), "mg/dL", {("umol/L",): (_times(1 / 59.48), "mg/dL = umol/L / 59.48")}),
    (("718-7",), "g/dL", {("g/L",): (_times(0.1), "g/dL = g/L / 10"),
                          ("mmol/L",): (_times(1.6114), "g/dL = mmol/L x 1.6114")}),
    (("6690-2", "777-3"), "10^3/uL", {("10^9/L", "10*9/L", "/nL", "x10^9/L", "10e9/L"): (_times(1.0),
                                                                                    "10^3/uL = 10^9/L")}),
    (("29463-7", "3141-9", "3142-7", "8350-1", "8351-9"), "kg", {("lb", "lbs", "[lb_av]", "pound", "pounds"): (_times(0.45359237),
                                                                              "kg = lb x 0.45359237"),
                                   ("g",): (_times(0.001), "kg = g / 1000"),
                                   ("oz", "[oz_av]"): (_times(0.028349523125), "kg = oz x 0.028349523125")}),
    (("8302-2",), "cm", {("in", "[in_i]", "inch", "inches"): (_times(2.54), "cm = in x 2.54"),
                         ("m",): (_times(100.0), "cm = m x 100"),
                         ("ft", "[ft_i]"): (_times(30.48), "cm = ft x 30.48")}),
    (("8310-5",), "°C", {("[degF]", "degf", "°f", "f"): (lambda v: (v - 32.0) * 5.0 / 9.0,
                                                         "°C = (°F - 32) x 5/9")}),
    (("8480-6", "8462-4"), "mmHg", {("kPa",): (_times(7.50062), "mmHg = kPa x 7.50062")}),
]



def _tables() -> tuple[dict[str, dict[str, Conversion]], dict[str, str]]:
    conversions: dict[str, dict[str, Conversion]] = {}
    stored_units: dict[str, str] = {}
    for codes, stored, by_unit in _GROUPS:
        for code in codes:
            stored_units[code] = stored
            conversions[code] = {_unit_key(name): Conversion(names[0], stored, fn, rule)
                                 for names, (fn, rule) in by_unit.items() for name in names}
    return conversions, stored_units


# LOINC code -> unit key -> conversion; LOINC code -> the unit the record keeps (for the codes of
# ``codes.LOINC_TESTS``, its unit: a test holds them equal).
CONVERSIONS, STORED_UNITS = _tables()


def conversion(loinc: str | None, *units: str | None) -> Conversion | None:
    """The conversion of a value of ``loinc`` given in the first of ``units`` that has one, or None
    (the record's own unit, an unknown code or an unknown unit)."""
    table = CONVERSIONS.get(loinc or "")
    if not table:
        return None
    stored = _unit_key(STORED_UNITS[loinc])
    for unit in units:
        key = _unit_key(unit)
        if not key:
            continue
        if key == stored:
            return None
        if key in table:
            return table[key]
    return None


def to_record_unit(loinc: str | None, value: float | None, unit: str | None,
                   code: str | None = None) -> tuple[float | None, str | None]:
    """``(value, unit)`` in the record's unit for ``loinc`` when a standard conversion applies,
    else as given."""
    found = conversion(loinc, unit, code)
    if found is None or value is None:
        return value, unit
    return found.convert(value), found.stored
