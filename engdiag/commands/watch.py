"""``engdiag watch``: a live slow-vs-dead judge that snapshots the engine before it is killed."""

from __future__ import annotations

import math
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from engdiag.commands.base import echo, guard, stderr_console, stdout_console, write_json
from engdiag.errors import ExitCode, UsageError
from engdiag.timeouts.model import DEFAULT_BASE_S, DEFAULT_FACTOR, DEFAULT_HARD_CAP_S, DEFAULT_HEARTBEAT_S

NAME = "watch"
NO_ARGS_HELP = True
HELP = (
    "Follow a vLLM log and/or poll /metrics and say IDLE, ALIVE, SLOW or DEAD as it happens; on DEAD, "
    "snapshot the process tree (--pid) and run a command.  --once judges from one look (a liveness probe)."
)
ONCE_CODES = {"idle": ExitCode.OK, "alive": ExitCode.OK, "unknown": ExitCode.OK,
              "no_progress_yet": ExitCode.WATCH_SLOW, "slow": ExitCode.WATCH_SLOW, "dead": ExitCode.WATCH_DEAD}


def _snapshotter(bundle_dir: Path):  # -> Snapshotter
    def take(pid: int) -> Path:
        from engdiag.render.jsonout import dumps
        from engdiag.render.snapshot_doc import snapshot_doc
        from engdiag.snapshot.bundle import default_path, write_atomically
        from engdiag.snapshot.capture import take_snapshot

        snapshot = take_snapshot(pid)
        return write_atomically(bundle_dir / default_path(pid, snapshot.started_at).name, dumps(snapshot_doc(snapshot)))

    return take


RAY_PID = 0
"""The watcher snapshots "a pid"; with --ray that is the whole cluster, recorded as pid 0."""


def _ray_snapshotter(address: str | None, bundle_dir: Path):  # -> Snapshotter
    def take(_pid: int) -> Path:
        from engdiag.commands.ray_snapshot import default_path
        from engdiag.render.jsonout import dumps
        from engdiag.render.ray_snapshot_doc import ray_snapshot_doc
        from engdiag.snapshot.bundle import write_atomically
        from engdiag.snapshot.ray_capture import take_ray_snapshot

        snapshot = take_ray_snapshot(address)
        return write_atomically(bundle_dir / default_path(snapshot.started_at).name, dumps(ray_snapshot_doc(snapshot)))

    return take


def _once(options, gap: float, state: Path | None, probe: bool, json: bool) -> None:
    from engdiag.watch.once import judge_once, look_at_log, look_at_metrics

    looks = []
    if options.metrics_url:
        looks.append(look_at_metrics(options.metrics_url, gap, state))
    if options.log:
        looks.append(look_at_log(options.log, datetime.now()))
    verdict = judge_once(looks, options.policy, options.tokens_per_sec, options.prompt_len)
    from engdiag.render.jsonout import SCHEMA_VERSION, dumps
    from engdiag.render.common import inert
    from engdiag.render.watch_view import verdict_doc

    if json:
        write_json(dumps({"schema": "engdiag.watch", "schema_version": SCHEMA_VERSION, "type": "once", **verdict_doc(verdict)}, pretty=False))
    else:
        echo(f"{verdict.state.value.upper().replace('_', ' ')}: {inert(verdict.reason)}\n")
    code = ONCE_CODES[verdict.state.value]
    if probe:
        code = ExitCode.WATCH_DEAD if verdict.state.value == "dead" else ExitCode.OK
    raise typer.Exit(int(code))


