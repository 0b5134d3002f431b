"""Agreement figures for labelled classes: confusion matrix, accuracy, per-class and macro F1,
Cohen's kappa, and the overlap of cited evidence ids. Pure functions over plain lists.

Conventions (the ones scikit-learn uses, so the figures compare):
- ``classes`` fixes the order of the confusion matrix (rows gold, columns predicted); a label
  outside ``classes`` is an error, never silently dropped.
- A class with no predictions has precision 0; with no gold rows, recall 0; F1 is 0 whenever
  precision + recall is 0. Macro-F1 averages over every class in ``classes``.
- Kappa is 0 when the expected agreement is 1 (a single class everywhere), as scikit-learn gives
  NaN there: 0 says "no agreement beyond chance" without breaking JSON.
- Evidence overlap is micro-averaged: the ids both cite, over the ids predicted (precision) and
  over the ids the reference cites (recall), summed over rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def confusion(gold: Sequence[str], predicted: Sequence[str], classes: Sequence[str]) -> list[list[int]]:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    index = {c: i for i, c in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for g, p in zip(gold, predicted):
        if g not in index or p not in index:
            raise ValueError(f"label {g if g not in index else p!r} is not one of {list(classes)}")
        matrix[index[g]][index[p]] += 1
    return matrix


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def per_class(matrix: list[list[int]], classes: Sequence[str]) -> dict[str, dict[str, float]]:
    out = {}
    for i, name in enumerate(classes):
        tp = matrix[i][i]
        predicted = sum(row[i] for row in matrix)
        support = sum(matrix[i])
        precision, recall = _ratio(tp, predicted), _ratio(tp, support)
        out[name] = {"precision": precision, "recall": recall,
                     "f1": _ratio(2 * precision * recall, precision + recall), "support": support}
    return out


def kappa(matrix: list[list[int]]) -> float:
    total = sum(map(sum, matrix))
    if not total:
        return 0.0
    observed = sum(matrix[i][i] for i in range(len(matrix))) / total
    expected = sum(sum(matrix[i]) * sum(row[i] for row in matrix) for i in range(len(matrix))) / total ** 2
    return 0.0 if expected == 1 else (observed - expected) / (1 - expected)


def agreement(gold: Sequence[str], predicted: Sequence[str], classes: Sequence[str]) -> dict:
    """Everything at once: ``n``, ``accuracy``, ``macro_f1``, ``kappa``, ``confusion`` (rows gold,
    columns predicted, in ``classes`` order) and ``per_class``; figures rounded to 4 places."""
    matrix = confusion(gold, predicted, classes)
    classes_ = per_class(matrix, classes)
    n = len(gold)
    return {
        "n": n,
        "accuracy": round(_ratio(sum(matrix[i][i] for i in range(len(classes))), n), 4),
        "macro_f1": round(sum(c["f1"] for c in classes_.values()) / len(classes), 4),
        "kappa": round(kappa(matrix), 4),
        "confusion": {"classes": list(classes), "rows_gold_columns_predicted": matrix},
        "per_class": {name: {k: (round(v, 4) if k != "support" else v) for k, v in c.items()}
                      for name, c in classes_.items()},
    }


def overlap(pairs: Iterable[tuple[Iterable[str], Iterable[str]]]) -> dict:
    """Micro precision/recall/F1 of predicted ids against reference ids, over (predicted,
    reference) pairs."""
    both = predicted_total = reference_total = 0
    for predicted, reference in pairs:
        p, r = set(predicted), set(reference)
        both += len(p & r)
        predicted_total += len(p)
        reference_total += len(r)
    precision, recall = _ratio(both, predicted_total), _ratio(both, reference_total)
    return {"precision": round(precision, 4), "recall": round(recall, 4),
            "f1": round(_ratio(2 * precision * recall, precision + recall), 4),
            "shared": both, "predicted": predicted_total, "reference": reference_total}
