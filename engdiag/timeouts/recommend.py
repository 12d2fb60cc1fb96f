"""Observations → timeout settings for the knobs the user's vLLM really has (pure).

The model (``engdiag.timeouts.model``) sizes a timeout from the work; this
module decides which work each knob bounds — one engine step (at most
``max_num_batched_tokens`` tokens with chunked prefill), the whole start-up, a
whole request — checks each value against what the log shows healthy
operation needed, and says where vLLM's defaults would have fired.
"""

from __future__ import annotations

import json
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


@dataclass(frozen=True)
class Options:
    """What the user set on the command line (None = take it from the inputs)."""

    percentile: float = DEFAULT_PERCENTILE
    tokens_per_sec: float | None = None
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool | None = None
    vllm_version: str | None = None
    output_tokens: int = DEFAULT_OUTPUT_TOKENS

    def validate(self) -> Options:
        if not 0 < self.percentile <= 100:
            raise UsageError(f"--percentile must be in (0, 100], got {self.percentile:g}")
        if self.tokens_per_sec is not None and not self.tokens_per_sec > 0:
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
class Recommendation:
    """The model's answer and the settings derived from it."""

    policy: Policy
    percentile: float
    prompt_len: int | None
    tokens_per_sec: Figure
    timeout_s: float
    buckets: tuple[Bucket, ...]
    step_tokens: int
    step_timeout_s: float
    settings: tuple[Setting, ...]
    what_if: tuple[WhatIf, ...]
    clears: str | None
    notes: tuple[str, ...]
    observations: Observations = field(repr=False)


def _buckets(top: int, tps: float, policy: Policy, include: int | None) -> tuple[Bucket, ...]:
    lengths = {512}
    while max(lengths) < top and len(lengths) < 24:
        lengths.add(max(lengths) * 2)
    if include is not None:
        lengths.add(include)
    return tuple(
        Bucket(n, round(estimate_prefill_seconds(n, tps), 1), round(adaptive_timeout(n, tps, policy), 1))
        for n in sorted(lengths)
    )


def _ceil(value: float, step: int = 10) -> int:
    return int(math.ceil(value / step) * step)


@dataclass(frozen=True)
class _Setup:
    version: k.Version | None
    engine: k.Engine | None
    parallel: int | None
    chunked: bool
    batched: int
    batched_known: bool


def _setup(obs: Observations, options: Options) -> _Setup:
    version = k.parse_version(options.vllm_version) or obs.version
    engine = obs.engine if options.vllm_version is None and obs.engine else k.default_engine(version)
    parallel = (obs.tp or 1) * (obs.pp or 1) if (obs.tp or obs.pp) else None
    chunked = options.chunked_prefill
    if chunked is None:
        chunked = obs.chunked_prefill if obs.chunked_prefill is not None else engine is not k.Engine.V0
    batched = options.max_num_batched_tokens or obs.max_num_batched_tokens
    return _Setup(version, engine, parallel, chunked, batched or ASSUMED_BATCHED_TOKENS, batched is not None)


