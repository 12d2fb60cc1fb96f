"""Observations → timeout settings for the knobs the user's vLLM really has (pure).

The one recommender: ``recommend-timeout`` prints it and ``analyze`` quotes it
(``engdiag.timeouts.advice``), so both give the same numbers on the same log.

The model (``engdiag.timeouts.model``) sizes a timeout from the work when a
throughput is known.  Whatever the model says, the step timeout never goes below
what the log proves: the limit that killed a step that was still working (× the
safety factor), the longest healthy stall, and vLLM's own default for the knob
(unless ``allow_lower``).  From a log alone, without prompt lengths or a
throughput, those floors are the recommendation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from engdiag.errors import NothingToRecommend, UsageError
from engdiag.timeouts import knobs as k
from engdiag.timeouts.model import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PERCENTILE,
    Policy,
    adaptive_timeout,
    estimate_prefill_seconds,
)
from engdiag.timeouts.observe import Figure, Observations

ASSUMED_DECODE_TPS = 20.0
"""Per-request decode speed assumed when no input shows it (a slow, loaded server)."""
ASSUMED_BATCHED_TOKENS = 8192
STARTUP_FLOOR_S = 600.0
STEP_DEFAULT_S = {k.Engine.V0: 60.0, k.Engine.V1: 300.0}
"""vLLM's default per-step limit: V0's iteration timeout, V1's execute-model timeout."""


@dataclass(frozen=True)
class Options:
    """What the user set on the command line (None = take it from the inputs)."""

    percentile: float = DEFAULT_PERCENTILE
    tokens_per_sec: float | None = None
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool | None = None
    vllm_version: str | None = None
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    allow_lower: bool = False
    platforms: frozenset[k.Platform] = frozenset()

    def validate(self) -> Options:
        if not 0 < self.percentile <= 100:
            raise UsageError(f"--percentile must be in (0, 100], got {self.percentile:g}")
        if self.tokens_per_sec is not None and not (self.tokens_per_sec > 0 and math.isfinite(self.tokens_per_sec)):
            raise UsageError(f"--tokens-per-sec must be positive, got {self.tokens_per_sec:g}")
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens <= 0:
            raise UsageError(f"--max-num-batched-tokens must be positive, got {self.max_num_batched_tokens}")
        if self.output_tokens <= 0:
            raise UsageError(f"--output-tokens must be positive, got {self.output_tokens}")
        if self.vllm_version is not None and k.parse_version(self.vllm_version) is None:
            raise UsageError(f"--vllm-version: {self.vllm_version!r} is not a version like 0.11.0")
        return self


@dataclass(frozen=True)
class Bucket:
    """How the timeout scales: prompt length → estimated prefill → timeout."""

    prompt_len: int
    prefill_s: float
    timeout_s: float


@dataclass(frozen=True)
class Setting:
    """One knob: the value to set (None: leave it), whether the version has it, and why."""

    knob: k.Knob
    value: str | None
    applies: bool | None
    """True: set it; False: this version/setup has no such knob; None: version unknown."""
    why: str


@dataclass(frozen=True)
class WhatIf:
    """Would vLLM's default have fired on what the inputs show?"""

    knob: str
    default_s: float
    observed_s: float | None
    would_fire: bool | None
    note: str


@dataclass(frozen=True)
class Bound:
    """One thing the step timeout was sized from, and the value it asks for."""

    seconds: float
    why: str


@dataclass(frozen=True)
class Recommendation:
    """The model's answer and the settings derived from it."""

    policy: Policy
    percentile: float
    prompt_len: int | None
    tokens_per_sec: Figure | None
    timeout_s: float | None
    """The model's timeout for the prompt quantile; None without a throughput."""
    buckets: tuple[Bucket, ...]
    """How it scales; empty when every row would show the same timeout."""
    step_tokens: int
    step_timeout_s: float
    step_bounds: tuple[Bound, ...]
    """What the step timeout was sized from; the largest wins."""
    settings: tuple[Setting, ...]
    what_if: tuple[WhatIf, ...]
    clears: str | None
    notes: tuple[str, ...]
    capture_s: float
    """A temporary step timeout that keeps a hang alive long enough to snapshot it."""
    observations: Observations = field(repr=False)

    def setting(self, knob: k.Knob) -> Setting | None:
        return next((s for s in self.settings if s.knob is knob), None)


