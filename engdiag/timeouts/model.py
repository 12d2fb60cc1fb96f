"""The adaptive-timeout model and the three-state liveness judge (pure, usable from Python).

A static timeout either kills slow-but-alive engines or waits forever on dead
ones.  The model sizes the timeout from the work: the estimated prefill time of
the prompt (prompt length ÷ measured throughput, at least 10 s), times a safety
factor, never below a base and never above a hard cap.  The judge then says
ALIVE, SLOW or DEAD from the time since the last progress signal.

>>> adaptive_timeout(32_000, 200.0)
240.0
>>> judge(elapsed_s=900, since_progress_s=2, prompt_len=1_000, tokens_per_sec=500.0)
<Liveness.ALIVE: 'alive'>
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from engdiag.errors import UsageError

MIN_ESTIMATE_S = 10.0
DEFAULT_BASE_S = 120.0
DEFAULT_FACTOR = 1.5
DEFAULT_HARD_CAP_S = 1800.0
DEFAULT_HEARTBEAT_S = 5.0
DEFAULT_PERCENTILE = 99.0
"""Prompt-length quantile the recommender sizes for."""
DEFAULT_OUTPUT_TOKENS = 1024
"""Output tokens a request is assumed to generate (client timeout)."""


class Liveness(str, Enum):
    """The three states of the judge."""

    ALIVE = "alive"
    """Progress within the last heartbeat interval."""
    SLOW = "slow"
    """No progress for longer than the heartbeat, but within the adaptive timeout."""
    DEAD = "dead"
    """No progress for longer than the adaptive timeout."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs of the model; ``validate`` refuses combinations that cannot work."""

    base_s: float = DEFAULT_BASE_S
    factor: float = DEFAULT_FACTOR
    hard_cap_s: float = DEFAULT_HARD_CAP_S
    heartbeat_s: float = DEFAULT_HEARTBEAT_S

    def validate(self) -> Policy:
        """Return self, or raise ``UsageError`` naming the bad value."""
        for name, value in (("base", self.base_s), ("factor", self.factor),
                            ("hard cap", self.hard_cap_s), ("heartbeat", self.heartbeat_s)):
            if not value > 0:
                raise UsageError(f"{name} must be a positive number, got {value}")
        if self.hard_cap_s < self.base_s:
            raise UsageError(f"the hard cap ({self.hard_cap_s:g} s) is below the base ({self.base_s:g} s)")
        if self.heartbeat_s >= self.hard_cap_s:
            raise UsageError(f"the heartbeat ({self.heartbeat_s:g} s) must be shorter than the hard cap")
        return self


def estimate_prefill_seconds(prompt_len: int, tokens_per_sec: float) -> float:
    """Seconds to prefill ``prompt_len`` tokens at ``tokens_per_sec``, at least 10 s."""
    if tokens_per_sec <= 0:
        raise UsageError(f"throughput must be positive, got {tokens_per_sec} tokens/s")
    if prompt_len < 0:
        raise UsageError(f"a prompt length cannot be negative, got {prompt_len}")
    return max(MIN_ESTIMATE_S, prompt_len / tokens_per_sec)


def adaptive_timeout(prompt_len: int, tokens_per_sec: float, policy: Policy = Policy()) -> float:
    """``min(hard_cap, max(base, estimate × factor))`` in seconds."""
    estimate = estimate_prefill_seconds(prompt_len, tokens_per_sec)
    return min(policy.hard_cap_s, max(policy.base_s, estimate * policy.factor))


def judge(
    elapsed_s: float,
    since_progress_s: float,
    prompt_len: int,
    tokens_per_sec: float,
    policy: Policy = Policy(),
) -> Liveness:
    """ALIVE, SLOW or DEAD for work that started ``elapsed_s`` ago and last progressed ``since_progress_s`` ago.

    Time since progress cannot exceed the time since the work started, so it is
    clamped to ``elapsed_s``; with recent progress the work is never DEAD, however
    long it has been running.
    """
    quiet = max(0.0, min(since_progress_s, elapsed_s))
    if quiet > adaptive_timeout(prompt_len, tokens_per_sec, policy):
        return Liveness.DEAD
    if quiet > policy.heartbeat_s:
        return Liveness.SLOW
    return Liveness.ALIVE
