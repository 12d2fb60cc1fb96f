"""Timeline → verdict: slow, deadlocked, fragmented, crashed, healthy or unknown.

The rules run in a fixed order, most decisive first.  Each encodes a fact seen
in real incidents (docs/verdicts.md explains them):

1. a hard fault (CUDA OOM, illegal memory access, fatal signal, a collective
   the NCCL watchdog caught) decides, and the first in time is the root cause;
2. an engine that died at exit after finishing its work is healthy;
3. a timeout is judged slow or stuck from what preceded it (compilation,
   start-up work, the size of the step, shared-memory stalls);
4. any other fatal error is a crash;
5. without a failure: stalled progress, then KV-cache pressure, then benign lines.
"""

from __future__ import annotations

from collections.abc import Callable

from engdiag.analysis.advice import next_steps, ruled_out
from engdiag.analysis.facts import (
    DECODE_STEP_TOKENS,
    HUGE_STEP_TOKENS,
    KV_HIGH_PCT,
    Facts,
    is_startup_work,
    stalled,
)
from engdiag.analysis.timeline import FATAL, Timeline
from engdiag.analysis.verdict import Evidence, Kind, MemoryKind, Role, Verdict
from engdiag.logs.events import Event, NcclWork, Preemption, Progress, Signal, Timeout
from engdiag.units import format_bytes

_CONSEQUENCES = FATAL | {Signal.SHUTDOWN, Signal.NCCL_ABORT, Signal.HTTP_ERROR, Signal.REQUEST_FAILED}
_MAX_CONSEQUENCES = 6


def evidence(event: Event, role: Role, note: str = "") -> Evidence:
    """Evidence pointing at one log line."""
    return Evidence(
        source=event.source,
        line=event.line,
        time=event.stamp.text if event.stamp is not None else None,
        signal=event.signal.value,
        text=event.text,
        role=role,
        note=note,
    )


def _clamp(value: float) -> float:
    return round(min(0.95, max(0.05, value)), 2)


class _Draft:
    """A verdict being put together by one rule."""

    def __init__(self, facts: Facts, kind: Kind, confidence: float, headline: str) -> None:
        self.facts = facts
        self.kind = kind
        self.confidence = confidence
        self.headline = headline
        self.sub_kind: MemoryKind | None = None
        self.items: list[Evidence] = []
        self.notes: list[str] = []
        self.undecided: str | None = None
        self.root: Event | None = None

    def cite(self, event: Event | None, role: Role, note: str = "") -> _Draft:
        if event is not None and not any(
            e.source == event.source and e.line == event.line and e.signal == event.signal.value
            for e in self.items
        ):
            self.items.append(evidence(event, role, note))
        return self

    def cite_consequences(self, root: Event) -> _Draft:
        """Fatal lines after the root cause: results of it, not causes."""
        self.root = root
        shown: set[Signal] = {root.signal}
        for event in self.facts.after(root):
            if event.signal in _CONSEQUENCES and event.signal not in shown:
                shown.add(event.signal)
                self.cite(event, Role.CONSEQUENCE)
            if len(shown) > _MAX_CONSEQUENCES:
                break
        return self

    def done(self) -> Verdict:
        return Verdict(
            kind=self.kind,
            confidence=_clamp(self.confidence),
            headline=self.headline,
            sub_kind=self.sub_kind,
            evidence=tuple(self.items),
            ruled_out=tuple(ruled_out(self.facts, self.kind)),
            next_steps=tuple(next_steps(self.facts, self.kind, self.sub_kind, self.root)),
            undecided=self.undecided,
            notes=tuple(self.notes),
        )


# ---- 1. hard faults -----------------------------------------------------------------------

_FAULTS = (
    Signal.CUDA_OOM,
    Signal.KV_CACHE_INSUFFICIENT,
    Signal.CUDA_ERROR,
    Signal.FATAL_SIGNAL,
    Signal.NCCL_WATCHDOG_TIMEOUT,
)
_KILLED = {-9: "SIGKILL", 137: "SIGKILL", -11: "SIGSEGV", 139: "SIGSEGV", -6: "SIGABRT", 134: "SIGABRT"}


