"""Nearest-rank quantiles of histograms (value → count): prompt lengths and rates are counted, not stored."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

Value = TypeVar("Value", int, float)


def nearest_rank(histogram: Mapping[Value, int], q: float) -> Value | None:
    """The smallest value with at least ``q`` (0–1] of the counts at or below it; None when empty."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for value, count in sorted(histogram.items()):
        seen += count
        if seen >= rank:
            return value
    return max(histogram)
