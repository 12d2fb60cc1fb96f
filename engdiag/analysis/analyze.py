"""``engdiag analyze``: log paths in, an ``Analysis`` out (no printing here).

Opens each input through ``engdiag.logs.inputs``, scans it, folds the events
into a timeline and classifies it.  A callback reports bytes read so the CLI
can draw a progress bar; the scan itself never touches the terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engdiag.analysis.classify import classify
from engdiag.analysis.timeline import ANOMALIES, FATAL, Timeline, TimelineBuilder, is_progress
from engdiag.analysis.verdict import Verdict
from engdiag.logs.clock import base_years
from engdiag.logs.events import Event, Stamp
from engdiag.logs.inputs import LogInput, expand, file_size, open_binary, read_lines
from engdiag.logs.lines import pieces
from engdiag.logs.scan import LineScanner, SourceSummary

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

    @property
    def found_vllm(self) -> bool:
        """Did any line carry a vLLM signal?"""
        return bool(self.timeline.events)


def _first_stamp(log: LogInput) -> Stamp | None:
    if log.path is None:
        return None
    with open_binary(log) as stream:
        for lineno, line in read_lines(stream, log.name):
            for piece in pieces(line, lineno):
                if piece.stamp is not None:
                    return piece.stamp
            if lineno >= _PEEK_LINES:
                return None
    return None


def scan_input(
    log: LogInput,
    index: int,
    base_year: int,
    show_prompts: bool,
    sink: Callable[[Event], None],
    progress: Progress | None = None,
) -> SourceSummary:
    """Stream every event of one input into ``sink`` (the line-by-line path); return its summary."""
    scanner = LineScanner(log.name, index, base_year, show_prompts)
    total = file_size(log)
    with open_binary(log) as stream:
        for lineno, line in read_lines(stream, log.name):
            for event in scanner.feed(lineno, line):
                sink(event)
            if progress is not None and lineno % 20_000 == 0:
                progress(log.name, _position(stream), total)
    for event in scanner.finish():
        sink(event)
    return scanner.summary


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


def analyze(paths: list[str], *, show_prompts: bool = False, progress: Progress | None = None) -> Analysis:
    """Read the logs at ``paths`` and judge the incident they record."""
    logs = expand(paths)
    years = base_years([_first_stamp(log) for log in logs])
    builder = TimelineBuilder()
    summaries: list[SourceSummary] = []
    infos: list[InputInfo] = []
    for index, log in enumerate(logs):
        summary = scan_input(log, index, years[index], show_prompts, builder.add, progress)
        summaries.append(summary)
        infos.append(InputInfo(log.name, file_size(log), summary.lines))
    timeline = builder.build(summaries)
    return Analysis(tuple(infos), timeline, frame_incident(timeline), classify(timeline))
