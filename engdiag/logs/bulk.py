"""The bulk scanner: find the few lines that matter in big windows, read only those exactly.

A window (``WINDOW_BYTES`` of whole lines) is searched at once for the rules'
literals (``engdiag.logs.engines``).  Only these lines go through the line
scanner, with just enough around them that its state is exactly what reading
every line would have left:

- a candidate's whole record (walk back and forward with ``records.joins``, the
  same local rule the parallel splitter relies on);
- back to the nearest line with a time before a line without one (the time a
  record or a process inherits);
- the last line of each process (``last_seen``) and of the window (line count,
  last time), the first timed line of the input;
- a line after a gap that would join the line fed before it is fed with its
  predecessor instead, so no record ever spans a gap.

A record without a literal yields no event, so a line outside these sets
changes nothing but the scanner's position, which the fed lines restore.  The
lines that break an assumption (process names the bulk search cannot see:
glog ``[rankN]:``, NCCL, bare role names, role tags without ``pid=``) are fed
line by line, from the first such line of a window to its last.
tests/test_bulk_scan.py checks every backend against the line scanner.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from engdiag.logs import counting, quick
from engdiag.logs.blocks import Lines, windows
from engdiag.logs.counting import COUNTABLE, Count, Found, hot_window, scan_window
from engdiag.logs.engines import LISTS_CUT, Finder, finder, literal_bytes, searches
from engdiag.logs.events import Event, Proc
from engdiag.logs.hotscan import HOT_LITERALS, HotScan
from engdiag.logs.inputs import decode_line
from engdiag.logs.lines import Piece, Shape, pieces
from engdiag.logs.quick import hot_events, kube_piece, quick_piece, searched_whole, starts_own_record
from engdiag.logs.records import joins, tracebackish
from engdiag.logs.scan import LineScanner
from engdiag.logs.statsline import STATS_ONLY, stats_line
from engdiag.logs.windowscan import Searches

TagSearch = Callable[[bytes], set[tuple[bytes, bytes, bytes, bytes]]]

WINDOW_BYTES = 8 << 20
"""Bytes searched at once: big enough to amortise the search, small enough for flat memory."""
WINDOW_LINES = 1 << 17
"""Lines per window at most: memory is per line as much as per byte."""
DENSE_SHARE = 8
"""A window with candidates on more than one line in this many is read line by line (planning would not pay)."""

_CLOCK = re.compile(rb":[^\n:]{2,8}:")
"""Every line with a time has this (``HH:MM:SS``, digits of any script): only such lines are parsed for one."""
_CLOCK_SPAN = 10
_CHUNK = 1 << 16


class _Window:
    """One window's lines, parsed lazily, and the plan of which to feed."""

    def __init__(self, data: bytes, starts: Sequence[int], first_line: int, before: Piece | None, colour: bool,
                 cued: bool) -> None:
        self.data = data
        self.cued = cued
        """Lines here name processes the tag search cannot see: read them all."""
        self.quick = not colour
        """No colour code anywhere: the common line shapes may take ``quick_piece`` (else kubectl's ``kube_piece``)."""
        self.lines = Lines(data, starts)
        self.starts = starts
        self.first_line = first_line
        self.before = before
        self._pieces: dict[int, list[Piece]] = {}

    def pieces(self, index: int) -> list[Piece]:
        found = self._pieces.get(index)
        if found is None:
            quick = (quick_piece if self.quick else kube_piece)(self.lines[index], self.first_line + index)
            found = [quick] if quick is not None else pieces(decode_line(self.lines[index]), self.first_line + index)
            self._pieces[index] = found
        return found

    def forget(self, before: int) -> None:
        """Drop parsed lines before ``before`` (a dense window is read once, in order: memory stays flat)."""
        for index in [i for i in self._pieces if i < before]:
            del self._pieces[index]

    def joins_before(self, index: int) -> bool:
        prev = self.pieces(index - 1)[-1] if index > 0 else self.before
        return prev is not None and joins(prev, self.pieces(index)[0]) is not None

    def start_of(self, index: int) -> int:
        while index > 0 and self.joins_before(index):
            index -= 1
        return index

    def end_of(self, index: int) -> int:
        while index + 1 < len(self.lines) and self.joins_before(index + 1):
            index += 1
        return index

    def timed(self, index: int) -> bool:
        return any(piece.stamp is not None for piece in self.pieces(index))

    def from_time(self, index: int) -> int:
        """The nearest line at or before ``index`` with a time; ``index`` itself if none is before it here.

        With no time earlier in the window, the time the line inherits is the one the
        previous window left in the scanner: nothing before it needs feeding.

        Only lines with a clock-like ``:..:`` are parsed, found in chunks searched backwards: 1 KiB
        first (most often the line before is the one), up to 64 KiB (few searches in a window without any).
        """
        if self.timed(index):
            return index
        end, size = self.starts[index], _CHUNK >> 6
        while True:
            begin = max(0, end - size)
            for position in reversed([hit.start() for hit in _CLOCK.finditer(self.data, begin, end)]):
                line = bisect_right(self.starts, position) - 1
                if line < index and self.timed(line):
                    return line
            if begin == 0:
                return index
            end, size = begin + _CLOCK_SPAN, min(size * 4, _CHUNK)  # a clock cut here is in the next chunk

    def first_timed(self) -> int | None:
        """The first line with a time, if any (searched like ``from_time``, forwards)."""
        for hit in _CLOCK.finditer(self.data):
            line = bisect_right(self.starts, hit.start()) - 1
            if self.timed(line):
                return line
        return None


