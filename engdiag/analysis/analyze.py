"""``engdiag analyze``: log paths in, an ``Analysis`` out (no printing here).

Opens each input through ``engdiag.logs.inputs``, scans it, folds the events
into a timeline and classifies it.  A callback reports bytes read so the CLI
can draw a progress bar; the scan itself never touches the terminal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from engdiag.analysis.classify import judge
from engdiag.analysis.facts import Facts
from engdiag.analysis.model import Model
from engdiag.analysis.timeline import ANOMALIES, FATAL, Timeline, TimelineBuilder, is_progress
from engdiag.analysis.verdict import Verdict
from engdiag.logs.clock import Clock, base_years
from engdiag.logs.events import Event, Stamp
from engdiag.logs.inputs import LogInput, count_lines, expand, file_size, is_gzip, open_binary, read_lines
from engdiag.logs.lines import first_stamp
from engdiag.logs.scan import LineScanner, SourceSummary
from engdiag.logs.split import cut_points
from engdiag.logs.window import Window, past_until, since_start, stream_tail, tail_start

PARALLEL_MIN_BYTES = 32 << 20
"""Plain files at least this big are scanned in parallel byte ranges."""
_PEEK_LINES = 5000
"""Lines read from the head of an input to find its first time (for year alignment)."""

Progress = Callable[[str, int, int | None], None]
"""Called with (input name, bytes or lines done, total bytes or None)."""


@dataclass(frozen=True)
class InputInfo:
    """What was read from one input."""

    name: str
    bytes: int | None
    lines: int


@dataclass(frozen=True)
class Incident:
    """The moments that frame the incident."""

    last_progress: Event | None
    first_anomaly: Event | None
    fatal: Event | None
    no_progress_seconds: int | None


@dataclass(frozen=True)
class Analysis:
    """Everything ``analyze`` found."""

    inputs: tuple[InputInfo, ...]
    timeline: Timeline
    incident: Incident
    verdict: Verdict
    model: Model = field(default_factory=Model)
    """Activities, waits and the guard that fired: what the verdict was judged from."""

    @property
    def found_vllm(self) -> bool:
        """Did any line carry a vLLM signal?"""
        return bool(self.timeline.events)


def _first_stamp(log: LogInput) -> Stamp | None:
    if log.path is None:
        return None
    with open_binary(log) as stream:
        return first_stamp(line for _, line in islice(read_lines(stream, log.name), _PEEK_LINES))


def _lines(log: LogInput, stream: BinaryIO, window: Window) -> Iterator[tuple[int, str]]:
    """The numbered lines of an input, limited to the window."""
    if window.empty:
        return read_lines(stream, log.name)
    if log.path is not None and stream.seekable() and not is_gzip(log.path):
        start = 0
        if window.tail_lines is not None or window.tail_bytes is not None:
            start = tail_start(log.path, window)
        if window.since is not None:
            start = max(start, since_start(log.path, window.since))
        stream.seek(start)
        return read_lines(stream, log.name, first_line=count_lines(log.path, start) + 1)
    return stream_tail(read_lines(stream, log.name), window)


def scan_input(
    log: LogInput,
    index: int,
    base_year: int,
    show_prompts: bool,
    sink: Callable[[Event], None],
    progress: Progress | None = None,
    window: Window = Window(),
) -> SourceSummary:
    """Stream every event of one input into ``sink`` (the line-by-line path); return its summary."""
    scanner = LineScanner(log.name, index, base_year, show_prompts)
    total = file_size(log)
    timed = window.since is not None or window.until is not None
    with open_binary(log) as stream:
        for lineno, line in _lines(log, stream, window):
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


@dataclass
class _RangeResult:
    builder: TimelineBuilder
    summary: SourceSummary
    clock: Clock


def _scan_range(part: _Range) -> _RangeResult:
    """Worker: scan one byte range into its own timeline builder (bounded, cheap to send back)."""
    first_line = count_lines(part.path, part.start) + 1 if part.start else 1
    scanner = LineScanner(part.name, part.index, part.base_year, part.show_prompts)
    builder = TimelineBuilder()
    limit = None if part.end is None else part.end - part.start
    with open(part.path, "rb") as stream:
        stream.seek(part.start)
        for lineno, line in read_lines(stream, part.name, first_line=first_line, byte_limit=limit):
            for event in scanner.feed(lineno, line):
                builder.add(event)
    for event in scanner.finish():
        builder.add(event)
    return _RangeResult(builder, scanner.summary, scanner.clock)


def _join(results: list[_RangeResult]) -> tuple[TimelineBuilder, SourceSummary] | None:
    """Chain the ranges' builders and summaries; None when a clock did not continue (New Year inside)."""
    first = results[0]
    year, last = first.clock.year, first.clock.last
    for result in results[1:]:
        if not result.clock.continues(year, last):
            return None
        year = result.clock.year
        last = result.clock.last if result.clock.last is not None else last
    builder, summary = first.builder, first.summary
    for result in results[1:]:
        builder.extend(result.builder)
        later = result.summary
        summary.lines = later.lines
        summary.first = summary.first or later.first
        summary.last = later.last or summary.last
        summary.last_seen.update(later.last_seen)
    return builder, summary


