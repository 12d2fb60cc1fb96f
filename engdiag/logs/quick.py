"""The two line shapes that make up most of a busy log, parsed in one match, and their events.

A vLLM logger line behind a ``(Name pid=N)`` tag (or none) and a uvicorn
access line are read here with one strict pattern each, giving exactly the
``Piece`` that ``lines.pieces`` gives — but only for lines where that is
certain: ASCII (so ``\\w``, ``\\d`` and ``\\s`` mean the same in bytes and text),
no CR, no ``|``, no Ray ``repeated`` suffix, no ``" NCCL "``, and (checked per window by the
caller) no colour code — or, with ``kube_piece``, kubectl's stamp and the two
colour codes around the tag only.  Anything else returns None and takes the full parser.

``hot_events`` reads the request lines that come by the thousand (received,
added, finished...) without ``extract``'s generic search: their literals are
already known from the bulk search, so only the masking and the rules of those
literals run.  tests/test_bulk_scan.py holds both to the full path.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import pairwise

from engdiag.logs.engines import literal_bytes
from engdiag.logs.events import Event, Proc, Stamp
from engdiag.logs.extract import event_text
from engdiag.logs.lines import Piece, Shape, kube_year, make_stamp
from engdiag.logs.patterns import RULES_BY_LITERAL
from engdiag.redact import mask

_LEVEL = rb"(DEBUG|INFO|WARNING|ERROR|CRITICAL)"
_TAG = rb"(?:\(([A-Za-z_][\w.-]{0,60}) pid=(\d+)\)[ \t]?)?"
_VLLM = re.compile(
    _TAG + rb"\s*" + _LEVEL + rb" (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)? \[?([^\s\]]+):(\d+)\] ?"
)
_ACCESS = re.compile(_TAG + rb"\s*" + _LEVEL + rb':\s+(?=\S+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3})')
_HOT_SIGNALS_MAX_RULES = 1


def _proc(name: bytes | None, pid: bytes | None) -> Proc | None:
    return None if name is None else Proc(name.decode(), int(pid or 0))


def _plain(line: bytes) -> bool:
    """A line the two strict patterns read exactly as ``lines.pieces`` does (see the module docstring; with
    ``" NCCL "`` in it, ``pieces`` may cut it where another process's record or NCCL line begins)."""
    return (line.isascii() and b"\r" not in line and b"|" not in line and b"repeated" not in line
            and b" NCCL " not in line)


def _vllm_line(line: bytes) -> tuple[re.Match[bytes], Stamp | None] | None:
    """A vLLM logger line and its time (None when impossible: the line scanner's slower path says what that
    means)."""
    match = _VLLM.match(line)
    if match is None:
        return None
    mo, d, h, mi, s = match.groups()[3:8]
    return match, make_stamp(int(mo), int(d), int(h), int(mi), int(s))


def quick_piece(line: bytes, lineno: int) -> Piece | None:
    """The piece ``lines.pieces`` would make of this raw line, when it is one of the two common shapes."""
    if not _plain(line):
        return None
    found = _vllm_line(line)
    if found is not None:
        match, stamp = found
        if stamp is None:
            return None
        name, pid, level, *_, path, number = match.groups()
        return Piece(
            lineno=lineno,
            shape=Shape.VLLM,
            msg=line[match.end() :].decode(),
            proc=_proc(name, pid),
            level=level.decode(),
            stamp=stamp,
            fileinfo=f"{path.decode()}:{number.decode()}",
            width=len(line),
        )
    match = _ACCESS.match(line)
    if match is not None:
        name, pid, level = match.groups()
        return Piece(
            lineno=lineno,
            shape=Shape.ACCESS,
            msg=line[match.end() :].decode(),
            proc=_proc(name, pid),
            level=level.decode(),
            width=len(line),
        )
    return None


_KUBE_COLOUR = re.compile(
    rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)) \x1b\[[0-9;]{0,12}m"
    rb"(\([A-Za-z_][\w.-]{0,60} pid=\d{1,9}\))\x1b\[[0-9;]{0,12}m"
)
"""kubectl's RFC 3339 stamp, then vLLM's process tag between colour codes (``\x1b[1;36m(Worker pid=9)\x1b[0;0m``),
all bounded: the line reader strips codes in a line's first 256 characters only (and its last 96)."""