def _last_lines_of_procs(window: _Window, data: bytes, starts: Sequence[int], tags: TagSearch) -> list[int]:
    """The last line of each process in the window (tags found in bulk, each confirmed by the parser).

    The process a line names may combine two tags (Ray's ``(RayWorkerProc pid=7, ip=H)
    (Worker_TP0 pid=7)`` is ``Worker_TP0`` on host H), so every process with the tag's pid
    met walking back is one whose last line this is (feeding a line more is always exact);
    the walk stops at the tag's own process, or at the window's start.
    """
    found: list[int] = []
    seen: set[Proc] = set()
    for whole, name, pid, ip in tags(data):
        host = decode_line(ip) if b", ip=" in whole else None
        proc = Proc(decode_line(name).strip(), int(pid), host)
        end = len(data)
        while proc not in seen and (position := data.rfind(whole, 0, end)) != -1:
            index = bisect_right(starts, position) - 1
            for piece in window.pieces(index):
                if piece.proc is not None and piece.proc.pid == proc.pid and piece.proc not in seen:
                    seen.add(piece.proc)
                    found.append(index)
            end = starts[index]
    return found


def _hot(window: _Window, index: int, literals: set[int], source: str) -> list[Event] | None:
    """The events of a one-line record read without ``extract`` (``quick.hot_events``; a plain stats line in one
    match, ``statsline``), if it is one (with colour codes: if the search saw its message whole)."""
    if index + 1 >= len(window.lines):
        return None
    read = stats_line(window.lines[index], window.first_line + index, source, window.quick) if literals == STATS_ONLY else None
    if read is not None:  # a plain stats line: its piece and events in one match
        window._pieces.setdefault(index, [read[0]])
    found = window.pieces(index)
    if read is None and (len(found) != 1 or found[0].shape is not Shape.VLLM or not found[0].msg.strip()
                         or tracebackish(found[0].msg)  # it might continue the record before it
                         or not (window.quick or searched_whole(window.lines[index], found[0].msg))):
        return None
    nxt = index + 1
    certain = (starts_own_record if window.quick else quick.kube_starts_own_record)(window.lines[nxt], found[0])
    if not certain and joins(found[0], window.pieces(nxt)[0]) is not None:
        return None
    return read[1] if read is not None else hot_events(found[0], literals, source)


def _candidates(window: _Window, find: Finder, searches: Searches, lists: bytes = b"") -> dict[int, set[int]]:
    """Line index → literals it holds (searched without colour codes, as cleaned, and ``engines.LISTS_CUT``)."""
    data, starts = searches.cut_lists(window.data, lists, window.starts) if lists else (window.data, window.starts)
    if window.quick:
        return find(data, memoryview(starts).cast("q") if lists else window.starts)
    searched = searches.strip_colour(data)
    return find(searched, memoryview(searches.line_starts(searched)[0]).cast("q"))


def _sparse(window: _Window, candidates: dict[int, set[int]]) -> bool:
    """Few enough candidates, and every process visible to the tag search: worth planning."""
    return not window.cued and len(candidates) * DENSE_SHARE <= len(window.lines)


