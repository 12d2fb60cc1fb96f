"""The vocabulary of ``snapshot``: processes, threads, frames, samples and what they mean.

Everything here is plain data, so a capture from elsewhere (Ray's dashboard, a
bundle) can be built into the same shapes and judged by the same pure code
(``engdiag.snapshot.assess``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from engdiag.roles import Ranks, Role


class Category(str, Enum):
    """Where a thread is, judged from its frames (rules in ``engdiag.snapshot.frames``)."""

    COLLECTIVE = "collective"
    SHM_WAIT = "shm_wait"
    CUDA_SYNC = "cuda_sync"
    ALLOCATOR = "allocator"
    COMPUTE = "compute"
    COMPILE = "compile"
    WEIGHT_LOADING = "weight_loading"
    IO_POLL = "io_poll"
    LOCK_WAIT = "lock_wait"
    IDLE = "idle"
    UNKNOWN = "unknown"


IDLE_POLLING = frozenset({Category.IDLE, Category.IO_POLL})
"""Waiting for work: an unchanged stack here is not stuck."""
BLOCKING = frozenset({Category.COLLECTIVE, Category.SHM_WAIT, Category.CUDA_SYNC, Category.LOCK_WAIT})
"""Waiting on another party: an unchanged stack here is a hang candidate."""
WORKING = frozenset({Category.COMPUTE, Category.COMPILE, Category.WEIGHT_LOADING})


class Motion(str, Enum):
    """How a thread's stack behaved across samples."""

    STUCK = "stuck"
    """Identical in every sample, not idle-polling, and no sign of work (CPU, native code)."""
    MOVING = "moving"
    """Changed between samples, or busy: CPU time advancing / running native code outside a wait."""
    WAITING = "waiting"
    """Identical, but idle-polling for work."""
    ONCE = "once"
    """Seen in one sample only (one sample taken, or the thread came or went)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame, innermost first in a stack."""

    name: str
    filename: str
    line: int
    native: bool = False
    module: str | None = None
    """Shared library of a native frame."""
    code: str | None = None
    """The source line, when the file is readable here."""
    locals: tuple[tuple[str, str], ...] | None = None

    @property
    def where(self) -> str:
        """``function (file:line)`` as py-spy prints it."""
        short = self.filename.rsplit("/", 3)[-3:] if self.filename else []
        place = "/".join(short) if short else (self.module or "?")
        return f"{self.name} ({place}:{self.line})" if self.line else f"{self.name} ({place})"


def named_frames(frames: tuple[Frame, ...], count: int = 3) -> tuple[Frame, ...]:
    """The innermost ``count`` frames worth showing a person: a stripped library's bare addresses (libcuda's
    ``0x7fe73a1b946e``, the innermost dozen frames of a CUDA sync with ``--native``) are skipped while a named
    frame follows them."""
    named = tuple(f for f in frames if not (f.native and f.name.startswith("0x")))
    return (named or frames)[:count]


@dataclass(frozen=True, slots=True)
class ThreadSample:
    """One thread in one py-spy dump."""

    thread_id: int
    os_tid: int | None
    name: str | None
    active: bool
    gil: bool
    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """CPU seconds (user + system) of a process and of each of its threads at one moment."""

    at: float
    """``time.monotonic()`` when read."""
    process: float
    threads: tuple[tuple[int, float], ...] = ()
    """(OS thread id, CPU seconds) pairs."""


@dataclass(frozen=True, slots=True)
class DumpResult:
    """One py-spy dump of one process: threads, or the reason it failed."""

    threads: tuple[ThreadSample, ...] = ()
    error: str | None = None
    kind: str | None = None
    """``permission``, ``gone``, ``not_python``, ``timeout``, ``missing`` or ``failed``."""
    seconds: float = 0.0
    """Wall time of the dump: an upper bound of how long the target was paused."""
    resumed: bool = False
    """engdiag sent SIGCONT because the dump left the target stopped."""
    cpu: CpuTimes | None = None
    """CPU times read just before the dump (None where they cannot be read, e.g. a remote capture)."""


@dataclass(frozen=True)
class ProcessInfo:
    """A process of the tree."""

    pid: int
    ppid: int | None
    name: str
    cmdline: tuple[str, ...]
    state: str | None
    started: float | None
    python: bool | None
    """True / False, or None when it could not be told (the dump will say)."""
    skip_reason: str | None = None
    title_role: Role = Role.OTHER
    node: str | None = None
    """Host the process runs on, for captures spanning nodes (None: this machine)."""

    @property
    def title(self) -> str:
        """What ``ps`` shows: the first argument (vLLM sets ``VLLM::EngineCore`` here)."""
        return self.cmdline[0] if self.cmdline else self.name


@dataclass(frozen=True)
class ThreadReport:
    """A thread across samples, with its category and motion."""

    thread_id: int
    os_tid: int | None
    name: str | None
    category: Category
    motion: Motion
    active: bool
    gil: bool
    frames: tuple[Frame, ...]
    reason: str
    """Which frame decided the category."""
    progress: str | None = None
    """Why the thread counts as moving (stack changed, CPU advancing, native code), when it does."""
    cpu_s: float | None = None
    """CPU seconds the thread used between its first and last sample (None: not measured)."""
    stacks: tuple[tuple[Frame, ...], ...] = ()
    """Its stack in each sample, oldest first (for the wait-for picture; not in the JSON)."""


@dataclass(frozen=True)
class ProcessReport:
    """A process: who it is, its threads, and what went wrong capturing it."""

    info: ProcessInfo
    role: Role
    ranks: Ranks
    threads: tuple[ThreadReport, ...] = ()
    error: str | None = None
    error_kind: str | None = None
    samples: int = 0
    pause_ms: tuple[float, ...] = ()
    resumed: bool = False
    cpu_s: float | None = None
    """CPU seconds the whole process used between its first and last sample."""
    wall_s: float | None = None
    """Wall seconds between its first and last CPU reading."""


@dataclass(frozen=True)
class SnapshotOptions:
    """How the capture was taken."""

    samples: int = 3
    interval_s: float = 1.0
    native: bool = False
    nonblocking: bool = False
    locals: bool = False
    dump_timeout_s: float = 10.0


@dataclass
class GpuInfo:
    """One GPU's NVML fields; a field a GPU does not support is None with its reason."""

    fields: dict[str, Any] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    processes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class NvmlState:
    """NVML as engdiag saw it; ``available`` False with a reason on machines without a GPU."""

    available: bool
    reason: str | None = None
    driver: str | None = None
    nvml_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuInfo] = field(default_factory=list)
    pid_note: str | None = None
    """Why GPU pids did not match the tree's pids (containers), when they did not."""


@dataclass(frozen=True)
class XidRecord:
    """Recent ``NVRM: Xid`` kernel-log lines, or why they could not be read."""

    available: bool
    reason: str | None = None
    lines: tuple[str, ...] = ()
