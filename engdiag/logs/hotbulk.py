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

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache

from engdiag.logs import hotscan
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
_ACCESS, _DIRTY = 3, 4
"""The kinds of an access line (reported only as a safe next line) and of a colour code or ``[repeated``
after a request literal (its line is classified the exact way)."""
_EXPECTED = {1: (1, 1, 0), 2: (0, 0, 1)}
"""How often a reported line of each kind holds each request literal (``REC``, ``PTI``, ``ADD``)."""
_PTI_OPEN = PTI + b"["


def _expressions() -> list[tuple[bytes, int]]:
    """(pattern, id): id = kind * 16 + month (1, 12, or 0 for any other) for the request lines."""
    found = [(_PREFIX + rb":[ \t][^\r\n]*$", _ACCESS * 16),
             (rb"(?:Received|Added) request [^\n]*(?:\[[0-9;]*[0-9]m|\[repeated )", _DIRTY * 16)]
    for kind, message in _MESSAGES.items():
        for month, digits in _MONTHS:
            header = _PREFIX + rb" " + digits + rb"-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\x21-\x5c\x5e-\x7e]+?:\d+\] ?"
            found.append((header + message, kind * 16 + month))
    return found


@lru_cache(maxsize=1)
def _database():  # -> hyperscan.Database | None
    try:
        import hyperscan

        expressions = _expressions()
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(expressions=[pattern for pattern, _ in expressions], ids=[i for _, i in expressions],
                         flags=[hyperscan.HS_FLAG_MULTILINE] * len(expressions))
    except Exception:  # noqa: BLE001 - missing, no SIMD support, or a broken wheel: the exact twin then
        return None
    return database


def available() -> bool:
    """Can this twin run here (hyperscan loads)?"""
    return _database() is not None


def hot_scan(data: bytes, starts: Sequence[int]) -> tuple[bytes, bytes, bytes, list[tuple[int, int]], int, bytes]:
    """``hotscan.hot_scan``'s result, from one hyperscan pass (the exact twin where ``" NCCL "`` is)."""
    database = _database()
    if database is None or b" NCCL " in data:
        return hotscan.hot_scan(data, starts)
    hits: list[int] = []
    add = hits.append

    def on_match(ident: int, _start: int, end: int, _flags: int, _context: object) -> None:
        add(end << 8 | ident)

    database.scan(data, match_event_handler=on_match)
    hits.sort()
    offsets = memoryview(starts).cast("B").cast("q")  # type: ignore[arg-type]  # any buffer of int64
    lines = [bisect_right(offsets, hit >> 8) - 1 for hit in hits]
    code = bytearray(len(offsets) + 1)
    odd: dict[int, int] = {}
    for line, hit in zip(lines, hits):
        if hit >> 4 & 15 == _DIRTY:
            odd[line] = 0
        else:
            code[line] = hit >> 4 & 15
    received, added = code.count(1), code.count(2)
    if data.count(REC) != received or data.count(PTI) != received or data.count(ADD) != added:
        odd.update(_misplaced(data, offsets, code))
    return _assemble(data, offsets, hits, lines, code, odd)


def _misplaced(data: bytes, offsets: memoryview, code: bytearray) -> dict[int, int]:
    """Line → literal bits, of the lines that hold the request literals other than as ``_EXPECTED``."""
    held: dict[int, list[int]] = {}
    for number, literal in enumerate((REC, PTI, ADD)):
        at = data.find(literal)
        while at != -1:
            held.setdefault(bisect_right(offsets, at) - 1, [0, 0, 0])[number] += 1
            at = data.find(literal, at + 1)
    return {line: sum(1 << n for n, times in enumerate(found) if times) for line, found in held.items()
            if tuple(found) != _EXPECTED.get(code[line])}


def _assemble(data: bytes, offsets: memoryview, hits: list[int], lines: list[int], code: bytearray,
              odd: dict[int, int]) -> tuple[bytes, bytes, bytes, list[tuple[int, int]], int, bytes]:
    """The result, line by line: the reported request lines, and the ``odd`` ones classified the exact way."""
    index, kinds, tokens, lists = array("i"), array("B"), array("i"), array("q")
    bad: list[tuple[int, int]] = []
    months = 0
    window: hotscan.Window | None = None
    last = len(offsets) - 1
    reported = {line: hit for line, hit in zip(lines, hits) if code[line] in _EXPECTED}
    for line in sorted(reported.keys() | odd.keys()):
        end = offsets[line + 1] - 1 if line < last else len(data)
        bits = odd.get(line) or (3 if code[line] == 1 else 4)
        if line == last:
            bad.append((line, bits))
            continue
        if line in odd or not code[line + 1]:  # the exact way: odd, or the next line may continue this record
            window = window or hotscan.Window(data)
            following = offsets[line + 2] - 1 if line + 2 <= last else len(data)
            kind, count, month, span = hotscan.classify(window, offsets[line], end, bits, following)
            if not kind:
                bad.append((line, bits))
                continue
            if span is not None:
                lists.extend(span)
        else:
            kind, month = code[line], reported[line] & 15
            count = 0
            if kind == 1:
                opening = data.find(_PTI_OPEN, offsets[line], end) + len(_PTI_OPEN)
                close = data.find(b"]", opening, end)
                commas = data.count(b",", opening, close)
                count = commas + 1 if commas or data[opening:close].strip(b" ") else 0
                if close > opening:
                    lists.extend((opening, close))
        index.append(line)
        kinds.append(kind)
        tokens.append(count)
        months |= 1 << month if month in (1, 12) else 0
    return index.tobytes(), kinds.tobytes(), tokens.tobytes(), bad, months, lists.tobytes()
