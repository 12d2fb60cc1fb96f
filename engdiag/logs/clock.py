"""Year offsets for vLLM's year-less timestamps.

Within one input, a jump back of more than half a year (``12-31`` → ``01-01``)
is a new year.  Across inputs, one whose first time is more than half a year
before another's first time started after New Year: ``base_years`` gives it a
year offset of 1.  Offsets, never invented years: output shows times as printed.
"""

from __future__ import annotations

from collections.abc import Sequence

from engdiag.logs.events import SECONDS_PER_DAY, Stamp

ROLLOVER = 183 * SECONDS_PER_DAY


def _in_year(stamp: Stamp) -> int:
    return Stamp(stamp.month, stamp.day, stamp.second).key


class Clock:
    """Places the stamps of one input on a common axis, in the order they are used."""

    def __init__(self, base_year: int = 0) -> None:
        self.year = base_year
        self.year_started = base_year
        self._last: int | None = None
        self.first: int | None = None
        """In-year key of the first stamp placed (lets a parallel scan check it continues a clock)."""

    @property
    def last(self) -> int | None:
        """In-year key of the last stamp that moved the clock."""
        return self._last

    def continues(self, year: int, last: int | None) -> bool:
        """Would this clock (started fresh) have placed its stamps the same had it started at ``(year, last)``?

        True when no year had passed before it and its first stamp is within half a
        year of ``last``: then neither a rollover nor a straggler differs.
        """
        if year != self.year_started:
            return False
        return last is None or self.first is None or abs(self.first - last) <= ROLLOVER

    def place(self, stamp: Stamp) -> Stamp:
        """The stamp with its year offset; a big jump back starts a new year."""
        key = _in_year(stamp)
        if self.first is None:
            self.first = key
        if self._last is not None:
            if key < self._last - ROLLOVER:
                self.year += 1
            elif key > self._last + ROLLOVER:
                return Stamp(stamp.month, stamp.day, stamp.second, self.year - 1, stamp.calendar)
        self._last = key
        return Stamp(stamp.month, stamp.day, stamp.second, self.year, stamp.calendar)

    def settle(self, stamp: Stamp) -> Stamp:
        """Year offset for a stamp seen outside the event order, without moving the clock."""
        key = _in_year(stamp)
        year = self.year
        if self._last is not None:
            if key < self._last - ROLLOVER:
                year += 1
            elif key > self._last + ROLLOVER:
                year -= 1
        return Stamp(stamp.month, stamp.day, stamp.second, year, stamp.calendar)


def base_years(first_stamps: Sequence[Stamp | None]) -> list[int]:
    """Year offset each input starts in, from the first time each one shows."""
    keys = [_in_year(s) for s in first_stamps if s is not None]
    if not keys:
        return [0] * len(first_stamps)
    latest = max(keys)
    return [
        1 if stamp is not None and _in_year(stamp) < latest - ROLLOVER else 0
        for stamp in first_stamps
    ]