def _buckets(top: int, tps: float, policy: Policy, include: int | None) -> tuple[Bucket, ...]:
    """Doubling prompt lengths up to the longest seen; nothing when every row would be the same."""
    lengths = {512}
    while max(lengths) < top and len(lengths) < 24:
        lengths.add(max(lengths) * 2)
    if include is not None:
        lengths.add(include)
    rows = tuple(
        Bucket(n, round(estimate_prefill_seconds(n, tps), 1), round(adaptive_timeout(n, tps, policy), 1))
        for n in sorted(lengths)
    )
    return rows if len({row.timeout_s for row in rows}) > 1 else ()


def ceil_to(value: float, step: int = 10) -> int:
    """Round up to a multiple of ``step`` (settings are whole, round numbers)."""
    return int(math.ceil(value / step) * step)


@dataclass(frozen=True)
class Setup:
    """The server as the inputs and flags describe it."""

    version: k.Version | None
    engine: k.Engine | None
    parallel: int | None
    chunked: bool
    batched: int
    batched_known: bool
    platforms: frozenset[k.Platform]


def _setup(obs: Observations, options: Options) -> Setup:
    version = k.parse_version(options.vllm_version) or obs.version
    engine = obs.engine if options.vllm_version is None and obs.engine else k.default_engine(version)
    if engine is None and obs.killed is not None:
        engine = obs.killed.knob.engine  # an iteration timeout proves V0, an execute-model one V1
    parallel = (obs.tp or 1) * (obs.pp or 1) if (obs.tp or obs.pp) else None
    chunked = options.chunked_prefill
    if chunked is None:
        chunked = obs.chunked_prefill if obs.chunked_prefill is not None else engine is not k.Engine.V0
    batched = options.max_num_batched_tokens or obs.max_num_batched_tokens
    return Setup(version, engine, parallel, chunked, batched or ASSUMED_BATCHED_TOKENS, batched is not None,
                 obs.platforms | options.platforms)


def _proves_something(obs: Observations, options: Options) -> bool:
    """Without a throughput, only these size a timeout (prompt lengths alone cannot); a version or a
    platform at least says which knobs exist, each at its floor; a log analyze judged deadlocked needs
    the capture value (the one number analyze prints for it)."""
    return bool(obs.killed or obs.startup_s or obs.longest_gap or obs.version or obs.platforms
                or options.vllm_version or options.platforms or obs.verdict == "deadlocked")


def step_bounds(obs: Observations, policy: Policy, options: Options, setup: Setup,
                step_tokens: int, tps: Figure | None) -> list[Bound]:
    """Everything the step timeout must cover; the recommendation is the largest."""
    bounds: list[Bound] = []
    if tps is not None:
        estimate = estimate_prefill_seconds(step_tokens, tps.value)
        bounds.append(Bound(adaptive_timeout(step_tokens, tps.value, policy),
                            f"the model: one step of {step_tokens:,} token{'' if step_tokens == 1 else 's'} ≈ {estimate:.0f} s at "
                            f"{tps.value:,.0f} tokens/s × {policy.factor:g} (at least the base {policy.base_s:g} s)"))
    killed = obs.killed
    if killed is not None and killed.knob in (k.EXECUTE_MODEL, k.ITERATION) and killed.progressing:
        stall = max(killed.limit_s, killed.stall_s or 0)
        bounds.append(Bound(stall * policy.factor,
                            f"the {killed.limit_s:g} s limit that killed a step still working ({killed.where}); "
                            f"{stall:g} s × {policy.factor:g}"))
    gap = obs.longest_gap
    if gap is not None:
        bounds.append(Bound(gap.seconds * policy.factor,
                            f"the longest healthy stall in the log, {gap.seconds} s ({gap.source}:{gap.start_line}) "
                            f"× {policy.factor:g}"))
    default = STEP_DEFAULT_S.get(setup.engine or k.Engine.V1, 300.0)
    if not options.allow_lower:
        knob = k.ITERATION if setup.engine is k.Engine.V0 else k.EXECUTE_MODEL
        unknown = " (engine unknown: the larger of V1's and V0's step defaults)" if setup.engine is None else ""
        bounds.append(Bound(default, f"vLLM's default {default:g} s for {knob.name}{unknown} "
                                     "(pass --allow-lower to go below it)"))
    return bounds


