"""The one entry point from inputs to events: open, pick the part to read, choose how, scan.

``analysis/`` hands over paths and a collector and gets events and summaries
back; it knows nothing of files, pipes, compression, byte ranges, worker
processes or scanner backends.  Plain files of ``PARALLEL_MIN_BYTES`` or more
are scanned in byte ranges at once, the first by this process and each other by
a forked child (where there is no ``os.fork``, in one pass); the result is the
same as a line-by-line scan (tests/test_parallel_scan.py).
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import BinaryIO, Protocol

from engdiag.logs.bulk import bulk_scan
from engdiag.logs.clock import Clock, base_years
from engdiag.logs.counting import Count
from engdiag.logs.engines import active_backend, prepare
from engdiag.logs.events import Event, Signal, Stamp
from engdiag.logs.inputs import LogInput, count_lines, expand, file_size, is_plain, open_input, read_lines
from engdiag.logs.lines import first_stamp
from engdiag.logs.paste import Paste, file_paste, input_paste, skip_doubled, unpasted
from engdiag.logs.scan import LineScanner, SourceSummary
from engdiag.logs.split import cut_points
from engdiag.logs.window import Window, past_until, since_start, stream_tail, tail_start

PARALLEL_MIN_BYTES = 32 << 20
"""Plain files at least this big are scanned in parallel byte ranges."""
_PEEK_LINES = 5000
"""Lines read from the head of an input to find its first time (for year alignment)."""

Progress = Callable[[str, int, int | None], None]
"""Called with (input name, bytes or lines done, total bytes or None)."""
Note = Callable[[str], None]
"""Called with one line for the user (how an input is being read)."""
Idle = Callable[[], None]
"""Called at most once, in this process, when it has scanned its byte range while forked ones still scan: the
caller's work for after the scan (its imports) then costs no time of its own (``split.FIRST_SHARE``)."""


class Collector(Protocol):
    """Where events go: ``analysis``'s timeline builder (a worker process builds its own)."""

    def add(self, event: Event) -> None: ...

    def count(self, source: str, signals: Mapping[Signal, int], prompt_lengths: Mapping[int, int]) -> None: ...

    def extend(self, later: Collector) -> None: ...


@dataclass(frozen=True)
class ReadInput:
    """What was read of one input."""

    name: str
    bytes: int | None
    summary: SourceSummary


def _first_stamp(log: LogInput) -> Stamp | None:
    if not log.seekable:
        return None  # a pipe can be read once: no peeking
    with open_input(log) as opened:
        paste, stream = input_paste(opened.stream, opened.plain)
        lines = read_lines(unpasted(stream, paste), log.name)
        return first_stamp(line for _, line in islice(lines, _PEEK_LINES))


def _lines(log: LogInput, stream: BinaryIO, plain: bool, window: Window, paste: Paste
           ) -> Iterator[tuple[int, str]]:
    """The numbered lines of an input as it was before it was pasted, limited to the window."""
    lines = _window_lines(log, stream, plain, window, paste)
    return skip_doubled(lines) if paste.double_spaced else lines


def _window_lines(log: LogInput, stream: BinaryIO, plain: bool, window: Window, paste: Paste
                  ) -> Iterator[tuple[int, str]]:
    if window.empty:
        return read_lines(unpasted(stream, paste), log.name)
    if plain and log.path is not None:
        start = 0
        if window.tail_lines is not None or window.tail_bytes is not None:
            start = tail_start(log.path, window)
        if window.since is not None:
            start = max(start, since_start(log.path, window.since))
        stream.seek(start)  # then unpasted: a line start
        return read_lines(unpasted(stream, paste), log.name, first_line=count_lines(log.path, start) + 1)
    return stream_tail(read_lines(unpasted(stream, paste), log.name), window)


def _how(log: LogInput, plain: bool, layers: tuple[str, ...], window: Window) -> str | None:
    """One line on how an input that cannot seek is read under ``--tail`` / ``--since``."""
    if plain or window.empty or (window.tail_lines is None and window.tail_bytes is None and window.since is None):
        return None
    what = "stdin" if log.path is None else ("a pipe" if not log.seekable else f"{'+'.join(layers)}-wrapped")
    option = "--tail" if window.tail_lines is not None or window.tail_bytes is not None else "--since"
    return f"{log.name}: {what} cannot seek; {option} reads all of it and keeps the part asked for"


TRACE_TAIL_LINES = 4096
"""Lines read from the end of a call trace: every earlier call returned, and a trace grows to gigabytes."""
_TRACE_NOTE_BYTES = 1 << 20
"""A trace smaller than this is read whole in all likelihood: no note that only its tail is."""


