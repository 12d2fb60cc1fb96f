"""Readings added after blind round 43 (tests/corpus/HELDOUT.md), each on both sides of its line."""

from __future__ import annotations

from tests.conftest import verdict_of


def test_tritons_cuda_out_of_memory_is_an_oom_and_its_other_cuda_errors_are_not(tmp_path):
    """Triton's driver check raises "Triton Error [CUDA]: <cuGetErrorString>" (qwen35-35b-5090-triton-autotune-oom:
    the GDN kernels' autotune buffers on the first request, on a card vLLM had filled)."""
    oom = verdict_of(tmp_path, "RuntimeError: Triton Error [CUDA]: out of memory\n")
    assert oom.kind.value == "fragmented" and oom.sub_kind.value == "exhaustion"
    ima = verdict_of(tmp_path, "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered\n")
    assert ima.kind.value == "crashed"
