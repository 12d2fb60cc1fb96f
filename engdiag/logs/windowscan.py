"""Window-level searches of the bulk planner, in Python; ``engdiag/logs/_scan.c`` has their C twins.

- ``cues``: the lines of the window that name a process where the bulk tag search cannot see
  it (glog ``[rankN]:``, vllm-omni's ``[Stage-N]``, NCCL, bare role names, role tags without ``pid=``),
  from the first to the last (they are read line by line), and ``colour`` of the window;
- ``proc_tags``: the distinct process tags with a pid (a superset of the
  processes: each is confirmed by the exact parser);
- ``line_starts``: offsets of the window's line starts (and the longest line);
- ``colour`` / ``strip_colour``: does the window hold a colour code / the window without them;
- ``cut_lists``: the window without some byte ranges (``hot_scan``'s token id lists, which the literal
  search skips), and its line starts.

tests/test_hot_scan.py holds the C and Python versions to each other (tests/test_hot_bulk.py the hyperscan
backend's ``hotbulk`` and ``cuebulk`` to the Python ones).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from engdiag.logs.blocks import Fill
from engdiag.logs.hotscan import HotScan, hot_scan
from engdiag.logs.hotscan import native as native_hot

_ROLES = rb"(?:EngineCore|APIServer|ApiServer|VllmWorker|Worker|RayWorker)"
_RANK = re.compile(rb"\[rank[^\]\n]*\]:")
_BARE_ROLES = [re.compile(role + rb"\S* (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
               for role in (b"EngineCore", b"APIServer", b"ApiServer", b"VllmWorker", b"Worker")]
"""A role name, then a level.  One search per name: each starts with a literal, which ``re`` skips to at C
speed, where their alternation is tried at every byte of the window (~25 ms per 8 MiB)."""
_ROLE_TAG = re.compile(rb"\(" + _ROLES + rb"[^()\n]{0,250}\)")
_ROLE_TAG_PID = re.compile(rb"\(" + _ROLES + rb"[^()\n]{0,250}? pid=\d+(?:, ip=[^)\s]*)?\)")
COLOUR_CODES = (rb"\x1b\[[0-9;]*[A-Za-z]", rb"\^\[\[[0-9;]*m", rb"\[[0-9;]*[0-9]m")
_COLOUR = re.compile(b"|".join(COLOUR_CODES))
"""Colour codes, as ``lines`` strips them (``engdiag.logs.bulk`` removes them before the literal search)."""
_COLOUR_PARTS = [re.compile(code) for code in COLOUR_CODES]
"""``_COLOUR``'s alternatives, searched one by one for the same reason as ``_BARE_ROLES``."""
_TAG = re.compile(rb"(\(([^()\n]{1,250}?) pid=(\d+)(?:, ip=([^)\s]*))?\))")
"""Every process tag with a pid, and more (a superset: each is checked by the exact parser)."""


CUES = [_RANK.pattern, rb" NCCL ", rb"\[Stage-", *(role.pattern for role in _BARE_ROLES)]
"""What ``cue_span`` looks for, as patterns (``engdiag.logs.cuebulk`` finds them all in one hyperscan pass)."""


def cue_span(data: bytes) -> tuple[int, int] | None:
    """The line starts of the first and the last line that name a process where the tag search cannot see it.

    Role tags without ``pid=`` are counted, not placed: where some are, the whole window is the span.
    The lines between are read line by line; the window's other lines can still be planned.
    """
    hits = [match.start() for match in _RANK.finditer(data)] if b"[rank" in data else []
    for literal in (b" NCCL ", b"[Stage-"):
        if (first := data.find(literal)) != -1:
            hits += [first, data.rfind(literal)]
    for role in _BARE_ROLES:
        hits += [match.start() for match in role.finditer(data)]
    return span_of(data, hits)


def span_of(data: bytes, hits: list[int]) -> tuple[int, int] | None:
    """``cue_span`` from the offsets of the cues found: the line starts of the first and the last."""
    if untagged_roles(data):
        hits += [0, len(data)]
    if not hits:
        return None
    return data.rfind(b"\n", 0, min(hits)) + 1, data.rfind(b"\n", 0, max(hits)) + 1