def scan_input(
    log: LogInput,
    index: int,
    base_year: int,
    show_prompts: bool,
    sink: Callable[[Event], None],
    progress: Progress | None = None,
    window: Window = Window(),
    note: Note | None = None,
    count: Count | None = None,
) -> SourceSummary:
    """Stream every event of one input into ``sink``; return its summary.

    With ``count``, the bulk backends count plain request lines into it instead of
    sending their events (see ``engdiag.logs.counting``).
    """
    scanner = LineScanner(log.name, index, base_year, show_prompts)
    total = file_size(log)
    timed = window.since is not None or window.until is not None
    backend = active_backend()
    with open_input(log) as opened:
        how = _how(log, opened.plain, opened.layers, window)
        if how is not None and note is not None:
            note(how)
        paste, stream = input_paste(opened.stream, opened.plain)
        scanner.wrap, scanner.skew = paste.wrap, paste.skew
        if paste.trace and window.empty:
            window = Window(tail_lines=TRACE_TAIL_LINES)
            if note is not None and (total is None or total > _TRACE_NOTE_BYTES):
                note(f"{log.name}: a call trace (VLLM_TRACE_FUNCTION): its last {TRACE_TAIL_LINES} lines are read, "
                     "where its thread stopped")
        if window.empty and backend != "lines" and not paste.double_spaced and paste.wrap is None \
                and paste.skew is None:
            report = None if progress is None else (lambda done: progress(log.name, done, total))
            bulk_scan(unpasted(stream, paste), scanner, backend, sink, progress=report, count=count)
            for event in scanner.finish():
                sink(event)
            return scanner.summary
        for lineno, line in _lines(log, stream, opened.plain, window, paste):
            for event in scanner.feed(lineno, line):
                if not timed or window.keeps(event.stamp):
                    sink(event)
            if progress is not None and lineno % 20_000 == 0:
                progress(log.name, _position(stream), total)
            if past_until(scanner.last_stamp, window):
                break
    for event in scanner.finish():
        if not timed or window.keeps(event.stamp):
            sink(event)
    return scanner.summary


@dataclass(frozen=True)
class _Range:
    """One byte range of a file for a worker process."""

    path: Path
    name: str
    index: int
    base_year: int
    show_prompts: bool
    start: int
    end: int | None
    collector: Callable[[], Collector]
    backend: str


@dataclass
class _RangeResult:
    collector: Collector
    summary: SourceSummary
    clock: Clock


def _scan_range(part: _Range) -> _RangeResult:
    """Worker: scan one byte range into its own collector (bounded, cheap to send back)."""
    first_line = count_lines(part.path, part.start) + 1 if part.start else 1
    scanner = LineScanner(part.name, part.index, part.base_year, part.show_prompts)
    collector = part.collector()
    limit = None if part.end is None else part.end - part.start
    with open(part.path, "rb") as stream:
        stream.seek(part.start)
        if part.backend != "lines":
            bulk_scan(stream, scanner, part.backend, collector.add, first_line=first_line, byte_limit=limit,
                      count=collector.count)
        else:
            for lineno, line in read_lines(stream, part.name, first_line=first_line, byte_limit=limit):
                for event in scanner.feed(lineno, line):
                    collector.add(event)
    for event in scanner.finish():
        collector.add(event)
    return _RangeResult(collector, scanner.summary, scanner.clock)


def _join(results: list[_RangeResult]) -> tuple[Collector, SourceSummary] | None:
    """Chain the ranges' collectors and summaries; None when a clock did not continue (New Year inside)."""
    first = results[0]
    year, last = first.clock.year, first.clock.last
    for result in results[1:]:
        if not result.clock.continues(year, last):
            return None
        year = result.clock.year
        last = result.clock.last if result.clock.last is not None else last
    collector, summary = first.collector, first.summary
    for result in results[1:]:
        collector.extend(result.collector)
        later = result.summary
        summary.lines = later.lines
        summary.first = summary.first or later.first
        summary.last = later.last or summary.last
        summary.last_seen.update(later.last_seen)
    return collector, summary


