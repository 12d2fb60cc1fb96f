"""Samples → per-thread reports: one sample cannot tell stuck from moving, several can (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from engdiag.snapshot.frames import categorize
from engdiag.snapshot.model import IDLE_POLLING, Motion, ThreadReport, ThreadSample


def _signature(sample: ThreadSample) -> tuple[tuple[str, str, int], ...]:
    return tuple((frame.name, frame.filename, frame.line) for frame in sample.frames)


def threads_across(samples: Sequence[Sequence[ThreadSample]]) -> tuple[ThreadReport, ...]:
    """One report per thread seen in any sample, ordered by first appearance."""
    seen: dict[int, list[ThreadSample]] = {}
    for sample in samples:
        for thread in sample:
            seen.setdefault(thread.thread_id, []).append(thread)
    reports = []
    for history in seen.values():
        last = history[-1]
        category, reason = categorize(last.frames)
        if len(history) < 2:
            motion = Motion.ONCE
        elif len({_signature(t) for t in history}) > 1:
            motion = Motion.MOVING
        else:
            motion = Motion.WAITING if category in IDLE_POLLING else Motion.STUCK
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
            )
        )
    return tuple(reports)
