"""Every guard engdiag knows, one row each: its owner, what it guards, its knob, and its limit when the line that
fired it printed none (the version's default, the value a start-up line armed it with, or what decides it).

A row is found by the signal and the ``Timeout.guard`` the line's rule set (``guards._guard_for``); adding a guard
is adding a row, and every row builds its ``Guard`` the same way.
"""

from __future__ import annotations

from engdiag.analysis.facts import Facts
from engdiag.analysis.guard_row import GuardRow
from engdiag.analysis.guarded_waits import GUARDED_WAITS
from engdiag.logs.events import Signal, Timeout
from engdiag.logs.patterns.guards import (
    DYNAMO_CANARY,
    DYNAMO_HEALTH,
    KSERVE_UPSTREAM,
    LLMD_DECODER,
    OMNI_ORCHESTRATOR,
    RAY_SERVE_REQUEST,
    RAY_USER_LOOP,
    ROUTER_HEALTH,
    SKY_INITIAL,
    SKY_PROBE,
)
from engdiag.logs.patterns.lmcache import LMCACHE_AUTOSTART
from engdiag.logs.patterns.waits import ASCEND_TASK
from engdiag.timeouts.knobs import ENGINE_READY, EXECUTE_MODEL, ITERATION, RPC, WATCHDOG, parse_version

V0_RPC = "v0-rpc"
"""The key of V0's frontend RPCs (their lines name the call, not a guard)."""
_V0_RPC_CALLS = {"RPCServer", "MQLLMEngine", "Server"}


def _step_limit(facts: Facts, call: str | None) -> tuple[float | None, str]:
    """The execute_model guard's limit for this version: 40 s fixed in 0.8.x, 300 s from 0.9.

    Without a version line, a ``sample_tokens`` RPC still dates the log: that RPC exists only in
    versions that read VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (absent in 0.11.0, present from 0.17.1).
    """
    version = parse_version(facts.t.version.version if facts.t.version else None)
    if version is None and call == "sample_tokens":
        return float(EXECUTE_MODEL.default), "default; the sample_tokens RPC dates the log after 0.11"
    if version is None:
        return None, "unknown (300 s from 0.9; 40 s in 0.8)"
    return (40.0, "default") if version < (0, 9, 0) else (float(EXECUTE_MODEL.default), "default")


def _ray_limit(facts: Facts, call: str | None) -> tuple[float | None, str]:
    """Ray's own 10 s default until vLLM set RAY_CGRAPH_get_timeout to 300 s (0.8.5)."""
    version = parse_version(facts.t.version.version if facts.t.version else None)
    if version is None:
        return None, "unknown (Ray's default 10 s; vLLM sets 300 s from 0.8.5)"
    return (10.0, "default") if version < (0, 8, 5) else (300.0, "default")


_HCCL_EXEC = "HCCL_EXEC_TIMEOUT"