def _forked(part: _Range) -> tuple[int, int]:
    """A child process scanning ``part``: its pid, and the pipe its pickled result (or exception) comes through.

    A bare fork, not a ``ProcessPoolExecutor``: importing ``concurrent.futures.process`` and ``multiprocessing``
    and starting the pool took ~40 ms of a 640 MiB run before any worker scanned a byte.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    status = 1
    try:  # the child: never returns, never runs the parent's exit handlers or flushes its buffers
        os.close(read)
        try:
            payload = pickle.dumps((True, _scan_range(part)), pickle.HIGHEST_PROTOCOL)
        except BaseException as error:  # noqa: BLE001 - raised again in the parent, as pool.map would
            payload = pickle.dumps((False, error), pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write, "wb") as pipe:
            pipe.write(payload)
        status = 0
    finally:
        os._exit(status)


def _result(pid: int, read: int) -> _RangeResult:
    """The result of a forked range, once its child has sent it (the child is reaped, killed if need be)."""
    done = False
    try:
        with os.fdopen(read, "rb") as pipe:
            payload = pipe.read()
        done = True
    finally:
        if not done:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not payload:
        raise RuntimeError("a worker process scanning a byte range ended without a result")
    ok, value = pickle.loads(payload)
    if not ok:
        raise value
    return value


def _scan_ranges(parts: list[_Range], idle: Idle | None = None) -> list[_RangeResult]:
    """Every range at once: the first in this process, each other in a forked child (all reaped, whatever fails);
    ``idle`` runs here once the first range is scanned, before the children's results are waited for."""
    children = [_forked(part) for part in parts[1:]]
    results: list[_RangeResult] = []
    failed: BaseException | None = None
    try:
        results.append(_scan_range(parts[0]))
        if idle is not None:
            idle()
    except BaseException as error:  # noqa: BLE001 - raised below, once the children are gone
        failed = error
        for pid, _ in children:
            os.kill(pid, signal.SIGKILL)
    for pid, read in children:
        try:
            results.append(_result(pid, read))
        except BaseException as error:  # noqa: BLE001 - the first one is raised, once every child is reaped
            failed = failed or error
    if failed is not None:
        raise failed
    return results


def scan_parallel(
    log: LogInput, index: int, base_year: int, show_prompts: bool, jobs: int, collector: Callable[[], Collector],
    idle: Idle | None = None,
) -> tuple[Collector, SourceSummary] | None:
    """Scan a big plain file in ``jobs`` byte ranges at once; None when it cannot be split exactly.

    A pasted log (indented, double-spaced or cut at a width) cannot: a range has no head to learn that from.
    """
    assert log.path is not None
    if not file_paste(log.path).untouched:
        return None
    points = cut_points(log.path, jobs)
    if not points:
        return None
    bounds = [0, *points]
    ends: list[int | None] = [*points, None]
    backend = active_backend()
    parts = [
        _Range(log.path, log.name, index, base_year, show_prompts, s, e, collector, backend)
        for s, e in zip(bounds, ends, strict=True)
    ]
    prepare(backend)
    return _join(_scan_ranges(parts, idle))


def _position(stream: object) -> int:
    tell = getattr(getattr(stream, "fileobj", None) or stream, "tell", None)
    try:
        return int(tell()) if tell is not None else 0
    except (OSError, ValueError):
        return 0


def _parallel_worth_it(log: LogInput, jobs: int, window: Window) -> bool:
    if jobs < 2 or not window.empty or not hasattr(os, "fork"):
        return False
    size = file_size(log)
    return size is not None and size >= PARALLEL_MIN_BYTES and is_plain(log)


def default_jobs() -> int:
    """Worker processes for big files: the CPUs this process may use, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def read_logs(
    paths: list[str],
    collector: Callable[[], Collector],
    *,
    show_prompts: bool = False,
    progress: Progress | None = None,
    jobs: int | None = None,
    window: Window = Window(),
    note: Note | None = None,
    idle: Idle | None = None,
) -> tuple[Collector, list[ReadInput]]:
    """Every event of every input into one collector, with what was read of each input (``idle``: see ``Idle``)."""
    logs = expand(paths)
    years = base_years([_first_stamp(log) for log in logs])
    jobs = default_jobs() if jobs is None else jobs
    main = collector()
    read: list[ReadInput] = []
    for index, log in enumerate(logs):
        parallel = _parallel_worth_it(log, jobs, window)
        joined = scan_parallel(log, index, years[index], show_prompts, jobs, collector, idle) if parallel else None
        idle = None if parallel else idle  # once: the first parallel scan's
        if joined is not None:
            main.extend(joined[0])
            summary = joined[1]
            if progress is not None:
                progress(log.name, file_size(log) or 0, file_size(log))
        else:
            summary = scan_input(log, index, years[index], show_prompts, main.add, progress, window, note, main.count)
        read.append(ReadInput(log.name, file_size(log), summary))
    return main, read
