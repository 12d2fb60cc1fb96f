"""Sparklines: a list of numbers → a row of block characters (pure)."""

from __future__ import annotations

from collections.abc import Sequence

_BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int = 48, top: float | None = None) -> str:
    """The last ``width`` values as blocks scaled to ``top`` (default: their maximum)."""
    tail = list(values)[-width:]
    numbers = [v for v in tail if v is not None]
    if not numbers:
        return ""
    ceiling = top if top is not None else max(numbers)
    if ceiling <= 0:
        return _BLOCKS[0] * len(tail)
    out = []
    for value in tail:
        if value is None:
            out.append(" ")
            continue
        index = int(min(max(value / ceiling, 0.0), 1.0) * (len(_BLOCKS) - 1) + 0.5)
        out.append(_BLOCKS[index])
    return "".join(out)
