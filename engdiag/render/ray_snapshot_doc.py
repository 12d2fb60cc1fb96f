"""RaySnapshot → the ``engdiag.ray-snapshot`` JSON document (also the bundle's content)."""

from __future__ import annotations

from typing import Any

from engdiag.render.common import envelope, verdict_doc
from engdiag.render.snapshot_doc import _process
from engdiag.snapshot.ray_capture import RayProcess, RaySnapshot
from engdiag.snapshot.ray_dashboard import Refusal


def _refusal(refusal: Refusal) -> dict[str, Any]:
    return {"kind": refusal.kind, "message": refusal.message, "fix": refusal.fix}


def _ray_process(process: RayProcess) -> dict[str, Any]:
    target = process.target
    doc = _process(process.report)
    doc["ray"] = {
        "kind": target.kind,
        "class_name": target.class_name,
        "actor_id": target.actor_id,
        "name": target.name,
        "state": target.state,
        "job_id": target.job_id,
        "node_id": target.node_id,
        "node_ip": target.node_ip,
        "gpus_required": target.gpus,
        "gpus": list(target.gpu_ids),
        "fix": process.fix,
    }
    return doc


def ray_snapshot_doc(snapshot: RaySnapshot) -> dict[str, Any]:
    """The whole document."""
    doc = envelope("engdiag.ray-snapshot", snapshot.started_at)
    options, selection = snapshot.options, snapshot.selection
    doc |= {
        "address": snapshot.address,
        "ray_version": snapshot.ray_version,
        "capture": {
            "samples": options.samples,
            "interval_s": options.interval_s,
            "native": options.native,
            "timeout_s": options.dump_timeout_s,
            "seconds": round(snapshot.seconds, 3),
            "sample_seconds": [round(s, 3) for s in snapshot.sample_seconds],
            "selection": {"jobs": list(selection.jobs), "actor_classes": list(selection.actor_classes),
                          "nodes": list(selection.nodes)},
        },
        "verdict": verdict_doc(snapshot.verdict),
        "jobs": [{"job_id": job.job_id, "verdict": verdict_doc(job.verdict)} for job in snapshot.jobs],
        "cluster_errors": [_refusal(refusal) for refusal in snapshot.cluster_errors],
        "nodes": [{"node_id": n.node_id, "ip": n.ip, "alive": n.alive, "head": n.head, "name": n.name}
                  for n in snapshot.nodes],
        "processes": [_ray_process(process) for process in snapshot.processes],
        "skipped": list(snapshot.skipped),
    }
    return doc