def _killed_worker(facts: Facts) -> Event | None:
    for event in facts.t.of(Signal.WORKER_DIED):
        code = getattr(event.data, "exit_code", None)
        if code in _KILLED:
            return event
    return None


def _hard_fault(facts: Facts) -> Verdict | None:
    faults = facts.t.of(*_FAULTS)
    killed = _killed_worker(facts)
    if killed is not None:
        faults = sorted([*faults, killed], key=facts.at)
    if not faults:
        return None
    root = faults[0]
    if root.signal is Signal.NCCL_WATCHDOG_TIMEOUT:
        return _collective(facts, root)
    if root.signal is Signal.CUDA_OOM:
        return _oom(facts, root)
    if root.signal is Signal.KV_CACHE_INSUFFICIENT:
        draft = _Draft(
            facts,
            Kind.FRAGMENTED,
            0.85,
            "GPU memory exhausted at start-up: the KV cache does not fit in what is left after the weights",
        )
        draft.sub_kind = MemoryKind.EXHAUSTION
        return draft.cite(root, Role.ROOT_CAUSE).cite_consequences(root).done()
    return _crash(facts, root)


def _collective(facts: Facts, root: Event) -> Verdict:
    reports = facts.t.of(Signal.NCCL_WATCHDOG_TIMEOUT)
    work = root.data if isinstance(root.data, NcclWork) else NcclWork(None)
    ranks = {getattr(e.data, "rank", None) for e in reports} - {None}
    seqs = {getattr(e.data, "seq", None) for e in reports} - {None}
    what = f"{work.op or 'a collective'}"
    if work.seq is not None:
        what += f" #{work.seq}"
    minutes = f" for {work.ran_ms / 60000:.0f} min" if work.ran_ms else ""
    draft = _Draft(
        facts,
        Kind.DEADLOCKED,
        0.8,
        f"deadlocked: NCCL {what} never completed{minutes} "
        f"({len(ranks) or 1} rank{'s' if len(ranks) > 1 else ''} reported it)",
    )
    if len(ranks) > 1 and len(seqs) == 1:
        draft.confidence += 0.1
        draft.notes.append(f"ranks {sorted(ranks)} are all stuck at the same collective (SeqNum {seqs.pop()})")
    draft.cite(root, Role.ROOT_CAUSE, "only this message marks a collective that never completed")
    for event in reports[1:4]:
        draft.cite(event, Role.SUPPORTING)
    for event in facts.t.of(Signal.NCCL_WORK_STATUS)[:3]:
        draft.cite(event, Role.SUPPORTING, "last enqueued vs completed collective on this rank")
    stalls = [e for e, s in facts.stats if stalled(s) and facts.at(e) < facts.at(root)]
    if stalls:
        draft.cite(stalls[-1], Role.SUPPORTING, "requests running, no tokens produced")
    return draft.cite_consequences(root).done()


def _oom(facts: Facts, root: Event) -> Verdict:
    oom = facts.oom(root)
    when = {"start-up": "at start-up", "serving": "while serving"}.get(facts.phase_at(root), "")
    draft = _Draft(facts, Kind.FRAGMENTED, 0.8, "")
    tried, reserved = oom.tried, oom.reserved_unallocated
    if tried is not None and reserved is not None and (reserved >= tried or reserved >= 0.5 * tried >= 256 << 20):
        draft.sub_kind = MemoryKind.FRAGMENTATION
        draft.confidence = 0.85 if reserved >= tried else 0.65
        draft.headline = (
            f"GPU memory fragmented{_pad(when)}: CUDA OOM asking for {format_bytes(tried)} while "
            f"{format_bytes(reserved)} sat reserved but unallocated in PyTorch's cache"
        )
        note = "reserved-but-unallocated ≥ the failed request: the memory exists but is split"
    else:
        draft.sub_kind = MemoryKind.EXHAUSTION
        if tried is not None:
            draft.headline = (
                f"GPU memory exhausted{_pad(when)}: CUDA OOM asking for {format_bytes(tried)} with "
                f"{format_bytes(oom.free)} free and only {format_bytes(reserved)} reserved-but-unallocated"
            )
            note = "little reserved-but-unallocated memory: not fragmentation, the GPU is full"
        else:
            draft.headline = f"GPU memory exhausted{_pad(when)}: CUDA out of memory"
            note = "the message carries no allocator numbers"
        draft.notes.append(
            "PyTorch prints the expandable_segments hint in every OOM; it only helps when "
            "reserved-but-unallocated memory is large"
        )
    draft.cite(root, Role.ROOT_CAUSE, note)
    for event in facts.t.of(Signal.CUDA_OOM)[1:3]:
        draft.cite(event, Role.SUPPORTING)
    return draft.cite_consequences(root).done()


