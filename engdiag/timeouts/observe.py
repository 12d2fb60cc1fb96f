"""What the recommender knows about the workload, gathered from any mix of inputs (pure).

Logs give the most (prompt lengths, throughput, start-up phases, the version,
the longest healthy gap); a metrics scrape gives the prompt-length histogram and
a prefill rate; files and flags give prompt lengths.  ``merge`` combines them,
explicit user values winning over observed ones.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from engdiag.analysis.timeline import Gap, Timeline, is_progress
from engdiag.logs.events import Event, Phase, Progress, ScheduledTokens, Signal, Timeout
from engdiag.quantile import nearest_rank
from engdiag.timeouts import knobs as k
from engdiag.timeouts.knobs import Engine, Platform, Version, default_engine, parse_version

if TYPE_CHECKING:
    from engdiag.analysis.model import Model

V0_RPC_CALLS = frozenset({"RPCServer", "MQLLMEngine", "Server"})
"""Callers of V0's frontend RPC timeout; any other ``RPC call to X timed out`` is a V1 worker step."""


@dataclass(frozen=True)
class Figure:
    """A number and where it came from."""

    value: float
    source: str


@dataclass(frozen=True)
class Killed:
    """A timeout that fired in the log: the knob, its limit, how long the stall it ended lasted, and where."""

    knob: k.Knob
    limit_s: float
    limit_source: str
    stall_s: float | None
    where: str
    progressing: bool | None
    """True when the analysis judged the work slow-but-alive (not deadlocked)."""


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
    killed: Killed | None = None
    step_tokens_seen: int | None = None
    """The largest step the log shows (vLLM's crash dump of the last scheduled batch)."""
    platforms: frozenset[Platform] = frozenset()
    platform_proof: tuple[str, ...] = ()
    """How each platform was detected in the log (``Kubernetes: a liveness probe failed (file:line)``)."""
    outside_fired: frozenset[str] = frozenset()
    """Guards outside vLLM that fired in the log (``ray-serve-health``, ``k8s-probe``)."""
    verdict: str | None = None
    """analyze's verdict on the same log (slow, deadlocked...), when the input was a log."""

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


_TQDM_TIMES = re.compile(r"\[(?:(\d+):)?(\d+):(\d+)<(?:(\d+):)?(\d+):(\d+)")


def _tqdm_total(text: str) -> float | None:
    """Elapsed + remaining from a tqdm bar's ``[09:36<05:20`` (the bar's own clock, no log time needed)."""
    match = _TQDM_TIMES.search(text)
    if match is None:
        return None
    h1, m1, s1, h2, m2, s2 = (int(g or 0) for g in match.groups())
    return float(h1 * 3600 + m1 * 60 + s1 + h2 * 3600 + m2 * 60 + s2)


def _startup(timeline: Timeline, model: Model | None = None) -> Figure | None:
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
    if bars:
        last: Progress = bars[-1].data  # type: ignore[assignment]
        elapsed = timeline.seconds_between(first, bars[-1]) if first is not None else None
        if last.total and 0 < last.done < last.total and elapsed:
            projected = elapsed * last.total / last.done
        if last.total and last.done < last.total:  # cut off while loading: the bar's own clock projects it
            projected = max(projected or 0, _tqdm_total(bars[-1].text) or 0) or None
    candidates = [
        (summed, "weight loading + engine initialisation in the log"),
        (spanned or 0, "first line to server ready in the log"),
        (projected or 0, "weight loading projected from its progress bar"),
    ]
    if model is not None:
        # analyze's start-up phases (a torch.compile or warm-up that timed itself): the same figure analyze cites
        longest = max((a for a in model.activities if a.startup and a.seconds), key=lambda a: a.seconds or 0,
                      default=None)
        if model.startup_seconds:
            candidates.append((model.startup_seconds, "launch to serving in analyze's start-up phases"))
        if longest is not None and longest.seconds:
            candidates.append((longest.seconds, f"the {longest.name} phase ({longest.source}:{longest.line})"))
    value, source = max(candidates)
    return Figure(value, source) if value > 0 else None


def _killed_knob(event: Event, engine: Engine | None, version: Version | None) -> tuple[k.Knob, float, str] | None:
    """The knob whose limit fired, its limit in seconds, and where that limit comes from."""
    data = event.data if isinstance(event.data, Timeout) else Timeout()
    if event.signal is Signal.ITERATION_TIMEOUT:
        return k.ITERATION, 60.0, "vLLM's default 60 s (the line does not print the limit)"
    if event.signal is Signal.ENGINE_READY_TIMEOUT:
        if data.guard in ("dp-coordinator", "omni-stage"):
            return None  # the coordinator's fixed 120 s, vllm-omni's --stage-init-timeout: no vLLM variable
        return k.ENGINE_READY, 600.0, "vLLM's default 600 s (the line does not print the limit)"
    if event.signal is Signal.HEARTBEAT_LOST:
        return k.RPC, 30.0, "3 × VLLM_RPC_TIMEOUT's default 10 s"
    if event.signal is Signal.RPC_TIMEOUT:
        if data.call in V0_RPC_CALLS:
            return k.RPC, data.limit_s or 10.0, "printed in the line" if data.limit_s else "vLLM's default 10 s"
        if engine is Engine.V0:
            return None
        limit = 40.0 if version is not None and (0, 8, 5) <= version < (0, 9, 0) else 300.0
        return k.EXECUTE_MODEL, limit, f"vLLM's {'hard-coded' if limit == 40 else 'default'} {limit:g} s"
    return None


