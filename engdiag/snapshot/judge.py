"""Reports of a capture (and GPU state) → verdict: deadlocked, slow, fragmented, healthy or unknown (pure).

Rules, first match wins:

- fragmented: threads in the CUDA allocator, more so with a GPU nearly full;
- deadlocked (lock cycle): threads of one process stuck on different locks —
  they are the root cause, a thread joining them a consequence (``hang.py``);
- deadlocked (wait-for): ranks wait in a collective with no rank progressing —
  the rank that never joined, ranks in different ops, a receive nobody sends
  are named (``waitfor.py``, ``hang.py``);
- slow: threads progressing — stacks changing, CPU advancing, native code
  running — in the workers (or anywhere, in a tree without workers);
- slow (GPU at work): the one process waiting in a CUDA sync, with no peer
  rank to wait for, on a GPU that is ≥ 90 % busy — its kernel is running;
- deadlocked (no collective): every worker stuck in a CUDA sync, a
  shared-memory wait or a lock while the engine core waits on them; or threads
  blocked with unchanged stacks elsewhere;
- healthy: everyone idle, waiting for work; unknown otherwise.
"""

from __future__ import annotations

from engdiag.analysis.verdict import Kind, MemoryKind, Verdict
from engdiag.analysis.verdict import Role as EvidenceRole
from engdiag.roles import Role
from engdiag.snapshot.advice import busy_gpus, evidence, steps
from engdiag.snapshot.frames import is_join, waits_for_work
from engdiag.snapshot.hang import core_waits, lock_cycle, wait_for
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
from engdiag.units import plural

GPU_FULL = 0.95


def _waiting_for_work(thread: ThreadReport) -> bool:
    return waits_for_work(thread.category, thread.frames)


def _busy(threads: tuple[ThreadReport, ...]) -> list[ThreadReport]:
    """Threads doing or waiting on something other than new work."""
    return [t for t in threads if t.category not in IDLE_POLLING and not _waiting_for_work(t)]


def _stuck(process: ProcessReport) -> list[ThreadReport]:
    return [t for t in process.threads if t.motion is Motion.STUCK and t.category in BLOCKING]


def _progressing(process: ProcessReport) -> list[ThreadReport]:
    """Threads with signs of work: moving outside idle waits, or caught once computing."""
    return [
        t for t in process.threads
        if t.category not in IDLE_POLLING
        and (t.motion is Motion.MOVING or (t.motion is Motion.ONCE and t.category in WORKING))
    ]


def _gpu_memory_fraction(nvml: NvmlState) -> float | None:
    fractions = []
    for gpu in nvml.gpus:
        memory = gpu.fields.get("memory")
        if isinstance(memory, dict) and memory.get("total"):
            fractions.append(memory["used"] / memory["total"])
    return max(fractions) if fractions else None