def _pad(text: str) -> str:
    return f" {text}" if text else ""


def _crash(facts: Facts, root: Event) -> Verdict:
    if root.signal is Signal.WORKER_DIED:
        signal_name = _KILLED.get(getattr(root.data, "exit_code", 0), "a signal")
        headline = f"crashed: a worker process was killed by {signal_name}"
        if signal_name == "SIGKILL":
            headline += " (the host's OOM killer or an operator)"
    else:
        headline = f"crashed: {root.text[:160]}"
    draft = _Draft(facts, Kind.CRASHED, 0.85, headline)
    earlier_stalls = [e for e in facts.before(root) if e.signal is Signal.SHM_STALL]
    draft.cite(root, Role.ROOT_CAUSE)
    for event in earlier_stalls[-2:]:
        draft.cite(event, Role.CONTEXT, "the wait before a crash is the crash in progress, not a deadlock")
    return draft.cite_consequences(root).done()


# ---- 2. benign exit -------------------------------------------------------------------------


def _benign_exit(facts: Facts) -> Verdict | None:
    """``Engine core proc ... died unexpectedly`` after all requests finished is a normal exit."""
    deaths = facts.t.of(Signal.WORKER_DIED)
    others = [e for e in facts.t.of(*FATAL) if e.signal is not Signal.WORKER_DIED]
    if not deaths or others or not all("Engine core proc" in e.text for e in deaths):
        return None
    death = deaths[0]
    finished = [
        e
        for e in facts.before(death)
        if isinstance(e.data, Progress) and e.data.total and e.data.done >= e.data.total
        and e.data.bar.startswith("Processed prompts")
    ]
    last_stats = [s for e, s in facts.stats if facts.at(e) < facts.at(death)]
    idle = bool(last_stats) and last_stats[-1].running == 0
    shutdown = facts.t.first_of(Signal.SHUTDOWN)
    if not (finished or idle or shutdown):
        return None
    draft = _Draft(
        facts,
        Kind.HEALTHY,
        0.75,
        "healthy: the engine core exited after all work finished (a benign message at shutdown)",
    )
    draft.cite(finished[-1] if finished else shutdown, Role.SUPPORTING, "all requests had finished")
    draft.cite(death, Role.CONTEXT, "printed at normal process exit; not a failure")
    return draft.done()


# ---- 3. timeouts ----------------------------------------------------------------------------


def _timeout_event(facts: Facts) -> Event | None:
    timeouts = facts.t.of(
        Signal.RPC_TIMEOUT, Signal.ITERATION_TIMEOUT, Signal.HEARTBEAT_LOST, Signal.ENGINE_READY_TIMEOUT
    )
    if timeouts:
        return timeouts[0]
    for event in facts.t.of(Signal.ENGINE_FATAL):
        if (facts.exception_of(event) or "").startswith(("TimeoutError", "asyncio.exceptions.TimeoutError")):
            return event
    return None


def _timeout(facts: Facts) -> Verdict | None:
    event = _timeout_event(facts)
    if event is None:
        return _startup_death(facts)
    if event.signal is Signal.ENGINE_READY_TIMEOUT:
        return _startup_timeout(facts, event)
    if event.signal is Signal.ITERATION_TIMEOUT:
        return _iteration_timeout(facts, event)
    if event.signal is Signal.HEARTBEAT_LOST:
        draft = _Draft(
            facts,
            Kind.SLOW,
            0.55,
            "slow: the V0 engine loop missed its heartbeat — usually one long step (prefill, guided decoding)",
        )
        draft.undecided = "a stack capture during the stall (engdiag snapshot) would show whether the loop was computing"
        return draft.cite(event, Role.ROOT_CAUSE).cite_consequences(event).done()
    return _step_timeout(facts, event)


