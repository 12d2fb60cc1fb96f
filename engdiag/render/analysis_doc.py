"""Analysis → the ``engdiag.analysis`` JSON document (docs/json-schema.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from engdiag.analysis.analyze import Analysis
from engdiag.analysis.model import Model
from engdiag.analysis.timeline import Timeline
from engdiag.logs.events import CudaOom, Memory, Phase, Preemption, Signal
from engdiag.render.common import envelope, event_doc, single_year, verdict_doc, year_at

SERIES_POINTS = 60
"""Stats intervals kept in the throughput / KV series (the run-up to the incident)."""


def _processes(timeline: Timeline) -> list[dict[str, Any]]:
    return [
        {
            "name": row.proc.name,
            "pid": row.proc.pid,
            "role": row.proc.role.value,
            "ranks": row.proc.ranks.label() or None,
            "last_source": row.source,
            "last_line": row.line,
            "last_time": row.stamp.text if row.stamp is not None else None,
            "last_year": row.stamp.calendar if row.stamp is not None else None,
        }
        for row in timeline.proc_last
    ]


def _memory(timeline: Timeline) -> dict[str, Any]:
    startup = [
        {"name": e.data.name, "value": e.data.value, "unit": e.data.unit, "source": e.source, "line": e.line}
        for e in timeline.of(Signal.MEMORY)
        if isinstance(e.data, Memory)
    ]
    ooms = []
    for event in timeline.of(Signal.CUDA_OOM):
        oom = event.data if isinstance(event.data, CudaOom) else CudaOom()
        ooms.append(
            {
                "source": event.source,
                "line": event.line,
                "time": event.stamp.text if event.stamp else None,
                "device": oom.device,
                "tried_bytes": oom.tried,
                "total_bytes": oom.total,
                "free_bytes": oom.free,
                "allocated_bytes": oom.allocated,
                "reserved_unallocated_bytes": oom.reserved_unallocated,
                "private_pools_bytes": oom.private_pools,
            }
        )
    kv = [s.gpu_kv_pct for _, s in timeline.stats if s.gpu_kv_pct is not None]
    cumulative = [
        e.data.cumulative
        for e in timeline.of(Signal.PREEMPTION)
        if isinstance(e.data, Preemption) and e.data.cumulative
    ]
    return {
        "startup": startup,
        "cuda_oom": ooms,
        "kv_usage": {
            "peak_pct": max(kv) if kv else None,
            "last_pct": kv[-1] if kv else None,
        },
        "preemptions": {
            "v0_cumulative": max(cumulative) if cumulative else None,
            "v1_total": sum(s.preemptions or 0 for _, s in timeline.stats) or None,
            "warnings": timeline.counts.get(Signal.PREEMPTION, 0),
        },
    }


def _series(timeline: Timeline) -> list[dict[str, Any]]:
    return [
        {
            "time": event.stamp.text if event.stamp else None,
            "prompt_tps": stats.prompt_tps,
            "generation_tps": stats.generation_tps,
            "running": stats.running,
            "waiting": stats.waiting,
            "gpu_kv_pct": stats.gpu_kv_pct,
        }
        for event, stats in timeline.stats[-SERIES_POINTS:]
    ]


def _phases(timeline: Timeline) -> list[dict[str, Any]]:
    return [
        {
            "name": e.data.name,
            "seconds": e.data.seconds,
            "gib": e.data.gib,
            "signal": e.signal.value,
            "time": e.stamp.text if e.stamp else None,
            "source": e.source,
            "line": e.line,
            "process": None if e.proc is None else {"name": e.proc.name, "pid": e.proc.pid, "role": e.proc.role.value},
        }
        for e in timeline.of(Signal.STARTUP_PHASE, Signal.COMPILE)
        if isinstance(e.data, Phase)
    ]


def _model(model: Model, year: Callable[[str, int], int | None], one_year: int | None) -> dict[str, Any]:
    """Activities, waits and the guard that fired: what the verdict was judged from."""
    guard = model.guard
    return {
        "activities": [
            {
                "name": a.name,
                "process": a.process,
                "start": a.start,
                "start_year": one_year if a.start else None,
                "seconds": a.seconds,
                "advancing": a.advancing,
                "finished": a.finished,
                "startup": a.startup,
                "detail": a.detail,
                "source": a.source,
                "line": a.line,
            }
            for a in model.activities
        ],
        "waits": [
            {
                "waiter": w.waiter,
                "on": w.on,
                "via": w.via,
                "satisfiable": w.satisfiable,
                "why": w.why,
                "seconds": w.seconds,
                "source": w.source,
                "line": w.line,
            }
            for w in model.waits
        ],
        "guard": None
        if guard is None
        else {
            "name": guard.name,
            "owner": guard.owner,
            "limit_seconds": guard.limit_s,
            "limit_origin": guard.limit_origin,
            "guarded": guard.guarded,
            "knob": guard.knob,
            "source": guard.source,
            "line": guard.line,
            "time": guard.time,
            "year": year(guard.source, guard.line) if guard.time else None,
        },
        "startup_seconds": model.startup_seconds,
    }


def analysis_doc(analysis: Analysis, generated_at: datetime | None = None) -> dict[str, Any]:
    """The whole JSON document for one analysis."""
    t = analysis.timeline
    incident = analysis.incident
    prompts = t.prompt_lengths
    config = t.config
    doc = envelope("engdiag.analysis", generated_at)
    doc |= {
        "inputs": [{"path": i.name, "bytes": i.bytes, "lines": i.lines} for i in analysis.inputs],
        "verdict": verdict_doc(analysis.verdict),
        "timeline": {
            "first_time": t.first_stamp.text if t.first_stamp else None,
            "last_time": t.last_stamp.text if t.last_stamp else None,
            "first_year": t.first_stamp.calendar if t.first_stamp else None,
            "last_year": t.last_stamp.calendar if t.last_stamp else None,
            "last_progress": event_doc(incident.last_progress),
            "first_anomaly": event_doc(incident.first_anomaly),
            "fatal": event_doc(incident.fatal),
            "no_progress_seconds": incident.no_progress_seconds,
            "processes": _processes(t),
        },
        "engine": {
            "vllm_version": t.version.version if t.version else None,
            "engine": t.version.engine if t.version else None,
            "model": config.model,
            "tensor_parallel": config.tp,
            "pipeline_parallel": config.pp,
            "data_parallel": config.dp,
            "nccl_ranks": config.nranks,
            "chunked_prefill": config.chunked_prefill,
            "max_num_batched_tokens": config.max_num_batched_tokens,
        },
        "model": _model(analysis.model, year_at(analysis.timeline), single_year(analysis.timeline)),
        "startup_phases": _phases(t),
        "memory": _memory(t),
        "throughput": _series(t),
        "requests": {
            name: t.counts.get(signal, 0)
            for name, signal in (
                ("received", Signal.REQUEST_RECEIVED),
                ("added", Signal.REQUEST_ADDED),
                ("finished", Signal.REQUEST_FINISHED),
                ("aborted", Signal.REQUEST_ABORTED),
                ("failed", Signal.REQUEST_FAILED),
            )
        },
        "prompt_lengths": {
            "count": prompts.count,
            "p50": prompts.p50,
            "p95": prompts.p95,
            "p99": prompts.p99,
            "max": prompts.max,
            "lower_bound": prompts.lower_bound,
            "origins": prompts.origins,
        },
        "signals": {signal.value: count for signal, count in sorted(t.counts.items(), key=lambda kv: kv[0].value)},
    }
    return doc
