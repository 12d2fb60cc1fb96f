"""``cues`` and ``colour`` of a window with hyperscan: the ``hyperscan`` backend's twins of ``windowscan``'s.

In Python, ``windowscan.cue_span`` runs a regular expression or a ``bytes.find`` over the window per
cue (glog ``[rankN]:``, ``" NCCL "``, ``[Stage-``, five bare role names) and ``colour`` one per kind of
colour code where there is none: ~25 ms per 8 MiB.  One hyperscan pass finds the cues (rare: a call
per match is cheap), another stops at the first colour code.  Only the first and the last cue's lines
matter, and a match that ``re.finditer`` skips lies inside one it found (none spans a newline), so
both find the same lines.  Role tags without ``pid=`` are counted as before
(``windowscan.untagged_roles``).
"""

from __future__ import annotations

from functools import lru_cache

from engdiag.logs import hscache, windowscan
from engdiag.logs.hotbulk import MIN_BYTES


@lru_cache(maxsize=1)
def _databases():  # -> tuple[hyperscan.Database, hyperscan.Database] | None
    try:
        found = []
        for name, patterns in (("cues", windowscan.CUES), ("colour", list(windowscan.COLOUR_CODES))):
            found.append(hscache.compiled(name, patterns, list(range(len(patterns))), [0] * len(patterns)))
    except Exception:  # noqa: BLE001 - missing, no SIMD support, or a broken wheel: the Python searches then
        return None
    return tuple(found)


def cues(data: bytes) -> tuple[tuple[int, int] | None, bool]:
    """``windowscan.cues``: the span of the lines with cues, and whether the window holds a colour code."""
    databases = _databases() if len(data) >= MIN_BYTES else None
    if databases is None:
        return windowscan.cues(data)
    hits: list[int] = []

    def on_match(_ident: int, _start: int, end: int, _flags: int, _context: object) -> None:
        hits.append(end - 1)  # the match's last byte: on its line, as its start is

    databases[0].scan(data, match_event_handler=on_match)
    return windowscan.span_of(data, hits), colour(data)


def colour(data: bytes) -> bool:
    """``windowscan.colour``: does the window hold a colour code (as ``lines`` strips them)?"""
    databases = _databases() if len(data) >= MIN_BYTES else None
    if databases is None:
        return windowscan.colour(data)
    import hyperscan

    try:
        databases[1].scan(data, match_event_handler=lambda *_: True)  # stop at the first
    except hyperscan.ScanTerminated:
        return True
    return False
