"""NVML on a real GPU (marker ``gpu``): invariants only, since every machine differs.

Skipped where NVML cannot start (no driver); the no-NVML record is tested in
test_snapshot.py on such machines.  Run on a GPU machine with ``pytest -m gpu``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engdiag.snapshot import nvml

pytestmark = pytest.mark.gpu
STATE = nvml.query(set())
needs_gpu = pytest.mark.skipif(not STATE.available, reason=f"no NVML here: {STATE.reason}")


@needs_gpu
def test_every_gpu_has_sane_fields_or_says_why_not():
    assert STATE.driver and STATE.gpus
    for gpu in STATE.gpus:
        fields = gpu.fields
        for name in ("name", "uuid", "memory", "utilization_pct", "temperature_c", "power_w", "mig_mode"):
            assert name in fields
            assert fields[name] is not None or name in gpu.unsupported
        memory = fields["memory"]
        assert 0 <= memory["used"] <= memory["total"] and memory["free"] <= memory["total"]
        assert all(reason for reason in gpu.unsupported.values())


@needs_gpu
def test_a_cpu_only_process_is_not_listed_and_pids_are_marked():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        state = nvml.query({sleeper.pid, os.getpid()})
        listed = {p["pid"] for gpu in state.gpus for p in gpu.processes}
        assert sleeper.pid not in listed
        assert all("in_tree" in p for gpu in state.gpus for p in gpu.processes)
    finally:
        sleeper.kill()
        sleeper.wait()
