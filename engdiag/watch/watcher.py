"""``engdiag watch``: follow a log and/or poll /metrics, judge liveness, snapshot the tree on DEAD.

``Watcher.tick(now)`` does one round — read what the log appended, poll the
metrics URL, update the judge, act on a change — and returns what happened as
records.  The command's loop calls it every few seconds; tests call it with a
fake clock.  Memory is bounded (deques), nothing spins: the loop sleeps on an
event that Ctrl-C and SIGTERM set.
"""

from __future__ import annotations

import shlex
import subprocess
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engdiag.analysis.timeline import is_progress
from engdiag.errors import EngdiagError
from engdiag.logs.events import Event, PromptLength, Signal, Stats
from engdiag.logs.scan import LineScanner
from engdiag.timeouts.model import Policy
from engdiag.timeouts.sources import MetricsSample, fetch_metrics, parse_sample
from engdiag.watch.follow import LogFollower
from engdiag.watch.judge import LivenessTracker, State, Verdict

DEATH = frozenset(
    {
        Signal.ENGINE_DEAD,
        Signal.ENGINE_FATAL,
        Signal.RPC_TIMEOUT,
        Signal.ITERATION_TIMEOUT,
        Signal.HEARTBEAT_LOST,
        Signal.FATAL_SIGNAL,
        Signal.CUDA_ERROR,
        Signal.NCCL_WATCHDOG_TIMEOUT,
    }
)
"""Log signals that mean the engine is dead whatever the timers say."""
SERIES = 120
STATS_INTERVAL_S = 10.0
"""V1 prints a stats line every 10 s while busy: a log-only watch cannot see progress more often."""

Snapshotter = Callable[[int], Path]
"""Takes a snapshot of a pid's tree, writes the bundle, returns its path (raises EngdiagError)."""


@dataclass(frozen=True)
class Record:
    """Something the watcher reports: a state change, a heartbeat, a snapshot, a problem."""

    kind: str
    at: datetime
    verdict: Verdict
    previous: State | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Options:
    """How to watch."""

    log: Path | None = None
    metrics_url: str | None = None
    interval_s: float = 5.0
    policy: Policy = Policy()
    tokens_per_sec: float | None = None
    prompt_len: int | None = None
    pid: int | None = None
    on_dead: str | None = None
    cooldown_s: float = 600.0
    heartbeat_every_s: float = 30.0
    from_start: bool = False


