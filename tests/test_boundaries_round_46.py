"""Readings added after blind round 46 (tests/corpus/HELDOUT.md), each on both sides of its line."""

from __future__ import annotations

from tests.conftest import verdict_of


def test_a_rocm_builds_hip_error_is_the_device_fault_cudas_is(tmp_path):
    """PyTorch's ROCm build prints its CUDA check hipified, "HIP error: <hipGetErrorString>"
    (rocm-hip-invalid-device-function-v0: a kernel not built for the GPU)."""
    line = "ERROR 03-17 03:57:17 [engine.py:411] RuntimeError: HIP error: invalid device function\n"
    verdict = verdict_of(tmp_path, line)
    assert verdict.kind.value == "crashed" and "HIP error: invalid device function" in verdict.headline
    # its out-of-memory is memory, as CUDA's is
    oom = verdict_of(tmp_path, line.replace("invalid device function", "out of memory"))
    assert oom.kind.value == "fragmented"