def recommend(obs: Observations, policy: Policy = Policy(), options: Options = Options()) -> Recommendation:
    """Size every timeout from the observations."""
    policy.validate()
    options.validate()
    tps = Figure(options.tokens_per_sec, "--tokens-per-sec") if options.tokens_per_sec else obs.prefill_tps
    quantile = obs.prompt_quantile(options.percentile)
    setup = _setup(obs, options)
    if quantile is None and tps is None:
        raise NothingToRecommend("nothing to go on: no prompt lengths and no throughput in the inputs")
    if tps is None:
        raise NothingToRecommend(
            "no throughput: the inputs show prompt lengths but no prefill rate",
            hint="pass --tokens-per-sec N (prefill tokens/s of one GPU group), or a log with stats lines, or --metrics",
        )
    notes: list[str] = []
    if quantile is None:
        notes.append(
            "no prompt lengths in the inputs (vLLM ≥ 0.12 logs none at INFO): sized from one engine step; "
            "pass --metrics http://HOST:8000/metrics or --prompt-lens for the client timeout"
        )
    if obs.lower_bound:
        notes.append("some prompt lengths are lower bounds (truncated in the log, or past the last histogram bucket)")
    prompt = quantile if quantile is not None else setup.batched
    timeout = adaptive_timeout(prompt, tps.value, policy)
    step_tokens = min(prompt, setup.batched) if setup.chunked else prompt
    step_timeout = adaptive_timeout(step_tokens, tps.value, policy)
    clears = None
    gap = obs.longest_gap
    if gap is not None:
        if step_timeout <= gap.seconds:
            raised = min(policy.hard_cap_s, gap.seconds * policy.factor)
            notes.append(
                f"raised the step timeout from {step_timeout:.0f} s to {raised:.0f} s: the log shows a healthy "
                f"{gap.seconds} s without progress ({gap.source}:{gap.start_line}–{gap.end_line})"
            )
            step_timeout = raised
        margin = step_timeout - gap.seconds
        clears = (
            f"the step timeout ({step_timeout:.0f} s) {'clears' if margin > 0 else 'does NOT clear'} the longest "
            f"healthy no-progress gap in the log ({gap.seconds} s from {gap.start_time}, "
            f"{gap.source}:{gap.start_line}) by {margin:.0f} s"
        )
    if step_timeout < 300 and setup.engine is not k.Engine.V0:
        notes.append(
            f"the step timeout ({step_timeout:.0f} s) is below vLLM's default 300 s: a hang is declared sooner; "
            "keep it above any kernel compilation your traffic can trigger at run time"
        )
    if not setup.batched_known and setup.chunked:
        notes.append(f"max_num_batched_tokens not in the inputs: assumed {ASSUMED_BATCHED_TOKENS} (pass --max-num-batched-tokens)")
    top = max(max(obs.prompt_lengths, default=0), prompt)
    settings = _settings(obs, policy, options, setup, prompt, step_tokens, step_timeout, tps.value, notes)
    return Recommendation(
        policy=policy,
        percentile=options.percentile,
        prompt_len=quantile,
        tokens_per_sec=tps,
        timeout_s=timeout,
        buckets=_buckets(top, tps.value, policy, quantile),
        step_tokens=step_tokens,
        step_timeout_s=step_timeout,
        settings=settings,
        what_if=_what_if(obs, setup),
        clears=clears,
        notes=tuple(notes),
        observations=obs,
    )


def _exists(knob: k.Knob, setup: _Setup) -> bool | None:
    if setup.version is None and setup.engine is None:
        return None
    return knob.exists_in(setup.version, setup.engine)


def _missing(knob: k.Knob, setup: _Setup) -> Setting:
    """A knob the user's version or engine does not have."""
    have = f"vLLM {k.format_version(setup.version)}" if setup.version else "this setup"
    engine = f" {setup.engine.value}" if setup.engine else ""
    only = f" ({knob.engine.value} only)" if knob.engine else ""
    return Setting(knob, None, False, f"not in {have}{engine}: it exists in {knob.versions()}{only}")


def _settings(
    obs: Observations, policy: Policy, options: Options, setup: _Setup,
    prompt: int, step_tokens: int, step_timeout: float, tps: float, notes: list[str],
) -> tuple[Setting, ...]:
    step_value = str(_ceil(step_timeout))
    single_gpu_v1 = setup.engine is k.Engine.V1 and setup.parallel == 1
    if single_gpu_v1:
        notes.append(
            "single-GPU V1 has no per-step guard: use --watchdog-config (0.33+) to dump stacks, "
            "and `engdiag watch` to tell slow from dead"
        )
    makers = {
        k.EXECUTE_MODEL: lambda: _step_setting(options, setup, prompt, step_tokens, step_value, tps, policy),
        k.ENGINE_READY: lambda: _ready_setting(obs, policy, setup),
        k.ITERATION: lambda: Setting(
            k.ITERATION, str(_ceil(adaptive_timeout(prompt, tps, policy))), _exists(k.ITERATION, setup),
            f"V0 steps hold a whole prompt (no chunked prefill by default): sized from {prompt} tokens",
        ),
        k.RPC: lambda: _rpc_setting(setup, step_timeout),
        k.DISTRIBUTED: lambda: Setting(
            k.DISTRIBUTED, str(max(600, _ceil(step_timeout * 1.5))), _exists(k.DISTRIBUTED, setup),
            f"keep the NCCL watchdog longer than the step timeout ({step_value} s), so a stuck step is "
            "reported by vLLM, not by a collective abort",
        ),
        k.WATCHDOG: lambda: Setting(
            k.WATCHDOG,
            json.dumps({"timeout": int(step_value), "check_interval": 10, "dump_dir": "/tmp/vllm-stacks"}),
            _exists(k.WATCHDOG, setup),
            "dumps every thread's stack when a step outlasts the step timeout, and kills nothing"
            + (" — the only per-step guard a single-GPU V1 server has" if single_gpu_v1 else ""),
        ),
        k.CLIENT: lambda: _client_setting(obs, policy, options, prompt, tps),
    }
    out = []
    for knob in k.KNOBS:
        setting = makers[knob]()
        out.append(_missing(knob, setup) if setting.applies is False and setting.value is not None else setting)
    return tuple(out)


