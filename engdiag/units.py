"""Human-readable sizes, durations and counts, shared by verdict text and renderers."""

from __future__ import annotations


def format_bytes(value: int | None) -> str:
    """``736.86 MiB``-style text (``?`` when unknown)."""
    if value is None:
        return "?"
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value} bytes"


def format_duration(seconds: float | None) -> str:
    """``4m35s``-style text (``?`` when unknown)."""
    if seconds is None:
        return "?"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 line``, ``2 lines`` (``many`` for irregular plurals)."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"
