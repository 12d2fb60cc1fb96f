"""The live judge: progress signals over time → IDLE, ALIVE, SLOW or DEAD (pure; time is injected).

It keeps when the engine last made progress, whether work is in flight and how
big it is, and asks the adaptive-timeout model (``engdiag.timeouts.model.judge``)
how long that work may go quiet.  The heartbeat it uses is never shorter than
the cadence at which progress can be observed (a poll interval, a stats line
every 10 s), so an engine between two stats lines is not called slow.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, replace
from enum import Enum

from engdiag.timeouts.model import Liveness, Policy, adaptive_timeout, judge

DEFAULT_TOKENS_PER_SEC = 500.0
"""Prefill rate assumed until one is measured (low: a longer, safer timeout)."""
RECENT = 64


class State(str, Enum):
    """What the watcher says."""

    UNKNOWN = "unknown"
    """Nothing observed yet."""
    IDLE = "idle"
    """Nothing in flight."""
    NO_PROGRESS_YET = "no_progress_yet"
    """Work in flight, and no counter or line has proved progress since watching began (never ALIVE)."""
    ALIVE = "alive"
    SLOW = "slow"
    DEAD = "dead"


_FROM_LIVENESS = {Liveness.ALIVE: State.ALIVE, Liveness.SLOW: State.SLOW, Liveness.DEAD: State.DEAD}


@dataclass(frozen=True)
class Verdict:
    """The state at one moment, with the numbers behind it."""

    state: State
    since_progress_s: float | None
    timeout_s: float
    heartbeat_s: float
    in_flight: float | None
    prompt_len: int
    tokens_per_sec: float
    reason: str


class LivenessTracker:
    """Folds observations into a state; call ``verdict(now)`` whenever you like."""

    def __init__(self, policy: Policy = Policy(), tokens_per_sec: float | None = None,
                 prompt_len: int | None = None, min_heartbeat_s: float = 0.0) -> None:
        self.policy = policy
        self._fixed_tps = tokens_per_sec
        self._fixed_prompt = prompt_len
        self.min_heartbeat_s = min_heartbeat_s
        self.last_progress: float | None = None
        self.in_flight: float | None = None
        self.in_flight_since: float | None = None
        self.seen = False
        self.fatal: str | None = None
        self._cadence: deque[float] = deque(maxlen=RECENT)
        self._rates: deque[float] = deque(maxlen=RECENT)
        self._prompts: deque[int] = deque(maxlen=RECENT)

    # -- observations ---------------------------------------------------------------------------

    def progress(self, now: float) -> None:
        """Something moved: tokens were produced, a request finished, a step completed."""
        self.seen = True
        if self.last_progress is not None and now > self.last_progress:
            self._cadence.append(now - self.last_progress)
        self.last_progress = now
        self.fatal = None

    def load(self, now: float, in_flight: float | None) -> None:
        """How many requests are running or waiting (None: unknown)."""
        self.seen = True
        if in_flight is None:
            return
        if in_flight > 0 and not (self.in_flight or 0) > 0:
            self.in_flight_since = now
        self.in_flight = in_flight

    def prompt(self, tokens: int) -> None:
        """A prompt length seen in flight (request log, crash dump, metrics histogram)."""
        self._prompts.append(tokens)

    def rate(self, tokens_per_sec: float) -> None:
        """A measured prefill rate."""
        if tokens_per_sec > 0:
            self._rates.append(tokens_per_sec)

    def died(self, reason: str) -> None:
        """The engine reported its own death (EngineDeadError, a fatal error)."""
        self.seen = True
        if self.fatal is None:  # the first report is the cause; later ones are its echoes
            self.fatal = reason

    # -- the judgement ----------------------------------------------------------------------------

    @property
    def tokens_per_sec(self) -> float:
        if self._fixed_tps:
            return self._fixed_tps
        if self._rates:
            ordered = sorted(self._rates)
            return ordered[len(ordered) // 4]
        return DEFAULT_TOKENS_PER_SEC

    @property
    def prompt_len(self) -> int:
        if self._fixed_prompt is not None:
            return self._fixed_prompt
        return max(self._prompts, default=0)

    @property
    def heartbeat_s(self) -> float:
        cadence = statistics.median(self._cadence) * 1.5 if len(self._cadence) >= 3 else 0.0
        return max(self.policy.heartbeat_s, self.min_heartbeat_s, cadence)

    def verdict(self, now: float) -> Verdict:
        """The state now."""
        heartbeat = self.heartbeat_s
        policy = replace(self.policy, heartbeat_s=heartbeat) if heartbeat < self.policy.hard_cap_s else self.policy
        timeout = adaptive_timeout(self.prompt_len, self.tokens_per_sec, policy)
        since = None if self.last_progress is None else max(0.0, now - self.last_progress)
        common = dict(timeout_s=timeout, heartbeat_s=heartbeat, in_flight=self.in_flight,
                      prompt_len=self.prompt_len, tokens_per_sec=self.tokens_per_sec)
        if self.fatal is not None:
            return Verdict(State.DEAD, since, reason=f"the engine reported its death: {self.fatal}", **common)
        if not self.seen:
            return Verdict(State.UNKNOWN, since, reason="nothing observed yet", **common)
        if not (self.in_flight or 0) > 0:
            return Verdict(State.IDLE, since, reason="no request in flight", **common)
        started = self.in_flight_since if self.in_flight_since is not None else now
        if self.last_progress is None:
            waited = max(0.0, now - started)
            if waited > timeout:
                return Verdict(State.DEAD, since, reason=f"no progress seen in {waited:.0f} s of work in flight, "
                               f"past the adaptive timeout of {timeout:.0f} s", **common)
            return Verdict(State.NO_PROGRESS_YET, since, reason=f"no progress seen yet ({waited:.0f} s watched with work "
                           f"in flight; DEAD after {timeout:.0f} s)", **common)
        anchor = started if self.last_progress is None else max(self.last_progress, started)
        quiet = max(0.0, now - anchor)
        liveness = judge(now - started, quiet, self.prompt_len, self.tokens_per_sec, policy)
        if liveness is Liveness.ALIVE and self.last_progress < started:
            return Verdict(State.NO_PROGRESS_YET, since, reason=f"no progress seen yet since work arrived {quiet:.0f} s ago",
                           **common)
        reason = {
            Liveness.ALIVE: "progress within the heartbeat",
            Liveness.SLOW: f"no progress for {quiet:.0f} s, within the adaptive timeout of {timeout:.0f} s",
            Liveness.DEAD: f"no progress for {quiet:.0f} s, past the adaptive timeout of {timeout:.0f} s",
        }[liveness]
        return Verdict(_FROM_LIVENESS[liveness], since, reason=reason, **common)