def _startup_timeout(facts: Facts, event: Event) -> Verdict:
    work = facts.startup_work_before(event)
    draft = _Draft(
        facts,
        Kind.SLOW,
        0.75 if work else 0.65,
        "slow start-up: the engine was still starting when the API server gave up waiting for it",
    )
    draft.cite(event, Role.ROOT_CAUSE, "start-up timeouts are usually slow work, not a hang")
    for item in work[-3:]:
        draft.cite(item, Role.SUPPORTING, "start-up work was still advancing")
    if not work:
        draft.undecided = "the log shows no start-up progress lines; the full log from launch would show what was slow"
    return draft.cite_consequences(event).done()


def _startup_death(facts: Facts) -> Verdict | None:
    """A process died during start-up while weights were still loading: the ready timeout."""
    deaths = facts.t.of(Signal.PROCESS_EXCEPTION)
    if not deaths:
        return None
    death = deaths[0]
    work = facts.startup_work_before(death)
    if facts.served_before(death) or not work or facts.exception_of(death):
        return None
    draft = _Draft(
        facts,
        Kind.SLOW,
        0.55,
        "slow start-up: a vLLM process died while start-up work was still advancing",
    )
    draft.cite(work[-1], Role.SUPPORTING, "start-up was still making progress")
    draft.cite(death, Role.ROOT_CAUSE, "the exception is cut off in this log")
    draft.undecided = (
        "the end of the traceback: TimeoutError('Timed out waiting for engine core processes to start') "
        "confirms the start-up timeout"
    )
    return draft.cite_consequences(death).done()


def _iteration_timeout(facts: Facts, event: Event) -> Verdict:
    stalls = [e for e, s in facts.stats if stalled(s) and facts.at(e) < facts.at(event)]
    if facts.multi_rank and len(stalls) >= 3:
        draft = _Draft(
            facts,
            Kind.DEADLOCKED,
            0.6,
            "deadlocked: requests ran without producing a token until the V0 iteration timeout fired",
        )
        draft.cite(event, Role.ROOT_CAUSE)
        for stall in stalls[-2:]:
            draft.cite(stall, Role.SUPPORTING, "running requests, 0 tokens/s")
        return draft.cite_consequences(event).done()
    draft = _Draft(
        facts,
        Kind.SLOW,
        0.65,
        "slow: one V0 engine step outlasted VLLM_ENGINE_ITERATION_TIMEOUT_S "
        "(a long prefill, guided decoding or a loaded CPU), and the engine was declared dead",
    )
    draft.cite(event, Role.ROOT_CAUSE, "V0 iteration timeouts are usually a busy engine, not a dead one")
    last = facts.stats[-1] if facts.stats else None
    if last is not None and last[1].running == 0 and stalled(last[1]) is False:
        draft.cite(last[0], Role.CONTEXT, "Running 0 at 0 tokens/s: idle or CPU-side work, not a stuck batch")
    return draft.cite_consequences(event).done()


