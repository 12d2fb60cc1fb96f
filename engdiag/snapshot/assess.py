"""The pure entry point from samples to a verdict: ``assess(processes, nvml, options)``.

A capture is a list of ``ProcessSamples``: a process (``ProcessInfo``: pid,
parent, title, optional ``node``) and its dumps (``DumpResult``: threads with
their frames and py-spy's ``active`` flag, plus CPU times where they could be
read).  ``assess`` turns each into a ``ProcessReport`` (role, ranks, each
thread's category and motion) and judges the whole (``judge.judge``).  Nothing
here touches a process, a file or the clock, so a capture taken elsewhere — the
live tree (``capture.py``), stacks fetched from Ray's dashboard on several
nodes — is judged by the same code.  A caller that knows a process's role or
ranks better than its title does (Ray actors) passes them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engdiag.analysis.verdict import Verdict
from engdiag.roles import Ranks, Role, ranks_of
from engdiag.snapshot.frames import role_from_stacks
from engdiag.snapshot.judge import judge
from engdiag.snapshot.model import DumpResult, NvmlState, ProcessInfo, ProcessReport, SnapshotOptions
from engdiag.snapshot.motion import process_cpu, threads_across


@dataclass(frozen=True)
class ProcessSamples:
    """One process and its dumps, oldest first."""

    info: ProcessInfo
    results: tuple[DumpResult, ...] = ()
    role: Role | None = None
    """Overrides the role read from the title and stacks."""
    ranks: Ranks | None = None
    """Overrides the ranks read from the title."""


def _role(samples: ProcessSamples) -> tuple[Role, Ranks]:
    info = samples.info
    role = samples.role or info.title_role
    if role is Role.OTHER:
        role = role_from_stacks([t.frames for r in samples.results for t in r.threads]) or Role.OTHER
    return role, samples.ranks or ranks_of(info.title)


def report(samples: ProcessSamples) -> ProcessReport:
    """A process's samples → its report (threads with category and motion, CPU used, pauses)."""
    info = samples.info
    role, ranks = _role(samples)
    if info.skip_reason is not None:
        return ProcessReport(info, role, ranks, error=info.skip_reason, error_kind="skipped")
    good = [r for r in samples.results if r.error is None]
    failed = next((r for r in reversed(samples.results) if r.error is not None), None)
    cpu_s, wall_s = process_cpu([r.cpu for r in good])
    return ProcessReport(
        info=info,
        role=role,
        ranks=ranks,
        threads=threads_across([r.threads for r in good], [r.cpu for r in good]),
        error=failed.error if failed is not None and not good else None,
        error_kind=failed.kind if failed is not None and not good else None,
        samples=len(good),
        pause_ms=tuple(round(r.seconds * 1000, 1) for r in good),
        resumed=any(r.resumed for r in samples.results),
        cpu_s=None if cpu_s is None else round(cpu_s, 3),
        wall_s=None if wall_s is None else round(wall_s, 3),
    )


def assess(
    processes: Sequence[ProcessSamples],
    nvml: NvmlState | None = None,
    options: SnapshotOptions = SnapshotOptions(),
) -> tuple[tuple[ProcessReport, ...], Verdict]:
    """Every process's report and the verdict for the whole capture."""
    reports = tuple(report(p) for p in processes)
    state = nvml if nvml is not None else NvmlState(available=False, reason="GPU state not read for this capture")
    return reports, judge(list(reports), state, options)