class Watcher:
    """Sources + judge + actions.  ``tick`` is the only method the loop needs."""

    def __init__(self, options: Options, snapshotter: Snapshotter | None = None,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.options = options
        self.wall = wall
        self.snapshotter = snapshotter
        floor = options.interval_s * 1.5
        if options.log is not None and options.metrics_url is None:
            floor = max(floor, STATS_INTERVAL_S * 1.5)
        self.tracker = LivenessTracker(options.policy, options.tokens_per_sec, options.prompt_len, floor)
        self.follower = LogFollower(options.log, options.from_start) if options.log is not None else None
        self.scanner = LineScanner(str(options.log), 0) if options.log is not None else None
        self.previous_sample: tuple[float, MetricsSample] | None = None
        self.state: State | None = None
        self.snapshotted_this_incident = False
        self.last_snapshot: float | None = None
        self.last_heartbeat: float | None = None
        self.generation: deque[float] = deque(maxlen=SERIES)
        self.kv: deque[float | None] = deque(maxlen=SERIES)
        self.last_event: Event | None = None
        self.problems: deque[str] = deque(maxlen=8)

    # -- sources ----------------------------------------------------------------------------------

    def _read_log(self, now: float) -> None:
        if self.follower is None or self.scanner is None:
            return
        lines = self.follower.read()
        for lineno, line in lines:
            for event in self.scanner.feed(lineno, line):
                self._event(event, now)
        if not lines:  # quiet for a round: the last record is complete
            for event in self.scanner.flush():
                self._event(event, now)

    def _event(self, event: Event, now: float) -> None:
        tracker = self.tracker
        self.last_event = event
        data = event.data
        if isinstance(data, Stats):
            tracker.load(now, data.running + data.waiting)
            if data.prompt_tps > 0:
                tracker.rate(data.prompt_tps)
            if self.options.metrics_url is None:
                self.generation.append(data.generation_tps)
                self.kv.append(data.gpu_kv_pct)
        if isinstance(data, PromptLength):
            tracker.prompt(data.tokens)
        if event.signal in DEATH:
            tracker.died(event.text[:160])
        elif is_progress(event):
            tracker.progress(now)

    def _poll(self, now: float) -> None:
        url = self.options.metrics_url
        if url is None:
            return
        try:
            sample = parse_sample(fetch_metrics(url), url)
        except EngdiagError as error:
            self.problems.append(str(error))
            return
        tracker = self.tracker
        running = (sample.running or 0) + (sample.waiting or 0) if sample.running is not None else None
        tracker.load(now, running)
        if sample.prompt_p99:
            tracker.prompt(sample.prompt_p99)
        if self.previous_sample is not None:
            then, before = self.previous_sample
            elapsed = max(now - then, 1e-6)
            moved = any(
                getattr(sample, name) is not None and getattr(before, name) is not None
                and getattr(sample, name) > getattr(before, name)
                for name in ("prompt_tokens", "generation_tokens", "finished")
            )
            if moved:
                tracker.progress(now)
            if sample.prompt_tokens is not None and before.prompt_tokens is not None:
                tracker.rate((sample.prompt_tokens - before.prompt_tokens) / elapsed)
            if sample.generation_tokens is not None and before.generation_tokens is not None:
                self.generation.append(max(0.0, (sample.generation_tokens - before.generation_tokens) / elapsed))
        self.kv.append(sample.kv_pct)
        self.previous_sample = (now, sample)

    # -- one round --------------------------------------------------------------------------------

    def tick(self, now: float) -> list[Record]:
        """Read, poll, judge and act once; return what there is to report."""
        self._read_log(now)
        self._poll(now)
        verdict = self.tracker.verdict(now)
        records: list[Record] = []
        if verdict.state != self.state:
            records.append(Record("state", self.wall(), verdict, previous=self.state))
            if verdict.state is not State.DEAD:
                self.snapshotted_this_incident = False
            self.state = verdict.state
            self.last_heartbeat = now
        elif self.last_heartbeat is None or now - self.last_heartbeat >= self.options.heartbeat_every_s:
            records.append(Record("heartbeat", self.wall(), verdict))
            self.last_heartbeat = now
        if verdict.state is State.DEAD:
            records += self._on_dead(now, verdict)
        return records

    def _on_dead(self, now: float, verdict: Verdict) -> list[Record]:
        options = self.options
        if options.pid is None or self.snapshotter is None or self.snapshotted_this_incident:
            return []
        if self.last_snapshot is not None and now - self.last_snapshot < options.cooldown_s:
            return []
        self.snapshotted_this_incident = True
        self.last_snapshot = now
        try:
            bundle = self.snapshotter(options.pid)
        except EngdiagError as error:
            return [Record("snapshot", self.wall(), verdict, detail={"pid": options.pid, "error": str(error)})]
        records = [Record("snapshot", self.wall(), verdict, detail={"pid": options.pid, "bundle": str(bundle)})]
        if options.on_dead:
            records.append(self._run_on_dead(verdict, bundle))
        return records

    def _run_on_dead(self, verdict: Verdict, bundle: Path) -> Record:
        command = [*shlex.split(self.options.on_dead or ""), str(bundle)]
        try:
            done = subprocess.run(command, capture_output=True, timeout=120, check=False)  # noqa: S603 - argument list, no shell
            detail: dict[str, Any] = {"command": command, "exit_code": done.returncode}
        except (OSError, subprocess.TimeoutExpired) as error:
            detail = {"command": command, "error": str(error)}
        return Record("on_dead", self.wall(), verdict, detail=detail)

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()
