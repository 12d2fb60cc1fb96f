"""Snapshot → the ``engdiag.snapshot`` JSON document (also the bundle's content)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from engdiag.render.common import envelope, verdict_doc
from engdiag.snapshot.capture import Snapshot
from engdiag.snapshot.model import Frame, NvmlState, ProcessReport, ThreadReport
from engdiag.snapshot.waitfor import Picture, RankState, pictures


def _frame(frame: Frame) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": frame.name,
        "file": frame.filename or None,
        "line": frame.line or None,
        "native": frame.native,
        "module": frame.module,
        "code": frame.code,
    }
    if frame.locals is not None:
        doc["locals"] = {name: value for name, value in frame.locals}
    return doc


def _thread(thread: ThreadReport) -> dict[str, Any]:
    return {
        "thread_id": thread.thread_id,
        "os_thread_id": thread.os_tid,
        "name": thread.name,
        "category": thread.category.value,
        "motion": thread.motion.value,
        "stuck": thread.motion.value == "stuck",
        "active": thread.active,
        "owns_gil": thread.gil,
        "reason": thread.reason,
        "progress": thread.progress,
        "cpu_s": thread.cpu_s,
        "frames": [_frame(frame) for frame in thread.frames],
    }


def _process(report: ProcessReport) -> dict[str, Any]:
    info = report.info
    return {
        "pid": info.pid,
        "ppid": info.ppid,
        "role": report.role.value,
        "ranks": {k: v for k, v in asdict(report.ranks).items() if v is not None},
        "title": info.title,
        "name": info.name,
        "cmdline": list(info.cmdline),
        "state": info.state,
        "started": info.started,
        "python": info.python,
        "samples": report.samples,
        "pause_ms": list(report.pause_ms),
        "resumed_by_engdiag": report.resumed,
        "node": info.node,
        "cpu_s": report.cpu_s,
        "wall_s": report.wall_s,
        "error": report.error,
        "error_kind": report.error_kind,
        "threads": [_thread(thread) for thread in report.threads],
    }


def _nvml(state: NvmlState) -> dict[str, Any]:
    if not state.available:
        return {"available": False, "reason": state.reason}
    return {
        "available": True,
        "reason": None,
        "driver": state.driver,
        "nvml_version": state.nvml_version,
        "cuda_version": state.cuda_version,
        "pid_note": state.pid_note,
        "gpus": [
            {**gpu.fields, "unsupported": dict(gpu.unsupported), "processes": list(gpu.processes)}
            for gpu in state.gpus
        ],
    }


def _rank(state: RankState) -> dict[str, Any]:
    return {"pid": state.process.info.pid, "ranks": state.process.ranks.label() or None, "state": state.state,
            "op": state.op, "group": state.group, "same_op_every_sample": state.consistent,
            "thread": state.thread.name if state.thread else None}


def _picture(picture: Picture) -> dict[str, Any]:
    return {
        "kind": picture.kind,
        "ops": {op: [s.process.info.pid for s in ranks] for op, ranks in picture.ops},
        "waiting": [_rank(s) for s in picture.waiting],
        "culprits": [_rank(s) for s in picture.culprits],
        "consistency": round(picture.consistency, 2),
    }


def snapshot_doc(snapshot: Snapshot) -> dict[str, Any]:
    """The whole document."""
    doc = envelope("engdiag.snapshot", snapshot.started_at)
    options = snapshot.options
    doc |= {
        "target_pid": snapshot.root_pid,
        "capture": {
            "samples": options.samples,
            "interval_s": options.interval_s,
            "native": options.native,
            "nonblocking": options.nonblocking,
            "locals": options.locals,
            "seconds": round(snapshot.seconds, 3),
            "sample_seconds": [round(s, 3) for s in snapshot.sample_seconds],
            "max_pause_ms": max((max(p.pause_ms) for p in snapshot.processes if p.pause_ms), default=None),
            "py_spy": snapshot.pyspy,
            "py_spy_version": snapshot.pyspy_version,
        },
        "verdict": verdict_doc(snapshot.verdict),
        "wait_for": [_picture(picture) for picture in pictures(snapshot.processes)],
        "processes": [_process(report) for report in snapshot.processes],
        "nvml": _nvml(snapshot.nvml),
        "xid": {"available": snapshot.xid.available, "reason": snapshot.xid.reason, "lines": list(snapshot.xid.lines)},
    }
    return doc
