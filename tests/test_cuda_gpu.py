"""Real CUDA processes on a real GPU (marker ``gpu``): what snapshot sees of a process waiting on its GPU.

tests/programs/cuda_work.py holds 2 GiB on the GPU and waits in torch.cuda.synchronize on spin
kernels: 20 ms ones in a loop (alive, progressing), or one of ten minutes, waited for directly or through
a CUDA event (torch/cuda/streams.py's Event.synchronize).  Each shows the same unchanged Python stack in
every sample; with no peer rank and the GPU busy, each is slow.  With
``--native`` the innermost frames are libcuda's bare addresses, under cuCtxSynchronize_v2.
Skipped where torch has no CUDA device or py-spy cannot attach; run with ``pytest -m gpu``.
"""

from __future__ import annotations

import orjson
import pytest

from engdiag.snapshot import nvml
from tests.conftest import needs_ptrace, ptrace_possible, run_engdiag

torch = pytest.importorskip("torch", reason="torch is not installed")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device here"),
]
HELD = 2 * 2**30


@pytest.mark.parametrize("mode", ["loop", "long"])
def test_memory_a_cuda_process_holds_is_counted_and_its_pid_found(spawn, mode):
    program = spawn("cuda_work.py", "2", mode, timeout=120)
    state = nvml.query({program.pid})
    assert state.available
    assert max(gpu.fields["memory"]["used"] for gpu in state.gpus) >= HELD
    ours = [p for gpu in state.gpus for p in gpu.processes if p["pid"] == program.pid]
    if ours:
        assert ours[0]["in_tree"] and (ours[0]["used_bytes"] is None or ours[0]["used_bytes"] >= HELD)
    else:
        assert state.pid_note, "the process is not listed and nothing says why"


@needs_ptrace
@pytest.mark.parametrize(("mode", "native"), [("loop", False), ("long", False), ("event", False),
                                              ("loop", True), ("long", True)])
def test_a_process_waiting_on_its_busy_gpu_is_slow_not_deadlocked(spawn, mode, native):
    program = spawn("cuda_work.py", "2", mode, timeout=120)
    flags = ["--native"] if native else []
    done = run_engdiag("snapshot", str(program.pid), "--json", "--no-bundle", "-n", "3", "-i", "0.5", *flags,
                       timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    doc = orjson.loads(done.stdout)
    threads = [t for p in doc["processes"] for t in p["threads"]]
    assert any(t["category"] == "cuda_sync" for t in threads)
    gpus = doc["nvml"]["gpus"]
    assert max(g["utilization_pct"]["gpu"] for g in gpus) >= 50
    assert doc["verdict"]["kind"] == "slow", doc["verdict"]["headline"]
    # native frames may catch the loop launching its next kernel: the stack moved, which is slow too
    assert "CUDA sync" in doc["verdict"]["headline"] or (native and "progressing" in doc["verdict"]["headline"])
    # with native frames the innermost are libcuda's bare addresses; the evidence shows named ones
    assert "0x" not in doc["verdict"]["evidence"][0]["text"]


def test_ptrace_is_possible_on_the_gpu_machine():
    """The snapshot test above must not skip silently where it matters most."""
    assert ptrace_possible() is None
