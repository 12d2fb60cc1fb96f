"""``engdiag snapshot``: a pid in, a ``Snapshot`` out — the tree, N parallel samples, GPU state, a verdict.

Every Python process of the tree is dumped once per sample, all in parallel,
so one sample of a 9-process tree costs about one dump.  A process that cannot
be read is recorded with its reason; the capture fails only when nothing at
all could be read.  Targets are never left stopped (``Dumper`` resumes them;
an interrupted capture resumes them here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

from engdiag.analysis.verdict import Verdict
from engdiag.errors import CaptureUnavailable, PermissionDenied, TargetGone, UsageError
from engdiag.roles import Ranks, Role, ranks_of
from engdiag.snapshot import kmsg, nvml, pyspy, tree
from engdiag.snapshot.frames import role_from_stacks
from engdiag.snapshot.judge import judge
from engdiag.snapshot.model import (
    DumpResult,
    NvmlState,
    ProcessInfo,
    ProcessReport,
    SnapshotOptions,
    XidRecord,
)
from engdiag.snapshot.motion import threads_across

MAX_PARALLEL = 32

Progress = Callable[[int, int], None]
"""Called with (sample number, samples) as sampling proceeds."""


@dataclass(frozen=True)
class Snapshot:
    """One capture of a process tree."""

    root_pid: int
    options: SnapshotOptions
    started_at: datetime
    seconds: float
    pyspy: str | None
    pyspy_version: str | None
    processes: tuple[ProcessReport, ...]
    nvml: NvmlState
    xid: XidRecord
    verdict: Verdict
    sample_seconds: tuple[float, ...] = field(default=())
    """Wall time of each parallel sample of the whole tree."""


def _role(info: ProcessInfo, results: list[DumpResult]) -> tuple[Role, Ranks]:
    role = info.title_role
    if role is Role.OTHER:
        role = role_from_stacks([t.frames for r in results for t in r.threads]) or Role.OTHER
    return role, ranks_of(info.title)


def _report(info: ProcessInfo, results: list[DumpResult]) -> ProcessReport:
    role, ranks = _role(info, results)
    if info.skip_reason is not None:
        return ProcessReport(info, role, ranks, error=info.skip_reason, error_kind="skipped")
    good = [r for r in results if r.error is None]
    failed = next((r for r in reversed(results) if r.error is not None), None)
    return ProcessReport(
        info=info,
        role=role,
        ranks=ranks,
        threads=threads_across([r.threads for r in good]),
        error=failed.error if failed is not None and not good else None,
        error_kind=failed.kind if failed is not None and not good else None,
        samples=len(good),
        pause_ms=tuple(round(r.seconds * 1000, 1) for r in results if r.error is None),
        resumed=any(r.resumed for r in results),
    )


def _no_capture(reports: list[ProcessReport], pid: int) -> None:
    """Raise the error that explains why nothing could be read."""
    kinds = {r.error_kind for r in reports if r.info.skip_reason is None}
    if not kinds or kinds == {None}:
        raise TargetGone(f"no Python process in the tree of pid {pid}",
                         hint="pass the pid of the vLLM API server or EngineCore (`pgrep -af vllm`)")
    if kinds == {"permission"}:
        raise PermissionDenied(f"ptrace permission denied for every process of pid {pid}'s tree")
    if kinds <= {"gone"}:
        raise TargetGone(f"pid {pid} and its children exited during the capture")
    if kinds <= {"not_python", "gone"}:
        raise TargetGone(f"pid {pid} is not a Python process py-spy can read",
                         hint="pass the pid of the vLLM API server or EngineCore (`pgrep -af vllm`)")
    first = next(r.error for r in reports if r.error)
    raise CaptureUnavailable(f"no process of pid {pid}'s tree could be sampled: {first}")


def take_snapshot(
    pid: int,
    options: SnapshotOptions = SnapshotOptions(),
    *,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Snapshot:
    """Capture the tree of ``pid``: stacks ``options.samples`` times, GPU state once."""
    if options.native and options.nonblocking:
        raise UsageError(
            "--native cannot go with --nonblocking: py-spy must pause the target to unwind native frames",
            hint="drop --native for a capture that never pauses, or --nonblocking for native frames",
        )
    if options.samples < 1 or options.interval_s < 0 or options.dump_timeout_s <= 0:
        raise UsageError("--samples must be at least 1, --interval not negative, --timeout positive")
    started_at = datetime.now(timezone.utc)
    started = time.monotonic()
    infos = tree.walk(pid)
    binary = pyspy.locate()
    dumper = pyspy.Dumper(binary, options)
    targets = [info for info in infos if info.skip_reason is None]
    results: dict[int, list[DumpResult]] = {info.pid: [] for info in infos}
    sample_seconds: list[float] = []
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(targets)))) as pool:
        try:
            for number in range(options.samples):
                began = time.monotonic()
                live = [t for t in targets if not results[t.pid] or results[t.pid][-1].kind not in ("gone", "not_python")]
                for info, result in zip(live, pool.map(lambda t: dumper.dump(t.pid), live), strict=True):
                    results[info.pid].append(result)
                sample_seconds.append(time.monotonic() - began)
                if progress is not None:
                    progress(number + 1, options.samples)
                if number + 1 < options.samples:
                    sleep(max(0.0, options.interval_s - (time.monotonic() - began)))
        finally:
            for info in targets:
                tree.resume_if_stopped(info.pid)
    reports = [_report(info, results[info.pid]) for info in infos]
    if not any(report.threads for report in reports):
        _no_capture(reports, pid)
    gpu = nvml.query({info.pid for info in infos})
    return Snapshot(
        root_pid=pid,
        options=options,
        started_at=started_at,
        seconds=time.monotonic() - started,
        pyspy=binary,
        pyspy_version=pyspy.version(binary),
        processes=tuple(reports),
        nvml=gpu,
        xid=kmsg.read_xid(),
        verdict=judge(reports, gpu, options),
        sample_seconds=tuple(sample_seconds),
    )
