"""``engdiag analyze``: log paths in, an ``Analysis`` out (no printing here).

Reads the events of every input through ``engdiag.logs.source``, folds them
into a timeline and classifies it.  A callback reports bytes read so the CLI
can draw a progress bar; the scan itself never touches the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engdiag.analysis.model import Model
from engdiag.analysis.timeline import ANOMALIES, FATAL, Timeline, TimelineBuilder, is_progress
from engdiag.analysis.verdict import Verdict
from engdiag.logs.events import Event
from engdiag.logs.source import Note, Progress, read_logs
from engdiag.logs.window import Window


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
        """Did any line carry a vLLM signal or a vLLM logger's time?"""
        return bool(self.timeline.events) or any(s.first is not None for s in self.timeline.sources)


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


def _import_judges() -> None:
    """Import what judges the timeline (~14 ms) after the scan, never before: the forked byte ranges never need
    it, and this process imports it while they finish (``read_logs``' ``idle``)."""
    import engdiag.analysis.classify  # noqa: F401
    import engdiag.analysis.facts  # noqa: F401


def analyze(
    paths: list[str],
    *,
    show_prompts: bool = False,
    progress: Progress | None = None,
    jobs: int | None = None,
    window: Window = Window(),
    note: Note | None = None,
) -> Analysis:
    """Read the logs at ``paths`` and judge the incident they record.

    How the inputs are read (pipes, compression, byte ranges over ``jobs`` worker
    processes, scanner backends) is ``engdiag.logs.source``'s business; ``note``
    receives its one-line remarks for the user.
    """
    builder, read = read_logs(
        paths, TimelineBuilder, show_prompts=show_prompts, progress=progress, jobs=jobs, window=window, note=note,
        idle=_import_judges,
    )
    assert isinstance(builder, TimelineBuilder)
    from engdiag.analysis.classify import judge
    from engdiag.analysis.facts import Facts

    timeline = builder.build([item.summary for item in read])
    infos = tuple(InputInfo(item.name, item.bytes, item.summary.lines) for item in read)
    facts = Facts(timeline)
    return Analysis(infos, timeline, frame_incident(timeline), judge(facts), facts.model)