def _killed(timeline: Timeline, engine: Engine | None, version: Version | None, verdict: str | None) -> Killed | None:
    """The first timeout that fired, with the stall it ended (from the last progress before it)."""
    fired = timeline.first_of(Signal.RPC_TIMEOUT, Signal.ITERATION_TIMEOUT, Signal.ENGINE_READY_TIMEOUT, Signal.HEARTBEAT_LOST)
    if fired is None:
        return None
    found = _killed_knob(fired, engine, version)
    if found is None:
        return None
    knob, limit, source = found
    before = [e for e in timeline.events[: timeline.events.index(fired)] if is_progress(e) and e.stamp is not None]
    start = timeline.events[0] if knob is k.ENGINE_READY else (before[-1] if before else None)
    stall = timeline.seconds_between(start, fired)
    progressing = None if verdict is None else verdict == "slow"
    return Killed(knob, limit, source, float(stall) if stall is not None else None,
                  f"{fired.source}:{fired.line}", progressing)


def _outside_fired(timeline: Timeline) -> frozenset[str]:
    return frozenset(e.data.guard for e in timeline.of(Signal.EXTERNAL_GUARD)
                     if isinstance(e.data, Timeout) and e.data.guard)


def _platforms(timeline: Timeline) -> dict[Platform, str]:
    """The platforms the log proves, each with the first line that proves it.

    Ray: its worker process names, vLLM's compiled-graph line, a Ray Serve health
    check.  Kubernetes: a kubelet probe failure, or ``kubectl logs --prefix``'s
    ``[pod/NAME/CONTAINER]``.  kubectl's RFC 3339 stamps alone prove nothing (any
    tool adds them), and neither does a host name.
    """
    found: dict[Platform, str] = {}
    for event in timeline.events:
        where = f"{event.source}:{event.line}"
        name = event.proc.name if event.proc is not None else ""
        guard = event.data.guard if isinstance(event.data, Timeout) else None
        if Platform.RAY not in found:
            if name.startswith("Ray"):
                found[Platform.RAY] = f"Ray: a Ray worker process ({name}) at {where}"
            elif "RAY_CGRAPH" in event.text or guard == "ray-cgraph":
                found[Platform.RAY] = f"Ray: the Ray executor's compiled graph at {where}"
            elif guard == "ray-serve-health":
                found[Platform.RAY] = f"Ray: a Ray Serve health check at {where}"
        if Platform.K8S not in found:
            if guard == "k8s-probe":
                found[Platform.K8S] = f"Kubernetes: the kubelet's {event.data.call} failed at {where}"  # type: ignore[union-attr]
            elif event.proc is not None and (event.proc.host or "").startswith("pod/"):
                # kubectl logs --prefix's [pod/NAME/CONTAINER], kept as the process's host (logs/lines.py)
                found[Platform.K8S] = (f"Kubernetes: kubectl logs --prefix names pod {event.proc.host[4:]} at "
                                       f"{where}")
        if len(found) == 2:
            break
    return found


def from_timeline(timeline: Timeline, verdict: str | None = None, model: Model | None = None) -> Observations:
    """Observations from an analysed log (``verdict``, ``model``: analyze's verdict kind and incident model)."""
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
    platforms = _platforms(timeline)
    return Observations(
        prompt_lengths=dict(timeline.prompt_histogram),
        prompt_sources=(f"log ({prompts.count} prompt lengths)",) if prompts.count else (),
        lower_bound=prompts.lower_bound,
        prefill_tps=_prefill_rate(timeline),
        decode_tps=Figure(decode, "p25 of generation throughput per running request") if decode else None,
        startup_s=_startup(timeline, model),
        longest_gap=load.longest_gap,
        version=version,
        engine=engine,
        tp=config.tp or (config.nranks if config.nranks and not config.pp else None),
        pp=config.pp,
        chunked_prefill=config.chunked_prefill,
        max_num_batched_tokens=config.max_num_batched_tokens,
        fired=fired,
        killed=_killed(timeline, engine, version, verdict),
        step_tokens_seen=max(
            (e.data.total for e in timeline.of(Signal.SCHEDULED_TOKENS) if isinstance(e.data, ScheduledTokens)),
            default=None,
        ),
        platforms=frozenset(platforms),
        platform_proof=tuple(platforms.values()),
        outside_fired=_outside_fired(timeline),
        verdict=verdict,
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
            platforms=merged.platforms | part.platforms,
            platform_proof=merged.platform_proof + part.platform_proof,
            outside_fired=merged.outside_fired | part.outside_fired,
            **{
                name: getattr(merged, name) if getattr(merged, name) is not None else getattr(part, name)
                for name in (
                    "prefill_tps", "decode_tps", "startup_s", "longest_gap", "version", "engine",
                    "tp", "pp", "chunked_prefill", "max_num_batched_tokens", "killed", "step_tokens_seen",
                    "verdict",
                )
            },
        )
    return merged