def command(
    log: Annotated[Path | None, typer.Option("--log", help="Follow this log (survives rotation and truncation).")] = None,
    metrics_url: Annotated[str | None, typer.Option("--metrics-url", help="Poll vLLM's /metrics at this URL.")] = None,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between rounds.")] = 5.0,
    pid: Annotated[int | None, typer.Option("--pid", help="On DEAD, snapshot this process tree (once per incident).")] = None,
    on_dead: Annotated[str | None, typer.Option("--on-dead", help="Command to run on DEAD with the bundle path appended (no shell).")] = None,
    bundle_dir: Annotated[Path, typer.Option("--bundle-dir", help="Where DEAD snapshots are written.")] = Path("."),
    cooldown: Annotated[float, typer.Option("--cooldown", help="Seconds between two snapshots at least.")] = 600.0,
    once: Annotated[bool, typer.Option("--once", help="Judge from one look and exit: 0 idle/alive, 11 slow, 12 dead.")] = False,
    probe: Annotated[bool, typer.Option("--probe", help="Like --once, but exit non-zero only when DEAD (a liveness probe).")] = False,
    once_gap: Annotated[
        float | None,
        typer.Option("--once-gap", help="Seconds between the two scrapes of --once (default: heartbeat + 0.5).")
    ] = None,
    state: Annotated[Path | None, typer.Option("--state", help="--once: remember the last scrape here between probes.")] = None,
    tokens_per_sec: Annotated[float | None, typer.Option("--tokens-per-sec", help="Prefill rate (default: measured).")] = None,
    prompt_len: Annotated[int | None, typer.Option("--prompt-len", help="Prompt length in flight (default: observed).")] = None,
    base: Annotated[float, typer.Option("--base", help="The adaptive timeout is never below this many seconds.")] = DEFAULT_BASE_S,
    factor: Annotated[
        float, typer.Option("--factor", help="Safety factor on the estimated prefill time of the work in flight.")
    ] = DEFAULT_FACTOR,
    hard_cap: Annotated[
        float, typer.Option("--hard-cap", help="The adaptive timeout is never above this many seconds (DEAD after it).")
    ] = DEFAULT_HARD_CAP_S,
    heartbeat: Annotated[float, typer.Option("--heartbeat", help="Seconds of quiet before SLOW (at least).")] = DEFAULT_HEARTBEAT_S,
    from_start: Annotated[bool, typer.Option("--from-start", help="Read the log from its start, not its end.")] = False,
    json: Annotated[bool, typer.Option("--json", help="One JSON line per state change and heartbeat.")] = False,
    ray: Annotated[
        str | None,
        typer.Option("--ray", help="On DEAD, snapshot this Ray cluster through its dashboard (URL, or 'auto' for "
                                   "RAY_ADDRESS / 127.0.0.1:8265) instead of a local --pid."),
    ] = None,
) -> None:
    """Watch a live engine."""
    with guard():
        from engdiag.timeouts.model import Policy
        from engdiag.watch.watcher import Options, Watcher

        if log is None and metrics_url is None:
            raise UsageError("give --log PATH and/or --metrics-url URL")
        once_gap = heartbeat + 0.5 if once_gap is None else once_gap
        for name, value in (("--interval", interval), ("--cooldown", cooldown), ("--once-gap", once_gap),
                            ("--heartbeat", heartbeat), ("--base", base), ("--factor", factor), ("--hard-cap", hard_cap)):
            if not math.isfinite(value):
                raise UsageError(f"{name} must be a finite number of seconds, got {value}")
        if tokens_per_sec is not None and not (math.isfinite(tokens_per_sec) and tokens_per_sec > 0):
            raise UsageError(f"--tokens-per-sec must be a positive number, got {tokens_per_sec}")
        if interval <= 0 or cooldown < 0 or once_gap < 0:
            raise UsageError("--interval must be positive; --cooldown and --once-gap not negative")
        if ray is not None and pid is not None:
            raise UsageError("--ray and --pid both say what to snapshot on DEAD: give one")
        if on_dead and pid is None and ray is None:
            raise UsageError("--on-dead runs after a snapshot: give --pid (or --ray) too")
        snapshotter = None
        if ray is not None:
            snapshotter, pid = _ray_snapshotter(None if ray == "auto" else ray, bundle_dir), RAY_PID
        elif pid is not None:
            snapshotter = _snapshotter(bundle_dir)
        policy = Policy(base_s=base, factor=factor, hard_cap_s=hard_cap, heartbeat_s=heartbeat).validate()
        options = Options(log=log, metrics_url=metrics_url, interval_s=interval, policy=policy,
                          tokens_per_sec=tokens_per_sec, prompt_len=prompt_len, pid=pid, on_dead=on_dead,
                          cooldown_s=cooldown, from_start=from_start)
        if once or probe:
            _once(options, once_gap, state, probe, json)
        if pid is not None:
            bundle_dir.mkdir(parents=True, exist_ok=True)
        watcher = Watcher(options, snapshotter)
        _loop(watcher, json)


def _loop(watcher, json: bool) -> None:
    from rich.live import Live

    from engdiag.render.jsonout import dumps
    from engdiag.render.watch_view import live_view, record_doc

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    history: list[str] = []
    live = None if json else Live(console=stdout_console(), auto_refresh=False, transient=False)
    try:
        if live is not None:
            live.start()
        while not stop.is_set():
            now = time.monotonic()
            records = watcher.tick(now)
            for record in records:
                if json:
                    write_json(dumps(record_doc(record), pretty=False))
                elif record.kind != "heartbeat":
                    history.append(f"{record.at:%H:%M:%S} {record.kind}: {record.verdict.state.value} {record.detail or ''}")
            if live is not None:
                live.update(live_view(watcher, watcher.tracker.verdict(now), history), refresh=True)
            stop.wait(watcher.options.interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
        watcher.close()
    stderr_console().print("engdiag watch: stopped", markup=False)
