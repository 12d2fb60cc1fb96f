"""The periodic stats line read in one match: its piece and its event without ``quick_piece`` and ``hot_events``.

Every stats line ("Avg prompt throughput: …", V1's ``loggers.py`` and V0's
``metrics.py``) must be fed (the load tracker reads each one): ~37 in a window
of V1 request logging, ~80 of V0's, ~230 without request logging.  Read
the general way a line costs ~17 µs (its piece, the next line's, the generic
literal and mask steps and the rule's searches of the payload); here one
whole-line pattern of exactly the two wordings vLLM prints says, for lines
that hold nothing else, what those steps would have given.

The pattern is ``quick``'s header (or ``kube_piece``'s kubectl stamp and
coloured tag) followed by a message with no quote, bracket or brace (``mask``
leaves it alone), no newline, not starting with a space (``tracebackish`` is
false), numbers that ``float`` reads as the rule does, and nothing after the
last field.  Anything else returns None: the caller reads the line the general
way.  tests/test_stats_line.py holds this to that way.
"""

from __future__ import annotations

import re
from functools import cache

from engdiag.logs.engines import literal_bytes
from engdiag.logs.events import Event, Proc, Signal, Stamp, Stats
from engdiag.logs.extract import MAX_EVENT_TEXT
from engdiag.logs.lines import Piece, Shape, kube_year, make_stamp
from engdiag.logs.patterns import RULES_BY_LITERAL
from engdiag.logs.quick import _CODE_PART, _KUBE_COLOUR, _TAG, _VLLM, _plain

_LITERAL = "Avg prompt throughput"
_NUM = rb"(\d+(?:\.\d+)?)"
_MESSAGE = (
    rb"((?:Engine (\d+): )?Avg prompt throughput: " + _NUM + rb" tokens/s, Avg generation throughput: " + _NUM
    + rb" tokens/s, Running: (\d+) reqs, (?:Swapped: (\d+) reqs, )?(?:Pending|Waiting): (\d+) reqs, "
    rb"GPU KV cache usage: " + _NUM + rb"%, (?:CPU KV cache usage: " + _NUM + rb"%\.|Prefix cache hit rate: "
    + _NUM + rb"%))\Z"
)
"""V1 (``Engine 000: …, Waiting: N reqs, GPU KV cache usage: x%, Prefix cache hit rate: y%``) and V0 (``…,
Swapped: N reqs, Pending: N reqs, GPU KV cache usage: x%, CPU KV cache usage: y%.``): the rule's payload searches
(``patterns.progress._stats``) find exactly these fields in them and nothing else."""
_KUBE_TAG = rb"\(([A-Za-z_][\w.-]{0,60}) pid=(\d{1,9})\)"


@cache
def _patterns() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """The plain line's pattern and the kubectl line's (its stamp, the tag between two colour codes, then what the
    plain one reads after a tag, as ``kube_piece`` does); compiled on first use (~1 ms: short logs never need it)."""
    kube = _KUBE_COLOUR.pattern.replace(rb"(\([A-Za-z_][\w.-]{0,60} pid=\d{1,9}\))", _KUBE_TAG, 1)
    return re.compile(_VLLM.pattern + _MESSAGE), re.compile(kube + rb"[ \t]?" + _VLLM.pattern.removeprefix(_TAG) + _MESSAGE)


def _literal_number() -> int | None:
    """The stats literal's number in ``literal_bytes()``, if its one rule is still the one this module reads."""
    rules = RULES_BY_LITERAL.get(_LITERAL, ())
    if len(rules) != 1 or rules[0].signal is not Signal.STATS or rules[0].every:
        return None
    return literal_bytes().index(_LITERAL.encode())


STATS_ONLY = frozenset({n}) if (n := _literal_number()) is not None else frozenset()
"""The literals of a line this module may read: the stats literal alone."""


def _f(value: bytes | None) -> float | None:
    return None if value is None else float(value)


def stats_line(line: bytes, lineno: int, source: str, quick: bool) -> tuple[Piece, list[Event]] | None:
    """The piece and events the general way gives a plain stats line (events' stamps not yet placed), or None.

    ``quick``: the window has no colour code (the line is read as ``quick_piece`` would);
    else only a kubectl line whose codes are the two around its tag (``kube_piece``).
    """
    if not _plain(line):
        return None
    if quick:
        match, kube_ts = _patterns()[0].match(line), None
        if match is None:
            return None
        name, pid, level, mo, d, h, mi, s, path, number = match.groups()[:10]
        fields = match.groups()[10:]
    else:
        match = _patterns()[1].match(line)
        if match is None:
            return None
        kube_ts, name, pid, level, mo, d, h, mi, s, path, number = match.groups()[:11]
        fields = match.groups()[11:]
        rest = line[line.index(b"m", match.end(3)) + 1 :]  # after the code closing the tag
        if b"\x1b" in rest or _CODE_PART.search(rest) is not None:
            return None
    stamp = make_stamp(int(mo), int(d), int(h), int(mi), int(s))
    if stamp is None:
        return None
    if kube_ts is not None:
        kube_ts = kube_ts.decode()
        stamp = Stamp(stamp.month, stamp.day, stamp.second, stamp.year, kube_year(kube_ts, stamp.month))
    msg, engine, prompt, generation, running, swapped, waiting, gpu, cpu, prefix = fields
    proc = None if name is None else Proc(name.decode(), int(pid))
    text = msg.decode()
    piece = Piece(lineno, Shape.VLLM, text, proc, level.decode(), stamp, f"{path.decode()}:{number.decode()}",
                  kube_ts, 1, len(line))
    payload = Stats(float(prompt), float(generation), int(running), int(waiting),
                    None if swapped is None else int(swapped), float(gpu), _f(cpu), _f(prefix), None,
                    None if engine is None else int(engine), None)
    return piece, [Event(Signal.STATS, source, lineno, stamp, proc, piece.level, text[:MAX_EVENT_TEXT].strip(), payload)]