def _plan(
    window: _Window, candidates: dict[int, set[int]], untimed: bool, hot: dict[int, list[Event]] | None,
    source: str, tags: TagSearch, extra: Iterable[int] = (),
) -> list[int]:
    """Indices of the lines to feed, in order.

    ``hot`` (when given) receives the events of the one-line records read without ``extract``;
    ``extra`` lines are fed too (with the line their time comes from).
    """
    lines, data, starts = window.lines, window.data, window.starts
    wanted: set[int] = set()

    def add(first: int, last: int) -> None:
        if not window.timed(first):
            first = window.from_time(first)
        wanted.update(range(first, last + 1))

    last = len(lines) - 1
    for index in sorted(candidates):
        if index in wanted:
            continue
        events = _hot(window, index, candidates[index], source) if hot is not None else None
        if events is not None:
            hot[index] = events  # type: ignore[index]
            wanted.add(index)
            continue
        add(window.start_of(index), window.end_of(index))
    if window.joins_before(0):
        add(0, window.end_of(0))
    if untimed:
        first = window.first_timed()
        add(0, 0 if first is None else first)
    for index in [*_last_lines_of_procs(window, data, starts, tags), *extra]:
        add(index, index)
    add(last, last)
    return sorted(wanted)


def _with_gaps_closed(window: _Window, order: list[int], before: Piece | None) -> Iterator[int]:
    """The planned lines, each gap's first line preceded by its neighbours while it would join the line fed before."""
    fed = -1
    prev = before
    for index in order:
        if index <= fed:
            continue
        start = index
        while start > fed + 1 and prev is not None and joins(prev, window.pieces(start)[0]) is not None:
            start -= 1
        for line in range(start, index + 1):
            yield line
            prev = window.pieces(line)[-1]
        fed = index


def _feed_all(
    window: _Window, candidates: dict[int, set[int]], scanner: LineScanner, sink: Callable[[Event], None], hot: bool
) -> None:
    """Every line of a dense window, in order; one-piece records with known literals (or none) skip ``extract``."""
    source = scanner.summary.name
    first = window.first_line
    for index in range(len(window.lines)):
        found = window.pieces(index)
        events: list[Event] | None = None
        if hot and len(found) == 1:
            literals = candidates.get(index)
            if literals is None:
                events = []  # no literal: its record, if it stays one piece, yields nothing
            elif (found[0].shape is Shape.VLLM and found[0].msg.strip() and not tracebackish(found[0].msg)
                  and (window.quick or searched_whole(window.lines[index], found[0].msg))):
                events = hot_events(found[0], literals, source)
        if events is not None:
            closed = scanner.feed_known(first + index, found[0], events)
        else:
            closed = scanner.feed_pieces(first + index, found)
        for event in closed:
            sink(event)
        if index and index % 4096 == 0:
            window.forget(index - 1)


@dataclass(frozen=True)
class Engine:
    """What a bulk backend searches with: every literal, all but the hot ones, and the hot-line scan."""

    backend: str
    searches: Searches
    numbers: dict[bytes, int]
    """Hot literal → its number in ``literal_bytes()``."""

    def find(self, data: bytes, starts: Sequence[int]) -> dict[int, set[int]]:
        """Every literal (compiled on first use: a counted log may never need it)."""
        return finder(self.backend)(data, starts)

    def find_rare(self, data: bytes, starts: Sequence[int]) -> dict[int, set[int]]:
        """Every literal but the hot ones."""
        return finder(self.backend, rare=True)(data, starts)


def engine(backend: str) -> Engine:
    """The search functions of a bulk backend (``native``, ``hyperscan`` or ``python``)."""
    numbers = {literal: n for n, literal in enumerate(literal_bytes()) if literal in HOT_LITERALS}
    return Engine(backend, searches(backend), numbers)


def _feed(window: _Window, order: Iterable[int], known: dict[int, list[Event]], scanner: LineScanner,
          sink: Callable[[Event], None]) -> None:
    lineno = window.first_line
    for index in order:
        events = known.get(index)
        if events is not None:
            closed = scanner.feed_known(lineno + index, window.pieces(index)[0], events)
        else:
            closed = scanner.feed_pieces(lineno + index, window.pieces(index))
        for event in closed:
            sink(event)


