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
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from engdiag.analysis.verdict import Verdict
from engdiag.errors import CaptureUnavailable, PermissionDenied, TargetGone, UsageError
from engdiag.snapshot import kmsg, nvml, pyspy, tree
from engdiag.snapshot.assess import ProcessSamples, assess, report
from engdiag.snapshot.model import (
    DumpResult,
    NvmlState,
    ProcessReport,
    SnapshotOptions,
    XidRecord,
)

MAX_PARALLEL = 32
MAX_SAMPLES = 100
"""Each sample pauses every process of the tree; past this a capture is a profiler's job (py-spy record)."""

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


def _sample(dumper: pyspy.Dumper, pid: int) -> DumpResult:
    """One dump, with the CPU times read just before it."""
    cpu = tree.cpu_times(pid)
    return replace(dumper.dump(pid), cpu=cpu)


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
    if options.samples > MAX_SAMPLES:
        raise UsageError(
            f"--samples {options.samples} is too many: at most {MAX_SAMPLES} (each sample pauses every process of the tree)",
            hint="a few samples tell stuck from moving (--samples 5 --interval 2); for a profile use `py-spy record`",
        )
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
                for info, result in zip(live, pool.map(lambda t: _sample(dumper, t.pid), live), strict=True):
                    results[info.pid].append(result)
                sample_seconds.append(time.monotonic() - began)
                if progress is not None:
                    progress(number + 1, options.samples)
                if number + 1 < options.samples:
                    sleep(max(0.0, options.interval_s - (time.monotonic() - began)))
        finally:
            for info in targets:
                tree.resume_if_stopped(info.pid)
    captured = [ProcessSamples(info, tuple(results[info.pid])) for info in infos]
    if not any(report(c).threads for c in captured):
        _no_capture([report(c) for c in captured], pid)
    gpu = nvml.query({info.pid for info in infos})
    reports, verdict = assess(captured, gpu, options)
    return Snapshot(
        root_pid=pid,
        options=options,
        started_at=started_at,
        seconds=time.monotonic() - started,
        pyspy=binary,
        pyspy_version=pyspy.version(binary),
        processes=reports,
        nvml=gpu,
        xid=kmsg.read_xid(),
        verdict=verdict,
        sample_seconds=tuple(sample_seconds),
    )
