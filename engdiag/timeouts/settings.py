"""One Setting per knob, from the sized step timeout and what the inputs show (pure).

Each maker says whether the user's version has the knob, whether setting it
changes anything there, and why the value is what it is.
"""

from __future__ import annotations

import json
import math

from engdiag.timeouts import knobs as k
from engdiag.timeouts.model import Policy, estimate_prefill_seconds
from engdiag.timeouts.observe import Figure, Observations
from engdiag.timeouts.recommend import (
    ASSUMED_DECODE_TPS,
    STARTUP_FLOOR_S,
    Options,
    Setting,
    Setup,
    WhatIf,
    ceil_to,
)

PROBE_PERIOD_S = 10
GLOO_DEFAULT_S = 1800
RAY_SERVE_HEALTH_S = 600
"""Ray Serve's health-check timeout once the log shows it restarting a busy replica (its default is 30 s)."""


def exists(knob: k.Knob, setup: Setup) -> bool | None:
    """Does the user's version have the knob?  None: no version known."""
    if setup.version is None and setup.engine is None:
        return None
    return knob.exists_in(setup.version, setup.engine)


def missing(knob: k.Knob, setup: Setup) -> Setting:
    """A knob the user's version or engine does not have."""
    have = f"vLLM {k.format_version(setup.version)}" if setup.version else "this setup"
    engine = f" {setup.engine.value}" if setup.engine else ""
    only = f" ({knob.engine.value} only)" if knob.engine else ""
    return Setting(knob, None, False, f"not in {have}{engine}: it exists in {knob.versions()}{only}")


def _inert(knob: k.Knob, setup: Setup) -> Setting | None:
    """From ``inert_from`` on vLLM still reads the variable, but nothing waits on it (until it is removed)."""
    if setup.version is not None and not knob.exists_in(setup.version, None):  # gone from envs.py altogether
        return missing(knob, setup)
    if knob.guards_in(setup.version) is False:
        return Setting(knob, None, False, f"still read by vLLM {k.format_version(setup.version)} (it exists in "
                       f"{knob.versions()}) but guards nothing from {k.format_version(knob.inert_from)} on: "
                       "the V0 engine loop that used it is gone")
    return None


def all_settings(
    obs: Observations, policy: Policy, options: Options, setup: Setup,
    prompt: int, step_timeout: float, step_why: str, tps: Figure | None, notes: list[str],
) -> tuple[Setting, ...]:
    step_value = str(int(step_timeout))
    single_gpu_v1 = setup.engine is k.Engine.V1 and setup.parallel == 1
    if single_gpu_v1:
        notes.append(
            "single-GPU V1 has no per-step guard: use --watchdog-config (0.33+) to dump stacks, "
            "and `engdiag watch` to tell slow from dead"
        )
    out: list[Setting] = [
        _step(setup, step_value, step_why),
        _ready(obs, policy, setup),
        _iteration(setup, step_value, step_why),
        _rpc(obs, policy, setup, step_timeout),
        _collectives(k.DISTRIBUTED, setup, step_timeout, 600, "NCCL watchdog"),
        _collectives(k.CPU_DISTRIBUTED, setup, step_timeout, GLOO_DEFAULT_S, "gloo (CPU) group timeout"),
        Setting(
            k.WATCHDOG,
            json.dumps({"timeout": int(step_value), "check_interval": 10, "dump_dir": "/tmp/vllm-stacks"}),
            exists(k.WATCHDOG, setup),
            "dumps every thread's stack when a step outlasts the step timeout, and kills nothing"
            + (" — the only per-step guard a single-GPU V1 server has" if single_gpu_v1 else ""),
        ),
        Setting(k.RINGBUFFER, None, True,
                "not a timeout: it is only how often a waiting shared-memory reader logs 'No available shared "
                "memory broadcast block found in N seconds'; N in your log is this period (default 60), and an "
                "idle server prints the line too"),
        _client(obs, policy, options, prompt, tps),
    ]
    out += _outside(obs, setup, step_value)
    return tuple(s if not (s.applies is False and s.value is not None) else missing(s.knob, setup) for s in out)


