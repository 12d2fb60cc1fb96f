"""Phases and activities: what each process was doing, for how long, and whether it still advanced.

Start-up is a sequence of long activities — weight loading, memory profiling, KV-cache
sizing, torch.compile, CUDA-graph capture, kernel JIT warm-up, NCCL set-up — each of
which can take from seconds to hours.  This module reconstructs them from the lines
(what, who, since when, for how long, still advancing or finished); ``phase_rules``
judges them (docs/verdicts.md, "Phases").
"""

from __future__ import annotations

from collections.abc import Iterable

from engdiag.analysis.facts import Facts, is_startup_work
from engdiag.analysis.model import Activity
from engdiag.logs.events import (
    Event,
    Memory,
    Phase,
    Progress,
    Signal,
    Stamp,
    Stats,
)
from engdiag.logs.patterns.startup import RANKS_ASSIGNED
from engdiag.timeouts.knobs import ENGINE_READY
from engdiag.units import plural

ENGINE_READY_DEFAULT_S = float(ENGINE_READY.default)
"""vLLM's default start-up limit (VLLM_ENGINE_READY_TIMEOUT_S; fixed 600 s before 0.14)."""

_REPORTED = {
    "weights_loaded": "weight loading",
    "weights_read": "weight reading",
    "memory_profiled": "memory profiling",
    "engine_initialised": "engine init (profile, KV cache, warm-up)",
    "cuda_graphs_captured": "CUDA-graph capture",
    "dynamo": "Dynamo bytecode transform",
    "warmup_run": "profiling / warm-up run",
}
_BARS = (
    ("checkpoint shards", "weight loading"),
    ("Capturing CUDA graph", "CUDA-graph capture"),
    ("Compiling FSM index", "guided-decoding compile"),
    ("DeepGemm(", "kernel warm-up (DeepGEMM)"),
    ("DeepGEMM warmup", "kernel warm-up (DeepGEMM)"),
    ("HPU graph warm-up", "graph warm-up (HPU buckets)"),
)
_FINISHES = {"weight loading": "weights_loaded", "CUDA-graph capture": "cuda_graphs_captured"}


def _proc(event: Event) -> str | None:
    return event.proc.label if event.proc is not None else None


def _minus(stamp: Stamp | None, seconds: float | None) -> str | None:
    """The time ``seconds`` before ``stamp``, as vLLM prints times."""
    if stamp is None:
        return None
    if not seconds:
        return stamp.text
    within_year = Stamp(stamp.month, stamp.day, stamp.second)
    return within_year.shifted(-min(int(seconds), within_year.key)).text


def _span(first: Event, last: Event) -> float | None:
    if first.stamp is None or last.stamp is None:
        return None
    return float(last.stamp.key - first.stamp.key)


def _activity(name: str, first: Event, last: Event, *, seconds: float | None, advancing: bool,
              finished: bool, detail: str, startup: bool = True) -> Activity:
    return Activity(
        name=name,
        process=_proc(first),
        start=first.stamp.text if first.stamp else None,
        seconds=seconds,
        advancing=advancing,
        finished=finished,
        detail=detail,
        source=last.source,
        line=last.line,
        startup=startup,
    )


def _bars(facts: Facts) -> Iterable[Activity]:
    """tqdm bars of start-up work, one activity per bar and process (the slowest kept)."""
    for key, name in _BARS:
        groups: dict[str | None, list[Event]] = {}
        for event in facts.t.of(Signal.PROGRESS_BAR):
            if isinstance(event.data, Progress) and key in event.data.bar:
                groups.setdefault(_proc(event), []).append(event)
        best: Activity | None = None
        for group in groups.values():
            first, last = group[0], group[-1]
            bar: Progress = last.data  # type: ignore[assignment]
            done = bar.total is not None and bar.done >= bar.total
            finish = _FINISHES.get(name)
            ended = done or any(
                isinstance(e.data, Phase) and e.data.name == finish and _proc(e) == _proc(last)
                for e in facts.after(last)
            )
            moved = bar.done > first.data.done or bar.seconds_per_item is not None  # type: ignore[union-attr]
            moved = moved and not _stale(facts, last, bar.seconds_per_item)
            seconds = bar.elapsed_s if bar.elapsed_s is not None else _span(first, last)
            rate = f", {bar.seconds_per_item:.2f} s/item" if bar.seconds_per_item else ""
            detail = f"{bar.done}/{bar.total if bar.total is not None else '?'}{rate}"
            found = _activity(name, first, last, seconds=seconds, advancing=moved and not ended,
                              finished=ended, detail=detail, startup=not facts.served_before(first))
            if best is None or (found.seconds or 0) > (best.seconds or 0):
                best = found
        if best is not None:
            yield best


