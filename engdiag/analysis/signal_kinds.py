"""What each signal means to the analysis: work done, an anomaly, a fatal, the engine serving.

The timeline, the load tracker, the classifier's rules and the live watcher all ask the same question of
an event — did the engine do work? — so the answer (``is_progress``) lives in one place.
"""

from __future__ import annotations

from engdiag.logs.events import Event, Phase, Progress, Signal, Stats

PROGRESS = frozenset(
    {
        Signal.ITERATION,
        Signal.REQUEST_FINISHED,
        Signal.RESPONSE_GENERATED,
        Signal.STARTUP_PHASE,
        Signal.COMPILE,
        Signal.SERVER_READY,
        Signal.MEMORY,
    }
)
"""Signals that prove the engine did work (stats and bars count when they move)."""

FATAL = frozenset(
    {
        Signal.ITERATION_TIMEOUT,
        Signal.HEARTBEAT_LOST,
        Signal.RPC_TIMEOUT,
        Signal.ENGINE_READY_TIMEOUT,
        Signal.ENGINE_FATAL,
        Signal.ENGINE_DEAD,
        Signal.WORKER_DIED,
        Signal.PROCESS_EXCEPTION,
        Signal.NCCL_WATCHDOG_TIMEOUT,
        Signal.FATAL_SIGNAL,
        Signal.CUDA_OOM,
        Signal.HOST_OOM,
        Signal.CUDA_ERROR,
        Signal.KV_CACHE_INSUFFICIENT,
    }
)
"""Signals after which the engine does not come back by itself."""

ANOMALIES = FATAL | frozenset(
    {
        Signal.SHM_STALL,
        Signal.WORKER_EXCEPTION,
        Signal.NCCL_WORK_STATUS,
        Signal.NCCL_ABORT,
        Signal.PREEMPTION,
        Signal.HTTP_ERROR,
        Signal.REQUEST_FAILED,
        Signal.STACK_DUMP,
        Signal.KV_BUFFER_FULL,
        Signal.SHM_TOO_SMALL,
        Signal.DRIVER_NO_MEMORY,
        Signal.KV_POOL_EXHAUSTED,
        Signal.KV_LEASE_EXPIRED,
        Signal.KV_READ_LATE,
        Signal.KV_LOAD_FAILED,
        Signal.LMCACHE_DEGRADED,
    }
)
"""Signals that something went wrong: every fatal one, and the warnings that precede or accompany them."""

SERVING = frozenset(
    {
        Signal.STATS,
        Signal.ITERATION,
        Signal.REQUEST_RECEIVED,
        Signal.REQUEST_ADDED,
        Signal.REQUEST_FINISHED,
        Signal.RESPONSE_GENERATED,
        Signal.SERVER_READY,
    }
)
"""Signals that only appear once the engine serves."""


def is_progress(event: Event) -> bool:
    """Does this event show the engine doing work?"""
    data = event.data
    if event.signal is Signal.STATS and isinstance(data, Stats):
        return data.prompt_tps > 0 or data.generation_tps > 0
    if event.signal is Signal.PROGRESS_BAR and isinstance(data, Progress):
        return data.done > 0
    if isinstance(data, Phase) and not data.is_work:
        return False  # the API server waiting on the engine, or a setting logged, is not the engine working
    return event.signal in PROGRESS