def _step(setup: Setup, step_value: str, step_why: str) -> Setting:
    knob = k.EXECUTE_MODEL
    if setup.engine is k.Engine.V1 and setup.parallel == 1:
        return Setting(knob, None, False, "single-GPU V1 runs the uni executor: there is NO per-step timeout at all; "
                       "a hung step is silent forever")
    if setup.engine is k.Engine.V1 and setup.version is not None and (0, 8, 5) <= setup.version < (0, 9, 2):
        fixed = "40" if setup.version < (0, 9, 0) else "300"
        return Setting(knob, None, False, f"hard-coded to {fixed} s in this version; upgrade to 0.9.2+ to set it")
    return Setting(knob, step_value, exists(knob, setup), f"bounds one model step; sized from {step_why}")


def _ready(obs: Observations, policy: Policy, setup: Setup) -> Setting:
    knob = k.ENGINE_READY
    if setup.engine is k.Engine.V1 and setup.version is not None and (0, 9, 1) <= setup.version < (0, 14, 0):
        return Setting(knob, None, False, "fixed at 600 s in this version (0.9.1–0.13); upgrade to 0.14+ to change it")
    present = exists(knob, setup)
    if present is False:
        return missing(knob, setup)
    killed = obs.killed if obs.killed is not None and obs.killed.knob is knob and obs.killed.progressing else None
    observed = obs.startup_s.value if obs.startup_s else 0.0
    if killed is not None:
        observed = max(observed, killed.limit_s, killed.stall_s or 0)
    if not observed:
        return Setting(knob, None, present, "no start-up in the inputs: keep the default, or pass a log from launch")
    value = str(ceil_to(max(STARTUP_FLOOR_S, observed * policy.factor), 60))
    source = (f"the {killed.limit_s:g} s limit that killed a start-up still working ({killed.where})"
              if killed is not None else f"start-up took {observed:.0f} s ({obs.startup_s.source})")  # type: ignore[union-attr]
    return Setting(knob, value, present, f"{source}; {observed:.0f} s × {policy.factor:g}, at least 600 s")


def _iteration(setup: Setup, step_value: str, step_why: str) -> Setting:
    knob = k.ITERATION
    inert = _inert(knob, setup)
    if inert is not None:
        return inert
    if setup.engine is k.Engine.V1:
        return missing(knob, setup)
    return Setting(knob, step_value, exists(knob, setup),
                   f"V0's per-step limit (a step holds whole prompts without chunked prefill); sized from {step_why}")


def _rpc(obs: Observations, policy: Policy, setup: Setup, step_timeout: float) -> Setting:
    knob = k.RPC
    inert = _inert(knob, setup)
    if inert is not None:
        return inert
    present = exists(knob, setup)
    if present is False:
        return missing(knob, setup)
    killed = obs.killed
    if killed is not None and killed.knob is knob and killed.progressing and obs.killed.limit_s < 30:
        value = str(max(10000, ceil_to(killed.limit_s * policy.factor * 1000, 1000)))
        return Setting(knob, value, present, f"a V0 frontend RPC timed out after {killed.limit_s:g} s ({killed.where}) "
                       f"while the engine was working; {killed.limit_s:g} s × {policy.factor:g} (milliseconds)")
    if setup.version is not None and (0, 6, 2) <= setup.version < (0, 6, 4):
        value = str(max(10000, ceil_to(step_timeout / 3, 1) * 1000))
        return Setting(knob, value, present, "0.6.2–0.6.3 declare the engine dead when one step exceeds 3× this (milliseconds)")
    return Setting(knob, None, present, "guards start-up and utility RPCs only (no step) in this version: the default is fine")