def recommend(obs: Observations, policy: Policy = Policy(), options: Options = Options()) -> Recommendation:
    """Size every timeout from the observations."""
    from engdiag.timeouts.settings import all_settings, what_if

    policy.validate()
    options.validate()
    tps = Figure(options.tokens_per_sec, "--tokens-per-sec") if options.tokens_per_sec else obs.prefill_tps
    quantile = obs.prompt_quantile(options.percentile)
    setup = _setup(obs, options)
    if tps is None and not _proves_something(obs, options):
        if obs.prompt_lengths:
            raise NothingToRecommend(
                "no throughput: the inputs show prompt lengths but no prefill rate, timeout, stall or start-up",
                hint="pass --tokens-per-sec N (prefill tokens/s of one GPU group), or a log with stats lines, or --metrics",
            )
        raise NothingToRecommend("nothing to go on: no prompt lengths, throughput, timeout, stall or start-up in the inputs")
    notes: list[str] = []
    if tps is None:
        notes.append(
            "no throughput in the inputs: the step timeout is sized from what the log proves (the limit that fired, "
            "the stalls, vLLM's default); pass --tokens-per-sec N or --metrics URL to size it from the prompts too"
        )
    elif quantile is None:
        notes.append(
            "no prompt lengths in the inputs (vLLM ≥ 0.12 logs none at INFO): sized from one engine step; "
            "pass --metrics http://HOST:8000/metrics or --prompt-lens for the client timeout"
        )
    killed = obs.killed
    if killed is not None and killed.progressing is False:
        notes.append(
            f"the {killed.limit_s:g} s limit that fired ({killed.where}) ended work that was not progressing "
            f"(analyze: {obs.verdict}): raising it only delays the same failure — capture the hang instead"
        )
    elif killed is None and obs.verdict == "deadlocked":
        notes.append(
            "analyze judged this log deadlocked: no timeout fixes a hang — keep vLLM's defaults, and to capture "
            "the next one raise the step timeout temporarily to the capture value, then run engdiag snapshot"
        )
    notes.extend(f"detected in the log — {proof}" for proof in obs.platform_proof)
    if obs.lower_bound:
        notes.append("some prompt lengths are lower bounds (truncated in the log, or past the last histogram bucket)")
    prompt = quantile if quantile is not None else max(setup.batched, obs.step_tokens_seen or 0)
    step_tokens = min(prompt, setup.batched) if setup.chunked else prompt
    bounds = step_bounds(obs, policy, options, setup, step_tokens, tps)
    winner = max(bounds, key=lambda bound: bound.seconds)
    step_timeout = float(ceil_to(winner.seconds))
    default = STEP_DEFAULT_S.get(setup.engine or k.Engine.V1, 300.0)
    if options.allow_lower and step_timeout < default:
        notes.append(
            f"--allow-lower: the step timeout ({step_timeout:.0f} s) is below vLLM's default {default:g} s, so a slow "
            "step (a long prefill, kernel compilation at run time, a loaded host) is declared dead sooner and the "
            "engine is killed"
        )
    clears = None
    gap = obs.longest_gap
    if gap is not None:
        margin = step_timeout - gap.seconds
        clears = (
            f"the step timeout ({step_timeout:.0f} s) {'clears' if margin > 0 else 'does NOT clear'} the longest "
            f"healthy no-progress gap in the log ({gap.seconds} s from {gap.start_time}, "
            f"{gap.source}:{gap.start_line}) by {margin:.0f} s"
        )
    if not setup.batched_known and setup.chunked:
        notes.append(f"max_num_batched_tokens not in the inputs: assumed {ASSUMED_BATCHED_TOKENS} (pass --max-num-batched-tokens)")
    settings = all_settings(obs, policy, options, setup, prompt, step_timeout, winner.why, tps, notes)
    top = max(max(obs.prompt_lengths, default=0), prompt)
    return Recommendation(
        policy=policy,
        percentile=options.percentile,
        prompt_len=quantile,
        tokens_per_sec=tps,
        timeout_s=adaptive_timeout(prompt, tps.value, policy) if tps else None,
        buckets=_buckets(top, tps.value, policy, quantile) if tps else (),
        step_tokens=step_tokens,
        step_timeout_s=step_timeout,
        step_bounds=tuple(sorted(bounds, key=lambda bound: -bound.seconds)),
        settings=settings,
        what_if=what_if(obs, setup),
        clears=clears,
        notes=tuple(notes),
        capture_s=max(policy.hard_cap_s, step_timeout),
        observations=obs,
    )
