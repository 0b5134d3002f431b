"""The benchmark's metric code against figures computed by hand on small tables (the working is
in the comments), so a wrong formula cannot agree with itself."""

from __future__ import annotations

import pytest

from appliance.prescreen.metrics import agreement, confusion, overlap

C = ("passes", "fails", "unknown")
P, F, U = C


def test_a_ten_row_table_worked_by_hand():
    gold = [P, P, P, F, F, U, U, U, P, F]
    pred = [P, P, F, F, U, U, P, U, P, F]
    m = agreement(gold, pred, C)
    # rows gold, columns predicted: passes -> 3 P, 1 F; fails -> 2 F, 1 U; unknown -> 1 P, 2 U
    assert m["confusion"]["rows_gold_columns_predicted"] == [[3, 1, 0], [0, 2, 1], [1, 0, 2]]
    assert m["n"] == 10 and m["accuracy"] == 0.7  # 7 on the diagonal
    # passes: 3 right of 4 predicted, 4 gold -> 0.75/0.75; fails and unknown: 2 of 3 each way
    assert m["per_class"][P] == {"precision": 0.75, "recall": 0.75, "f1": 0.75, "support": 4}
    assert m["per_class"][F] == {"precision": 0.6667, "recall": 0.6667, "f1": 0.6667, "support": 3}
    assert m["macro_f1"] == round((0.75 + 2 / 3 + 2 / 3) / 3, 4) == 0.6944
    # chance agreement: (4*4 + 3*3 + 3*3) / 100 = 0.34; kappa = (0.7 - 0.34) / (1 - 0.34)
    assert m["kappa"] == round(0.36 / 0.66, 4) == 0.5455


def test_a_class_never_predicted_and_never_seen_scores_zero_not_an_error():
    m = agreement([P, F], [P, P], C)
    assert m["per_class"][P] == {"precision": 0.5, "recall": 1.0, "f1": 0.6667, "support": 1}
    assert m["per_class"][F]["f1"] == 0.0 and m["per_class"][U] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert m["macro_f1"] == round(0.6667 / 3, 4)
    # observed 0.5, chance (1*2 + 1*0 + 0*0) / 4 = 0.5: kappa 0
    assert m["kappa"] == 0.0
    # one class everywhere: chance agreement 1, kappa reported as 0 (scikit-learn gives NaN)
    assert agreement([P, P], [P, P], C)["kappa"] == 0.0


def test_perfect_agreement_is_one_everywhere():
    m = agreement([P, F, U, U], [P, F, U, U], C)
    assert (m["accuracy"], m["macro_f1"], m["kappa"]) == (1.0, 1.0, 1.0)


def test_labels_outside_the_classes_are_refused():
    with pytest.raises(ValueError, match="not one of"):
        confusion([P], ["eligible"], C)
    with pytest.raises(ValueError, match="2 gold labels but 1"):
        confusion([P, F], [P], C)


def test_evidence_overlap_is_micro_averaged_over_rows():
    # shared {1}; predicted 0,1 + 4 = 3 ids; reference 1,2 + 3 = 3 ids
    o = overlap([(["0", "1"], ["1", "2"]), ([], ["3"]), (["4"], [])])
    assert (o["shared"], o["predicted"], o["reference"]) == (1, 3, 3)
    assert (o["precision"], o["recall"], o["f1"]) == (0.3333, 0.3333, 0.3333)
    assert overlap([]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "shared": 0, "predicted": 0, "reference": 0}
