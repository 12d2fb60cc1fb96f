"""Throughput figures and the longest silence while busy, gathered while the events stream past.

Rates are kept as bounded histograms of rounded values (not lists), so a log of millions of stats lines
costs the same memory as a short one; the timeout recommender sizes its advice from them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from engdiag.analysis.signal_kinds import FATAL, is_progress
from engdiag.logs.events import Event, Iteration, Stats


def _round3(value: float) -> float:
    """Three significant digits: rates kept as a bounded histogram, not a list."""
    return float(f"{value:.3g}")


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch with work in flight and no progress line, while the engine was healthy."""

    seconds: int
    source: str
    start_line: int
    end_line: int
    start_time: str


@dataclass(frozen=True)
class Load:
    """Throughput figures gathered while streaming (bounded histograms of rounded rates)."""

    step_prefill_tps: dict[float, int]
    """Per-step prefill rate from ``Iteration(N)`` lines (context tokens ÷ step time)."""
    busy_prompt_tps: dict[float, int]
    """Stats intervals with prompt throughput and a queue: the engine was saturated."""
    prompt_tps: dict[float, int]
    """Every stats interval with prompt throughput."""
    decode_tps_per_request: dict[float, int]
    """Generation throughput ÷ running requests."""
    longest_gap: Gap | None


class LoadTracker:
    def __init__(self) -> None:
        self.step: Counter[float] = Counter()
        self.busy: Counter[float] = Counter()
        self.prompt: Counter[float] = Counter()
        self.decode: Counter[float] = Counter()
        self.busy_since: dict[str, Event] = {}
        self.gap: Gap | None = None
        self.opening: dict[str, Event] = {}
        """First progress event per source while no fatal had been seen (to join with an earlier range)."""
        self.saw_fatal = False

    def add(self, event: Event) -> None:
        data = event.data
        if isinstance(data, Iteration) and data.context_tokens and data.elapsed_ms > 0:
            self.step[_round3(data.context_tokens / (data.elapsed_ms / 1000))] += 1
        if isinstance(data, Stats):
            if data.prompt_tps > 0:
                self.prompt[_round3(data.prompt_tps)] += 1
                if data.waiting > 0:
                    self.busy[_round3(data.prompt_tps)] += 1
            if data.running > 0 and data.generation_tps > 0:
                self.decode[_round3(data.generation_tps / data.running)] += 1
        if event.signal in FATAL:
            self.busy_since.clear()
            self.saw_fatal = True
        elif is_progress(event) and event.stamp is not None:
            if not self.saw_fatal:
                self.opening.setdefault(event.source, event)
            self._gap(event)

    def _gap(self, event: Event) -> None:
        self._measure(self.busy_since.get(event.source), event)
        busy = (isinstance(event.data, Stats) and event.data.running > 0) or isinstance(event.data, Iteration)
        if busy:
            self.busy_since[event.source] = event
        else:
            self.busy_since.pop(event.source, None)

    def _measure(self, start: Event | None, event: Event) -> None:
        if start is not None and start.stamp is not None and event.stamp is not None:
            seconds = event.stamp.key - start.stamp.key
            if self.gap is None or seconds > self.gap.seconds:
                self.gap = Gap(seconds, event.source, start.line, event.line, start.stamp.text)

    def extend(self, later: LoadTracker) -> None:
        """Continue with a tracker that saw the events after these."""
        for mine, theirs in ((self.step, later.step), (self.busy, later.busy),
                             (self.prompt, later.prompt), (self.decode, later.decode)):
            mine.update(theirs)
        for source, event in later.opening.items():
            self._measure(self.busy_since.get(source), event)
        if later.gap is not None and (self.gap is None or later.gap.seconds > self.gap.seconds):
            self.gap = later.gap
        carried = {} if later.saw_fatal else {s: e for s, e in self.busy_since.items() if s not in later.opening}
        self.busy_since = {**carried, **later.busy_since}
        if not self.saw_fatal:
            for source, event in later.opening.items():
                self.opening.setdefault(source, event)
        self.saw_fatal = self.saw_fatal or later.saw_fatal

    def build(self) -> Load:
        return Load(dict(self.step), dict(self.busy), dict(self.prompt), dict(self.decode), self.gap)
