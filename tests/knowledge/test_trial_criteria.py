"""Eligibility text read by code: ages in years, sex, and the inclusion/exclusion split."""

from __future__ import annotations

import pytest

from mcp_servers.knowledge.trial_criteria import (
    age_range_text,
    age_years,
    split_criteria,
    trial_sex,
)


@pytest.mark.parametrize("text, years", [
    ("18 Years", 18.0), ("1 Year", 1.0), ("6 Months", 0.5), ("2 Weeks", round(14 / 365.25, 4)),
    ("30 Days", round(30 / 365.25, 4)), ("12 Hours", round(12 / (365.25 * 24), 4)), ("65 years", 65.0),
    ("N/A", None), ("", None), (None, None), ("adult", None),
])
def test_ages_in_years(text, years):
    assert age_years(text) == years


def test_sex_and_age_range_words():
    assert [trial_sex(s) for s in ("ALL", "Female", "male", "Both", None, "x")] == ["ALL", "FEMALE", "MALE", "ALL", None, None]
    assert age_range_text("18 Years", "75 Years") == "18 Years to 75 Years"
    assert age_range_text("18 Years", None) == "18 Years and older"
    assert age_range_text(None, "17 Years") == "up to 17 Years"
    assert age_range_text("N/A", None) == "any age"


def test_sections_bullets_numbers_and_escapes():
    text = ("Inclusion Criteria:\n\n* Age \\>= 18 years\n* ECOG 0-1\n  continued on an indented line\n"
            "\nExclusion Criteria:\n\n1. Pregnancy\n2) Active hepatitis B \\[HBsAg positive\\]\n")
    assert split_criteria(text) == {
        "inclusion": ["Age >= 18 years", "ECOG 0-1 continued on an indented line"],
        "exclusion": ["Pregnancy", "Active hepatitis B [HBsAg positive]"],
        "notes": [],
    }


def test_sub_items_join_their_parent_and_sub_headings_prefix_their_items():
    text = ("Inclusion Criteria:\n* Diagnosis confirmed by one of the following:\n"
            "  * Biopsy\n  * Cytology\n* Adequate organ function\n\nHematopoietic\n\n* Platelets at least 100,000/mm3\n")
    assert split_criteria(text)["inclusion"] == [
        "Diagnosis confirmed by one of the following: Biopsy; Cytology",
        "Adequate organ function",
        "Hematopoietic: Platelets at least 100,000/mm3",
    ]


def test_text_without_headings_is_inclusion_and_a_preamble_is_kept_apart():
    assert split_criteria("PATIENT CHARACTERISTICS:\n\n* No active infection\n* Not pregnant")["inclusion"] == [
        "PATIENT CHARACTERISTICS: No active infection", "PATIENT CHARACTERISTICS: Not pregnant"]
    split = split_criteria("A study summary line.\n\nInclusion Criteria:\n* Adults\n\nExclusion criteria:\n* Dialysis")
    assert split == {"inclusion": ["Adults"], "exclusion": ["Dialysis"], "notes": ["A study summary line."]}
    assert split_criteria(None) == split_criteria("") == {"inclusion": [], "exclusion": [], "notes": []}


def test_no_line_is_lost():
    text = ("Key Inclusion Criteria:\n- Histologically confirmed NSCLC\n- Measurable disease per RECIST 1.1\n"
            "Other\n- Informed consent\nExclusion Criteria:\n- Prior anti-PD-1 therapy\n"
            "Patients with a history of interstitial lung disease requiring steroids are excluded")
    split = split_criteria(text)
    joined = " ".join(split["inclusion"] + split["exclusion"] + split["notes"])
    for words in ("Histologically confirmed NSCLC", "RECIST 1.1", "Informed consent", "anti-PD-1",
                  "interstitial lung disease"):
        assert words in joined
    assert split["exclusion"][-1].startswith("Patients with a history of interstitial")
