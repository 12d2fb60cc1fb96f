"""``hot_scan`` with one hyperscan pass per window: the twin the ``hyperscan`` backend runs.

The pure-Python twin (``engdiag.logs.hotscan``) classifies each request line with a handful of
Python calls, ~5 µs a line, which alone keeps the hyperscan backend far from grep.  Here one
hyperscan pass over the window reports every line that is surely a plain request line, and every
access line, by line-end offset (and the line's month, in the pattern's id); Python then works per
reported line only with a few C-level calls.

A reported request line is exactly one that ``hotscan.classify`` accepts, given what is checked
beside the patterns:

- the header patterns are a sub-language of ``hotscan._HEADER`` whose parse is unique (stamp, codes,
  tag and level are each set by the bytes: the stamp starts with ``2``, a code with ESC, a tag with
  ``(``, a level with a capital; a file holds no ``]`` nor space), so ``_HEADER.match`` ends where the
  pattern's header ends, with the same month, access or not;
- the message holds no CR, ``|`` or ESC; a colour code or ``[repeated`` after the request literal is
  reported by a pattern of its own (the line is then classified the exact way), and ``" NCCL "``
  anywhere sends the window to the exact twin;
- each request literal occurs in the window as often as the reported lines that must hold it once
  (``bytes.count``): then no line holds one otherwise.  Where that fails, the literals are placed
  on their lines, and the lines that hold them otherwise are classified the exact way.

A reported line whose next line is reported too (a request line, or an access line without CR) has a
next line that surely starts its own record; any other is classified the exact way.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from functools import lru_cache

from engdiag.logs import hotscan, hscache
from engdiag.logs.hotscan import ADD, PTI, REC

_STAMP = rb"(?:20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) )?"
_CODES = rb"(?:\x1b\[[0-9;]*m)*"
_PREFIX = (rb"^" + _STAMP + _CODES + rb"(?:\([A-Za-z_][A-Za-z0-9_.-]{0,60} pid=\d+\)" + _CODES + rb"[ \t]?)? *"
           rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)")
"""``hotscan._HEADER`` up to the level, without its groups."""
_CLEAN = rb"[^\n\r|\x1b]"
_MESSAGES = {
    1: rb"Received request [A-Za-z0-9_.-]+:" + _CLEAN + rb"* prompt_token_ids: \[ *(?:[0-9][0-9, ]*)?\][^\n\r|\x1b'\"]*$",
    2: rb"Added request [A-Za-z0-9_.-]" + _CLEAN + rb"*$",
}
"""The plain ``Received request`` (kind 1) and ``Added request`` (kind 2) messages."""
_MONTHS = [(1, b"01"), (12, b"12"), (0, rb"(?:0[02-9]|1[013-9]|[2-9][0-9])")]
"""The months the New Year guard asks about, and the others (as ``hotscan``: any two digits)."""
_ACCESS = 3
"""The kind of an access line: reported only as a safe next line."""
_EXPECTED = {1: (1, 1, 0), 2: (0, 0, 1)}
"""How often a reported line of each kind holds each request literal (``REC``, ``PTI``, ``ADD``)."""
_PTI_OPEN = PTI + b"["
MIN_BYTES = 1 << 20
"""Smaller windows take the exact twin: the databases (compiled once per process on first use, ~80 ms with
``cuebulk``'s) would cost a small log more than they save (~5 µs a request line)."""


def _expressions() -> list[tuple[bytes, int]]:
    """(pattern, id) of the lines reported: id = kind * 16 + month (1, 12, or 0 for any other)."""
    found = [(_PREFIX + rb":[ \t][^\r\n]*$", _ACCESS * 16)]
    for kind, message in _MESSAGES.items():
        for month, digits in _MONTHS:
            header = _PREFIX + rb" " + digits + rb"-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\x21-\x5c\x5e-\x7e]+?:\d+\] ?"
            found.append((header + message, kind * 16 + month))
    return found


_DIRTY = rb"(?:Received|Added) request [^\n]*(?:\[[0-9;]*[0-9]m|\[repeated )"
"""A colour code or ``[repeated`` after a request literal: its line is classified the exact way (a pass of
its own: the reported lines' ids are then their kinds and months alone)."""


@lru_cache(maxsize=1)
def _databases():  # -> tuple[hyperscan.Database, hyperscan.Database] | None
    try:
        import hyperscan

        expressions = _expressions()
        lines = hscache.compiled("hot-lines", [pattern for pattern, _ in expressions], [i for _, i in expressions],
                                 [hyperscan.HS_FLAG_MULTILINE] * len(expressions))
        dirty = hscache.compiled("hot-dirty", [_DIRTY], [0], [0])
    except Exception:  # noqa: BLE001 - missing, no SIMD support, or a broken wheel: the exact twin then
        return None
    return lines, dirty


def available() -> bool:
    """Can this twin run here (hyperscan loads)?"""
    return _databases() is not None


def hot_scan(data: bytes, starts: Sequence[int]) -> tuple[bytes, bytes, bytes, list[tuple[int, int]], int, bytes]:
    """``hotscan.hot_scan``'s result from one hyperscan pass (the exact twin's where ``" NCCL "`` is), without
    token id lists to cut: in Python, cutting them costs more than the hyperscan pass over them that it saves."""
    databases = _databases() if len(data) >= MIN_BYTES else None
    if databases is None or b" NCCL " in data:
        return (*hotscan.hot_scan(data, starts)[:5], b"")
    hits: list[int] = []
    dirty: list[int] = []
    add = hits.append
    databases[0].scan(data, match_event_handler=lambda ident, _start, end, _flags, _context: add(end << 8 | ident))
    databases[1].scan(data, match_event_handler=lambda _ident, _start, end, _flags, _context: dirty.append(end))
    hits.sort()
    offsets = memoryview(starts).cast("B").cast("q")  # type: ignore[arg-type]  # any buffer of int64
    odd = {bisect_right(offsets, end - 1) - 1: 0 for end in dirty}
    last = len(offsets) - 1
    number = dict(zip(offsets.tolist(), range(last + 1))).get  # a line's end + 1 → the next line's number
    lines = [number((hit >> 8) + 1, last + 1) - 1 for hit in hits]
    kind_list = [hit >> 4 & 15 for hit in hits]
    kinds = dict(zip(lines, kind_list))
    received, added = kind_list.count(1), kind_list.count(2)
    if data.count(REC) == data.count(PTI) == received and data.count(ADD) == added:
        lengths: list[int] | None = [ids.count(b",") + 1 if ids.strip(b" ") else 0 for ids in _IDS.findall(data)]
    else:
        odd.update(_misplaced(data, offsets, kinds))
        lengths = None
    requests = [line for line, kind in zip(lines, kind_list) if kind != _ACCESS]
    months = set(map((15).__and__, hits)) - {0}
    month_of = dict(zip(lines, hits)) if months else {}
    return _assemble(data, offsets, requests, kinds, odd, lengths, month_of)


_IDS = re.compile(rb"prompt_token_ids: \[([0-9, ]*)\]")
"""The token id list of a reported line (one a line, in order, where the literal counts are as expected)."""


def _misplaced(data: bytes, offsets: memoryview, kinds: dict[int, int]) -> dict[int, int]:
    """Line → literal bits, of the lines that hold the request literals other than as ``_EXPECTED``."""
    held: dict[int, list[int]] = {}
    for number, literal in enumerate((REC, PTI, ADD)):
        at = data.find(literal)
        while at != -1:
            held.setdefault(bisect_right(offsets, at) - 1, [0, 0, 0])[number] += 1
            at = data.find(literal, at + 1)
    return {line: sum(1 << n for n, times in enumerate(found) if times) for line, found in held.items()
            if tuple(found) != _EXPECTED.get(kinds.get(line, 0))}


def _assemble(data: bytes, offsets: memoryview, requests: list[int], kinds: dict[int, int], odd: dict[int, int],
              lengths: list[int] | None, month_of: dict[int, int]
              ) -> tuple[bytes, bytes, bytes, list[tuple[int, int]], int, bytes]:
    """The result: the reported request lines followed by a reported line, in bulk (token counts from
    ``lengths`` where given, else per line; months from ``month_of``'s hits where some may count), and the
    others line by line, the exact way."""
    index = [line for line in requests if line + 1 in kinds and line not in odd]
    kind = bytearray(map(kinds.__getitem__, index))
    if lengths is not None:
        count = dict(zip([line for line in requests if kinds[line] == 1], lengths))
        tokens = [count.get(line, 0) for line in index]
    else:
        tokens = [_tokens(data, offsets[line], offsets[line + 1] - 1) if kinds[line] == 1 else 0 for line in index]
    months = {month_of[line] & 15 for line in index} if month_of else set()
    bad: list[tuple[int, int]] = []
    window: hotscan.Window | None = None
    last = len(offsets) - 1
    rest = [line for line in requests if line + 1 not in kinds] if len(index) < len(requests) else []
    for line in sorted({*rest, *odd}):
        bits = odd.get(line) or (3 if kinds[line] == 1 else 4)
        if line == last:
            bad.append((line, bits))
            continue
        window = window or hotscan.Window(data)
        following = offsets[line + 2] - 1 if line + 2 <= last else len(data)
        found, length, month, _ = hotscan.classify(window, offsets[line], offsets[line + 1] - 1, bits, following)
        if not found:
            bad.append((line, bits))
            continue
        at = bisect_left(index, line)
        index.insert(at, line)
        kind.insert(at, found)
        tokens.insert(at, length)
        months.add(month)
    mask = sum(1 << month for month in months & {1, 12})
    return array("i", index).tobytes(), bytes(kind), array("i", tokens).tobytes(), bad, mask, b""


def _tokens(data: bytes, start: int, end: int) -> int:
    """The token count of a reported ``Received request`` line."""
    opening = data.find(_PTI_OPEN, start, end) + len(_PTI_OPEN)
    close = data.find(b"]", opening, end)
    commas = data.count(b",", opening, close)
    return commas + 1 if commas or data[opening:close].strip(b" ") else 0
