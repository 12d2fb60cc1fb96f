"""Live stacks (and GPU state) → verdict: deadlocked, slow, fragmented, healthy or unknown (pure).

- deadlocked: every worker (or every rank of a group) stuck with an unchanged
  stack in a collective, a CUDA sync, a shared-memory wait or a lock, while the
  engine core waits on them; or threads of one process stuck on locks;
- fragmented: threads in the CUDA allocator, more so with a GPU nearly full;
- slow: workers computing, compiling or loading weights with moving stacks;
- healthy: everyone idle, waiting for work; unknown otherwise.
"""

from __future__ import annotations

from engdiag.analysis.verdict import Evidence, Kind, MemoryKind, Role as EvidenceRole, Step, Verdict
from engdiag.roles import Role
from engdiag.snapshot.frames import waits_on_workers
from engdiag.snapshot.model import (
    BLOCKING,
    IDLE_POLLING,
    WORKING,
    Category,
    Motion,
    NvmlState,
    ProcessReport,
    SnapshotOptions,
    ThreadReport,
)

GPU_FULL = 0.95


def _evidence(process: ProcessReport, thread: ThreadReport, role: EvidenceRole, note: str = "") -> Evidence:
    top = " ← ".join(frame.where for frame in thread.frames[:3]) or "no Python frames"
    name = thread.name or f"thread {thread.thread_id}"
    return Evidence(
        source=f"pid {process.info.pid} ({process.role.value}{' ' + process.ranks.label() if process.ranks.label() else ''})",
        line=None,
        time=None,
        signal=f"{thread.category.value}/{thread.motion.value}",
        text=f"{name}: {top}",
        role=role,
        note=note,
    )


def _busy(threads: tuple[ThreadReport, ...]) -> list[ThreadReport]:
    """Threads doing or waiting on something other than new work."""
    return [t for t in threads if t.category not in IDLE_POLLING and not _waiting_for_work(t)]


def _stuck(process: ProcessReport) -> list[ThreadReport]:
    return [t for t in process.threads if t.motion is Motion.STUCK and t.category in BLOCKING]


def _working(process: ProcessReport) -> list[ThreadReport]:
    return [t for t in process.threads if t.category in WORKING and t.motion in (Motion.MOVING, Motion.ONCE)]


def _gpu_memory_fraction(nvml: NvmlState) -> float | None:
    fractions = []
    for gpu in nvml.gpus:
        memory = gpu.fields.get("memory")
        if isinstance(memory, dict) and memory.get("total"):
            fractions.append(memory["used"] / memory["total"])
    return max(fractions) if fractions else None


def _busy_gpus(nvml: NvmlState) -> list[int]:
    return [
        gpu.fields.get("index", -1)
        for gpu in nvml.gpus
        if isinstance(gpu.fields.get("utilization_pct"), dict) and gpu.fields["utilization_pct"].get("gpu", 0) >= 90
    ]


