"""Label sentences shortened for display are cut only where a clause ends, never mid-clause,
and always keep the words that matched (the warning the finding is about)."""

from __future__ import annotations

import re

import pytest

from appliance.safety.checks import clip_at_clause

WARFARIN = ("Warfarin can cause major or fatal bleeding, including bleeding in the brain, the gut and other "
            "organs; bleeding is more likely during the starting period and with a higher dose (resulting in a "
            "higher INR), and risk factors for bleeding include high intensity of anticoagulation, age 65 or "
            "older and a history of highly variable INRs.")
CLAUSE_ENDS = (",", ";", ":", ")", "INR", "organs")


@pytest.mark.parametrize("needle", [None, "bleeding in", "starting period", "history of highly variable"])
def test_a_long_warning_is_cut_only_at_a_clause_end_and_keeps_the_match(needle):
    match = re.search(needle, WARFARIN) if needle else None
    shown = clip_at_clause(WARFARIN, around=match)
    assert shown != WARFARIN  # it was shortened
    body = shown.removeprefix("... ").removesuffix(" ...")
    assert body in WARFARIN
    if shown.endswith(" ..."):
        end = WARFARIN.index(body) + len(body)
        assert WARFARIN[end] in ",;:" or WARFARIN[end - 1] == ")", shown  # a clause ended there
    if shown.startswith("... "):
        assert WARFARIN[WARFARIN.index(body) - 2] in ",;:", shown
    if needle:
        assert needle in shown
    assert not re.search(r"\b(in|the|of|and|a|with|for) \.\.\.$", shown)


def test_short_text_and_text_without_clause_ends_are_kept_whole():
    assert clip_at_clause("Avoid in pregnancy.") == "Avoid in pregnancy."
    long_plain = "word " * 60
    assert clip_at_clause(long_plain) == long_plain.strip()
