"""Questions about a timeline that several verdict rules ask, answered once.

Kept apart from the rules so that each rule reads like the domain fact it
encodes ("an execute_model timeout on a decode step cannot be slowness") rather
than like list processing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from engdiag.analysis.model import Model
from engdiag.analysis.signal_kinds import SERVING
from engdiag.analysis.timeline import Timeline
from engdiag.logs.events import (
    CudaOom,
    Event,
    Failure,
    Phase,
    Progress,
    ScheduledTokens,
    Signal,
    Stats,
)
from engdiag.roles import Role

STARTUP_WORK = frozenset({Signal.STARTUP_PHASE, Signal.COMPILE, Signal.MEMORY})
_STARTUP_BARS = ("checkpoint shards", "Capturing CUDA graph", "DeepGemm(", "DeepGEMM warmup", "HPU graph warm-up")
KV_HIGH_PCT = 90.0
DECODE_STEP_TOKENS = 512
"""A scheduled batch this small with no new prompt is decode work: seconds at most."""
HUGE_STEP_TOKENS = 32_768


def is_startup_work(event: Event) -> bool:
    """Weight loading, profiling, compilation or CUDA-graph capture (not the API server waiting on them)."""
    if isinstance(event.data, Phase) and not event.data.is_work:
        return False  # the API server waiting, or a setting logged: not work in progress
    if event.signal in STARTUP_WORK:
        return True
    return isinstance(event.data, Progress) and any(b in event.data.bar for b in _STARTUP_BARS)


def stalled(stats: Stats) -> bool:
    """A stats interval with requests running and not one token produced."""
    return stats.running > 0 and stats.prompt_tps == 0 and stats.generation_tps == 0


@dataclass
class Facts:
    """A timeline plus derived answers."""

    t: Timeline

    @cached_property
    def events(self) -> list[Event]:
        return list(self.t.events)

    @cached_property
    def position(self) -> dict[int, int]:
        return {id(event): i for i, event in enumerate(self.events)}

    @cached_property
    def model(self) -> Model:
        """Activities, waits and the guard that fired (``engdiag.analysis.reconstruct``)."""
        from engdiag.analysis.reconstruct import build_model

        return build_model(self)

    def event_at(self, source: str, line: int) -> Event | None:
        """The kept event written at this line."""
        return next((e for e in self.events if e.source == source and e.line == line), None)

    def seconds(self, earlier: Event, later: Event) -> float | None:
        """Seconds from one event to another, when both have times."""
        span = self.t.seconds_between(earlier, later)
        return None if span is None else float(span)

    def at(self, event: Event) -> int:
        """Position of a kept event in time order."""
        return self.position[id(event)]

    def before(self, event: Event) -> list[Event]:
        """Kept events earlier in time than ``event``."""
        return self.events[: self.position[id(event)]]

    def after(self, event: Event) -> list[Event]:
        """Kept events later in time than ``event``."""
        return self.events[self.position[id(event)] + 1 :]

    @cached_property
    def first_serving(self) -> int:
        """Position of the first event that shows the engine serving (past the end when none)."""
        for i, event in enumerate(self.events):
            if event.signal in SERVING:
                return i
            if isinstance(event.data, Progress) and event.data.bar.startswith(("Processed prompts", "Adding requests")):
                return i
        return len(self.events)

    def served_before(self, event: Event) -> bool:
        """Had the engine started serving before this event?"""
        return self.first_serving < self.position[id(event)]

    def phase_at(self, event: Event) -> str | None:
        """``serving``, ``start-up`` or None when the log does not say."""
        if self.served_before(event):
            return "serving"
        if self.startup_work_before(event):
            return "start-up"
        for later in self.after(event):
            failure = later.data
            if later.signal is Signal.ENGINE_READY_TIMEOUT or (
                later.signal is Signal.ENGINE_FATAL and isinstance(failure, Failure) and failure.name == "start-up"
            ):
                return "start-up"
        return None

    def startup_work_before(self, event: Event) -> list[Event]:
        """Start-up work seen before ``event`` (and after serving began, none counts)."""
        return [e for e in self.before(event) if is_startup_work(e)]

    @cached_property
    def api_servers_apart(self) -> bool:
        """Do API servers run as processes of their own (``--api-server-count`` > 1: ``ApiServer_N`` tags,
        ``run_multi_api_server`` in a traceback)?  Only they wait on engine start-up with a deadline."""
        return any((e.proc is not None and e.proc.name.startswith("ApiServer_")) or "run_multi_api_server" in e.text
                   for e in self.events)

    @cached_property
    def multi_rank(self) -> bool:
        """Does the log show more than one GPU rank working together?"""
        config = self.t.config
        sizes = [config.tp, config.pp, config.dp, config.nranks]
        if any(size is not None and size > 1 for size in sizes):
            return True
        ranks = {e.proc.name for e in self.events if e.proc is not None and e.proc.role is Role.WORKER}
        # V0 spawns VllmWorkerProcess / RayWorkerWrapper only beside a driver rank that logs untagged
        # (pp2-startup-hang-after-pynccl-p2p-ctrl-c-dump: one tagged worker, two ranks)
        return len(ranks) > 1 or any(name.startswith(("VllmWorkerProcess", "RayWorkerWrapper")) for name in ranks)

    def shm_stalls(self, *, workers: bool) -> list[Event]:
        """Shared-memory waits logged by workers (``workers=True``) or by anyone else."""
        found = self.t.of(Signal.SHM_STALL)
        return [
            e
            for e in found
            if (e.proc is not None and e.proc.role is Role.WORKER) == workers
        ]

    @cached_property
    def stats(self) -> list[tuple[Event, Stats]]:
        return self.t.stats

    def trailing_stalled_stats(self) -> list[Event]:
        """The run of stalled stats intervals at the end of the stats series."""
        run: list[Event] = []
        for event, stats in reversed(self.stats):
            if not stalled(stats):
                break
            run.append(event)
        return list(reversed(run))

    @cached_property
    def kv_peak(self) -> float | None:
        values = [s.gpu_kv_pct for _, s in self.stats if s.gpu_kv_pct is not None]
        return max(values) if values else None

    @cached_property
    def last_crash_dump(self) -> ScheduledTokens | None:
        event = self.t.last_of(Signal.SCHEDULED_TOKENS)
        return event.data if event is not None and isinstance(event.data, ScheduledTokens) else None

    def exception_of(self, event: Event) -> str | None:
        """The exception text a fatal event carries."""
        return event.data.exception if isinstance(event.data, Failure) else None

    @staticmethod
    def oom(event: Event) -> CudaOom:
        return event.data if isinstance(event.data, CudaOom) else CudaOom()

    def engine_pids(self) -> list[str]:
        """``name pid=N`` of the engine-core (or API-server) processes the log names."""
        procs = [row.proc for row in self.t.proc_last if row.proc.pid is not None]
        for role in (Role.ENGINE_CORE, Role.API_SERVER):
            chosen = [p for p in procs if p.role is role]
            if chosen:
                return [f"{p.pid}" for p in chosen]
        return []
