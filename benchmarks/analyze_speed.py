#!/usr/bin/env python3
"""engdiag analyze against grep on the same gigabyte-class vLLM log.

Generates a realistic vLLM V1 log (hours of healthy serving with request logs that
carry prompt token ids, access lines and stats lines, then a deadlock: requests
running at 0 tokens/s, shared-memory stalls from the engine core, the
execute_model RPC timeout, EngineDeadError), then times in the same run:

- ``engdiag analyze --json`` on it, and ``LC_ALL=C grep -cE`` with the key patterns;
- the same for a ``.gz`` copy against ``zcat | grep -cE``;
- the last tenth of the same log, to show that memory stays flat and the
  evidence is the same;

and prints time (the best of a few runs on a warm page cache), MiB/s, peak RSS and
the ratio to grep, and checks that the verdict is ``deadlocked`` with the same
evidence as on a small copy.

    python benchmarks/analyze_speed.py [--size-mib 640] [--keep DIR] [--no-gzip]

Targets (docs/performance.md): at most 3x grep's time; peak RSS under 200 MiB and
flat (the big log within 20 % of the tenth-size one); the .gz within 2x zcat|grep.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from engdiag import synth

KEY_PATTERNS = (
    "Avg prompt throughput|No available shared memory broadcast block|RPC call to .* timed out|"
    "EngineCore encountered a fatal error|EngineDeadError|out of memory|Watchdog caught collective|"
    "Received request|prompt_token_ids|Engine iteration timed out|illegal memory access"
)


def generate(path: Path, size_mib: int, seed: int = 3) -> None:
    """Start-up, then healthy serving until the file reaches the size, then the deadlock."""
    target = size_mib << 20
    style = synth.Style(version="0.11.0", tp=2)
    writer = synth.Writer(style, datetime(2025, 10, 20, 6, 0, 0), seed)
    load = synth.Load(prompt_len=1500, request_every=1.0)
    with path.open("w", buffering=1 << 22) as handle:
        for line in synth.startup(writer):
            handle.write(line + "\n")
        written = 0
        while written < target:
            chunk = "".join(line + "\n" for line in synth.serving(writer, 10, load))
            handle.write(chunk)
            written += len(chunk)
        for line in synth.deadlock_v1(writer, load):
            handle.write(line + "\n")


def run(command: list[str] | str, shell: bool = False) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS in MiB (largest process, from GNU time) and stdout."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        if shell:
            wrapped: list[str] = ["/usr/bin/time", "-f", "%M", "-o", rss.name, "sh", "-c", str(command)]
        else:
            wrapped = ["/usr/bin/time", "-f", "%M", "-o", rss.name, *command]
        started = time.perf_counter()
        done = subprocess.run(wrapped, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - started
        text = rss.read().strip().splitlines()
    peak = int(text[-1]) // 1024 if text and text[-1].isdigit() else -1
    return elapsed, peak, done.stdout


def tail_copy(big: Path, small: Path, fraction: int = 10) -> None:
    """The last tenth of the big log (cut at a line start): the same incident, less history."""
    size = big.stat().st_size
    with big.open("rb") as source, small.open("wb") as target:
        source.seek(size - size // fraction)
        source.readline()
        shutil.copyfileobj(source, target, 1 << 22)


def best(command: list[str] | str, shell: bool = False, tries: int = 3) -> tuple[float, int, bytes]:
    """The fastest of a few runs (the page cache is warm for every run but the first)."""
    runs = [run(command, shell) for _ in range(tries)]
    return min(runs, key=lambda r: r[0])


def warm(*paths: Path) -> None:
    """Read the files once so that no contestant pays for the disk."""
    for path in paths:
        with path.open("rb") as handle:
            while handle.read(1 << 24):
                pass


def engdiag(path: Path) -> tuple[float, int, dict]:
    seconds, rss, out = best([sys.executable, "-m", "engdiag", "analyze", "--json", str(path)], tries=2)
    return seconds, rss, json.loads(out)


def evidence(doc: dict) -> list[tuple[str, str, str]]:
    """What the verdict cites, without line numbers (the small copy starts later in the file)."""
    return [(e["signal"], e["role"], e["text"]) for e in doc["verdict"]["evidence"]]


def row(name: str, seconds: float, rss: int, size: int, grep_seconds: float | None = None) -> str:
    speed = size / (1 << 20) / seconds
    ratio = f"{seconds / grep_seconds:5.2f}x grep" if grep_seconds else "          "
    return f"{name:<34} {seconds:7.2f} s {speed:8.1f} MiB/s {rss:6d} MiB peak RSS  {ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=640)
    parser.add_argument("--keep", type=Path, help="generate into (and keep) this folder")
    parser.add_argument("--no-gzip", action="store_true", help="skip the .gz comparison")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="engdiag-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    big, small = folder / "vllm-big.log", folder / "vllm-small.log"
    try:
        if not big.exists():
            print(f"generating a {args.size_mib} MiB log and its last tenth in {folder} …", flush=True)
            generate(big, args.size_mib)
            tail_copy(big, small)
        size, small_size = big.stat().st_size, small.stat().st_size
        grep = ["env", "LC_ALL=C", "grep", "-cE", KEY_PATTERNS, str(big)]
        warm(big, small)
        grep_seconds, grep_rss, _ = best(grep)
        ours_seconds, ours_rss, doc = engdiag(big)
        small_seconds, small_rss, small_doc = engdiag(small)
        print(f"\nlog: {size / (1 << 20):.0f} MiB, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
        print(row("grep -cE (key patterns)", grep_seconds, grep_rss, size))
        print(row("engdiag analyze --json", ours_seconds, ours_rss, size, grep_seconds))
        print(row(f"engdiag analyze --json ({small_size >> 20} MiB)", small_seconds, small_rss, small_size))
        results = {
            "time ≤ 3x grep": ours_seconds <= 3 * grep_seconds,
            "peak RSS < 200 MiB": ours_rss < 200,
            "RSS flat (within 20 % of the small log)": ours_rss <= 1.2 * small_rss,
            "verdict deadlocked": doc["verdict"]["kind"] == "deadlocked",
            "same evidence as the small copy": evidence(doc) == evidence(small_doc),
        }
        if not args.no_gzip:
            packed = folder / "vllm-big.log.gz"
            if not packed.exists():
                with big.open("rb") as raw, gzip.open(packed, "wb", compresslevel=6) as out:
                    shutil.copyfileobj(raw, out, 1 << 22)
            warm(packed)
            zgrep_seconds, zgrep_rss, _ = best(f"zcat {packed} | LC_ALL=C grep -cE '{KEY_PATTERNS}'", shell=True)
            gz_seconds, gz_rss, gz_doc = engdiag(packed)
            print(row("zcat | grep -cE", zgrep_seconds, zgrep_rss, size))
            print(row("engdiag analyze --json (.gz)", gz_seconds, gz_rss, size, zgrep_seconds))
            results["gz ≤ 2x zcat|grep"] = gz_seconds <= 2 * zgrep_seconds
            results["gz verdict deadlocked"] = gz_doc["verdict"]["kind"] == "deadlocked"
        print()
        for name, ok in results.items():
            print(f"  {'MET ' if ok else 'MISS'}  {name}")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
