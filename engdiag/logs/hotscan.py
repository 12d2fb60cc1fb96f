"""The request lines that come by the thousand: which of them can be counted instead of parsed.

With request logging on, most lines of a busy vLLM log are ``Received request``
(with its prompt token ids) and ``Added request`` lines.  Building an event for
each costs ~10 µs of Python; the timeline only keeps the last few of them and
counts the rest.  ``hot_scan`` finds, in one window, the lines that are surely
one-piece vLLM records whose events are known from the line alone — a strict
header (optionally behind a kubectl stamp and colour codes), exactly one set of
hot literals at the message start, a closed list of token ids with no quote
after it (so the ids are not user data), nothing cleaning would change, and a
next line that surely starts a record of its own.  Every other line holding a
hot literal is returned as "bad" and read the full way.

The same grammar exists in C (``engdiag/logs/_scan.c``, the ``native`` backend);
this module is its pure-Python twin, and tests/test_hot_scan.py holds both to
each other and, through the bulk scanner, to the line scanner.  The hyperscan
backend finds the same lines with a hyperscan pass (``engdiag.logs.hotbulk``,
held to this module by tests/test_hot_bulk.py) and asks ``classify`` about the odd ones.

Returns ``(ok_index, ok_kind, ok_tokens, bad, months)``: the ok lines' indices
(int32 array bytes), kinds (1 received, 2 added; uint8), token counts (int32),
``[(index, literal bits)]`` of the bad lines (bits: 1 received, 2 token ids,
4 added), bits 1 and 12 set where an ok line is of January / December (all the New Year guard
asks: ``hotbulk`` finds no other month by pattern) and
the ``(start, end)`` offsets (int64 pairs) of the ok lines' token id lists that hold
nothing but digits, commas and spaces, between their brackets (the literal search
skips them: ``engines.LISTS_CUT``).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from functools import lru_cache

HotScan = Callable[[bytes, Sequence[int]], tuple[bytes, bytes, bytes, list[tuple[int, int]], int, bytes]]
"""(window, its line starts: any buffer of int64) → the result below."""

REC = b"Received request"
PTI = b"prompt_token_ids: "
ADD = b"Added request"
BITS = {REC: 1, PTI: 2, ADD: 4}
"""Literal → bit in ``bad``."""
HOT_LITERALS = frozenset(BITS)
"""The literals of the lines that are counted; the literal search looks for all the others."""
KEEP_LAST = 16
"""Request events the timeline keeps per signal and input (the last ones): these are read the full way."""

_CODES = rb"(?:\x1b\[[0-9;]*m)*"
_HEADER = re.compile(
    rb"(?:20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) )?" + _CODES
    + rb"(?:\((?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,60}) pid=(?P<pid>\d+)\)" + _CODES + rb"[ \t]?)? *"
    rb"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)"
    rb"(?:(?P<access>:[ \t])| (?P<mo>\d\d)-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?(?P<file>[!-\\^-~]+?:\d+)\] ?)"
)
"""The strict header (ASCII); group ``access`` for a uvicorn line, else ``file`` and the month."""
_UNCLEAN = (b"\r", b"|", b"\x1b", b"[repeated ", b" NCCL ")
_COLOUR_CODE = re.compile(rb"\[[0-9;]*[0-9]m")
_ID = re.compile(rb"[A-Za-z0-9_.-]+")


class Window:
    """One window's bytes, with what is found once for all its lines: header parses (a line's own and its
    predecessor's successor check are one), and where cleaning would act (``_UNCLEAN`` and colour codes),
    searched over the window by ``bytes.find`` / a regular expression with a literal first byte rather
    than line by line."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._parsed: tuple[int, int, re.Match[bytes] | None] = (-1, -1, None)
        found: list[int] = [hit.start() for hit in _COLOUR_CODE.finditer(data)]
        for cue in _UNCLEAN:
            at = data.find(cue)
            while at != -1:
                found.append(at)
                at = data.find(cue, at + 1)
        self._unclean = sorted(found)

    def header(self, start: int, end: int) -> re.Match[bytes] | None:
        if self._parsed[:2] != (start, end):
            match = _HEADER.match(self.data, start, end)
            if match is not None and match["name"] is not None and len(match["name"]) > 61:
                match = None
            self._parsed = (start, end, match)
        return self._parsed[2]

    def unclean(self, start: int, end: int) -> bool:
        """Would cleaning act on ``data[start:end]`` (a cue wholly inside it: none holds a newline)?"""
        at = bisect_left(self._unclean, start)
        return at < len(self._unclean) and self._unclean[at] < end


def _safe_successor(window: Window, start: int, end: int, head: re.Match[bytes]) -> bool:
    """Does the line at ``start`` surely start a record that cannot join ``head``'s?"""
    data = window.data
    if data.find(b"\r", start, end) != -1:
        return False
    match = window.header(start, end)
    if match is None:
        return False
    if match["access"] is not None:
        return True
    if match.group("name", "pid", "level", "file") != head.group("name", "pid", "level", "file"):
        return True
    msg = match.end()
    return data.startswith(REC + b" ", msg) or data.startswith(ADD + b" ", msg)