def _scan_window(window: _Window, untimed: bool, scanner: LineScanner, run: Engine,
                 sink: Callable[[Event], None], count: Count | None, found_hot: Found | None,
                 later: Found | None) -> None:
    """Feed one window: line by line if dense, else only the planned lines; hot lines counted when allowed
    (``found_hot``: this window's hot lines, ``later``: the next window's, None where not counted)."""
    hot_events: dict[int, list[Event]] | None = None if scanner.show_prompts else {}
    source = scanner.summary.name
    hot = None
    if count is not None and found_hot is not None:
        hot = scan_window(found_hot, scanner.last_stamp)
    if hot is None:
        found = _candidates(window, run.find, run.searches)
    else:
        lists = found_hot[5] if LISTS_CUT and found_hot is not None else b""
        found = counting.candidates(_candidates(window, run.find_rare, run.searches, lists), hot, run.numbers)
    if not _sparse(window, found):
        if hot is not None:
            found = counting.every_candidate(found, hot, run.numbers)
        _feed_all(window, found, scanner, sink, hot_events is not None)
        return
    extra = hot.keep(None if later is None else hot_window(later)) if hot is not None else ()
    plan = _plan(window, found, untimed, hot_events, source, run.searches.proc_tags, extra)
    order = list(_with_gaps_closed(window, plan, window.before))
    _feed(window, order, hot_events or {}, scanner, sink)
    if hot is not None and count is not None:
        signals, lengths = counting.counts(hot, order)
        count(source, signals, lengths)


def _cut_at_cues(parts: Iterable[tuple[bytes, Sequence[int]]], searches: Searches
                 ) -> Iterator[tuple[bytes, Sequence[int], bool, bool]]:
    """Each window, the lines that name processes the tag search cannot see (from the first to the last such
    line) cut out as a window of their own to be read line by line (the flag), so that the lines before and
    after them can still be planned.  A log that ends in an NCCL watchdog's ``[rank0]:`` lines would otherwise
    read its whole last window line by line (~0.7 s for 8 MiB of V0 request lines).  The last flag: does the
    part hold a colour code (found in the same walk; asked again only of the parts of a window that holds one)."""
    for data, starts in parts:
        span, colour = searches.cues(data)
        if span is None:
            yield data, starts, False, colour
            continue
        first, last = (bisect_right(starts, offset) - 1 for offset in span)
        for begin, end, cued in ((0, first, False), (first, last + 1, True), (last + 1, len(starts), False)):
            if begin == end:
                continue
            if begin == 0 and end == len(starts):
                yield data, starts, cued, colour
                continue
            part = data[starts[begin] : starts[end] - 1 if end < len(starts) else len(data)]
            yield part, memoryview(searches.line_starts(part)[0]).cast("q"), cued, colour and searches.colour(part)


def _ahead(parts: Iterable[tuple[bytes, Sequence[int], bool, bool]], hot: HotScan | None
           ) -> Iterator[tuple[bytes, Sequence[int], bool, bool, Found | None, Found | None]]:
    """Each window with its hot lines and the next window's (None without ``hot``): which request lines a
    window reads the full way depends on the next one (``HotWindow.keep``), so windows are read one ahead."""
    held: tuple[bytes, Sequence[int], bool, bool, Found | None] | None = None
    for data, starts, cued, colour in parts:
        found = hot(data, starts) if hot is not None else None
        if held is not None:
            yield (*held, found)
        held = (data, starts, cued, colour, found)
    if held is not None:
        yield (*held, None)


def bulk_scan(stream: BinaryIO, scanner: LineScanner, backend: str, sink: Callable[[Event], None], *,
              first_line: int = 1, byte_limit: int | None = None, progress: Callable[[int], None] | None = None,
              count: Count | None = None) -> None:
    """Feed ``scanner`` what it needs of the stream to emit exactly the events of a full scan.

    With ``count`` (the timeline's counting entry point), plain request lines are
    counted into it instead of being built as events (``engdiag.logs.counting``).
    """
    run = engine(backend)
    before: Piece | None = None
    lineno = first_line
    done = 0
    parts = windows(stream, run.searches.line_starts, WINDOW_BYTES, WINDOW_LINES, byte_limit, run.searches.read_window)
    counted = count is not None and not scanner.show_prompts and COUNTABLE
    hot = run.searches.hot if counted else None
    for data, starts, cued, colour, found_hot, later in _ahead(_cut_at_cues(parts, run.searches), hot):
        window = _Window(data, starts, lineno, before, colour, cued)
        # until a line with a time is read, each window looks for the input's (or the range's) first one
        _scan_window(window, not scanner.timed, scanner, run, sink, count, found_hot, later)
        before = window.pieces(len(starts) - 1)[-1]
        lineno += len(starts)
        done += len(data) + 1
        if progress is not None:
            progress(done)