STALE_AFTER_S = 120.0
"""A bar silent this long (and five of its own items) before the log's last line has stopped advancing."""


def _stale(facts: Facts, last: Event, seconds_per_item: float | None) -> bool:
    """Did the log go on for much longer than this bar's pace without a new bar line?"""
    end = next((e for e in reversed(facts.events) if e.stamp is not None), None)
    if last.stamp is not None and not last.inherited_time:
        printed = last
    else:  # a bar has no time of its own: the next line with one is the latest it can have been printed
        printed = next((e for e in facts.after(last) if e.stamp is not None and not e.inherited_time), None)
    if end is None or printed is None:
        return False
    silent = end.stamp.key - printed.stamp.key  # type: ignore[union-attr]
    return silent >= max(STALE_AFTER_S, 5 * (seconds_per_item or 0))


def _reported(facts: Facts) -> Iterable[Activity]:
    """Lines that report a finished phase and its duration (``Model loading took ... 41.2 seconds``)."""
    seen: set[str] = set()
    for event in facts.t.of(Signal.STARTUP_PHASE):
        phase = event.data
        if not isinstance(phase, Phase) or phase.name not in _REPORTED:
            continue
        if phase.seconds is None and phase.gib is None:
            continue  # V0's "Loading model weights took 17.98 GB" has no duration, but says loading finished
        name = _REPORTED[phase.name]
        if name in seen:
            continue
        seen.add(name)
        took = [f"{phase.seconds:.1f} s"] if phase.seconds is not None else []
        took += [f"{phase.gib:.2f} GiB"] if phase.gib else []
        yield Activity(name, _proc(event), _minus(event.stamp, phase.seconds), phase.seconds, False, True,
                       "reported " + ", ".join(took), event.source, event.line)


_STARTED = {
    "cuda_graph_capture": ("CUDA-graph capture", ("cuda_graphs_captured",)),
    "weight_loading": ("weight loading", ("weights_loaded", "weights_read")),
}
"""Lines that say a step began (V0's "Capturing cudagraphs for decoding", the runner's "Starting to load model"),
the step they begin, and the phases that report its end."""


def _started(facts: Facts) -> Iterable[Activity]:
    """A step whose start is printed and whose end is not (and no bar of its own shows it): running, as of its
    start line."""
    phases = [e for e in facts.t.of(Signal.STARTUP_PHASE) if isinstance(e.data, Phase)]
    barred = {name for e in facts.t.of(Signal.PROGRESS_BAR) if isinstance(e.data, Progress)
              for prefix, name in _BARS if e.data.bar.startswith(prefix)}
    for marker, (name, ends) in _STARTED.items():
        starts = [e for e in phases if e.data.name == marker]  # type: ignore[union-attr]
        if not starts or name in barred:
            continue
        if any(e.data.name in ends and facts.at(e) > facts.at(starts[0]) for e in phases):  # type: ignore[union-attr]
            continue  # the reported duration covers it (_reported)
        yield _activity(name, starts[0], starts[-1], seconds=None, advancing=False, finished=False,
                        detail="started, no end reported")


def _kv_sizing(facts: Facts) -> Iterable[Activity]:
    sizes = [e for e in facts.t.of(Signal.MEMORY) if isinstance(e.data, Memory)
             and e.data.name in ("available_kv_cache", "gpu_blocks", "kv_cache_tokens")]
    if sizes:
        parts = [f"{e.data.name.replace('_', ' ')} {e.data.value:g} {e.data.unit}" for e in sizes[:3]]  # type: ignore[union-attr]
        yield _activity("KV-cache sizing", sizes[0], sizes[-1], seconds=None, advancing=False,
                        finished=True, detail=", ".join(parts))