def _step_timeout(facts: Facts, event: Event) -> Verdict:
    """V1 ``RPC call to execute_model timed out`` (or V0 RPC): slow step or stuck worker?"""
    call = event.data.call if isinstance(event.data, Timeout) and event.data.call else "execute_model"
    before = facts.before(event)
    served = facts.served_before(event)
    compiles = [
        e
        for e in before
        if e.signal is Signal.COMPILE and (facts.served_before(e) or "inference" in e.text)
    ]
    startup = [e for e in before if is_startup_work(e)]
    dump = facts.last_crash_dump
    core_stalls = [e for e in facts.shm_stalls(workers=False) if facts.at(e) < facts.at(event)]
    stalled_stats = [e for e, s in facts.stats if stalled(s) and facts.at(e) < facts.at(event)]
    if compiles:
        draft = _Draft(
            facts,
            Kind.SLOW,
            0.8,
            f"slow: a worker was compiling kernels during inference when the {call} RPC timed out",
        )
        draft.cite(compiles[-1], Role.ROOT_CAUSE, "JIT/compilation outside warm-up can take minutes")
        draft.cite(event, Role.SUPPORTING)
        for stall in core_stalls[-2:]:
            draft.cite(stall, Role.CONTEXT, "the engine core waited on the compiling worker")
        return draft.cite_consequences(event).done()
    if not served and startup:
        draft = _Draft(
            facts,
            Kind.SLOW,
            0.6,
            f"slow start-up: the {call} RPC timed out during warm-up, before the engine served requests",
        )
        draft.cite(startup[-1], Role.SUPPORTING, "start-up work was in progress")
        return draft.cite(event, Role.ROOT_CAUSE).cite_consequences(event).done()
    if dump is not None and dump.total <= DECODE_STEP_TOKENS and dump.new_requests == 0:
        draft = _Draft(
            facts,
            Kind.DEADLOCKED,
            0.85,
            f"deadlocked: the {call} RPC timed out on a decode step of {dump.total} tokens, "
            "which takes milliseconds — a worker never answered",
        )
        draft.cite(event, Role.ROOT_CAUSE)
        draft.cite(facts.t.last_of(Signal.SCHEDULED_TOKENS), Role.SUPPORTING, "a decode step cannot be slowness")
        for stall in stalled_stats[-1:]:
            draft.cite(stall, Role.SUPPORTING, "requests running, 0 tokens/s: no step completed after this")
        for stall in core_stalls[-2:]:
            draft.cite(stall, Role.SUPPORTING, "the engine core waited on the workers")
        return draft.cite_consequences(event).done()
    if dump is not None and (dump.total >= HUGE_STEP_TOKENS or (dump.largest_new_prompt or 0) >= HUGE_STEP_TOKENS):
        draft = _Draft(
            facts,
            Kind.SLOW,
            0.55,
            f"slow: the {call} RPC timed out on a very large step ({dump.total} tokens scheduled)",
        )
        draft.cite(facts.t.last_of(Signal.SCHEDULED_TOKENS), Role.ROOT_CAUSE, "an unchunked long prefill")
        draft.cite(event, Role.SUPPORTING)
        draft.undecided = "whether the GPU was busy: a snapshot during the next stall shows compute vs a wait"
        return draft.cite_consequences(event).done()
    confidence = 0.6 + (0.1 if core_stalls else 0) + (0.05 if len(core_stalls) >= 3 else 0)
    confidence += 0.05 if stalled_stats else 0
    draft = _Draft(
        facts,
        Kind.DEADLOCKED,
        confidence,
        f"deadlocked: a worker did not answer the {call} RPC before the step timeout, with no sign of slow work",
    )
    draft.cite(event, Role.ROOT_CAUSE)
    for stall in core_stalls[-3:]:
        draft.cite(stall, Role.SUPPORTING, "the engine core waited on the workers, minute after minute")
    for stall in stalled_stats[-1:]:
        draft.cite(stall, Role.SUPPORTING, "requests running, 0 tokens/s")
    if not core_stalls and not stalled_stats:
        draft.undecided = (
            "the log shows no stall lines or crash dump; a snapshot during the next stall "
            "(engdiag snapshot) or the scheduler dump would decide"
        )
    return draft.cite_consequences(event).done()


# ---- 4. other fatal errors --------------------------------------------------------------------


def _fatal(facts: Facts) -> Verdict | None:
    fatal = facts.t.of(
        Signal.ENGINE_FATAL,
        Signal.ENGINE_DEAD,
        Signal.WORKER_EXCEPTION,
        Signal.WORKER_DIED,
        Signal.PROCESS_EXCEPTION,
        Signal.NCCL_ABORT,
    )
    if not fatal:
        return None
    root = fatal[0]
    exception = next((facts.exception_of(e) for e in fatal if facts.exception_of(e)), None)
    headline = "crashed: the engine died with " + (exception[:160] if exception else "an error (no timeout, no OOM)")
    if root.signal is Signal.NCCL_ABORT and not exception:
        headline = (
            "crashed: the NCCL watchdog tore the engine process down after a GPU error "
            "(no collective timed out)"
        )
    draft = _Draft(facts, Kind.CRASHED, 0.65 if exception else 0.55, headline)
    if root.signal is Signal.NCCL_ABORT:
        draft.notes.append(
            "ncclCommWatchdog frames without 'Watchdog caught collective operation timeout' are the "
            "watchdog tearing the process down after a CUDA error, not a stuck collective"
        )
    draft.cite(root, Role.ROOT_CAUSE)
    if not exception:
        draft.undecided = "the first error of the dying process (often a CUDA error) is not in this log"
    return draft.cite_consequences(root).done()