def judge(processes: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict:
    """The verdict for one capture."""
    captured = [p for p in processes if p.threads]
    if not captured:
        return Verdict(Kind.UNKNOWN, 0.0, "unknown: no process could be sampled",
                       undecided="a capture with ptrace permission (see the errors per process)")
    for rule in (_allocator, _workers_deadlocked, _slow, _locked, _healthy):
        verdict = rule(captured, nvml, options)
        if verdict is not None:
            return verdict
    busy = [(p, t) for p in captured for t in _busy(p.threads)]
    evidence = tuple(_evidence(p, t, EvidenceRole.CONTEXT) for p, t in busy[:6])
    undecided = (
        "more samples: with one sample a waiting thread cannot be told from a stuck one (--samples 3)"
        if options.samples < 2
        else "native frames (--native) show where threads without a known Python frame are"
    )
    return Verdict(Kind.UNKNOWN, 0.3, "unknown: the stacks match no known hang, slowness or idle pattern",
                   evidence=evidence, undecided=undecided, next_steps=_steps(Kind.UNKNOWN, processes, options))


def _allocator(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    hits = [(p, t) for p in captured for t in p.threads if t.category is Category.ALLOCATOR]
    if not hits:
        return None
    fraction = _gpu_memory_fraction(nvml)
    full = fraction is not None and fraction >= GPU_FULL
    confidence = 0.75 if full else 0.6
    headline = f"fragmented: {len(hits)} thread(s) in the CUDA allocator"
    if full:
        headline += f" with a GPU {fraction:.0%} full"
    evidence = tuple(_evidence(p, t, EvidenceRole.ROOT_CAUSE, "allocation in progress or waiting") for p, t in hits[:4])
    return Verdict(Kind.FRAGMENTED, confidence, headline, sub_kind=MemoryKind.FRAGMENTATION if not full else MemoryKind.EXHAUSTION,
                   evidence=evidence, next_steps=_steps(Kind.FRAGMENTED, captured, options))


def _core_waits(captured: list[ProcessReport]) -> list[tuple[ProcessReport, ThreadReport]]:
    """Engine-core threads waiting for the workers' answer to a step."""
    return [
        (p, t) for p in captured if p.role is Role.ENGINE_CORE for t in p.threads
        if waits_on_workers(t.frames) and t.motion in (Motion.STUCK, Motion.WAITING, Motion.ONCE)
    ]


def _waiting_for_work(thread: ThreadReport) -> bool:
    """A worker's busy loop blocked reading the next broadcast: idle unless the core waits on it."""
    return thread.category is Category.SHM_WAIT and any(
        "worker_busy_loop" in f.name or "worker_main" in f.name for f in thread.frames
    )


def _workers_deadlocked(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    workers = [p for p in captured if p.role is Role.WORKER]
    if not workers or any(_working(w) for w in workers):
        return None
    if not all(_stuck(w) for w in workers):
        return None
    core_waits = _core_waits(captured)
    if not core_waits and all(_waiting_for_work(t) for w in workers for t in _stuck(w)):
        return None
    categories = sorted({t.category.value for w in workers for t in _stuck(w)})
    confidence = 0.8 + (0.1 if core_waits else 0)
    headline = (
        f"deadlocked: all {len(workers)} worker(s) stuck with unchanged stacks in {', '.join(categories)}"
        + (" while the engine core waits on them" if core_waits else "")
    )
    evidence = [_evidence(w, _stuck(w)[0], EvidenceRole.ROOT_CAUSE, "identical in every sample") for w in workers[:8]]
    evidence += [_evidence(p, t, EvidenceRole.SUPPORTING, "the engine core waits for the workers' answer") for p, t in core_waits[:1]]
    notes = []
    busy_gpus = _busy_gpus(nvml)
    if busy_gpus and "collective" in categories:
        notes.append(f"GPU(s) {busy_gpus} at ≥ 90% utilisation with no progress: NCCL kernels spinning on a peer that never arrives")
    return Verdict(Kind.DEADLOCKED, confidence, headline, evidence=tuple(evidence), notes=tuple(notes),
                   next_steps=_steps(Kind.DEADLOCKED, captured, options))


def _slow(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    working = [(p, t) for p in captured for t in _working(p)]
    if not working:
        return None
    moving = [(p, t) for p, t in working if t.motion is Motion.MOVING]
    kinds = sorted({t.category.value for _, t in working})
    confidence = 0.7 if moving else 0.45
    headline = f"slow: {len(working)} thread(s) {'/'.join(kinds)} with {'moving' if moving else 'single-sample'} stacks — alive, not stuck"
    evidence = tuple(_evidence(p, t, EvidenceRole.ROOT_CAUSE, "the stack changed between samples" if t.motion is Motion.MOVING else "")
                     for p, t in (moving or working)[:6])
    return Verdict(Kind.SLOW, confidence, headline, evidence=evidence, next_steps=_steps(Kind.SLOW, captured, options),
                   undecided=None if moving else "more samples (--samples 3) to see the stacks move")


def _locked(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    waiting_core = bool(_core_waits(captured))
    stuck = [(p, t) for p in captured for t in _stuck(p) if waiting_core or not _waiting_for_work(t)]
    if not stuck:
        return None
    locks = [(p, t) for p, t in stuck if t.category is Category.LOCK_WAIT]
    confidence = 0.75 if len(locks) >= 2 else 0.6
    what = "threads wait on each other's locks" if len(locks) >= 2 else f"{len(stuck)} thread(s) blocked with unchanged stacks"
    headline = f"deadlocked: {what} ({', '.join(sorted({t.category.value for _, t in stuck}))})"
    evidence = tuple(_evidence(p, t, EvidenceRole.ROOT_CAUSE, "identical in every sample") for p, t in stuck[:6])
    return Verdict(Kind.DEADLOCKED, confidence, headline, evidence=evidence, next_steps=_steps(Kind.DEADLOCKED, captured, options))


def _healthy(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    if any(_busy(p.threads) for p in captured):
        return None
    return Verdict(Kind.HEALTHY, 0.7 if options.samples > 1 else 0.5,
                   "healthy: every thread is idle, waiting for work",
                   next_steps=_steps(Kind.HEALTHY, captured, options))


def _steps(kind: Kind, processes: list[ProcessReport], options: SnapshotOptions) -> tuple[Step, ...]:
    root = processes[0].info.pid if processes else "PID"
    steps: list[Step] = []
    if kind is Kind.DEADLOCKED:
        if not options.native:
            steps.append(Step("see the native frames under the stuck Python frames (NCCL, CUDA)", f"engdiag snapshot --native {root}"))
        steps += [
            Step("check the other nodes' ranks: one rank missing from a collective hangs all the others"),
            Step("record collectives so the next hang names the diverging rank",
                 "export NCCL_DEBUG=INFO TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1"),
            Step("read the server's log around the hang", "engdiag analyze SERVER_LOG"),
        ]
    elif kind is Kind.SLOW:
        steps += [
            Step("size the step timeout so this work is not declared dead", "engdiag recommend-timeout --log SERVER_LOG"),
            Step("watch it: slow keeps moving, dead does not", f"engdiag snapshot --samples 5 --interval 2 {root}"),
        ]
    elif kind is Kind.FRAGMENTED:
        steps += [
            Step("let the allocator grow segments instead of splitting them", "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
            Step("leave more headroom", "--gpu-memory-utilization 0.85"),
        ]
    elif kind is Kind.UNKNOWN:
        steps.append(Step("take more samples, with native frames", f"engdiag snapshot --samples 5 --native {root}"))
    return tuple(steps)
