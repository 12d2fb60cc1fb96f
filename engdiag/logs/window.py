"""Look at part of a big log: ``--tail`` (the last N lines or bytes) and ``--since`` / ``--until``.

The incident is usually at the end.  For plain files the start is found without
parsing what comes before it: ``--tail`` reads backwards from the end, ``--since``
bisects the file on its timestamps; line numbers stay exact (newlines before the
start are counted, not parsed).  Streams (stdin, ``.gz``) are read through and
filtered instead.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engdiag.errors import UsageError
from engdiag.logs.events import Stamp
from engdiag.logs.inputs import decode_line
from engdiag.logs.lines import first_stamp

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB|KB|MB|GB|K|M|G)\s*$", re.IGNORECASE)
_UNITS = {"k": 1 << 10, "kib": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "mb": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "gb": 1 << 30}
_VLLM_TIME = re.compile(r"^\s*(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")
_ISO_TIME = re.compile(r"^\s*\d{4}-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s*$")
_PROBE_BYTES = 64 << 10
SINCE_MARGIN_BYTES = 1 << 20
"""--since starts this far before the bisected offset: log lines are only nearly in time order."""
UNTIL_GRACE_S = 120
"""--until keeps reading this long past the bound before it stops (lines of several processes interleave)."""


@dataclass(frozen=True)
class Window:
    """Which part of each input to read."""

    tail_lines: int | None = None
    tail_bytes: int | None = None
    since: Stamp | None = None
    until: Stamp | None = None

    @property
    def empty(self) -> bool:
        return self.tail_lines is None and self.tail_bytes is None and self.since is None and self.until is None

    def keeps(self, stamp: Stamp | None) -> bool:
        """Is an event at this time inside ``--since`` / ``--until`` (times compared within the year)?"""
        if self.since is None and self.until is None:
            return True
        if stamp is None:
            return False
        key = _in_year(stamp)
        return (self.since is None or key >= _in_year(self.since)) and (self.until is None or key <= _in_year(self.until))


def _in_year(stamp: Stamp) -> int:
    return Stamp(stamp.month, stamp.day, stamp.second).key


def parse_tail(text: str) -> tuple[int | None, int | None]:
    """``5000`` → 5000 lines; ``200MiB`` → bytes."""
    if text.strip().isdigit():
        lines = int(text)
        if lines <= 0:
            raise UsageError(f"--tail needs a positive number of lines, got {text}")
        return lines, None
    match = _SIZE.match(text)
    if match is None:
        raise UsageError(f"--tail takes a line count (5000) or a size (200MiB, 1GiB), got {text!r}")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size <= 0:
        raise UsageError(f"--tail needs a positive size, got {text}")
    return None, size


def parse_time(text: str, option: str) -> Stamp:
    """``10-22 09:30[:00]`` as vLLM prints it, or ISO ``2025-10-22T09:30:00`` (the year is ignored)."""
    match = _VLLM_TIME.match(text) or _ISO_TIME.match(text)
    if match is None:
        raise UsageError(f"{option} takes a time like '10-22 09:30:00' or '2025-10-22T09:30:00', got {text!r}")
    month, day, hours, minutes = (int(match.group(i)) for i in range(1, 5))
    seconds = int(match.group(5) or 0)
    if not (1 <= month <= 12 and 1 <= day <= 31 and hours < 24 and minutes < 60 and seconds < 60):
        raise UsageError(f"{option}: {text!r} is not a valid time")
    return Stamp(month, day, hours * 3600 + minutes * 60 + seconds)


def _line_start_after(handle: object, offset: int) -> int:
    """The first line start at or after ``offset``."""
    if offset <= 0:
        return 0
    handle.seek(offset - 1)  # type: ignore[attr-defined]
    while True:
        block: bytes = handle.read(_PROBE_BYTES)  # type: ignore[attr-defined]
        if not block:
            return offset
        newline = block.find(b"\n")
        if newline != -1:
            return offset - 1 + newline + 1
        offset += len(block)


def tail_start(path: Path, window: Window) -> int:
    """Byte offset where the last ``tail_lines`` lines or ``tail_bytes`` bytes begin."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if window.tail_bytes is not None:
            return _line_start_after(handle, max(0, size - window.tail_bytes))
        wanted = window.tail_lines or 0
        position = size
        while position > 0:
            step = min(position, 1 << 20)
            position -= step
            handle.seek(position)
            block = handle.read(step)
            if position + step == size and block.endswith(b"\n"):
                block = block[:-1]
            count = block.count(b"\n")
            if count >= wanted:
                cut = len(block)
                for _ in range(wanted):
                    cut = block.rfind(b"\n", 0, cut)
                return position + cut + 1
            wanted -= count
        return 0


def _first_stamp_at(handle: object, offset: int) -> Stamp | None:
    handle.seek(offset)  # type: ignore[attr-defined]
    block: bytes = handle.read(_PROBE_BYTES)  # type: ignore[attr-defined]
    start = 0 if offset == 0 else block.find(b"\n") + 1
    return first_stamp(decode_line(raw) for raw in block[start:].split(b"\n")[:-1])


def since_start(path: Path, since: Stamp) -> int:
    """A line start shortly before the first line at ``since`` (bisection on timestamps)."""
    target = _in_year(since)
    size = path.stat().st_size
    low, high = 0, size
    with open(path, "rb") as handle:
        while high - low > _PROBE_BYTES:
            middle = (low + high) // 2
            stamp = _first_stamp_at(handle, middle)
            if stamp is not None and _in_year(stamp) < target:
                low = middle
            else:
                high = middle
        return _line_start_after(handle, max(0, low - SINCE_MARGIN_BYTES))


def stream_tail(lines: Iterable[tuple[int, str]], window: Window) -> Iterator[tuple[int, str]]:
    """The last lines of a stream that cannot seek (stdin, ``.gz``), kept in a bounded buffer."""
    if window.tail_lines is None and window.tail_bytes is None:
        yield from lines
        return
    kept: deque[tuple[int, str]] = deque(maxlen=window.tail_lines)
    size = 0
    for item in lines:
        kept.append(item)
        if window.tail_bytes is not None:
            size += len(item[1]) + 1
            while size > window.tail_bytes and len(kept) > 1:
                size -= len(kept.popleft()[1]) + 1
    yield from kept


def past_until(stamp: Stamp | None, window: Window) -> bool:
    """Has the log's time gone past ``--until`` by more than the grace period?"""
    if window.until is None or stamp is None:
        return False
    return _in_year(stamp) > _in_year(window.until) + UNTIL_GRACE_S
