"""Which guard fired: its owner, its limit (printed or the version's default), what it guarded.

The guards are vLLM's own (the step RPC, engine start-up, V0's iteration/RPC/heartbeat, the
0.33+ watchdog, fault tolerance, the DP coordinator) and those outside it that kill slow engines
just as often (NCCL/gloo process-group timeouts, Ray compiled graphs, DeepEP, Kubernetes probes,
Ray Serve health checks, a launcher's start-up timeout, the client).  ``timeouts.py`` judges them.
"""

from __future__ import annotations

from engdiag.analysis.facts import Facts
from engdiag.analysis.guarded_waits import GUARDED_WAITS
from engdiag.analysis.model import Activity, Guard
from engdiag.logs.events import Event, Failure, NcclWork, Phase, Signal, Timeout
from engdiag.logs.patterns.guards import (
    DYNAMO_CANARY,
    DYNAMO_HEALTH,
    KSERVE_UPSTREAM,
    OMNI_ORCHESTRATOR,
    RAY_SERVE_REQUEST,
    ROUTER_HEALTH,
    SKY_INITIAL,
    SKY_PROBE,
)
from engdiag.logs.patterns.lmcache import LMCACHE_AUTOSTART
from engdiag.logs.patterns.waits import ASCEND_TASK
from engdiag.timeouts.knobs import (
    DISTRIBUTED,
    ENGINE_READY,
    EXECUTE_MODEL,
    ITERATION,
    RPC,
    WATCHDOG,
    parse_version,
)

_V0_RPC_CALLS = {"RPCServer", "MQLLMEngine", "Server"}
GUARD_SIGNALS = (
    Signal.RPC_TIMEOUT,
    Signal.ITERATION_TIMEOUT,
    Signal.HEARTBEAT_LOST,
    Signal.ENGINE_READY_TIMEOUT,
    Signal.COMM_TIMEOUT,
    Signal.NCCL_WATCHDOG_TIMEOUT,
    Signal.RECOVERY_TIMEOUT,
    Signal.STACK_DUMP,
    Signal.EXTERNAL_GUARD,
)


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


def _ray_limit(facts: Facts) -> tuple[float | None, str]:
    """Ray's own 10 s default until vLLM set RAY_CGRAPH_get_timeout to 300 s (0.8.5)."""
    version = parse_version(facts.t.version.version if facts.t.version else None)
    if version is None:
        return None, "unknown (Ray's default 10 s; vLLM sets 300 s from 0.8.5)"
    return (10.0, "default") if version < (0, 8, 5) else (300.0, "default")


