"""Which guard fired: its owner, its limit (printed or the version's default), what it guarded.

The guards are vLLM's own (the step RPC, engine start-up, V0's iteration/RPC/heartbeat, the
0.33+ watchdog, fault tolerance, the DP coordinator) and those outside it that kill slow engines
just as often (NCCL/gloo process-group timeouts, Ray compiled graphs, DeepEP, Kubernetes probes,
Ray Serve health checks, a launcher's start-up timeout, the client).  ``timeouts.py`` judges them.
"""

from __future__ import annotations

from engdiag.analysis.facts import Facts
from engdiag.analysis.guard_rows import row_for
from engdiag.analysis.model import Activity, Guard
from engdiag.logs.events import Event, Failure, NcclWork, Signal, Timeout
from engdiag.timeouts.knobs import DISTRIBUTED, ENGINE_READY

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


def _guard_for(facts: Facts, event: Event) -> Guard:
    """The guard whose line this is, from its row (``guard_rows``); NCCL's watchdog prints its own limit and work."""
    where = (event.source, event.line, event.stamp.text if event.stamp else None)
    if event.signal is Signal.NCCL_WATCHDOG_TIMEOUT:
        work = event.data if isinstance(event.data, NcclWork) else NcclWork(None)
        what = (f"collective {work.op}" if work.op else "a collective") + (f" #{work.seq}" if work.seq is not None else "")
        owner = "PyTorch (NCCL watchdog)" if work.backend == "NCCL" else "torch_npu (HCCL watchdog)"
        return Guard(f"{work.backend} process-group timeout", owner,
                     work.timeout_ms / 1000 if work.timeout_ms else None, "printed" if work.timeout_ms else "unknown",
                     what, DISTRIBUTED.name, *where)
    data = event.data if isinstance(event.data, Timeout) else Timeout()
    row = row_for(event.signal, data)
    if row is None:
        limit, origin = (data.limit_s, "printed") if data.limit_s is not None else (None, "unknown")
        return Guard("a timeout", "?", limit, origin, "?", None, *where)
    limit, origin = row.limit(facts, event, data)
    call = data.call or row.call_default
    return Guard(row.name.format(call=call), row.owner, limit, origin, row.guarded.format(call=call), row.knob, *where)


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
