"""Numbers as eval.yaml gives them: what counts as one, and as a finite float."""

from __future__ import annotations

import math
from typing import Any


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_float(value: Any) -> float | None:
    """value as a finite float, or None (not a number, a bool, inf, NaN, or an int too
    large for a float)."""
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
