"""``engdiag snapshot PID``: live stacks of the vLLM process tree + GPU state → a bundle and a verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from engdiag.commands.base import guard, stderr_console, stdout_console, write_json
from engdiag.errors import UsageError

# NOTE: psutil, pynvml, py-spy handling and the renderers load only when this command runs.

NAME = "snapshot"
NO_ARGS_HELP = True
HELP = (
    "Capture live Python stacks of a vLLM server's whole process tree (py-spy, several samples, in parallel) "
    "and the GPUs' state (NVML); say slow, deadlocked or fragmented; write a bundle file."
)
LONG_CAPTURE_S = 5.0
"""Captures expected to take longer print their progress on stderr even when it is not a terminal."""


def _pid(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise UsageError(f"{text!r} is not a process id", hint="pass a number, e.g. `engdiag snapshot $(pgrep -f 'vllm serve' | head -1)`") from None
    if value <= 0:
        raise UsageError(f"{value} is not a process id", hint="process ids are positive numbers")
    return value


def command(
    pid: Annotated[
        str | None,
        typer.Argument(help="pid of the API server or EngineCore (its children are captured too); "
                            "with --ray, the Ray dashboard's address (default RAY_ADDRESS, then 127.0.0.1:8265)."),
    ] = None,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples per process (1-100; each pauses every process).")] = 3,
    interval: Annotated[float, typer.Option("--interval", "-i", help="Seconds between samples.")] = 1.0,
    native: Annotated[bool, typer.Option(
        "--native",
        help="Include native frames (NCCL, CUDA, allocator). Slow on torch processes: each sample pauses a target "
             "about 0.35-1.45 s while libtorch's symbols are read (the pause per target is reported).",
    )] = False,
    nonblocking: Annotated[
        bool, typer.Option("--nonblocking", help="Never pause the targets (less reliable; not with --native).")
    ] = False,
    locals_: Annotated[
        bool, typer.Option("--locals", help="Include frame locals (long strings masked: they can hold prompts).")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one py-spy dump may take.")] = 10.0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Bundle path (default: ./engdiag-snapshot-PID-TIME.json).")] = None,
    no_bundle: Annotated[bool, typer.Option("--no-bundle", help="Do not write a bundle file.")] = False,
    json: Annotated[bool, typer.Option("--json", help="Print the JSON document (the bundle's content).")] = False,
    ray: Annotated[bool, typer.Option("--ray", help="Capture a Ray cluster's vLLM workers through its dashboard.")] = False,
    job: Annotated[list[str] | None, typer.Option("--job", help="--ray: only this Ray job id (repeatable).")] = None,
    actor_class: Annotated[
        list[str] | None, typer.Option("--actor-class", help="--ray: actors whose class or name contains this (repeatable).")
    ] = None,
    node: Annotated[list[str] | None, typer.Option("--node", help="--ray: only this node (IP, node id or prefix; repeatable).")] = None,
) -> None:
    """Snapshot a live process tree."""
    with guard():
        if (job or actor_class or node) and not ray:
            raise UsageError("--job, --actor-class and --node select Ray actors: add --ray")
        if ray:
            from engdiag.commands.ray_snapshot import run_ray

            run_ray(pid, job, actor_class, node, samples, interval, native, nonblocking, locals_, timeout, out, no_bundle, json)
            return
        if pid is None:
            raise UsageError("give the pid of the vLLM server (or --ray for a Ray cluster)")
        from engdiag.render.jsonout import dumps
        from engdiag.render.snapshot_doc import snapshot_doc
        from engdiag.render.snapshot_view import snapshot_view
        from engdiag.snapshot.bundle import default_path, write_atomically
        from engdiag.snapshot.capture import take_snapshot
        from engdiag.snapshot.model import SnapshotOptions

        target = _pid(pid)
        options = SnapshotOptions(samples, interval, native, nonblocking, locals_, timeout)
        console = stderr_console()
        if console.is_terminal:
            with console.status(f"sampling the tree of pid {target}…") as status:
                snapshot = take_snapshot(target, options, progress=lambda n, total: status.update(
                    f"sampling the tree of pid {target}: sample {n}/{total}…"))
        elif samples * interval >= LONG_CAPTURE_S or samples >= 10:
            snapshot = take_snapshot(target, options, progress=lambda n, total: console.print(
                f"engdiag: sample {n}/{total} of pid {target}'s tree", markup=False))
        else:
            snapshot = take_snapshot(target, options)
        document = dumps(snapshot_doc(snapshot))
        if json:
            write_json(document)
        else:
            stdout_console().print(snapshot_view(snapshot))
        if no_bundle:
            return
        path = write_atomically(out or default_path(target, snapshot.started_at), document)
        console.print(f"bundle: {path} (mode 0600)", markup=False)