def _step_setting(
    options: Options, setup: _Setup, prompt: int, step_tokens: int, step_value: str, tps: float, policy: Policy
) -> Setting:
    knob = k.EXECUTE_MODEL
    if setup.engine is k.Engine.V1 and setup.parallel == 1:
        return Setting(knob, None, False, "single-GPU V1 runs the uni executor: there is NO per-step timeout at all; "
                       "a hung step is silent forever")
    if setup.engine is k.Engine.V1 and setup.version is not None and (0, 8, 5) <= setup.version < (0, 9, 2):
        fixed = "40" if setup.version < (0, 9, 0) else "300"
        return Setting(knob, None, False, f"hard-coded to {fixed} s in this version; upgrade to 0.9.2+ to set it")
    if setup.chunked:
        estimate = estimate_prefill_seconds(step_tokens, tps)
        why = (f"bounds one model step; with chunked prefill one step holds at most {setup.batched} tokens, so it is "
               f"sized from the worst step ({step_tokens} tokens ≈ {estimate:.0f} s × {policy.factor:g})")
    else:
        why = f"bounds one model step; without chunked prefill a step holds a whole prompt: p{options.percentile:g} = {prompt} tokens"
    return Setting(knob, step_value, _exists(knob, setup), why)


def _ready_setting(obs: Observations, policy: Policy, setup: _Setup) -> Setting:
    exists = _exists(k.ENGINE_READY, setup)
    if setup.engine is k.Engine.V1 and setup.version is not None and (0, 9, 1) <= setup.version < (0, 14, 0):
        return Setting(k.ENGINE_READY, None, False, "fixed at 600 s in this version (0.9.1–0.13); upgrade to 0.14+ to change it")
    if exists is False:
        return _missing(k.ENGINE_READY, setup)
    if obs.startup_s is None:
        return Setting(k.ENGINE_READY, None, exists, "no start-up in the inputs: keep the default, or pass a log from launch")
    value = str(_ceil(max(STARTUP_FLOOR_S, obs.startup_s.value * policy.factor), 60))
    return Setting(k.ENGINE_READY, value, exists, f"start-up took {obs.startup_s.value:.0f} s ({obs.startup_s.source}) × {policy.factor:g}")


def _rpc_setting(setup: _Setup, step_timeout: float) -> Setting:
    exists = _exists(k.RPC, setup)
    if exists is False:
        return _missing(k.RPC, setup)
    if setup.version is not None and (0, 6, 2) <= setup.version < (0, 6, 4):
        value = str(max(10000, _ceil(step_timeout / 3, 1) * 1000))
        return Setting(k.RPC, value, exists, "0.6.2–0.6.3 declare the engine dead when one step exceeds 3× this (milliseconds)")
    return Setting(k.RPC, None, exists, "guards start-up and utility RPCs only (no step) in this version: the default is fine")


def _client_setting(obs: Observations, policy: Policy, options: Options, prompt: int, tps: float) -> Setting:
    decode = obs.decode_tps.value if obs.decode_tps else ASSUMED_DECODE_TPS
    decode_s = options.output_tokens / decode
    prefill_s = estimate_prefill_seconds(prompt, tps)
    value = str(_ceil(max(policy.base_s, (prefill_s + decode_s) * policy.factor)))
    source = obs.decode_tps.source if obs.decode_tps else f"an assumed {ASSUMED_DECODE_TPS:g} tokens/s"
    return Setting(k.CLIENT, value, True,
                   f"a whole request: prefill of {prompt} tokens ≈ {prefill_s:.0f} s + {options.output_tokens} output "
                   f"tokens at {decode:.1f} tokens/s ({source}) ≈ {decode_s:.0f} s, × {policy.factor:g}")


def _what_if(obs: Observations, setup: _Setup) -> tuple[WhatIf, ...]:
    gap = obs.longest_gap.seconds if obs.longest_gap else None
    startup = obs.startup_s.value if obs.startup_s else None
    fired = {signal: where for signal, where in obs.fired}
    checks = []
    if setup.engine is not k.Engine.V0:
        checks += [
            (k.EXECUTE_MODEL, 300, gap, "rpc_timeout", "the longest healthy no-progress gap"),
            (k.ENGINE_READY, 600, startup, "engine_ready_timeout", "the observed start-up"),
        ]
    if setup.engine is not k.Engine.V1:
        checks.append((k.ITERATION, 60, gap, "iteration_timeout", "the longest healthy no-progress gap"))
    rows = []
    for knob, default, observed, signal, what in checks:
        if signal in fired:
            rows.append(WhatIf(knob.name, default, observed, True, f"fired in the log at {fired[signal]}"))
        else:
            would = None if observed is None else observed > default
            rows.append(WhatIf(knob.name, default, observed, would, f"compared with {what}"))
    return tuple(rows)
