"""Samples → per-thread reports: is each thread stuck, moving, or waiting for work? (pure)

One sample cannot tell stuck from moving; several can, from three signs combined:

- the stack changed between samples (progress, even inside a collective);
- CPU time advanced between samples (psutil's per-thread times, read next to
  every dump) while the Python frame stayed the same: a matmul, a kernel
  launch, a child spinning — busy, not stuck;
- py-spy's ``active`` flag in every sample (the thread was running, not
  sleeping in a syscall) where CPU times are not available.

A thread in a blocking wait (collective, CUDA sync, shared-memory queue, lock)
whose stack never changes stays stuck even when it burns CPU: NCCL and CUDA
synchronisation spin on the host while they hang.
"""

from __future__ import annotations

from collections.abc import Sequence

from engdiag.snapshot.frames import categorize, categorize_at
from engdiag.snapshot.model import (
    BLOCKING,
    IDLE_POLLING,
    Category,
    CpuTimes,
    Motion,
    ThreadReport,
    ThreadSample,
)

BUSY_CPU_SHARE = 0.2
"""CPU seconds per wall second above which an unchanged frame is working, not stuck."""
ACTIVE_CPU_SHARE = 0.02
"""With py-spy saying ``active`` in every sample, this little CPU is enough to call it busy."""


def _signature(sample: ThreadSample) -> tuple[object, ...]:
    """What must change for a thread to have moved.

    Inside a blocking wait only the wait function and the frames outside it
    count: a spin loop inside ``acquire_read`` or a zmq poll under it changes
    lines without any progress.
    """
    category, _, index = categorize_at(sample.frames)
    if category in BLOCKING and index is not None:
        inside = sample.frames[index]
        outer = tuple((f.name, f.filename, f.line) for f in sample.frames[index + 1:])
        return (category, inside.name, inside.filename, *outer)
    return tuple((frame.name, frame.filename, frame.line) for frame in sample.frames)


def _span(cpu: Sequence[CpuTimes | None]) -> tuple[CpuTimes, CpuTimes] | None:
    readings = [c for c in cpu if c is not None]
    if len(readings) < 2 or readings[-1].at <= readings[0].at:
        return None
    return readings[0], readings[-1]


def _thread_cpu(span: tuple[CpuTimes, CpuTimes] | None, os_tid: int | None) -> float | None:
    if span is None or os_tid is None:
        return None
    first, last = (dict(reading.threads) for reading in span)
    if os_tid not in first or os_tid not in last:
        return None
    return max(0.0, last[os_tid] - first[os_tid])


def process_cpu(cpu: Sequence[CpuTimes | None]) -> tuple[float | None, float | None]:
    """CPU seconds the process used between its first and last reading, and the wall seconds between them."""
    span = _span(cpu)
    if span is None:
        return None, None
    return max(0.0, span[1].process - span[0].process), span[1].at - span[0].at


def _motion(history: list[ThreadSample], category, cpu_s: float | None, wall: float | None) -> tuple[Motion, str | None]:
    if len(history) < 2:
        return Motion.ONCE, None
    if len({_signature(t) for t in history}) > 1:
        return Motion.MOVING, "the stack changed between samples"
    if category in BLOCKING:
        return Motion.STUCK, None
    if category in IDLE_POLLING:
        return Motion.WAITING, None
    share = cpu_s / wall if cpu_s is not None and wall else None
    if share is not None and share >= BUSY_CPU_SHARE:
        return Motion.MOVING, f"busy: CPU +{cpu_s:.2f} s in {wall:.2f} s with an unchanged frame"
    if all(t.active for t in history) and (share is None or share >= ACTIVE_CPU_SHARE):
        return Motion.MOVING, "busy: running (py-spy: active) in every sample with an unchanged frame"
    return Motion.STUCK, None


def _category(history: list[ThreadSample]) -> tuple[Category, str]:
    """The category of the latest sample a rule recognised, so one sample caught between known frames
    (a model loop's own line between two layer calls) does not erase what the thread was doing."""
    for back, sample in enumerate(reversed(history)):
        category, reason = categorize(sample.frames)
        if category is not Category.UNKNOWN:
            return category, reason if back == 0 else f"{reason} (in sample {len(history) - back} of {len(history)})"
    return categorize(history[-1].frames)


def threads_across(samples: Sequence[Sequence[ThreadSample]], cpu: Sequence[CpuTimes | None] = ()) -> tuple[ThreadReport, ...]:
    """One report per thread seen in any sample, ordered by first appearance.

    ``cpu`` holds the process's CPU reading taken with each sample (any may be
    None); without it motion rests on the stacks and py-spy's ``active`` flag.
    """
    seen: dict[int, list[ThreadSample]] = {}
    for sample in samples:
        for thread in sample:
            seen.setdefault(thread.thread_id, []).append(thread)
    span = _span(cpu)
    wall = span[1].at - span[0].at if span else None
    reports = []
    for history in seen.values():
        last = history[-1]
        category, reason = _category(history)
        cpu_s = _thread_cpu(span, last.os_tid)
        motion, progress = _motion(history, category, cpu_s, wall)
        reports.append(
            ThreadReport(
                thread_id=last.thread_id,
                os_tid=last.os_tid,
                name=last.name,
                category=category,
                motion=motion,
                active=any(t.active for t in history),
                gil=any(t.gil for t in history),
                frames=last.frames,
                reason=reason,
                progress=progress,
                cpu_s=None if cpu_s is None else round(cpu_s, 3),
                stacks=tuple(t.frames for t in history),
            )
        )
    return tuple(reports)