def _collectives(knob: k.Knob, setup: Setup, step_timeout: float, floor: int, what: str) -> Setting:
    if exists(knob, setup) is False:
        return missing(knob, setup)
    value = max(floor, ceil_to(step_timeout * 1.5))
    if value == floor and knob is k.CPU_DISTRIBUTED:
        return Setting(knob, None, exists(knob, setup),
                       f"PyTorch's {floor} s already outlasts the step timeout ({step_timeout:.0f} s) × 1.5: leave it")
    return Setting(knob, str(value), exists(knob, setup),
                   f"keep the {what} longer than the step timeout ({step_timeout:.0f} s) × 1.5, so a stuck step is "
                   "reported by vLLM, not by a collective abort")


def _client(obs: Observations, policy: Policy, options: Options, prompt: int, tps: Figure | None) -> Setting:
    if tps is None:
        return Setting(k.CLIENT, None, True, "needs a prefill throughput (--tokens-per-sec, --metrics, or a log with stats lines)")
    decode = obs.decode_tps.value if obs.decode_tps else ASSUMED_DECODE_TPS
    decode_s = options.output_tokens / decode
    prefill_s = estimate_prefill_seconds(prompt, tps.value)
    value = str(ceil_to(max(policy.base_s, (prefill_s + decode_s) * policy.factor)))
    source = obs.decode_tps.source if obs.decode_tps else f"an assumed {ASSUMED_DECODE_TPS:g} tokens/s"
    return Setting(k.CLIENT, value, True,
                   f"a whole request: prefill of {prompt:,} token{'' if prompt == 1 else 's'} ≈ {prefill_s:.0f} s + {options.output_tokens} output "
                   f"tokens at {decode:.1f} tokens/s ({source}) ≈ {decode_s:.0f} s, × {policy.factor:g}")


def probe_failures(step_timeout: float) -> int:
    """Failed probes (every PROBE_PERIOD_S) before a restart, so a probe never outruns the step timeout."""
    return int(math.ceil(step_timeout / PROBE_PERIOD_S)) + 1


def _outside(obs: Observations, setup: Setup, step_value: str) -> list[Setting]:
    """Guards outside vLLM, only for the platforms the inputs show or --platform names."""
    out: list[Setting] = []
    if k.Platform.RAY in setup.platforms:
        for knob in (k.RAY_CGRAPH_GET, k.RAY_CGRAPH_SUBMIT):
            out.append(Setting(knob, step_value, exists(knob, setup),
                               "the Ray executor's compiled graph kills a step that outlasts it: keep it equal to the "
                               "step timeout (set it before vLLM starts; vLLM only sets get_timeout if unset)"))
        if "ray-serve-health" in obs.outside_fired:
            value = max(RAY_SERVE_HEALTH_S, int(step_value))
            out.append(Setting(k.RAY_SERVE_HEALTH, str(value), True,
                               "the log shows Ray Serve restarting a replica that failed its health check: a busy "
                               "engine (a V0 engine loop, a long step) answers late, so give the check at least the "
                               f"step timeout and probe less often — in the deployment's code: @serve.deployment("
                               f"health_check_timeout_s={value}, health_check_period_s=30); Ray Serve LLM (10 s by "
                               "default): LLMConfig(deployment_config={...}) with the same keys"))
        else:
            out.append(Setting(k.RAY_SERVE_HEALTH, None, True,
                               "vLLM's check_health answers from the engine's state without waiting for a step: the "
                               "defaults do not kill a slow step; raise it only if replicas restart during long steps"))
    if k.Platform.K8S in setup.platforms:
        failures = probe_failures(float(step_value))
        out.append(Setting(k.K8S_PROBE, f"periodSeconds {PROBE_PERIOD_S}, failureThreshold {failures}, timeoutSeconds 5",
                           True,
                           f"a liveness probe must not restart the pod before the step timeout: {failures} × "
                           f"{PROBE_PERIOD_S} s > {step_value} s; cover start-up with a startupProbe, or probe with "
                           "`engdiag watch --probe` (docs/watch.md), which never fails a slow engine"))
    return out


def what_if(obs: Observations, setup: Setup) -> tuple[WhatIf, ...]:
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
