"""Evidence lines and next steps shared by the snapshot verdicts (pure)."""

from __future__ import annotations

from engdiag.analysis.verdict import Evidence, Kind, Step
from engdiag.analysis.verdict import Role as EvidenceRole
from engdiag.snapshot.model import NvmlState, ProcessReport, SnapshotOptions, ThreadReport, named_frames


def where(process: ProcessReport) -> str:
    """``pid 42 (worker TP1)``, with the node when the capture spans nodes."""
    ranks = process.ranks.label()
    node = f" on {process.info.node}" if process.info.node else ""
    return f"pid {process.info.pid}{node} ({process.role.value}{' ' + ranks if ranks else ''})"


def evidence(process: ProcessReport, thread: ThreadReport, role: EvidenceRole, note: str = "") -> Evidence:
    """One thread as evidence: where it is (its three innermost frames) and what it is to the verdict."""
    top = " ← ".join(frame.where for frame in named_frames(thread.frames)) or "no Python frames"
    name = thread.name or f"thread {thread.thread_id}"
    return Evidence(
        source=where(process),
        line=None,
        time=None,
        signal=f"{thread.category.value}/{thread.motion.value}",
        text=f"{name}: {top}",
        role=role,
        note=note,
    )


def steps(kind: Kind, processes: list[ProcessReport], options: SnapshotOptions, *, named: bool = False) -> tuple[Step, ...]:
    """What to do next; ``named``: the verdict already names the rank or threads at fault."""
    root = processes[0].info.pid if processes else "PID"
    steps: list[Step] = []
    if kind is Kind.DEADLOCKED:
        if not options.native:
            steps.append(Step("see the native frames under the stuck Python frames (NCCL, CUDA)", f"engdiag snapshot --native {root}"))
        if not named:
            steps.append(Step("check the other nodes' ranks: one rank missing from a collective hangs all the others"))
        steps += [
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


def busy_gpus(nvml: NvmlState, at_least: int = 90) -> list[int]:
    """GPUs at ≥ ``at_least`` % utilisation: kernels running (or spinning)."""
    return [
        gpu.fields.get("index", -1)
        for gpu in nvml.gpus
        if isinstance(gpu.fields.get("utilization_pct"), dict)
        and gpu.fields["utilization_pct"].get("gpu", 0) >= at_least
    ]
