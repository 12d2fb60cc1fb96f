"""Events → a timeline: what happened when, in bounded memory.

Events arrive input by input, not in time order, so the builder keeps bounded
per-input lists and sorts only at the end.  High-volume signals (requests,
prompt lengths) are counted, not kept.  The result answers the classifier's
questions: when did the engine last make progress, what was the first anomaly,
what was fatal, and who went silent first.  Which signals count as work, anomaly or
fatal is ``signal_kinds.py``; the throughput figures are gathered by ``load.py``.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from engdiag.analysis.load import Gap, Load, LoadTracker
from engdiag.analysis.signal_kinds import ANOMALIES, FATAL, SERVING, is_progress
from engdiag.logs.events import (
    Event,
    ParallelConfig,
    Proc,
    Progress,
    PromptLength,
    Signal,
    Stamp,
    Stats,
    Version,
)
from engdiag.logs.hotscan import KEEP_LAST
from engdiag.logs.scan import Seen, SourceSummary
from engdiag.quantile import nearest_rank

# The signal kinds (signal_kinds.py) and load figures (load.py) are re-exported: the classifier, the
# recommender and the watcher read them with the timeline.
__all__ = [
    "ANOMALIES",
    "FATAL",
    "SERVING",
    "Gap",
    "Load",
    "ProcLast",
    "PromptStats",
    "Timeline",
    "TimelineBuilder",
    "is_progress",
    "order_key",
]

_KEEP_FIRST = 64
_KEEP_LAST = 512
_KEEP_LAST_REQUESTS = KEEP_LAST
_HIGH_VOLUME = frozenset(
    {
        Signal.REQUEST_RECEIVED,
        Signal.REQUEST_ADDED,
        Signal.REQUEST_FINISHED,
        Signal.REQUEST_ABORTED,
        Signal.RESPONSE_GENERATED,
        Signal.PROMPT_LENGTH,
        Signal.PREFIX_CACHE,
        Signal.ITERATION,
        Signal.TRACE_CALL,  # a call trace is judged by its last lines (analysis/traces.py)
    }
)

_COUNTABLE = frozenset({Signal.REQUEST_RECEIVED, Signal.REQUEST_ADDED, Signal.PROMPT_LENGTH})
"""High-volume signals that neither prove progress nor carry load figures: counting them loses nothing."""


def order_key(event: Event, source_index: dict[str, int]) -> tuple[int, int, int]:
    """Sort key: time (untimed first), then input order, then line."""
    time = event.stamp.key if event.stamp is not None else -1
    return (time, source_index.get(event.source, 0), event.line)


@dataclass(slots=True)
class _Kept:
    """The first and last events of one signal in one input."""

    first: list[Event] = field(default_factory=list)
    last: deque[Event] = field(default_factory=lambda: deque(maxlen=_KEEP_LAST))
    count: int = 0

    def add(self, event: Event, keep_first: int, keep_last: int) -> None:
        self.count += 1
        if len(self.first) < keep_first:
            self.first.append(event)
        elif keep_last:
            if self.last.maxlen != keep_last:
                self.last = deque(self.last, maxlen=keep_last)
            self.last.append(event)

    def events(self) -> list[Event]:
        return self.first + list(self.last)

    def extend(self, later: _Kept, keep_first: int, keep_last: int) -> None:
        """Continue with what another builder kept of the events that came after these.

        Feeding its known events through ``add`` is exact: any gap it had lies before
        its last ``keep_last`` events, which are all ``add`` keeps from it.
        """
        count = self.count + later.count
        for event in later.events():
            self.add(event, keep_first, keep_last)
        self.count = count


@dataclass(frozen=True, slots=True)
class PromptStats:
    """Prompt-length distribution in tokens (exact; lengths are counted, not stored)."""

    count: int
    p50: int | None
    p95: int | None
    p99: int | None
    max: int | None
    lower_bound: bool
    """Some lengths were truncated in the log (``--max-log-len``): true sizes are larger."""
    origins: dict[str, int]


@dataclass(frozen=True, slots=True)
class ProcLast:
    """Where a process last wrote."""

    proc: Proc
    source: str
    line: int
    stamp: Stamp | None


@dataclass(frozen=True)
class Timeline:
    """Everything the classifier and the renderers need, sorted by time."""

    sources: tuple[SourceSummary, ...]
    events: tuple[Event, ...]
    """Kept events (bounded per signal and input), in time order."""
    counts: dict[Signal, int]
    prompt_lengths: PromptStats
    prompt_histogram: dict[int, int]
    version: Version | None
    config: ParallelConfig
    proc_last: tuple[ProcLast, ...]
    """Each process's last line, the one that went silent first first."""
    first_stamp: Stamp | None
    last_stamp: Stamp | None
    load: Load

    def of(self, *signals: Signal) -> list[Event]:
        """Kept events of these signals, in time order."""
        wanted = set(signals)
        return [event for event in self.events if event.signal in wanted]

    def first_of(self, *signals: Signal) -> Event | None:
        found = self.of(*signals)
        return found[0] if found else None

    def last_of(self, *signals: Signal) -> Event | None:
        found = self.of(*signals)
        return found[-1] if found else None

    @property
    def stats(self) -> list[tuple[Event, Stats]]:
        """Stats lines with their numbers, in time order."""
        return [(e, e.data) for e in self.events if isinstance(e.data, Stats)]

    @property
    def last_progress(self) -> Event | None:
        """The last event that shows the engine doing work."""
        found = [event for event in self.events if is_progress(event)]
        return found[-1] if found else None

    @property
    def serving_started(self) -> bool:
        """Did the engine get as far as serving requests?"""
        return any(self.counts.get(signal, 0) for signal in SERVING) or any(
            isinstance(e.data, Progress) and e.data.bar.startswith(("Processed prompts", "Adding requests"))
            for e in self.events
        )

    def seconds_between(self, earlier: Event | None, later: Event | None) -> int | None:
        """Seconds from one event to another, when both have times."""
        if earlier is None or later is None or earlier.stamp is None or later.stamp is None:
            return None
        return later.stamp.key - earlier.stamp.key