# ---- 5. no failure: stalls, memory pressure, benign lines -----------------------------------


def _stall(facts: Facts) -> Verdict | None:
    trailing = facts.trailing_stalled_stats()
    progress_after = facts.t.last_progress
    if trailing and (progress_after is None or facts.at(progress_after) < facts.at(trailing[0])):
        draft = _Draft(
            facts,
            Kind.DEADLOCKED,
            0.55 + (0.1 if len(trailing) >= 3 else 0) + (0.1 if facts.shm_stalls(workers=False) else 0),
            f"deadlocked: {trailing[-1].data.running} requests running, no token produced since "  # type: ignore[union-attr]
            f"{trailing[0].stamp.text if trailing[0].stamp else 'the last stats line'}",
        )
        draft.cite(trailing[0], Role.ROOT_CAUSE, "0 tokens/s with requests running: no engine step completed")
        for event in trailing[1:3]:
            draft.cite(event, Role.SUPPORTING)
        for event in facts.shm_stalls(workers=False)[-2:]:
            draft.cite(event, Role.SUPPORTING)
        draft.undecided = "a stack capture now (engdiag snapshot) shows where the workers wait"
        return draft.done()
    core = facts.shm_stalls(workers=False)
    by_proc: dict[str, list[Event]] = {}
    for event in core:
        by_proc.setdefault(event.proc.label if event.proc else "?", []).append(event)
    repeated = {name: events for name, events in by_proc.items() if len(events) >= 2}
    if repeated:
        first = min((events[0] for events in repeated.values()), key=facts.at)
        if not facts.startup_work_before(first) or facts.served_before(first):
            draft = _Draft(
                facts,
                Kind.DEADLOCKED,
                0.55 + (0.1 if len(repeated) > 1 else 0),
                f"deadlocked: {len(repeated)} engine process{'es' if len(repeated) > 1 else ''} "
                "waited on the shared-memory queue minute after minute without recovering",
            )
            draft.cite(first, Role.ROOT_CAUSE, "the engine core waits for workers that never answer")
            for events in repeated.values():
                draft.cite(events[-1], Role.SUPPORTING, f"{len(events)} consecutive waits of {events[-1].data.interval_s} s")  # type: ignore[union-attr]
            draft.undecided = "a stack capture now (engdiag snapshot) shows which collective the workers are in"
            return draft.done()
    return _offline_stall(facts)


def _offline_stall(facts: Facts) -> Verdict | None:
    bars = [e for e in facts.t.of(Signal.PROGRESS_BAR) if e.data.bar.startswith("Processed prompts")]  # type: ignore[union-attr]
    if not bars:
        return None
    last = bars[-1]
    progress: Progress = last.data  # type: ignore[assignment]
    if progress.total is None or progress.done >= progress.total:
        return None
    later = [e for e in facts.after(last) if e.signal is not Signal.PROGRESS_BAR]
    if later:
        return None
    if not facts.multi_rank:
        draft = _Draft(facts, Kind.UNKNOWN, 0.3, "unknown: generation stopped at "
                       f"{progress.done}/{progress.total} prompts and the log ends")
        draft.cite(last, Role.CONTEXT)
        draft.undecided = "whether the process is still computing: engdiag snapshot on it"
        return draft.done()
    draft = _Draft(
        facts,
        Kind.DEADLOCKED,
        0.5,
        f"deadlocked: multi-GPU generation stuck at {progress.done}/{progress.total} prompts "
        "right after start-up, nothing logged since",
    )
    draft.cite(last, Role.ROOT_CAUSE, "no prompt completed and the log went silent")
    nccl = facts.t.last_of(Signal.PARALLEL_CONFIG)
    draft.cite(nccl, Role.CONTEXT, "GPUs talk over NCCL: a peer-to-peer hang stops the first step")
    draft.undecided = "a stack capture now (engdiag snapshot) shows whether the ranks sit in a collective"
    return draft.done()


