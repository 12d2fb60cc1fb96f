#!/usr/bin/env python3
"""How long does one sample of a whole tree take, and how long is each target paused?

Starts one parent with 8 Python worker children (each busy in a model-layer-shaped
loop), takes snapshots with the real py-spy, and prints the wall time of one full
sample of the tree (all dumps in parallel) next to the sum of the per-process dump
times (what a sequential capture would cost), and the pause per target.

    python benchmarks/snapshot_speed.py [--workers 8] [--samples 5] [--native] [--torch]

``--native --torch`` measures what the --help warns about: native unwinding of a process
that loaded libtorch pauses it far longer than a Python-only dump.

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
prelude = "import torch; " if {torch!r} else ""
run = prelude + "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
children = [subprocess.Popen([sys.executable, "-c", run, {busy!r}, {ready!r} + str(i)]) for i in range({n})]
open({ready!r} + "parent", "w").write("1")
time.sleep(3600)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--native", action="store_true", help="dump native frames too (py-spy --native)")
    parser.add_argument("--torch", action="store_true", help="workers import torch first (libtorch loaded)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="engdiag-bench-"))
    ready = str(folder / "ready.")
    code = PARENT.format(busy=str(PROGRAMS / "busy.py"), ready=ready, n=args.workers, torch=args.torch)
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=PROGRAMS, start_new_session=True)
    try:
        deadline = time.time() + 120
        while len(list(folder.iterdir())) < args.workers + 1 and time.time() < deadline:
            time.sleep(0.05)
        snapshot = take_snapshot(parent.pid, SnapshotOptions(samples=args.samples, interval_s=0.2,
                                                                   native=args.native))
        captured = [p for p in snapshot.processes if p.pause_ms]
        per_sample = [s * 1000 for s in snapshot.sample_seconds]
        pauses = [ms for p in captured for ms in p.pause_ms]
        sequential = [sum(p.pause_ms[i] for p in captured if len(p.pause_ms) > i) for i in range(args.samples)]
        print(f"tree: 1 parent + {args.workers} workers{' (torch loaded)' if args.torch else ''}, "
              f"{len(captured)} processes sampled, {args.samples} samples{', native frames' if args.native else ''}")
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
