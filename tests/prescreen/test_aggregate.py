"""The trial verdict by rule (appliance.prescreen.aggregate), as a truth table, with the
exclusion direction spelt out: the patient *passes* an exclusion criterion when the excluding
condition is *absent*; a *present* condition excludes."""

from __future__ import annotations

import pytest

from appliance.prescreen.aggregate import (
    CriterionJudgement,
    aggregate,
    rank_key,
    standing_for,
)


def inc(verdict: str, text: str = "inclusion", cited=("P1",), by="model") -> CriterionJudgement:
    return CriterionJudgement(text, "inclusion", verdict, None, cited, judged_by=by)


def exc(presence: str, text: str = "exclusion", cited=("P1",), by="model") -> CriterionJudgement:
    verdict = {"present": "fails", "absent": "passes", "unknown": "unknown"}[presence]
    return CriterionJudgement(text, "exclusion", verdict, presence, cited, judged_by=by)


@pytest.mark.parametrize("answer, standing, presence", [
    (("inclusion", "yes"), "passes", None),
    (("inclusion", "no"), "fails", None),
    (("inclusion", "unknown"), "unknown", None),
    # the exclusion question is "is the excluding condition present?": yes means the patient fails it
    (("exclusion", "yes"), "fails", "present"),
    (("exclusion", "no"), "passes", "absent"),
    (("exclusion", "unknown"), "unknown", "unknown"),
])
def test_the_models_answer_maps_to_the_patients_standing(answer, standing, presence):
    assert standing_for(*answer) == (standing, presence)


TRUTH_TABLE = [
    # (inclusion standings, exclusion conditions) -> verdict
    (["passes", "passes"], ["absent", "absent"], "ELIGIBLE"),
    (["passes"], [], "ELIGIBLE"),
    ([], ["absent"], "ELIGIBLE"),
    (["fails", "passes"], ["absent"], "NOT_ELIGIBLE"),
    (["fails"], ["present"], "NOT_ELIGIBLE"),  # the first rule wins
    (["fails", "unknown"], ["unknown"], "NOT_ELIGIBLE"),
    (["passes"], ["present"], "EXCLUDED"),
    (["passes"], ["absent", "present"], "EXCLUDED"),
    (["unknown"], ["present"], "EXCLUDED"),
    (["passes", "unknown"], ["absent"], "UNCERTAIN"),
    (["passes"], ["absent", "unknown"], "UNCERTAIN"),
    (["unknown"], ["unknown"], "UNCERTAIN"),
    ([], [], "UNCERTAIN"),  # nothing judged is never eligible
]


@pytest.mark.parametrize("inclusions, exclusions, expected", TRUTH_TABLE,
                         ids=[f"{'+'.join(i) or '-'}|{'+'.join(e) or '-'}" for i, e, _ in TRUTH_TABLE])
def test_truth_table(inclusions, exclusions, expected):
    judgements = [inc(v, f"i{n}") for n, v in enumerate(inclusions)] + [exc(p, f"e{n}") for n, p in enumerate(exclusions)]
    assert aggregate(judgements).verdict == expected


def test_a_failure_rests_on_code_or_on_a_cited_fact_else_it_is_unknown():
    """EXCLUDED and NOT_ELIGIBLE never rest on a model answer that cites nothing."""
    bare_fail, bare_present = inc("fails", "ECOG 0-1", cited=()), exc("present", "Hepatitis B", cited=())
    assert aggregate([bare_fail]).verdict == "UNCERTAIN" and aggregate([bare_fail]).unknown == (0,)
    assert aggregate([inc("passes"), bare_present]).verdict == "UNCERTAIN"
    assert aggregate([inc("fails", "Age 18 or older", cited=(), by="code")]).verdict == "NOT_ELIGIBLE"
    assert aggregate([exc("present", "Male", cited=(), by="code")]).verdict == "EXCLUDED"
    assert aggregate([inc("fails", "ECOG 0-1", cited=("D1",))]).verdict == "NOT_ELIGIBLE"


def test_an_exclusion_the_patient_passes_is_not_an_exclusion_that_is_met():
    """The direction seed 004's aggregator words as "MET": only a present condition excludes."""
    absent = exc("absent", "Pregnancy")
    assert absent.verdict == "passes" and absent.exclusion_condition == "absent"
    assert aggregate([inc("passes"), absent]).verdict == "ELIGIBLE"
    assert aggregate([inc("passes"), exc("present", "Pregnancy")]).verdict == "EXCLUDED"


def test_uncertain_lists_every_unknown_criterion_as_a_question():
    verdict = aggregate([inc("passes"), inc("unknown", "ECOG 0-1"), exc("unknown", "Active hepatitis B"), exc("absent")])
    assert verdict.verdict == "UNCERTAIN" and verdict.unknown == (1, 2)
    assert verdict.questions == ("Does the patient meet the inclusion criterion 'ECOG 0-1'?",
                                 "Is the exclusion condition 'Active hepatitis B' present?")
    assert "2 of 4" in verdict.explanation


def test_explanations_name_the_deciding_criteria():
    assert "'Age 18 or older'" in aggregate([inc("fails", "Age 18 or older")]).explanation
    excluded = aggregate([inc("passes"), exc("present", "Prior pleurodesis")])
    assert "'Prior pleurodesis'" in excluded.explanation and excluded.exclusions_present == (1,)
    assert excluded.questions == ()  # a decided trial asks nothing


def test_ranking_eligible_first_then_fewer_unknowns_then_search_order():
    eligible = aggregate([inc("passes")])
    two_unknown = aggregate([inc("unknown"), inc("unknown")])
    one_unknown = aggregate([inc("unknown")])
    excluded = aggregate([exc("present")])
    not_eligible = aggregate([inc("fails")])
    trials = [(not_eligible, 0), (two_unknown, 1), (excluded, 2), (one_unknown, 3), (eligible, 4)]
    ordered = sorted(trials, key=lambda t: rank_key(*t))
    assert [t[0].verdict for t in ordered] == ["ELIGIBLE", "UNCERTAIN", "UNCERTAIN", "EXCLUDED", "NOT_ELIGIBLE"]
    assert ordered[1][0] is one_unknown