def untagged_roles(data: bytes) -> bool:
    """Does the window hold a role tag without ``pid=`` (as many role tags as tags with a pid, or not)?"""
    return len(_ROLE_TAG.findall(data)) != len(_ROLE_TAG_PID.findall(data))


def cues(data: bytes) -> tuple[tuple[int, int] | None, bool]:
    """``cue_span`` and ``colour`` of a window at once: the C twin finds both in one walk over its ``[``."""
    return cue_span(data), colour(data)


_DISTINCT = 8
"""Tags found one by one before the rest of a window is ``findall``-ed (each costs a pass over the window)."""


def proc_tags(data: bytes) -> set[tuple[bytes, bytes, bytes, bytes]]:
    """(whole tag, name, pid, ip or b"") of every distinct process tag with a pid, as ``set(_TAG.findall(data))``.

    A window repeats a handful of tags on every line, and ``findall`` made an object per line (16–48 ms per
    8 MiB): each tag found is removed from the rest instead (for a newline, which no match spans), the first
    ``_DISTINCT`` of them.  That changes no other match: a tag holds `` pid=``, so it cannot lie inside
    another (a name holds no parenthesis, an ip no space), and the same bytes are always the same match.
    """
    found: set[tuple[bytes, bytes, bytes, bytes]] = set()
    rest = data
    for _ in range(_DISTINCT):
        match = _TAG.search(rest)
        if match is None:
            return found
        found.add(match.groups(b""))  # type: ignore[arg-type]  # every group but ip always takes part
        rest = rest.replace(match[1], b"\n")
    found.update(_TAG.findall(rest))
    return found


def line_starts(data: bytes) -> tuple[bytes, int]:
    """Offsets (int64 bytes) of the line starts of ``data`` (lines joined by ``\\n``), and the longest line."""
    lengths = [len(line) for line in data.split(b"\n")]
    return array("q", [0, *accumulate(length + 1 for length in lengths[:-1])]).tobytes(), max(lengths)


def colour(data: bytes) -> bool:
    """Does ``data`` hold a colour code (as ``lines`` strips them)?"""
    return any(part.search(data) is not None for part in _COLOUR_PARTS)


def strip_colour(data: bytes) -> bytes:
    """``data`` without its colour codes (so that a literal they split is found)."""
    return _COLOUR.sub(b"", data)


def cut_lists(data: bytes, lists: bytes, starts: bytes) -> tuple[bytes, bytes]:
    """``data`` without the byte ranges of ``lists`` (int64 start, end pairs, ascending, no newline in one),
    and its line starts (``starts``: those of ``data``)."""
    spans = memoryview(lists).cast("q")
    ends = [0, *spans[1::2]]
    cut = b"".join(data[ends[i] : start] for i, start in enumerate(spans[::2])) + data[ends[-1] :]
    return cut, line_starts(cut)[0]


@dataclass(frozen=True)
class Searches:
    """One implementation of the window-level searches."""

    hot: HotScan
    cues: Callable[[bytes], tuple[tuple[int, int] | None, bool]]
    proc_tags: Callable[[bytes], set[tuple[bytes, bytes, bytes, bytes]]]
    line_starts: Callable[[bytes], tuple[bytes, int]]
    colour: Callable[[bytes], bool]
    strip_colour: Callable[[bytes], bytes]
    cut_lists: Callable[[bytes, bytes, bytes], tuple[bytes, bytes]]
    read_window: Fill | None = None
    """Reads a window in one object (C only: in Python, read + join is as fast as it gets)."""


PYTHON = Searches(hot_scan, cues, proc_tags, line_starts, colour, strip_colour, cut_lists)


def native() -> Searches | None:
    """The C searches when the extension was built, else None."""
    if native_hot() is None:
        return None
    from engdiag.logs import _scan  # type: ignore[attr-defined]

    return Searches(_scan.hot_scan, _scan.cues, _scan.proc_tags, _scan.line_starts, _scan.colour,
                    _scan.strip_colour, _scan.cut_lists, _scan.read_window)