_IDS = b"0123456789, "
_NOTHING = (0, 0, 0, None)


def classify(window: Window, start: int, end: int, bits: int, next_end: int | None
              ) -> tuple[int, int, int, tuple[int, int] | None]:
    """(kind, tokens, month, pure token id list) of an ok line; kind 0 when it must be read the full way."""
    if next_end is None:
        return _NOTHING
    data = window.data
    head = window.header(start, end)
    if head is None or head["access"] is not None:
        return _NOTHING
    msg = head.end()
    if window.unclean(msg, end):  # the header is ASCII: _HEADER takes no other byte
        return _NOTHING
    month = int(head["mo"])
    if bits == 3 and data.startswith(REC + b" ", msg):
        if data.find(REC, msg + 1, end) != -1:
            return _NOTHING
        ident = _ID.match(data, msg + len(REC) + 1, end)
        if ident is None or data[ident.end() : ident.end() + 1] != b":" or ident.end() >= end:
            return _NOTHING
        at = data.find(PTI, start, end)
        if at == -1 or data.find(PTI, at + 1, end) != -1 or data[at - 1 : at] != b" ":
            return _NOTHING
        opening = at + len(PTI)
        close = data.find(b"]", opening, end)
        if data[opening : opening + 1] != b"[" or close == -1:
            return _NOTHING
        rest = data[opening:end]
        if b"'" in rest or b'"' in rest:
            return _NOTHING  # a quote in or after the list: "prompt_token_ids: [" may be inside a user string
        inside = data[opening + 1 : close].lstrip(b" ")
        if inside and not inside[:1].isdigit():
            return _NOTHING  # mask() counts what is there; only a list that starts with an id is surely ids
        tokens = inside.count(b",") + 1 if inside else 0
        if not _safe_successor(window, end + 1, next_end, head):
            return _NOTHING
        pure = close > opening + 1 and not data[opening + 1 : close].translate(None, _IDS)
        return 1, tokens, month, (opening + 1, close) if pure else None
    after = msg + len(ADD) + 1
    if bits == 4 and data.startswith(ADD + b" ", msg) and _ID.match(data, after, min(after + 1, end)):
        if data.find(ADD, msg + 1, end) != -1 or not _safe_successor(window, end + 1, next_end, head):
            return _NOTHING
        return 2, 0, month, None
    return _NOTHING


def _bits(data: bytes, start: int, end: int) -> int:
    return ((data.find(REC, start, end) != -1) | (data.find(PTI, start, end) != -1) << 1
            | (data.find(ADD, start, end) != -1) << 2)


def hot_scan(data: bytes, starts: Sequence[int]) -> tuple[bytes, bytes, bytes, list[tuple[int, int]], int]:
    """Pure-Python ``hot_scan`` (see the module docstring); ``starts``: the window's line starts (int64), which
    number the lines (the C twin walks them instead of searching each newline)."""
    offsets = memoryview(starts).cast("B").cast("q")  # type: ignore[arg-type]  # any buffer of int64
    index, kinds, tokens, lists = array("i"), array("B"), array("i"), array("q")
    bad: list[tuple[int, int]] = []
    months = 0
    size = len(data)
    window = Window(data)
    line, number = 0, 0
    hits = {b" request": data.find(b" request"), b"_token_ids: ": data.find(b"_token_ids: ")}
    while True:
        for needle, at in hits.items():
            if at != -1 and at < line:
                hits[needle] = data.find(needle, line)
        live = [at for at in hits.values() if at != -1]
        if not live:
            break
        hit = min(live)
        number = bisect_right(offsets, hit) - 1
        line = offsets[number]
        end = data.find(b"\n", hit)
        end = size if end == -1 else end
        bits = _bits(data, line, end)
        if bits:
            next_end = None
            if end < size:
                following = data.find(b"\n", end + 1)
                next_end = size if following == -1 else following
            kind, count, month, span = classify(window, line, end, bits, next_end)
            if kind:
                if span is not None:
                    lists.extend(span)
                index.append(number)
                kinds.append(kind)
                tokens.append(count)
                months |= 1 << month if month in (1, 12) else 0
            else:
                bad.append((number, bits))
        if end >= size:
            break
        line, number = end + 1, number + 1
    return index.tobytes(), kinds.tobytes(), tokens.tobytes(), bad, months, lists.tobytes()


@lru_cache(maxsize=1)
def native() -> HotScan | None:
    """The C ``hot_scan`` when the extension was built, else None."""
    try:
        from engdiag.logs._scan import hot_scan as scan  # type: ignore[import-not-found]
    except ImportError:
        return None
    return scan  # type: ignore[no-any-return]
