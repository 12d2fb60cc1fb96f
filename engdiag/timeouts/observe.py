"""What the recommender knows about the workload, gathered from any mix of inputs (pure).

Logs give the most (prompt lengths, throughput, start-up phases, the version,
the longest healthy gap); a metrics scrape gives the prompt-length histogram and
a prefill rate; files and flags give prompt lengths.  ``merge`` combines them,
explicit user values winning over observed ones.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from engdiag.analysis.timeline import Gap, Timeline
from engdiag.logs.events import Phase, Progress, Signal
from engdiag.quantile import nearest_rank
from engdiag.timeouts.knobs import Engine, Version, default_engine, parse_version


@dataclass(frozen=True)
class Figure:
    """A number and where it came from."""

    value: float
    source: str


@dataclass(frozen=True)
class Observations:
    """Everything known about the workload and the server."""

    prompt_lengths: dict[int, int] = field(default_factory=dict)
    prompt_sources: tuple[str, ...] = ()
    lower_bound: bool = False
    prefill_tps: Figure | None = None
    decode_tps: Figure | None = None
    """Per request."""
    startup_s: Figure | None = None
    longest_gap: Gap | None = None
    version: Version | None = None
    engine: Engine | None = None
    tp: int | None = None
    pp: int | None = None
    chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = None
    fired: tuple[tuple[str, str], ...] = ()
    """Timeouts that fired in the log: (signal, ``file:line``)."""

    @property
    def prompt_count(self) -> int:
        return sum(self.prompt_lengths.values())

    def prompt_quantile(self, percentile: float) -> int | None:
        """Nearest-rank quantile of prompt lengths (``percentile`` in 0–100]."""
        return nearest_rank(self.prompt_lengths, percentile / 100)


def _prefill_rate(timeline: Timeline) -> Figure | None:
    """A conservative prefill rate: the 25th percentile of saturated intervals, never an idle-diluted mean."""
    load = timeline.load
    step = nearest_rank(load.step_prefill_tps, 0.25)
    if step is not None:
        return Figure(step, f"p25 of {sum(load.step_prefill_tps.values())} per-step prefill rates (Iteration lines)")
    if sum(load.busy_prompt_tps.values()) >= 3:
        busy = nearest_rank(load.busy_prompt_tps, 0.25)
        if busy is not None:
            count = sum(load.busy_prompt_tps.values())
            return Figure(busy, f"p25 of {count} stats intervals with prefill work and a queue")
    if load.prompt_tps:
        # without a queue an interval is partly idle: its busiest quarter is the least diluted
        top = nearest_rank(load.prompt_tps, 0.75)
        if top is not None:
            return Figure(top, f"p75 of {sum(load.prompt_tps.values())} stats intervals with prefill work (no queue seen)")
    return None


def _startup(timeline: Timeline) -> Figure | None:
    phases = {e.data.name: e for e in timeline.of(Signal.STARTUP_PHASE) if isinstance(e.data, Phase)}
    summed = sum(
        e.data.seconds or 0  # type: ignore[union-attr]
        for name, e in phases.items()
        if name in ("weights_loaded", "engine_initialised")
    )
    first = timeline.events[0] if timeline.events else None
    ready = timeline.first_of(Signal.SERVER_READY) or phases.get("engine_initialised")
    spanned = timeline.seconds_between(first, ready) if ready is not None else None
    bars = [e for e in timeline.of(Signal.PROGRESS_BAR) if isinstance(e.data, Progress) and "shards" in e.data.bar]
    projected = None
    if bars and first is not None:
        last: Progress = bars[-1].data  # type: ignore[assignment]
        elapsed = timeline.seconds_between(first, bars[-1])
        if last.total and 0 < last.done < last.total and elapsed:
            projected = elapsed * last.total / last.done
    candidates = [
        (summed, "weight loading + engine initialisation in the log"),
        (spanned or 0, "first line to server ready in the log"),
        (projected or 0, "weight loading projected from its progress bar"),
    ]
    value, source = max(candidates)
    return Figure(value, source) if value > 0 else None


def from_timeline(timeline: Timeline) -> Observations:
    """Observations from an analysed log."""
    version = parse_version(timeline.version.version) if timeline.version else None
    engine_name = timeline.version.engine if timeline.version else None
    engine = Engine(engine_name) if engine_name in ("V0", "V1") else default_engine(version)
    load = timeline.load
    decode = nearest_rank(load.decode_tps_per_request, 0.25)
    config = timeline.config
    fired = tuple(
        (e.signal.value, f"{e.source}:{e.line}")
        for e in timeline.of(Signal.RPC_TIMEOUT, Signal.ITERATION_TIMEOUT, Signal.ENGINE_READY_TIMEOUT, Signal.HEARTBEAT_LOST)
    )
    prompts = timeline.prompt_lengths
    return Observations(
        prompt_lengths=dict(timeline.prompt_histogram),
        prompt_sources=(f"log ({prompts.count} prompt lengths)",) if prompts.count else (),
        lower_bound=prompts.lower_bound,
        prefill_tps=_prefill_rate(timeline),
        decode_tps=Figure(decode, "p25 of generation throughput per running request") if decode else None,
        startup_s=_startup(timeline),
        longest_gap=load.longest_gap,
        version=version,
        engine=engine,
        tp=config.tp or (config.nranks if config.nranks and not config.pp else None),
        pp=config.pp,
        chunked_prefill=config.chunked_prefill,
        max_num_batched_tokens=config.max_num_batched_tokens,
        fired=fired,
    )


def from_lengths(lengths: list[int], source: str) -> Observations:
    """Observations holding only prompt lengths (files, flags)."""
    return Observations(prompt_lengths=dict(Counter(lengths)), prompt_sources=(f"{source} ({len(lengths)})",))


def merge(*parts: Observations) -> Observations:
    """Combine observations: prompt lengths add up; for single values the first one given wins."""
    merged = Observations()
    for part in parts:
        lengths = Counter(merged.prompt_lengths)
        lengths.update(part.prompt_lengths)
        merged = replace(
            merged,
            prompt_lengths=dict(lengths),
            prompt_sources=merged.prompt_sources + part.prompt_sources,
            lower_bound=merged.lower_bound or part.lower_bound,
            fired=merged.fired + part.fired,
            **{
                name: getattr(merged, name) if getattr(merged, name) is not None else getattr(part, name)
                for name in (
                    "prefill_tps", "decode_tps", "startup_s", "longest_gap", "version", "engine",
                    "tp", "pp", "chunked_prefill", "max_num_batched_tokens",
                )
            },
        )
    return merged