def _guard_for(facts: Facts, event: Event) -> Guard:
    data = event.data if isinstance(event.data, Timeout) else Timeout()
    where = (event.source, event.line, event.stamp.text if event.stamp else None)
    limit, origin = (data.limit_s, "printed") if data.limit_s is not None else (None, "unknown")
    signal = event.signal
    if signal is Signal.RPC_TIMEOUT and data.guard == "ray-cgraph":
        limit, origin = _ray_limit(facts)
        return Guard("Ray compiled-graph read timeout", "Ray", limit, origin,
                     "reading one step's output from the workers through the Ray compiled graph",
                     "RAY_CGRAPH_get_timeout", *where)
    if signal is Signal.RPC_TIMEOUT and data.call in _V0_RPC_CALLS:
        return Guard("V0 frontend RPC timeout", "vLLM", limit, origin,
                     "an RPC from the API server to the engine process (health check, request)", RPC.name, *where)
    if signal is Signal.RPC_TIMEOUT:
        if limit is None:
            limit, origin = _step_limit(facts, data.call)
        return Guard(f"{data.call or 'execute_model'} step timeout", "vLLM", limit, origin,
                     "one model step on the workers (execute_model / sample_tokens)", EXECUTE_MODEL.name, *where)
    if signal is Signal.ITERATION_TIMEOUT:
        return Guard("V0 engine iteration timeout", "vLLM", limit or float(ITERATION.default),
                     origin if limit else "default", "one V0 engine step", ITERATION.name, *where)
    if signal is Signal.HEARTBEAT_LOST:
        return Guard("V0 MQLLMEngine heartbeat", "vLLM", limit, origin,
                     "the V0 engine loop's heartbeat to the API server", RPC.name, *where)
    if signal is Signal.ENGINE_READY_TIMEOUT:
        if data.guard == "omni-stage":
            return Guard("vllm-omni stage start-up timeout", "vllm-omni", limit, origin,
                         "a stage's process becoming ready: weight loading, profiling, compilation",
                         "--stage-init-timeout", *where)
        if data.guard == "dp-coordinator":
            return Guard("DP coordinator start-up timeout", "vLLM", limit, origin,
                         "the data-parallel coordinator reporting its addresses", None, *where)
        return Guard("engine start-up timeout", "vLLM", limit or float(ENGINE_READY.default),
                     origin if limit else "default",
                     "engine start-up: weight loading, profiling, compilation, CUDA-graph capture",
                     ENGINE_READY.name, *where)
    if signal is Signal.COMM_TIMEOUT and data.guard == "gloo":
        return Guard(f"{data.call} timeout", "PyTorch (gloo)", limit, origin,
                     "a CPU-side collective between ranks", "--cpu-distributed-timeout-seconds (0.22+)", *where)
    if signal is Signal.COMM_TIMEOUT and data.call == ASCEND_TASK:
        return Guard("Ascend stream task timeout", "Ascend runtime", limit,
                     origin if limit else "HCCL_EXEC_TIMEOUT for collectives (1836 s default)",
                     "a device stream's work, most often an HCCL collective", "HCCL_EXEC_TIMEOUT", *where)
    if signal is Signal.COMM_TIMEOUT and data.guard == "hccl":
        return Guard("HCCL notify-wait timeout", "Ascend HCCL", None, "HCCL_EXEC_TIMEOUT (1836 s default)",
                     data.call or "a collective between NPUs", "HCCL_EXEC_TIMEOUT", *where)
    if signal is Signal.COMM_TIMEOUT and (known := GUARDED_WAITS.get(data.guard or "")) is not None:
        if limit is None:
            limit, origin = known.default_s, known.default_origin
        return Guard(known.guard, known.owner, limit, origin, known.guarded, known.knob, *where)
    if signal is Signal.COMM_TIMEOUT:
        return Guard(f"{data.call or 'DeepEP'} timeout", "DeepEP", None, "unknown",
                     "tokens exchanged between expert-parallel ranks", None, *where)
    if signal is Signal.NCCL_WATCHDOG_TIMEOUT:
        work = event.data if isinstance(event.data, NcclWork) else NcclWork(None)
        what = (f"collective {work.op}" if work.op else "a collective") + (f" #{work.seq}" if work.seq is not None else "")
        owner = "PyTorch (NCCL watchdog)" if work.backend == "NCCL" else "torch_npu (HCCL watchdog)"
        return Guard(f"{work.backend} process-group timeout", owner,
                     work.timeout_ms / 1000 if work.timeout_ms else None, "printed" if work.timeout_ms else "unknown",
                     what, DISTRIBUTED.name, *where)
    if signal is Signal.STACK_DUMP:
        set_to = [e.data.name.split()[-1] for e in facts.before(event)
                  if isinstance(e.data, Phase) and e.data.name.startswith("watchdog_configured")]
        limit, origin = (float(set_to[-1]), "printed") if set_to else (300.0, "default")
        return Guard("vLLM watchdog (0.33+)", "vLLM", limit, origin,
                     f"progress of the process's main loop ({data.call or 'feed timeout'}); dumps stacks, never kills",
                     WATCHDOG.name, *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == "k8s-probe":
        return Guard(f"Kubernetes {data.call}", "platform (kubelet)", None, "the pod spec's periodSeconds × failureThreshold",
                     "the server answering /health within the probe's limits", "livenessProbe / startupProbe", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == "platform":
        armed = [float(e.data.name.split()[-1]) for e in facts.before(event)
                 if isinstance(e.data, Phase) and e.data.name.startswith("platform_limit_configured")]
        if limit is None and armed:
            limit, origin = armed[-1], "printed"
        return Guard("platform start-up timeout", "platform", limit, origin if limit is not None else "the launcher's own setting",
                     "the server becoming ready after launch", "the launcher's start-up timeout", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == RAY_SERVE_REQUEST:
        return Guard("Ray Serve request timeout", "Ray Serve", limit, origin,
                     "one request from the proxy to its answer (408 when it runs out)",
                     "http_options.request_timeout_s", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == SKY_INITIAL:
        armed = [float(e.data.name.split()[-1]) for e in facts.before(event)
                 if isinstance(e.data, Phase) and e.data.name.startswith("skyserve_initial_delay_configured")]
        limit, origin = (armed[-1], "printed") if armed else (1200.0, "default")
        return Guard("SkyServe initial delay", "SkyServe", limit, origin,
                     "a new replica's first ready probe after launch", "service.readiness_probe.initial_delay_seconds",
                     *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == SKY_PROBE:
        return Guard("SkyServe readiness probe", "SkyServe", limit, origin,
                     "a replica answering its readiness probe (180 s of failures kills one that was ready)",
                     "service.readiness_probe.timeout_seconds", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == KSERVE_UPSTREAM:
        return Guard("KServe predictor request timeout", "KServe", limit, origin if limit else "600 s in v0.13",
                     "a request proxied to the vLLM predictor", "--predictor_request_timeout_seconds", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == ROUTER_HEALTH:
        return Guard("production-stack router health check", "production-stack router", limit or 10.0,
                     origin if limit else "default",
                     "a backend answering a one-token request; on failure it leaves the routing table",
                     "--static-backend-health-check-timeout-seconds", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == DYNAMO_CANARY:
        return Guard("Dynamo canary health check", "Dynamo", limit or 3.0, origin if limit else "default",
                     "an endpoint answering a canary request after it was idle; on failure it is marked not ready",
                     "DYN_HEALTH_CHECK_REQUEST_TIMEOUT", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == DYNAMO_HEALTH:
        return Guard("Dynamo engine health check", "Dynamo", limit or 30.0, origin if limit else "default",
                     "vLLM's engine answering Dynamo's check, every 2 s; on failure Dynamo exits the worker",
                     "DYN_ENGINE_HEALTH_CHECK_TIMEOUT", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == OMNI_ORCHESTRATOR:
        return Guard("vllm-omni orchestrator start-up timeout", "vllm-omni", limit, origin if limit else "unknown",
                     "its stages becoming ready after launch (each within --stage-init-timeout)",
                     "--init-timeout / --stage-init-timeout", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == LMCACHE_AUTOSTART:
        return Guard("LMCache MP server start-up wait", "LMCache", limit or 90.0, origin if limit else "default",
                     "the LMCache MP server vLLM started answering its health check",
                     "lmcache.mp.autostart.wait_timeout", *where)
    if signal is Signal.EXTERNAL_GUARD and data.guard == "client":
        return Guard("client request timeout", "client", limit, origin if limit is not None else "the client's own setting",
                     "the whole request, as the client waits for its answer", "client request timeout", *where)
    if signal is Signal.EXTERNAL_GUARD:
        return Guard("Ray Serve health check", "Ray Serve", limit, origin if limit else "health_check_timeout_s",
                     "the replica answering check_health", "health_check_period_s / health_check_timeout_s", *where)
    if signal is Signal.RECOVERY_TIMEOUT:
        return Guard("fault-tolerance recovery timeout", "vLLM", limit, origin,
                     "recovery of the engine after a fault ([FT])", None, *where)
    return Guard("a timeout", "?", limit, origin, "?", None, *where)


def _client_guard(facts: Facts) -> Guard | None:
    aborted = facts.t.of(Signal.REQUEST_ABORTED)
    if not aborted or not facts.stats:
        return None
    event = aborted[0]
    return Guard("client request timeout", "client", None, "unknown",
                 "the whole request, as the client or gateway waits for it", "client request timeout",
                 event.source, event.line, event.stamp.text if event.stamp else None)


def guard(facts: Facts) -> Guard | None:
    """The guard that fired first (vLLM's, Ray's, NCCL's, DeepEP's, or the client's)."""
    fatal = timeout_event(facts)
    fired = [e for e in facts.t.of(*GUARD_SIGNALS)
             if not (e.signal is Signal.STACK_DUMP and isinstance(e.data, Timeout) and e.data.is_stop_dump)]
    other_fired = fatal is not None or any(e.signal is not Signal.RECOVERY_TIMEOUT for e in fired)
    for event in fired:
        if event.signal is Signal.RECOVERY_TIMEOUT and other_fired:
            # fault tolerance only waits for recovery after another fault ("[FT] Busy loop raised %s. Waiting for
            # recovery.", then the original exception re-raised): that fault's guard is the one that fired
            continue
        return _guard_for(facts, event)
    if fatal is not None:
        return _guard_for(facts, fatal)
    return _client_guard(facts)


_CRASH_SIGNALS = (Signal.CUDA_OOM, Signal.CUDA_ERROR, Signal.FATAL_SIGNAL, Signal.WORKER_EXCEPTION,
                  Signal.WORKER_DIED, Signal.COLLECTIVE_MISMATCH, Signal.PEER_LOST, Signal.RENDEZVOUS_FAILED)


def cut_startup_wait(facts: Facts, activities: tuple[Activity, ...]) -> Guard | None:
    """The start-up guard, when the API server's start-up wait died while start-up work was still advancing.

    A traceback through ``launch_core_engines`` / ``wait_for_engine_startup`` with its exception cut off,
    no crash anywhere, and a start-up phase still advancing at its last line.  Where API servers run apart
    from the engines (``run_multi_api_server``, ``ApiServer_N`` processes), each waits on its input socket
    for VLLM_ENGINE_READY_TIMEOUT_S (600 s; fixed before 0.14) and its exit ends the launcher's wait —
    nightly-161-shard-load-timeout-ascend, 43 min into a 161-shard load.  A single API server's
    ``wait_for_engine_startup`` has no deadline (0.9.2–0.34): there only a process exit ends it.
    """
    failures = [e for e in facts.t.of(Signal.ENGINE_FATAL)
                if isinstance(e.data, Failure) and e.data.name == "start-up" and not e.data.exception]
    if not failures or facts.t.of(*_CRASH_SIGNALS):
        return None
    event = failures[0]
    if facts.served_before(event) or not any(a.startup and a.advancing and not a.finished for a in activities):
        return None
    if not facts.api_servers_apart:
        return None  # one API server's wait_for_engine_startup has no deadline: only a process exit ends it
    return Guard("engine start-up timeout", "vLLM", float(ENGINE_READY.default),
                 "default; inferred — the start-up wait's traceback is cut before its exception",
                 "engine start-up: weight loading, profiling, compilation, CUDA-graph capture",
                 ENGINE_READY.name, event.source, event.line, event.stamp.text if event.stamp else None)


def timeout_event(facts: Facts) -> Event | None:
    """The first line where one of vLLM's own timeouts fired."""
    timeouts = facts.t.of(
        Signal.RPC_TIMEOUT, Signal.ITERATION_TIMEOUT, Signal.HEARTBEAT_LOST, Signal.ENGINE_READY_TIMEOUT
    )
    if timeouts:
        return timeouts[0]
    for event in facts.t.of(Signal.ENGINE_FATAL):
        if (facts.exception_of(event) or "").startswith(("TimeoutError", "asyncio.exceptions.TimeoutError")):
            return event
    return None