class TimelineBuilder:
    """Folds events from any number of inputs into a ``Timeline``."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, Signal], _Kept] = {}
        self._counts: Counter[Signal] = Counter()
        self._lengths: Counter[int] = Counter()
        self._lower_bound = False
        self._origins: Counter[str] = Counter()
        self._version: Version | None = None
        self._config: dict[str, object] = {}
        self._load = LoadTracker()

    def add(self, event: Event) -> None:
        """Take one event."""
        signal = event.signal
        self._counts[signal] += 1
        self._load.add(event)
        data = event.data
        if isinstance(data, PromptLength):
            self._lengths[data.tokens] += 1
            self._lower_bound |= data.lower_bound
            self._origins[data.origin] += 1
        elif isinstance(data, Version):
            self._take_version(data)
        elif isinstance(data, ParallelConfig):
            for name in ParallelConfig.__dataclass_fields__:
                value = getattr(data, name)
                if value is not None:
                    self._config.setdefault(name, value)
        kept = self._kept.setdefault((event.source, signal), _Kept())
        if signal in _HIGH_VOLUME:
            kept.add(event, 0, _KEEP_LAST_REQUESTS)
        else:
            kept.add(event, _KEEP_FIRST, _KEEP_LAST)

    def count(self, source: str, signals: Mapping[Signal, int], prompt_lengths: Mapping[int, int]) -> None:
        """Take request events that were counted, not built (the bulk scanner's hot lines).

        Only high-volume signals that do not move the load tracker may be counted, and
        only events older than the last ``KEEP_LAST`` of their signal in the input
        (those are built and ``add``-ed): the result is what ``add`` of each would give.
        Prompt lengths are exact sizes from the request log (never lower bounds).
        """
        for signal, number in signals.items():
            if number <= 0:
                continue
            if signal not in _COUNTABLE:
                raise ValueError(f"{signal} cannot be counted")
            self._counts[signal] += number
            kept = self._kept.setdefault((source, signal), _Kept())
            kept.count += number
        for tokens, number in prompt_lengths.items():
            if number > 0:
                self._lengths[tokens] += number
                self._origins["request_log"] += number

    def _take_version(self, data: Version) -> None:
        """The first banner wins, unless it did not say the engine and a later one does."""
        if self._version is None or (self._version.engine is None and data.engine):
            earlier = self._version.version if self._version else None
            self._version = Version(data.version or earlier, data.engine)
        elif self._version.version is None and data.version:
            self._version = Version(data.version, self._version.engine)

    def extend(self, later: TimelineBuilder) -> None:
        """Continue with a builder that took the events after these (a later byte range of one input).

        The result is the builder that would have taken all the events in order.
        """
        self._counts.update(later._counts)
        self._lengths.update(later._lengths)
        self._lower_bound |= later._lower_bound
        self._origins.update(later._origins)
        if later._version is not None:
            self._take_version(later._version)
        for name, value in later._config.items():
            self._config.setdefault(name, value)
        self._load.extend(later._load)
        for key, kept in later._kept.items():
            high_volume = key[1] in _HIGH_VOLUME
            first, last = (0, _KEEP_LAST_REQUESTS) if high_volume else (_KEEP_FIRST, _KEEP_LAST)
            self._kept.setdefault(key, _Kept()).extend(kept, first, last)

    def build(self, sources: list[SourceSummary]) -> Timeline:
        """Sort what was kept and summarise."""
        index = {summary.name: summary.index for summary in sources}
        events = [event for kept in self._kept.values() for event in kept.events()]
        events.sort(key=lambda event: order_key(event, index))
        stamps = [s.first for s in sources if s.first] + [s.last for s in sources if s.last]
        return Timeline(
            sources=tuple(sources),
            events=tuple(events),
            counts=dict(self._counts),
            prompt_lengths=self._prompt_stats(),
            prompt_histogram=dict(self._lengths),
            version=self._version,
            config=ParallelConfig(**self._config),  # type: ignore[arg-type]
            proc_last=_proc_last(sources),
            first_stamp=min(stamps, key=lambda s: s.key) if stamps else None,
            last_stamp=max(stamps, key=lambda s: s.key) if stamps else None,
            load=self._load.build(),
        )

    def _prompt_stats(self) -> PromptStats:
        lengths = self._lengths
        total = sum(lengths.values())
        if not total:
            return PromptStats(0, None, None, None, None, False, {})
        return PromptStats(
            count=total,
            p50=nearest_rank(lengths, 0.50),
            p95=nearest_rank(lengths, 0.95),
            p99=nearest_rank(lengths, 0.99),
            max=max(lengths),
            lower_bound=self._lower_bound,
            origins=dict(self._origins),
        )


def _proc_last(sources: list[SourceSummary]) -> tuple[ProcLast, ...]:
    last: dict[Proc, tuple[SourceSummary, Seen]] = {}
    for summary in sources:
        for proc, seen in summary.last_seen.items():
            held = last.get(proc)
            if held is None or _seen_key(seen, summary) > _seen_key(held[1], held[0]):
                last[proc] = (summary, seen)
    rows = [ProcLast(proc, s.name, seen.line, seen.stamp) for proc, (s, seen) in last.items()]
    index = {s.name: s.index for s in sources}
    rows.sort(key=lambda r: (r.stamp.key if r.stamp else -1, index.get(r.source, 0), r.line))
    return tuple(rows)


def _seen_key(seen: Seen, summary: SourceSummary) -> tuple[int, int, int]:
    return (seen.stamp.key if seen.stamp else -1, summary.index, seen.line)