def _context():  # -> multiprocessing context
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def scan_parallel(
    log: LogInput, index: int, base_year: int, show_prompts: bool, jobs: int
) -> tuple[TimelineBuilder, SourceSummary] | None:
    """Scan a big plain file in ``jobs`` byte ranges at once; None when it cannot be split exactly."""
    from concurrent.futures import ProcessPoolExecutor

    assert log.path is not None
    points = cut_points(log.path, jobs)
    if not points:
        return None
    bounds = [0, *points]
    ends: list[int | None] = [*points, None]
    parts = [_Range(log.path, log.name, index, base_year, show_prompts, s, e) for s, e in zip(bounds, ends, strict=True)]
    with ProcessPoolExecutor(max_workers=len(parts), mp_context=_context()) as pool:
        results = list(pool.map(_scan_range, parts))
    return _join(results)


def _position(stream: object) -> int:
    tell = getattr(getattr(stream, "fileobj", None) or stream, "tell", None)
    try:
        return int(tell()) if tell is not None else 0
    except (OSError, ValueError):
        return 0


def frame_incident(timeline: Timeline) -> Incident:
    """Last progress before the fatal event, the first anomaly after it, and the gap."""
    events = timeline.events
    fatal = next((e for e in events if e.signal in FATAL), None)
    cutoff = events.index(fatal) if fatal is not None else len(events)
    progress = next((e for e in reversed(events[:cutoff]) if is_progress(e)), None)
    start = events.index(progress) + 1 if progress is not None else 0
    anomaly = next((e for e in events[start:] if e.signal in ANOMALIES), None)
    end_stamp = fatal.stamp if fatal is not None else timeline.last_stamp
    gap = None
    if progress is not None and progress.stamp is not None and end_stamp is not None:
        gap = max(end_stamp.key - progress.stamp.key, 0)
    return Incident(progress, anomaly, fatal, gap)


def _parallel_worth_it(log: LogInput, jobs: int, window: Window) -> bool:
    if jobs < 2 or log.path is None or not window.empty:
        return False
    size = file_size(log)
    return size is not None and size >= PARALLEL_MIN_BYTES and not is_gzip(log.path)


def default_jobs() -> int:
    """Worker processes for big files: the CPUs this process may use, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def analyze(
    paths: list[str],
    *,
    show_prompts: bool = False,
    progress: Progress | None = None,
    jobs: int | None = None,
    window: Window = Window(),
) -> Analysis:
    """Read the logs at ``paths`` and judge the incident they record.

    Plain files of ``PARALLEL_MIN_BYTES`` or more are scanned in byte ranges by
    ``jobs`` worker processes (default: the CPUs available); the result is the
    same as a line-by-line scan (tests/test_parallel_scan.py).
    """
    logs = expand(paths)
    years = base_years([_first_stamp(log) for log in logs])
    jobs = default_jobs() if jobs is None else jobs
    builder = TimelineBuilder()
    summaries: list[SourceSummary] = []
    infos: list[InputInfo] = []
    for index, log in enumerate(logs):
        parallel = _parallel_worth_it(log, jobs, window)
        joined = scan_parallel(log, index, years[index], show_prompts, jobs) if parallel else None
        if joined is not None:
            builder.extend(joined[0])
            summary = joined[1]
            if progress is not None:
                progress(log.name, file_size(log) or 0, file_size(log))
        else:
            summary = scan_input(log, index, years[index], show_prompts, builder.add, progress, window)
        summaries.append(summary)
        infos.append(InputInfo(log.name, file_size(log), summary.lines))
    timeline = builder.build(summaries)
    facts = Facts(timeline)
    return Analysis(tuple(infos), timeline, frame_incident(timeline), judge(facts), facts.model)
