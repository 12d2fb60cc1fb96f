#!/usr/bin/env python3
"""How long does one sample of a whole tree take, and how long is each target paused?

Starts one parent with 8 Python worker children (each busy in a model-layer-shaped
loop), takes snapshots with the real py-spy, and prints the wall time of one full
sample of the tree (all dumps in parallel) next to the sum of the per-process dump
times (what a sequential capture would cost), and the pause per target.

    python benchmarks/snapshot_speed.py [--workers 8] [--samples 5]

Needs ptrace rights (root, or kernel.yama.ptrace_scope=0).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engdiag.snapshot.capture import take_snapshot
from engdiag.snapshot.model import SnapshotOptions

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"
PARENT = """
import subprocess, sys, time
children = [subprocess.Popen([sys.executable, {busy!r}, {ready!r} + str(i)]) for i in range({n})]
open({ready!r} + "parent", "w").write("1")
time.sleep(3600)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="engdiag-bench-"))
    ready = str(folder / "ready.")
    code = PARENT.format(busy=str(PROGRAMS / "busy.py"), ready=ready, n=args.workers)
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=PROGRAMS, start_new_session=True)
    try:
        deadline = time.time() + 30
        while len(list(folder.iterdir())) < args.workers + 1 and time.time() < deadline:
            time.sleep(0.05)
        snapshot = take_snapshot(parent.pid, SnapshotOptions(samples=args.samples, interval_s=0.2))
        captured = [p for p in snapshot.processes if p.pause_ms]
        per_sample = [s * 1000 for s in snapshot.sample_seconds]
        pauses = [ms for p in captured for ms in p.pause_ms]
        sequential = [sum(p.pause_ms[i] for p in captured if len(p.pause_ms) > i) for i in range(args.samples)]
        print(f"tree: 1 parent + {args.workers} workers, {len(captured)} processes sampled, {args.samples} samples")
        print(f"one full sample of the tree (parallel): median {statistics.median(per_sample):.0f} ms, "
              f"max {max(per_sample):.0f} ms")
        print(f"the same dumps one after another would take: median {statistics.median(sequential):.0f} ms "
              f"({statistics.median(sequential) / statistics.median(per_sample):.1f}x)")
        print(f"pause per target per sample (py-spy dump wall time, an upper bound): median "
              f"{statistics.median(pauses):.0f} ms, max {max(pauses):.0f} ms")
        print(f"verdict: {snapshot.verdict.kind.value} — {snapshot.verdict.headline}")
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


if __name__ == "__main__":
    main()
