"""Count the request lines of a window instead of building their events.

``hotscan`` says which lines are plain request records (ok) and which hold a
request literal but must be read the full way (bad).  Here a window's scan
becomes: the candidates the bulk planner must read (the rare literals' lines,
the bad lines, and the hot literals of any candidate), the ok lines to read the
full way anyway (the last ``KEEP_LAST`` of each signal, which the timeline
keeps), and — once the planner has said which lines it fed — the counts of the
rest: requests received and added, and the prompt-length histogram.

Guards: counting is off when the rule table no longer reads these lines the
way ``hotscan`` assumes (checked at import), and for a window around New Year
(a counted line's stamp never reaches the clock that places the year).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from engdiag.logs.events import Signal, Stamp
from engdiag.logs.hotscan import ADD, BITS, KEEP_LAST, PTI, REC
from engdiag.logs.patterns import RULES_BY_LITERAL

Found = tuple[bytes, bytes, bytes, list[tuple[int, int]], int, bytes]
"""A window's ``hot_scan`` result (see ``engdiag.logs.hotscan``)."""
Count = Callable[[str, Mapping[Signal, int], Mapping[int, int]], None]
"""Where counts go: (input name, signal → count, prompt tokens → count) — the timeline's ``count``."""

_EXPECTED = {
    REC: (Signal.REQUEST_RECEIVED, r"Received request \S+?:"),
    PTI: (Signal.PROMPT_LENGTH, r"prompt_token_ids: <(?P<least>≥)?(?P<n>\d+) token ids>"),
    ADD: (Signal.REQUEST_ADDED, r"Added request \S+"),
}


def _rules_as_assumed() -> bool:
    """Each hot literal has exactly the one rule whose events ``hotscan`` predicts."""
    for literal, (signal, pattern) in _EXPECTED.items():
        rules = RULES_BY_LITERAL.get(literal.decode(), ())
        if len(rules) != 1 or rules[0].signal is not signal or rules[0].pattern.pattern != pattern or rules[0].every:
            return False
    return True


COUNTABLE = _rules_as_assumed()


def _histogram(tokens: memoryview) -> Counter[int]:
    """How many ok lines have each token count (the C ``histogram`` where built: ``Counter`` takes ~60 ns a line)."""
    try:
        from engdiag.logs._scan import histogram  # type: ignore[import-not-found]
    except ImportError:
        return Counter(tokens)
    return Counter(histogram(tokens))


@dataclass
class HotWindow:
    """One window's hot lines."""

    index: memoryview
    """Ok line indices, ascending (int32)."""
    kind: bytes
    tokens: memoryview
    bad: list[tuple[int, int]]

    def kind_of(self, line: int) -> int:
        """1 (received), 2 (added) or 0 (not an ok line)."""
        at = bisect_left(self.index, line)
        return self.kind[at] if at < len(self.index) and self.index[at] == line else 0

    def keep(self, later: HotWindow | None = None) -> list[int]:
        """The last ``KEEP_LAST`` ok lines of each signal (read the full way: the timeline keeps their events).

        None of a signal of which the ``later`` window (the next of the same input) has
        ``KEEP_LAST`` ok lines: however that window is read (planned, dense or around New
        Year), each of those lines adds its event, so the timeline's last ``KEEP_LAST``
        of the signal are never this window's — these can be counted like the rest.
        """
        received, lengths, added = later.covers() if later is not None else (False, False, False)
        found: list[int] = []
        for kind, plain_wanted, lengths_wanted in ((1, not received, not lengths), (2, not added, False)):
            want_plain, want_length = KEEP_LAST * plain_wanted, KEEP_LAST * lengths_wanted
            end, with_length, plain = len(self.kind), 0, 0
            while (with_length < want_length or plain < want_plain) and (at := self.kind.rfind(kind, 0, end)) != -1:
                end = at
                counts_length = kind == 1 and self.tokens[at] > 0
                if plain < want_plain or (counts_length and with_length < want_length):
                    found.append(self.index[at])
                plain += 1
                with_length += counts_length
        return found

    def covers(self) -> tuple[bool, bool, bool]:
        """Has this window ``KEEP_LAST`` ok lines of requests received, of prompt lengths, of requests added?

        Prompt lengths are looked for among the last ``_LOOK`` received lines only (a
        window of empty prompts says no: the earlier window then keeps its own, as always).
        """
        received = self.kind.count(1) >= KEEP_LAST
        added = self.kind.count(2) >= KEEP_LAST
        lengths, end = 0, len(self.kind)
        for _ in range(_LOOK):
            if lengths >= KEEP_LAST or (at := self.kind.rfind(1, 0, end)) == -1:
                break
            lengths += self.tokens[at] > 0
            end = at
        return received, lengths >= KEEP_LAST, added


_LOOK = 4 * KEEP_LAST


def hot_window(found: Found) -> HotWindow:
    """A window's ``hot_scan`` result as a ``HotWindow``."""
    index, kind, tokens, bad = found[:4]
    return HotWindow(memoryview(index).cast("i"), kind, memoryview(tokens).cast("i"), bad)


def scan_window(found: Found, last: Stamp | None) -> HotWindow | None:
    """The window's hot lines (its ``hot_scan`` result), or None when they must not be counted here (New Year)."""
    months = found[4]
    december, january = months & (1 << 12), months & (1 << 1)
    if (december and january) or (last is not None and ((last.month == 12 and january) or
                                                          (last.month == 1 and december))):
        return None
    return hot_window(found)


def _numbers(bits: int, numbers: Mapping[bytes, int]) -> set[int]:
    return {numbers[literal] for literal, bit in BITS.items() if bits & bit}


def candidates(rare: dict[int, set[int]], hot: HotWindow, numbers: Mapping[bytes, int]) -> dict[int, set[int]]:
    """Lines to read the full way, with their literals: the rare literals' lines (plus any hot literal they hold)
    and the bad hot lines."""
    merged = dict(rare)
    for line, literals in rare.items():
        kind = hot.kind_of(line)
        if kind:
            merged[line] = literals | _numbers(3 if kind == 1 else 4, numbers)
    for line, bits in hot.bad:
        merged[line] = merged.get(line, set()) | _numbers(bits, numbers)
    return merged


def every_candidate(merged: dict[int, set[int]], hot: HotWindow, numbers: Mapping[bytes, int]) -> dict[int, set[int]]:
    """``merged`` plus every ok line with its literals (a window read line by line counts nothing)."""
    full = dict(merged)
    received, added = _numbers(3, numbers), _numbers(4, numbers)
    for at, line in enumerate(hot.index):
        if line not in full:
            full[line] = set(received if hot.kind[at] == 1 else added)
    return full


def counts(hot: HotWindow, fed: Iterable[int]) -> tuple[dict[Signal, int], Counter[int]]:
    """Signal counts and prompt lengths of the ok lines that were not fed."""
    lengths = _histogram(hot.tokens)
    received, added = hot.kind.count(1), hot.kind.count(2)
    for line in fed:
        kind = hot.kind_of(line)
        if kind == 1:
            received -= 1
            lengths[hot.tokens[bisect_left(hot.index, line)]] -= 1
        elif kind == 2:
            added -= 1
    lengths[0] = 0
    lengths = +lengths
    return {
        Signal.REQUEST_RECEIVED: received,
        Signal.REQUEST_ADDED: added,
        Signal.PROMPT_LENGTH: sum(lengths.values()),
    }, lengths
