"""The answer engdiag gives: what kind of incident, how sure, why, and what to do next.

Shared by ``analyze`` (from logs) and ``snapshot`` (from live stacks), so both
speak the same six kinds and renderers draw both the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Kind(str, Enum):
    """The six verdicts."""

    SLOW = "slow"
    """Alive and progressing, but a step or wait outlasted a timeout."""
    DEADLOCKED = "deadlocked"
    """No progress: a collective or barrier that never completes, a hung worker."""
    FRAGMENTED = "fragmented"
    """GPU memory: fragmentation, exhaustion or KV-cache pressure (see ``MemoryKind``)."""
    CRASHED = "crashed"
    """A fault that is not a timeout: illegal memory access, segfault, an exception."""
    HEALTHY = "healthy"
    """No incident, or only lines that look alarming but are benign."""
    UNKNOWN = "unknown"
    """Not enough evidence; the verdict says what would decide it."""


class MemoryKind(str, Enum):
    """Sub-kinds of ``Kind.FRAGMENTED``."""

    FRAGMENTATION = "fragmentation"
    EXHAUSTION = "exhaustion"
    KV_PRESSURE = "kv-pressure"


class Role(str, Enum):
    """What a piece of evidence is to the verdict."""

    ROOT_CAUSE = "root cause"
    SUPPORTING = "supporting"
    CONSEQUENCE = "consequence"
    CONTEXT = "context"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One line (log) or one stack (snapshot) that supports the verdict."""

    source: str
    """File name for logs; ``pid N (role)`` for snapshots."""
    line: int | None
    time: str | None
    signal: str
    text: str
    role: Role
    note: str = ""
    year: int | None = None
    """The calendar year of ``time`` when the input printed one (kubectl's stamp)."""
    inherited_time: bool = False
    """``time`` is the previous line's: this line had no readable time of its own (none, or an impossible one)."""


@dataclass(frozen=True, slots=True)
class Step:
    """A next step: what to do and, where there is one, the exact command or setting."""

    text: str
    command: str | None = None


@dataclass(frozen=True)
class Verdict:
    """Kind, confidence and the reasons for it."""

    kind: Kind
    confidence: float
    headline: str
    sub_kind: MemoryKind | None = None
    evidence: tuple[Evidence, ...] = ()
    ruled_out: tuple[str, ...] = ()
    next_steps: tuple[Step, ...] = ()
    undecided: str | None = None
    """For ``unknown`` (or weak verdicts): what evidence would decide it."""
    notes: tuple[str, ...] = field(default=())
