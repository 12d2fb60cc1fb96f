"""The straightforward scanner: every line is cleaned, grouped into records and read.

This path defines what the events of a log *are*; the bulk scanner
(``engdiag.logs.bulk``) must produce exactly the same events and summary (tests/test_bulk_scan.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engdiag.logs.clock import Clock
from engdiag.logs.events import Event, Proc, Stamp
from engdiag.logs.extract import extract
from engdiag.logs.lines import Piece, clocks, pieces
from engdiag.logs.paste import rest_of
from engdiag.logs.records import Assembler, Record


@dataclass(frozen=True, slots=True)
class Seen:
    """Where a process last wrote: line number and time."""

    line: int
    stamp: Stamp | None


@dataclass(slots=True)
class SourceSummary:
    """What was read of one input besides its events."""

    name: str
    index: int
    lines: int = 0
    first: Stamp | None = None
    last: Stamp | None = None
    last_seen: dict[Proc, Seen] = field(default_factory=dict)


class LineScanner:
    """Feeds one input's lines through cleaning, record assembly and extraction."""

    def __init__(self, name: str, index: int, base_year: int = 0, show_prompts: bool = False):
        self.summary = SourceSummary(name, index)
        self._clock = Clock(base_year)
        self._base_year = base_year
        self._assembler = Assembler(name)
        self._show_prompts = show_prompts
        self._last_stamp: Stamp | None = None
        self._record_inherited: Stamp | None = None
        self._raw_first: Stamp | None = None
        self._raw_last: Stamp | None = None
        self._raw_seen: dict[Proc, tuple[int, Stamp | None]] = {}
        self._known: tuple[Piece, list[Event]] | None = None
        """A one-piece record fed with its events already read (``feed_known``), placed when it closes."""
        self.wrap: int | None = None
        self._held: tuple[int, str] | None = None
        """A row exactly ``wrap`` wide, with its line number, waiting to see whether the next row is its rest."""
        """The width the paste cut every long line at (``engdiag.logs.paste``), once its head has shown it;
        such an input is read line by line (``feed``), never by the bulk scanner."""
        self.skew: int | None = None
        """Seconds from vLLM's own clock to the paste's wrapper clock (``engdiag.logs.paste``): a line with vLLM's
        time alone is moved onto the wrapper's clock.  Such an input too is read line by line."""

    @property
    def timed(self) -> bool:
        """Has a line with a time been read (the input's first time is known)?"""
        return self._raw_first is not None

    @property
    def last_stamp(self) -> Stamp | None:
        """The time of the last line read that had one (as printed, no year)."""
        return self._last_stamp

    @property
    def clock(self) -> Clock:
        """The clock that placed this input's stamps (a parallel scan checks ranges continue it)."""
        return self._clock

    def feed(self, lineno: int, line: str) -> list[Event]:
        """Read one physical line; return the events of any record it completed."""
        self.summary.lines = lineno
        if self.wrap is None:
            return self._line(lineno, line)
        return self._unwrapped(lineno, line)

    def _unwrapped(self, lineno: int, line: str) -> list[Event]:
        """A paste cut every long line at ``wrap``: a line that wide is held until the next shows whether it is
        the rest; the rows are read as the one line they were.  Joined only as pieces, a header cut in two
        (``…17.39it/s]INFO 08-09 0`` | ``3:02:26 metrics.py:406] Avg prompt throughput…``) was never read."""
        events: list[Event] = []
        held, self._held = self._held, None
        row = line
        if held is not None:
            rest = rest_of(line)
            if rest is not None:
                lineno, line = held[0], held[1] + rest
            else:
                events.extend(self._line(*held))
        if len(row) == self.wrap:
            self._held = (lineno, line)
        else:
            events.extend(self._line(lineno, line))
        return events

    def _line(self, lineno: int, line: str) -> list[Event]:
        events: list[Event] = []
        found = pieces(line, lineno)
        if self.skew and clocks(line)[0] is None:
            found = [replace(p, stamp=p.stamp.shifted(self.skew)) if p.stamp else p for p in found]
        for piece in found:
            events.extend(self._piece(piece))
        return events

    @property
    def show_prompts(self) -> bool:
        """Whether event text keeps prompt text (then only the full path may read records)."""
        return self._show_prompts

    def feed_known(self, lineno: int, piece: Piece, events: list[Event]) -> list[Event]:
        """Feed a one-piece record whose events (stamps not yet placed) were read by the bulk scanner.

        They are emitted when the record closes, exactly where ``extract`` would have
        run; should a later piece join the record after all, it is read the full way.
        """
        closed = self.feed_pieces(lineno, [piece])
        self._known = (piece, events)
        return closed

    def _close(self, record: Record) -> list[Event]:
        known, self._known = self._known, None
        if known is not None and len(record.pieces) == 1 and record.pieces[0] is known[0]:
            place = self._clock.place
            return [
                Event(e.signal, e.source, e.line, place(e.stamp) if e.stamp else None, e.proc, e.level, e.text, e.data)
                for e in known[1]
            ]
        return self._read(record)

    def feed_pieces(self, lineno: int, parsed: list[Piece]) -> list[Event]:
        """``feed`` for a line already cut into pieces (the bulk scanner parses some lines to plan)."""
        self.summary.lines = lineno
        events: list[Event] = []
        for piece in parsed:
            events.extend(self._piece(piece))
        return events

    def _piece(self, piece: Piece) -> list[Event]:
        inherited = self._last_stamp
        if piece.stamp is not None:
            self._last_stamp = piece.stamp
            if self._raw_first is None:
                self._raw_first = piece.stamp
            self._raw_last = piece.stamp
        if piece.proc is not None:
            self._raw_seen[piece.proc] = (piece.lineno, piece.stamp or inherited)
        started_first = self._assembler.empty
        closed = self._assembler.feed(piece)
        events = self._close(closed) if closed is not None else []
        if closed is not None or started_first:
            self._record_inherited = inherited
        return events

    def _read(self, record: Record) -> list[Event]:
        return extract(
            record,
            inherited=self._record_inherited,
            place=self._clock.place,
            show_prompts=self._show_prompts,
        )

    def _release(self) -> list[Event]:
        """The row held for its rest, read as it is: no rest came."""
        held, self._held = self._held, None
        return self._line(*held) if held is not None else []

    def flush(self) -> list[Event]:
        """Close the open record now (a followed log went quiet): its events, without waiting for a next line."""
        events = self._release()
        record = self._assembler.finish()
        return events + (self._close(record) if record is not None else [])

    def finish(self) -> list[Event]:
        """Close the last record and settle the summary's times."""
        events = self._release()
        record = self._assembler.finish()
        events += self._close(record) if record is not None else []
        summary = self.summary
        if self._raw_first is not None:
            first = self._raw_first
            summary.first = Stamp(first.month, first.day, first.second, self._base_year, first.calendar)
        if self._raw_last is not None:
            summary.last = self._clock.settle(self._raw_last)
        summary.last_seen = {
            proc: Seen(line, self._clock.settle(stamp) if stamp else None)
            for proc, (line, stamp) in self._raw_seen.items()
        }
        return events