ROWS: dict[tuple[Signal, str | None], GuardRow] = {
    # vLLM's own
    (Signal.RPC_TIMEOUT, "ray-cgraph"): GuardRow(
        "Ray compiled-graph read timeout", "Ray", "reading one step's output from the workers through the Ray compiled "
        "graph", "RAY_CGRAPH_get_timeout", version_default=_ray_limit),
    (Signal.RPC_TIMEOUT, V0_RPC): GuardRow(
        "V0 frontend RPC timeout", "vLLM", "an RPC from the API server to the engine process (health check, request)",
        RPC.name),
    (Signal.RPC_TIMEOUT, None): GuardRow(
        "{call} step timeout", "vLLM", "one model step on the workers (execute_model / sample_tokens)",
        EXECUTE_MODEL.name, version_default=_step_limit, call_default="execute_model"),
    (Signal.ITERATION_TIMEOUT, None): GuardRow(
        "V0 engine iteration timeout", "vLLM", "one V0 engine step", ITERATION.name, default_s=float(ITERATION.default)),
    (Signal.HEARTBEAT_LOST, None): GuardRow(
        "V0 MQLLMEngine heartbeat", "vLLM", "the V0 engine loop's heartbeat to the API server", RPC.name),
    (Signal.ENGINE_READY_TIMEOUT, "omni-stage"): GuardRow(
        "vllm-omni stage start-up timeout", "vllm-omni",
        "a stage's process becoming ready: weight loading, profiling, compilation", "--stage-init-timeout"),
    (Signal.ENGINE_READY_TIMEOUT, "dp-coordinator"): GuardRow(
        "DP coordinator start-up timeout", "vLLM", "the data-parallel coordinator reporting its addresses", None),
    (Signal.ENGINE_READY_TIMEOUT, None): GuardRow(
        "engine start-up timeout", "vLLM", "engine start-up: weight loading, profiling, compilation, CUDA-graph capture",
        ENGINE_READY.name, default_s=float(ENGINE_READY.default)),
    (Signal.STACK_DUMP, None): GuardRow(
        "vLLM watchdog (0.33+)", "vLLM", "progress of the process's main loop ({call}); dumps stacks, never kills",
        WATCHDOG.name, default_s=300.0, armed_by="watchdog_configured", call_default="feed timeout"),
    (Signal.RECOVERY_TIMEOUT, None): GuardRow(
        "fault-tolerance recovery timeout", "vLLM", "recovery of the engine after a fault ([FT])", None),
    # collectives and transfers
    (Signal.COMM_TIMEOUT, "gloo"): GuardRow(
        "{call} timeout", "PyTorch (gloo)", "a CPU-side collective between ranks",
        "--cpu-distributed-timeout-seconds (0.22+)", call_default="gloo collective"),
    (Signal.COMM_TIMEOUT, ASCEND_TASK): GuardRow(
        "Ascend stream task timeout", "Ascend runtime", "a device stream's work, most often an HCCL collective",
        _HCCL_EXEC, unprinted=f"{_HCCL_EXEC} for collectives (1836 s default)"),
    (Signal.COMM_TIMEOUT, "hccl"): GuardRow(
        "HCCL notify-wait timeout", "Ascend HCCL", "{call}", _HCCL_EXEC, unprinted=f"{_HCCL_EXEC} (1836 s default)",
        call_default="a collective between NPUs"),
    **{(Signal.COMM_TIMEOUT, key): wait.row for key, wait in GUARDED_WAITS.items()},
    (Signal.COMM_TIMEOUT, None): GuardRow(
        "{call} timeout", "DeepEP", "tokens exchanged between expert-parallel ranks", None, call_default="DeepEP"),
    # outside vLLM: platforms, serving layers, launchers, clients
    (Signal.EXTERNAL_GUARD, "k8s-probe"): GuardRow(
        "Kubernetes {call}", "platform (kubelet)", "the server answering /health within the probe's limits",
        "livenessProbe / startupProbe", unprinted="the pod spec's periodSeconds × failureThreshold",
        call_default="probe"),
    (Signal.EXTERNAL_GUARD, "platform"): GuardRow(
        "platform start-up timeout", "platform", "the server becoming ready after launch",
        "the launcher's start-up timeout", unprinted="the launcher's own setting", armed_by="platform_limit_configured"),
    (Signal.EXTERNAL_GUARD, RAY_SERVE_REQUEST): GuardRow(
        "Ray Serve request timeout", "Ray Serve", "one request from the proxy to its answer (408 when it runs out)",
        "http_options.request_timeout_s"),
    (Signal.EXTERNAL_GUARD, RAY_USER_LOOP): GuardRow(
        "Ray Serve user event-loop probe", "Ray Serve",
        "the replica's event loop (where Ray Serve LLM runs vLLM's AsyncLLM) running a probe; three misses fail its "
        "health check", "RAY_SERVE_USER_HEALTH_CHECK_PROBE_TIMEOUT_S / RAY_SERVE_USER_HEALTH_CHECK_PROBE_MAX_FAIL",
        default_s=300.0),
    (Signal.EXTERNAL_GUARD, SKY_INITIAL): GuardRow(
        "SkyServe initial delay", "SkyServe", "a new replica's first ready probe after launch",
        "service.readiness_probe.initial_delay_seconds", default_s=1200.0,
        armed_by="skyserve_initial_delay_configured"),
    (Signal.EXTERNAL_GUARD, SKY_PROBE): GuardRow(
        "SkyServe readiness probe", "SkyServe",
        "a replica answering its readiness probe (180 s of failures kills one that was ready)",
        "service.readiness_probe.timeout_seconds"),
    (Signal.EXTERNAL_GUARD, KSERVE_UPSTREAM): GuardRow(
        "KServe predictor request timeout", "KServe", "a request proxied to the vLLM predictor",
        "--predictor_request_timeout_seconds", unprinted="600 s in v0.13"),
    (Signal.EXTERNAL_GUARD, ROUTER_HEALTH): GuardRow(
        "production-stack router health check", "production-stack router",
        "a backend answering a one-token request; on failure it leaves the routing table",
        "--static-backend-health-check-timeout-seconds", default_s=10.0),
    (Signal.EXTERNAL_GUARD, LLMD_DECODER): GuardRow(
        "llm-d routing sidecar", "llm-d", "a request proxied to the vLLM server in its pod (503 when it is refused)",
        None, unprinted="none: a refused connection fails at once"),
    (Signal.EXTERNAL_GUARD, DYNAMO_CANARY): GuardRow(
        "Dynamo canary health check", "Dynamo",
        "an endpoint answering a canary request after it was idle; on failure it is marked not ready",
        "DYN_HEALTH_CHECK_REQUEST_TIMEOUT", default_s=3.0),
    (Signal.EXTERNAL_GUARD, DYNAMO_HEALTH): GuardRow(
        "Dynamo engine health check", "Dynamo",
        "vLLM's engine answering Dynamo's check, every 2 s; on failure Dynamo exits the worker",
        "DYN_ENGINE_HEALTH_CHECK_TIMEOUT", default_s=30.0),
    (Signal.EXTERNAL_GUARD, OMNI_ORCHESTRATOR): GuardRow(
        "vllm-omni orchestrator start-up timeout", "vllm-omni",
        "its stages becoming ready after launch (each within --stage-init-timeout)",
        "--init-timeout / --stage-init-timeout"),
    (Signal.EXTERNAL_GUARD, LMCACHE_AUTOSTART): GuardRow(
        "LMCache MP server start-up wait", "LMCache", "the LMCache MP server vLLM started answering its health check",
        "lmcache.mp.autostart.wait_timeout", default_s=90.0),
    (Signal.EXTERNAL_GUARD, "client"): GuardRow(
        "client request timeout", "client", "the whole request, as the client waits for its answer",
        "client request timeout", unprinted="the client's own setting"),
    (Signal.EXTERNAL_GUARD, None): GuardRow(
        "Ray Serve health check", "Ray Serve", "the replica answering check_health",
        "health_check_period_s / health_check_timeout_s", unprinted="health_check_timeout_s"),
}


def row_for(signal: Signal, data: Timeout) -> GuardRow | None:
    """The row of the guard a line fired: by its guard, else the signal's own (None: no row, e.g. NCCL's)."""
    if data.call == ASCEND_TASK:
        key: str | None = ASCEND_TASK
    elif signal is Signal.RPC_TIMEOUT and data.guard != "ray-cgraph" and data.call in _V0_RPC_CALLS:
        key = V0_RPC
    else:
        key = data.guard
    return ROWS.get((signal, key)) or ROWS.get((signal, None))
