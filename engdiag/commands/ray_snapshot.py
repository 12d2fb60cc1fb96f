"""``engdiag snapshot --ray [ADDRESS]``: the Ray-cluster branch of the snapshot command (thin)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from engdiag.commands.base import stderr_console, stdout_console, write_json


def default_path(when: datetime) -> Path:
    """``engdiag-ray-snapshot-<UTC time>.json`` in the current folder."""
    return Path(f"engdiag-ray-snapshot-{when.strftime('%Y%m%dT%H%M%SZ')}.json")


def run_ray(
    address: str | None, jobs: list[str] | None, actor_classes: list[str] | None, nodes: list[str] | None,
    samples: int, interval: float, native: bool, nonblocking: bool, locals_: bool, timeout: float,
    out: Path | None, no_bundle: bool, json: bool,
) -> None:
    """Capture the cluster, print it, write the bundle (atomic, 0600)."""
    from engdiag.render.jsonout import dumps
    from engdiag.render.ray_snapshot_doc import ray_snapshot_doc
    from engdiag.render.ray_snapshot_view import ray_snapshot_view
    from engdiag.snapshot.bundle import write_atomically
    from engdiag.snapshot.model import SnapshotOptions
    from engdiag.snapshot.ray_capture import Selection, take_ray_snapshot

    options = SnapshotOptions(samples, interval, native, nonblocking, locals_, timeout)
    selection = Selection(tuple(jobs or ()), tuple(actor_classes or ()), tuple(nodes or ()))
    console = stderr_console()
    if console.is_terminal and not json:
        with console.status("sampling the Ray cluster's vLLM workers…"):
            snapshot = take_ray_snapshot(address, options, selection)
    else:
        snapshot = take_ray_snapshot(address, options, selection)
    document = dumps(ray_snapshot_doc(snapshot))
    if json:
        write_json(document)
    else:
        stdout_console().print(ray_snapshot_view(snapshot))
    if no_bundle:
        return
    path = write_atomically(out or default_path(snapshot.started_at), document)
    console.print(f"bundle: {path} (mode 0600)", markup=False)