def judge(processes: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict:
    """The verdict for one capture (pure: reports in, verdict out)."""
    captured = [p for p in processes if p.threads]
    if not captured:
        return Verdict(Kind.UNKNOWN, 0.0, "unknown: no process could be sampled",
                       undecided="a capture with ptrace permission (see the errors per process)")
    for rule in (_allocator, lock_cycle, wait_for, _slow, _waits_on_busy_gpu, _workers_deadlocked, _locked,
                 _healthy):
        verdict = rule(captured, nvml, options)
        if verdict is not None:
            return verdict
    busy = [(p, t) for p in captured for t in _busy(p.threads)]
    found = tuple(evidence(p, t, EvidenceRole.CONTEXT) for p, t in busy[:6])
    undecided = (
        "more samples: with one sample a waiting thread cannot be told from a stuck one (--samples 3)"
        if options.samples < 2
        else "native frames (--native) show where threads without a known Python frame are"
    )
    return Verdict(Kind.UNKNOWN, 0.3, "unknown: the stacks match no known hang, slowness or idle pattern",
                   evidence=found, undecided=undecided, next_steps=steps(Kind.UNKNOWN, processes, options))


def _allocator(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    hits = [(p, t) for p in captured for t in p.threads if t.category is Category.ALLOCATOR]
    if not hits:
        return None
    fraction = _gpu_memory_fraction(nvml)
    full = fraction is not None and fraction >= GPU_FULL
    confidence = 0.75 if full else 0.6
    headline = f"fragmented: {plural(len(hits), 'thread')} in the CUDA allocator"
    if full:
        headline += f" with a GPU {fraction:.0%} full"
    found = tuple(evidence(p, t, EvidenceRole.ROOT_CAUSE, "allocation in progress or waiting") for p, t in hits[:4])
    return Verdict(Kind.FRAGMENTED, confidence, headline, sub_kind=MemoryKind.FRAGMENTATION if not full else MemoryKind.EXHAUSTION,
                   evidence=found, next_steps=steps(Kind.FRAGMENTED, captured, options))


def _slow(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    engine = [p for p in captured if p.role in (Role.WORKER, Role.ENGINE_CORE)]
    working = [(p, t) for p in (engine or captured) for t in _progressing(p)]
    if not working:
        return None
    moving = [(p, t) for p, t in working if t.motion is Motion.MOVING]
    kinds = sorted({t.category.value for _, t in working} - {Category.UNKNOWN.value})
    confidence = 0.75 if moving else 0.45
    signs = sorted({(t.progress or "").split(":")[0] for _, t in moving if t.progress})
    how = f"progressing ({'; '.join(signs)})" if moving else "caught computing in a single sample"
    who = ", ".join(dict.fromkeys(
        p.ranks.label() or (p.role.value.replace("_", " ") if p.role is not Role.OTHER else f"pid {p.info.pid}")
        for p, _ in working))
    what = f" ({'/'.join(kinds)})" if kinds else ""
    headline = f"slow: {plural(len(working), 'thread')}{what} in {who} {how} — alive, not stuck"
    found = tuple(evidence(p, t, EvidenceRole.ROOT_CAUSE, t.progress or "") for p, t in (moving or working)[:6])
    return Verdict(Kind.SLOW, confidence, headline, evidence=found, next_steps=steps(Kind.SLOW, captured, options),
                   undecided=None if moving else "more samples (--samples 3) to see the stacks move")


GPU_WORKING = 50
"""Utilisation (%) that shows a GPU running kernels under a process's sync.  Not 90: a native capture pauses
the process ~0.3 s a sample, so it cannot queue its next kernel, and a GPU busy with 20 ms kernels read 80 %
on a real H200 (tests/test_cuda_gpu.py)."""


def _gpus_busy_for(process: ProcessReport, nvml: NvmlState) -> list[int]:
    """GPUs this process uses that run kernels (all such GPUs when NVML's pids are not the tree's: containers)."""
    busy = busy_gpus(nvml, GPU_WORKING)
    own = [gpu.fields.get("index", -1) for gpu in nvml.gpus if any(p["pid"] == process.info.pid for p in gpu.processes)]
    return [i for i in busy if i in own] if own or not nvml.pid_note else busy


def _has_peers(captured: list[ProcessReport], process: ProcessReport) -> bool:
    """Other ranks it could be waiting for: a second worker, or an index ≥ 1 in its name (a group of ≥ 2)."""
    ranks = process.ranks
    return (sum(p.role is Role.WORKER for p in captured) > 1
            or any((ranks.rank, ranks.tp, ranks.pp, ranks.dp, ranks.ep)))


def _waits_on_busy_gpu(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    """A process alone in a CUDA sync on a busy GPU is waiting for a kernel that runs: slow, not stuck.

    With no peer rank there is nothing to deadlock on, and unchanged Python stacks are all a long
    kernel shows (a long prefill on a TP=1 worker).  Seen on a real H200 (tests/test_cuda_gpu.py):
    a loop of 20 ms kernels and one ten-minute kernel both sit in torch.cuda.synchronize in every
    sample, the GPU at 80-100 %.  An idle GPU under the same wait stays a deadlock (rules below).
    """
    syncing = [(p, t) for p in captured for t in _stuck(p) if t.category is Category.CUDA_SYNC]
    if len({p.info.pid for p, _ in syncing}) != 1:
        return None
    process = syncing[0][0]
    gpus = _gpus_busy_for(process, nvml)
    if not gpus or _has_peers(captured, process):
        return None
    who = process.ranks.label() or (process.role.value.replace("_", " ") if process.role is not Role.OTHER
                                    else f"pid {process.info.pid}")
    busy = ", ".join(f"GPU {i}" for i in gpus)
    found = [evidence(process, t, EvidenceRole.ROOT_CAUSE, f"waits for its kernels; {busy} ≥ {GPU_WORKING} % busy")
             for _, t in syncing[:2]]
    found += [evidence(p, t, EvidenceRole.CONSEQUENCE, "the engine core waits for the worker's answer")
              for p, t in core_waits(captured)[:1]]
    return Verdict(
        Kind.SLOW, 0.55,
        f"slow: {who} waits in a CUDA sync on {busy}, which is busy — GPU work in progress, no peer rank to deadlock on",
        evidence=tuple(found), next_steps=steps(Kind.SLOW, captured, options),
        undecided=(f"a second snapshot minutes later: the same wait with {busy} still busy, for longer than any "
                   f"step should take, is a kernel that never ends (engdiag snapshot --native {process.info.pid})"),
    )


def _workers_deadlocked(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    workers = [p for p in captured if p.role is Role.WORKER]
    if not workers or not all(_stuck(w) for w in workers):
        return None
    waits = core_waits(captured)
    if not waits and all(_waiting_for_work(t) for w in workers for t in _stuck(w)):
        return None
    categories = sorted({t.category.value for w in workers for t in _stuck(w)})
    confidence = 0.8 + (0.1 if waits else 0)
    headline = (
        f"deadlocked: all {plural(len(workers), 'worker')} stuck with unchanged stacks in {', '.join(categories)}"
        + (" while the engine core waits on them" if waits else "")
    )
    found = [evidence(w, _stuck(w)[0], EvidenceRole.ROOT_CAUSE, "identical in every sample") for w in workers[:8]]
    found += [evidence(p, t, EvidenceRole.CONSEQUENCE, "the engine core waits for the workers' answer") for p, t in waits[:1]]
    notes = []
    gpus = busy_gpus(nvml)
    if gpus and "cuda_sync" in categories:
        notes.append(f"GPU(s) {gpus} at ≥ 90% utilisation with no progress: kernels spinning on a peer that never arrives")
    return Verdict(Kind.DEADLOCKED, confidence, headline, evidence=tuple(found), notes=tuple(notes),
                   next_steps=steps(Kind.DEADLOCKED, captured, options))


def _locked(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    waiting_core = bool(core_waits(captured))
    stuck = [(p, t) for p in captured for t in _stuck(p) if waiting_core or not _waiting_for_work(t)]
    if not stuck:
        return None
    causes = [(p, t) for p, t in stuck if not is_join(t.reason)] or stuck
    joins = [(p, t) for p, t in stuck if is_join(t.reason) and (p, t) not in causes]
    headline = (f"deadlocked: {plural(len(causes), 'thread')} blocked with unchanged stacks "
                f"({', '.join(sorted({t.category.value for _, t in causes}))})")
    found = [evidence(p, t, EvidenceRole.ROOT_CAUSE, "identical in every sample") for p, t in causes[:6]]
    found += [evidence(p, t, EvidenceRole.CONSEQUENCE, "waits for other threads to finish") for p, t in joins[:2]]
    return Verdict(Kind.DEADLOCKED, 0.6, headline, evidence=tuple(found), next_steps=steps(Kind.DEADLOCKED, captured, options))


def _healthy(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    if any(_busy(p.threads) for p in captured):
        return None
    return Verdict(Kind.HEALTHY, 0.7 if options.samples > 1 else 0.5,
                   "healthy: every thread is idle, waiting for work",
                   next_steps=steps(Kind.HEALTHY, captured, options))