def _compiles(facts: Facts) -> Iterable[Activity]:
    """torch.compile at start-up (per graph and in total) and kernel JIT during serving."""
    startup: list[Event] = []
    runtime: list[Event] = []
    for event in facts.t.of(Signal.COMPILE):
        (runtime if facts.served_before(event) or "inference" in event.text else startup).append(event)
    if startup:
        totals = [e for e in startup if isinstance(e.data, Phase) and e.data.name == "torch_compile"]
        graphs = [e.data.seconds for e in startup
                  if isinstance(e.data, Phase) and e.data.name == "graph_compile" and e.data.seconds]
        total = max((e.data.seconds or 0 for e in totals), default=None)  # type: ignore[union-attr]
        seconds = total if total is not None else (sum(graphs) if graphs else _span(startup[0], startup[-1]))
        detail = f"{plural(len(graphs), 'graph')}, largest {max(graphs):.0f} s" if graphs else "compiling"
        if total is not None:
            detail += f"; {total:.0f} s in total"
        jit_only = all(isinstance(e.data, Phase) and e.data.name == "jit_compile" for e in startup)
        name = "kernel JIT warm-up" if jit_only else "torch.compile"
        yield _activity(name, startup[0], startup[-1], seconds=seconds, advancing=total is None and not jit_only,
                        finished=total is not None, detail=detail)
    if runtime:
        yield _activity("kernel JIT during serving", runtime[0], runtime[-1], seconds=_span(runtime[0], runtime[-1]),
                        advancing=True, finished=False,
                        detail=f"{plural(len(runtime), 'line')}: kernels compiled for shapes warm-up did not cover",
                        startup=False)


def _retries(facts: Facts) -> Iterable[Activity]:
    retries = facts.t.of(Signal.BUSY_RETRY)
    if retries:
        name = retries[0].data.name if isinstance(retries[0].data, Phase) else "set-up retries"
        yield _activity(name, retries[0], retries[-1], seconds=_span(retries[0], retries[-1]), advancing=True,
                        finished=False, detail=f"{plural(len(retries), 'bounded wait')} timed out; the set-up went on")


NCCL_SETUP = "NCCL communicator set-up (NCCL INFO lines)"


def _process_group(facts: Facts) -> Iterable[Activity]:
    """torch.distributed / NCCL set-up: the rendezvous line, then pynccl's communicator set-up.

    pynccl's "vLLM is using nccl==X" is printed as the communicator set-up *starts* (a broadcast of the
    unique id, ncclCommInitRank, a warm-up all_reduce follow), so set-up is finished only once other
    start-up work follows (pp2-startup-hang-after-pynccl-p2p-ctrl-c-dump: both ranks print it, then 20 min
    of nothing until NCCL_P2P_DISABLE=1).
    """
    lines = [e for e in facts.t.of(Signal.STARTUP_PHASE) if isinstance(e.data, Phase)
             and e.data.name.startswith(("process_group_init", "nccl_communicator_init", "nccl_comm_setup"))]
    if not lines:
        return
    inits = [e for e in lines if e.data.name.startswith("process_group_init")]  # type: ignore[union-attr]
    inits = [e for e in inits if e.data.name != RANKS_ASSIGNED] or inits  # type: ignore[union-attr]
    later = [e for e in facts.after(lines[-1]) if is_startup_work(e) and isinstance(e.data, (Phase, Progress))]
    end = later[0] if later else lines[-1]
    # every group is up once a rank says which ranks it was assigned (parallel_state.py)
    assigned = isinstance(lines[-1].data, Phase) and lines[-1].data.name == RANKS_ASSIGNED
    if inits:
        method = inits[0].data.name.split(" ", 1)[-1]  # type: ignore[union-attr]
    elif any(e.data.name == "nccl_communicator_init" for e in lines):  # type: ignore[union-attr]
        method = "pynccl communicator set-up"
    else:
        method = NCCL_SETUP
    count = len(inits) if inits else len({e.proc for e in lines if e.proc is not None} or {None})
    yield _activity("process-group / NCCL init", lines[0], end, seconds=_span(lines[0], end), advancing=False,
                    finished=bool(later) or assigned, detail=f"{plural(count, 'rank')} at {method}")