def _memory_pressure(facts: Facts) -> Verdict | None:
    preemptions = facts.t.of(Signal.PREEMPTION)
    cumulative = max((e.data.cumulative or 0 for e in preemptions if isinstance(e.data, Preemption)), default=0)
    v1_preempt = [e for e, s in facts.stats if s.preemptions]
    peak = facts.kv_peak or 0.0
    if (cumulative >= 50 or len(v1_preempt) >= 3) and peak >= KV_HIGH_PCT:
        draft = _Draft(
            facts,
            Kind.FRAGMENTED,
            0.7,
            f"KV-cache pressure: usage reached {peak:.1f}% and the scheduler kept preempting requests"
            + (f" ({cumulative} preemptions)" if cumulative else ""),
        )
        draft.sub_kind = MemoryKind.KV_PRESSURE
        draft.cite((preemptions or v1_preempt)[-1], Role.ROOT_CAUSE, "requests evicted for lack of KV space")
        draft.cite(max(facts.stats, key=lambda pair: pair[1].gpu_kv_pct or 0)[0], Role.SUPPORTING)
        return draft.done()
    series = [(e, s) for e, s in facts.stats if s.gpu_kv_pct is not None]
    tail = series[-3:]
    if len(tail) == 3 and tail[-1][1].gpu_kv_pct >= KV_HIGH_PCT:  # type: ignore[operator]
        values = [s.gpu_kv_pct for _, s in tail]
        if values == sorted(values) and values[-1] - values[0] >= 2:  # type: ignore[operator]
            last = tail[-1][1]
            starving = last.generation_tps < 0.05 * max(last.prompt_tps, 1.0)
            draft = _Draft(
                facts,
                Kind.FRAGMENTED,
                0.55 if starving else 0.4,
                f"KV-cache pressure: GPU KV cache usage climbing to {values[-1]:.1f}%"
                + (" while decoding has almost stopped" if starving else ""),
            )
            draft.sub_kind = MemoryKind.KV_PRESSURE
            draft.cite(tail[-1][0], Role.ROOT_CAUSE, "usage near full and still rising")
            draft.cite(tail[0][0], Role.SUPPORTING)
            draft.undecided = "whether preemptions follow: the next stats lines (Preemptions: N) or /metrics"
            return draft.done()
    return None


def _benign(facts: Facts) -> Verdict | None:
    if not facts.events:
        return None
    worker_stalls = facts.shm_stalls(workers=True)
    core_stalls = facts.shm_stalls(workers=False)
    if worker_stalls or core_stalls:
        stalls = worker_stalls + core_stalls
        reason = (
            "a worker waiting for work while the engine is idle"
            if worker_stalls and not core_stalls
            else "start-up work (compile, weight loading, warm-up)"
        )
        draft = _Draft(facts, Kind.HEALTHY, 0.6, f"healthy: the shared-memory wait lines are {reason}")
        for event in stalls[:2]:
            draft.cite(event, Role.CONTEXT, "benign on an idle worker and during start-up")
        return draft.done()
    draft = _Draft(facts, Kind.HEALTHY, 0.7, "healthy: no timeout, stall, memory or crash signal in the log")
    draft.cite(facts.t.last_progress, Role.CONTEXT, "last progress")
    return draft.done()


_RULES: tuple[Callable[[Facts], Verdict | None], ...] = (
    _hard_fault,
    _benign_exit,
    _timeout,
    _fatal,
    _stall,
    _memory_pressure,
    _benign,
)


def classify(timeline: Timeline) -> Verdict:
    """The verdict for a timeline."""
    facts = Facts(timeline)
    if not timeline.events:
        return Verdict(
            kind=Kind.UNKNOWN,
            confidence=0.0,
            headline="unknown: no vLLM lines found",
            undecided="a vLLM server or engine log (API server stdout, kubectl logs, journald)",
        )
    for rule in _RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    raise AssertionError("the last rule always decides")  # pragma: no cover