def kube_piece(line: bytes, lineno: int) -> Piece | None:
    """The piece ``lines.pieces`` would make of a kubectl line whose only colour codes are the two around its
    process tag: what ``quick_piece`` makes of the tag and the rest, with kubectl's stamp and its year.

    The stamp and the tag hold nothing a colour code could start with, and the rest no code nor part of one,
    so cleaning removes exactly those two codes wherever the line reader strips them.
    """
    match = _KUBE_COLOUR.match(line)
    if match is None:
        return None
    rest = line[match.end() :]
    if b"\x1b" in rest or _CODE_PART.search(rest) is not None:
        return None
    piece = quick_piece(match[2] + rest, lineno)
    if piece is None:
        return None
    kube_ts = match[1].decode()
    stamp = piece.stamp
    if stamp is not None:
        stamp = Stamp(stamp.month, stamp.day, stamp.second, stamp.year, kube_year(kube_ts, stamp.month))
    return replace(piece, kube_ts=kube_ts, stamp=stamp, width=len(line))


def starts_own_record(line: bytes, prev: Piece) -> bool:
    """Certain, without building its piece, that this raw line does not continue ``prev`` (a vLLM line).

    ``records.joins`` continues a vLLM line only with a line of the same header (a traceback) or a bare one;
    a vLLM line from another file:line, or an access line, starts a record of its own.  False is "not
    certain": the caller builds the piece.  Saves a piece per stats line in a busy log.
    """
    if not _plain(line):
        return False
    found = _vllm_line(line)
    if found is not None:
        if found[1] is None:
            return False
        path, number = found[0].groups()[-2:]
        return f"{path.decode()}:{number.decode()}" != prev.fileinfo
    return _ACCESS.match(line) is not None


def kube_starts_own_record(line: bytes, prev: Piece) -> bool:
    """``starts_own_record`` for a line of a window with colour codes, whose piece ``kube_piece`` makes: certain when
    that piece is sure to be one, and its tag and the rest are a line that surely starts its own record (kubectl's
    stamp only adds a calendar year, which no record header compares).  Saves a piece per stats line there."""
    match = _KUBE_COLOUR.match(line)
    if match is None:
        return False
    rest = line[match.end() :]
    return b"\x1b" not in rest and _CODE_PART.search(rest) is None and starts_own_record(match[2] + rest, prev)


def searched_whole(line: bytes, msg: str) -> bool:
    """Is every literal of ``msg`` (a piece of the raw ``line`` of a window with colour codes) one the literal
    search saw on this line?  It is when the message is the line's own tail, after the header's ``]`` or space,
    and holds no colour code, nor part of one: the search's copy without colour codes (and without the token
    id lists, see ``engines.LISTS_CUT``) keeps every match inside it whole."""
    raw = msg.encode()
    return (line.endswith(raw) and len(line) > len(raw) and line[-len(raw) - 1] in _HEADER_END
            and b"\x1b" not in raw and _CODE_PART.search(raw) is None)


_HEADER_END = b"] "
_CODE_PART = re.compile(rb"\[[0-9;]*m")
"""With ESC, what any colour code holds: a message without either has none inside (one literal first byte:
``re`` skips to each ``[`` at C speed, where an alternation is tried at every byte)."""


def _hot_literals() -> dict[int, str]:
    """Literal index → literal, for literals whose rules are plain first-match rules (no crash-dump every=True)."""
    hot: dict[int, str] = {}
    for number, raw in enumerate(literal_bytes()):
        literal = raw.decode()
        rules = RULES_BY_LITERAL.get(literal, ())
        if rules and all(not rule.every for rule in rules):
            hot[number] = literal
    return hot


HOT = _hot_literals()
_HOT_NUMBERS = frozenset(HOT)
"""``HOT``'s keys as a set: ``set.issubset`` of a dict's keys view builds a set of them on every call (~9 µs)."""


def hot_events(piece: Piece, literals: set[int], source: str) -> list[Event] | None:
    """The events ``extract`` gives a one-piece vLLM record holding only these literals; stamps not yet placed.

    None when the record is not that simple (the caller reads it the full way) — also when
    the piece has no time of its own (an impossible one, 02-30): ``extract`` gives its events
    the time they borrow and says so.
    """
    if piece.shape is not Shape.VLLM or piece.stamp is None or not literals <= _HOT_NUMBERS:
        return None
    text = mask(piece.msg).text
    if "\n" in text:
        return None
    found = sorted((position, literal) for literal in (HOT[n] for n in literals) if (position := text.find(literal)) != -1)
    if any(a + len(x) > b for (a, x), (b, _) in pairwise(found)):
        return None  # overlapping literals: the alternation of extract might pick another one
    events: list[Event] = []
    seen = set()
    for _, literal in found:
        for rule in RULES_BY_LITERAL[literal]:
            if rule.signal in seen:
                continue
            match = rule.pattern.search(text)
            if match is None:
                continue
            payloads = list(rule.build(match, text)) if rule.build else [None]
            line = event_text(text, match.start()).strip()
            for payload in payloads:
                events.append(Event(rule.signal, source, piece.lineno, piece.stamp, piece.proc, piece.level, line, payload))
            if payloads:
                seen.add(rule.signal)
    return events
