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


_NOTICE = ("(EngineCore pid=171) INFO 07-16 08:20:50 [shm_broadcast.py:705] No available shared memory broadcast block "
           "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming "
           "work (e.g. compilation).\n")


def test_the_engine_cores_notice_alone_is_unknown_naming_what_the_workers_did(tmp_path):
    """Round 45's vllm-ascend-npu-graph-compile-shm-broadcast-60s and three earlier pastes of the notice alone were
    labelled slow, memory and deadlocked, never benign: the workers' doing decides."""
    verdict = verdict_of(tmp_path, _NOTICE)
    assert verdict.kind.value == "unknown" and "what the workers were doing then" in verdict.undecided
    # beside start-up work the same notice is read with that work (here a start-up the log stops in), not alone
    compiling = "(EngineCore pid=171) INFO 07-16 08:19:40 [backends.py:430] Dynamo bytecode transform time: 12.01 s\n"
    assert "shared-memory notice" not in verdict_of(tmp_path, compiling + _NOTICE).headline
    # from a worker while the engine is idle it stays benign
    idle = _NOTICE.replace("(EngineCore pid=171)", "(VllmWorker rank=0 pid=172)")
    assert verdict_of(tmp_path, idle).kind.value == "healthy"
