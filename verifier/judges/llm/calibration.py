"""How well a judge agrees with human labels: Spearman's rho for scores, Cohen's kappa
for pass/fail, with their counts. Pure functions over pairs of (label, judge value).

A judge that ranks the cases as the labels do has rho 1; one that ranks them the
other way -1. Ties take their average rank (as scipy.stats.spearmanr). Kappa is the
agreement beyond chance, (p_o - p_e) / (1 - p_e) (as sklearn's cohen_kappa_score).
Either is undefined (None, with the reason) when it cannot be computed: fewer than
two pairs, or labels or values that never vary (rho; p_e = 1 for kappa). Undefined is
never read as agreement: `--min-agreement` fails on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs


@attrs.frozen
class Agreement:
    measure: str  # "spearman" or "cohen_kappa"
    value: float | None  # None: undefined (reason says why)
    pairs: int
    reason: str | None = None
    mean_abs_error: float | None = None  # scores: mean |value - label|
    confusion: tuple[int, int, int, int] | None = None  # pass/fail: (tp, fp, fn, tn)


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranked = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranked[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranked


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None when either side does not vary."""
    n = len(xs)
    mean_x, mean_y = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    syy = math.fsum((y - mean_y) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    sxy = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(labels: Sequence[float], values: Sequence[float]) -> Agreement:
    pairs = len(labels)
    differences = [abs(value - label) for label, value in zip(labels, values, strict=True)]
    error = math.fsum(differences) / pairs if pairs else None
    if pairs < 2:
        return Agreement("spearman", None, pairs, "fewer than 2 labelled cases", error)
    rho = pearson(ranks(labels), ranks(values))
    if rho is None:
        side = "labels" if len(set(labels)) == 1 else "judge's values"
        return Agreement("spearman", None, pairs, f"the {side} are all the same", error)
    return Agreement("spearman", rho, pairs, None, error)


def cohen_kappa(labels: Sequence[bool], values: Sequence[bool]) -> Agreement:
    pairs = len(labels)
    both = list(zip(labels, values, strict=True))
    tp = sum(1 for label, value in both if label and value)
    fp = sum(1 for label, value in both if not label and value)
    fn = sum(1 for label, value in both if label and not value)
    tn = pairs - tp - fp - fn
    confusion = (tp, fp, fn, tn)
    if pairs < 2:
        return Agreement(
            "cohen_kappa", None, pairs, "fewer than 2 labelled cases", confusion=confusion
        )
    observed = (tp + tn) / pairs
    chance = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / pairs**2
    if chance == 1:
        return Agreement(
            "cohen_kappa", None, pairs, "labels and values are all one verdict", confusion=confusion
        )
    return Agreement("cohen_kappa", (observed - chance) / (1 - chance), pairs, confusion=confusion)