def _autotune(facts: Facts) -> Iterable[Activity]:
    """Kernel autotuning at start-up (FlashInfer's autotuner): ranks tune together, with collectives."""
    lines = [e for e in facts.t.of(Signal.STARTUP_PHASE) if isinstance(e.data, Phase)
             and e.data.name.startswith(("kernel_autotune", "autotune_cache_loaded"))]
    bars = [e for e in facts.t.of(Signal.PROGRESS_BAR) if isinstance(e.data, Progress)
            and e.data.bar.startswith("Tuning ")]
    found = sorted(lines + bars, key=facts.at)
    if not found:
        return
    loaded = [e for e in lines if e.data.name.startswith("autotune_cache_loaded")]  # type: ignore[union-attr]
    ranks = {e.proc.label for e in found if e.proc is not None}
    moved = any(e.data.done > 0 for e in bars)  # type: ignore[union-attr]
    detail = f"{len(ranks) or 1} process(es)"
    if bars:
        last: Progress = bars[-1].data  # type: ignore[assignment]
        detail += f", tuning {last.done}/{last.total}"
    if loaded:
        detail += f"; {len(loaded)} loaded cached configs"
    elapsed = bars[-1].data.elapsed_s if bars else None  # type: ignore[union-attr]
    span = _span(found[0], found[-1])
    seconds = max(elapsed, span or 0) if elapsed is not None else span
    yield _activity("kernel autotune", found[0], found[-1], seconds=seconds,
                    advancing=moved and not _stale(facts, found[-1], None), finished=False, detail=detail)


def _handshake(facts: Facts) -> Iterable[Activity]:
    waits = [e for e in facts.t.of(Signal.STARTUP_PHASE)
             if isinstance(e.data, Phase) and e.data.name.startswith("waiting")]
    if waits:
        ready = [e for e in facts.after(waits[0]) if e.signal is Signal.SERVER_READY]
        end = ready[0] if ready else (facts.events[-1] if facts.events else waits[-1])
        yield _activity("start-up handshake", waits[0], end, seconds=_span(waits[0], end), advancing=False,
                        finished=bool(ready), detail=waits[0].text[:120])


def _serving(facts: Facts) -> Iterable[Activity]:
    stats = facts.stats
    if stats:
        first, last = stats[0][0], stats[-1][0]
        numbers: Stats = stats[-1][1]
        yield _activity(
            "serving", first, last, seconds=_span(first, last),
            advancing=numbers.generation_tps > 0 or numbers.prompt_tps > 0, finished=False,
            detail=f"last interval: {numbers.prompt_tps:g} prompt + {numbers.generation_tps:g} generated tok/s, "
            f"{numbers.running} running, {numbers.waiting} waiting",
            startup=False,
        )
    bars = [e for e in facts.t.of(Signal.PROGRESS_BAR)
            if isinstance(e.data, Progress) and e.data.bar.startswith("Processed prompts")]
    if bars:
        bar: Progress = bars[-1].data  # type: ignore[assignment]
        done = bar.total is not None and bar.done >= bar.total
        yield _activity("offline generation", bars[0], bars[-1], seconds=bar.elapsed_s or _span(bars[0], bars[-1]),
                        advancing=not done and bar.done > bars[0].data.done, finished=done,  # type: ignore[union-attr]
                        detail=f"{bar.done}/{bar.total} prompts", startup=False)


def _shutdown(facts: Facts) -> Iterable[Activity]:
    stops = facts.t.of(Signal.OPERATOR_STOP, Signal.SHUTDOWN)
    if stops:
        complete = any("shutdown complete" in e.text for e in stops)
        yield _activity("shutdown", stops[0], stops[-1], seconds=_span(stops[0], stops[-1]), advancing=False,
                        finished=complete, detail=stops[0].text[:120], startup=False)


def activities(facts: Facts) -> list[Activity]:
    """Every activity the log shows, in the order their last lines appear."""
    found = [
        *_process_group(facts), *_autotune(facts), *_bars(facts), *_reported(facts), *_started(facts), *_kv_sizing(facts), *_compiles(facts),
        *_retries(facts),
        *_handshake(facts), *_serving(facts), *_shutdown(facts),
    ]
    index = {(e.source, e.line): i for i, e in enumerate(facts.events)}
    found.sort(key=lambda a: index.get((a.source, a.line), 0))
    return found


def startup_seconds(facts: Facts, activities: Iterable[Activity]) -> float | None:
    """Launch to the first sign of serving (or to the end of the log when it never served)."""
    first = next((e for e in facts.events if e.stamp is not None), None)
    if first is None:
        return None
    if facts.first_serving <= facts.position[id(first)]:
        return None  # the log begins while the engine already serves: no start-up in it
    serving = next((e for e in facts.events[facts.first_serving :] if e.stamp is not None), None)
    if serving is None and facts.t.serving_started:
        return None
    end = serving or next((e for e in reversed(facts.events) if e.stamp is not None), first)
    span = _span(first, end)
    longest = max((a.seconds or 0 for a in activities if a.startup), default=0)
    return max(span or 0, longest) or None


# ---- rules ------------------------------------------------------------------------------
