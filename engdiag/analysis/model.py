"""The incident model behind every verdict: activities, waits and the guard that fired.

An expert reading a hang asks three questions before naming it: what was each
process doing and was it still advancing (``Activity``); who was waiting on whom,
and could that wait ever be satisfied (``Wait``); which timeout fired, with what
limit, guarding what (``Guard``).  ``analyze`` reconstructs these from the lines
(``engdiag.analysis.reconstruct``); the rules compare them, and the renderers show
them so a verdict can be checked against its reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Activity:
    """One phase of work: weight loading, torch.compile, CUDA-graph capture, serving..."""

    name: str
    process: str | None
    start: str | None
    """Time of its first line (``MM-DD HH:MM:SS``), when the log has one."""
    seconds: float | None
    """How long it ran: the duration the line reports, else first to last line."""
    advancing: bool
    """Still making progress at its last line (not finished, counters moving)."""
    finished: bool
    detail: str
    source: str
    line: int
    startup: bool = True
    """Part of start-up (before the engine serves)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """A process waiting on another party."""

    waiter: str
    on: str
    via: str
    """The channel: shared-memory queue, collective, rendezvous, RPC, placement group."""
    satisfiable: bool | None
    """True: the party is demonstrably working (slow); False: it can never answer
    (deadlocked); None: the log does not say."""
    why: str
    seconds: float | None
    source: str
    line: int


@dataclass(frozen=True, slots=True)
class Guard:
    """The timeout that fired: who owns it, its limit, and what it was guarding."""

    name: str
    owner: str
    """vLLM, Ray, PyTorch/NCCL, DeepEP, the client or the platform."""
    limit_s: float | None
    limit_origin: str
    """``printed`` (the line says), ``default`` (the version's default) or ``unknown``."""
    guarded: str
    knob: str | None
    source: str
    line: int
    time: str | None


@dataclass(frozen=True)
class Model:
    """Everything reconstructed about the incident, in time order."""

    activities: tuple[Activity, ...] = ()
    waits: tuple[Wait, ...] = ()
    guard: Guard | None = None
    startup_seconds: float | None = None
    """Launch to ready (or to the end of the log when it never got ready)."""
    notes: tuple[str, ...] = field(default=())
