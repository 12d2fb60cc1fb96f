"""The line between a process waiting on a busy GPU (slow) and one stuck in a CUDA sync (deadlocked).

The reports are built by hand because the line is drawn on GPU utilisation, which only a GPU
machine has; tests/test_cuda_gpu.py takes the same captures from real CUDA processes there.
"""

from __future__ import annotations

from engdiag.analysis.verdict import Kind
from engdiag.roles import Ranks, Role
from engdiag.snapshot.judge import judge
from engdiag.snapshot.model import (
    Category,
    Frame,
    GpuInfo,
    Motion,
    NvmlState,
    ProcessInfo,
    ProcessReport,
    SnapshotOptions,
    ThreadReport,
)

SYNC = (Frame("synchronize", "torch/cuda/__init__.py", 1162), Frame("execute_model", "vllm/v1/worker/gpu_worker.py", 430))


def _process(pid: int, role: Role = Role.WORKER, ranks: Ranks | None = None) -> ProcessReport:
    thread = ThreadReport(1, pid, "MainThread", Category.CUDA_SYNC, Motion.STUCK, True, False, SYNC,
                          reason="torch.cuda synchronize")
    info = ProcessInfo(pid, 1, "python3", ("python3",), "S", None, True)
    return ProcessReport(info, role, ranks or Ranks(), threads=(thread,), samples=3)


def _gpus(util: int, pids: list[int], pid_note: str | None = None) -> NvmlState:
    gpu = GpuInfo(fields={"index": 0, "utilization_pct": {"gpu": util, "memory": 40}},
                  processes=[{"pid": pid, "used_bytes": 2**31} for pid in pids])
    return NvmlState(available=True, gpus=[gpu], pid_note=pid_note)


def test_one_worker_waiting_on_its_busy_gpu_is_slow_and_says_what_would_decide():
    verdict = judge([_process(100)], _gpus(99, [100]), SnapshotOptions())
    assert verdict.kind is Kind.SLOW
    assert "GPU 0" in verdict.headline and "no peer" in verdict.headline
    assert verdict.undecided and "--native 100" in verdict.undecided


def test_a_gpu_slowed_by_the_captures_own_pauses_still_counts_as_working():
    # a native capture pauses the process ~0.3 s a sample, so it queues fewer kernels: 80 % on a real H200
    assert judge([_process(100)], _gpus(80, [100]), SnapshotOptions(native=True)).kind is Kind.SLOW


def test_stripped_library_addresses_are_not_what_the_evidence_shows():
    hexes = tuple(Frame(f"0x7fe73a1b94{i}e", "/usr/lib/libcuda.so.580", 0, native=True) for i in range(3))
    named = (Frame("cuCtxSynchronize_v2", "/usr/lib/libcuda.so.580", 0, native=True), *SYNC)
    thread = ThreadReport(1, 100, "MainThread", Category.CUDA_SYNC, Motion.STUCK, True, False, hexes + named,
                          reason="CUDA synchronisation")
    info = ProcessInfo(100, 1, "python3", ("python3",), "S", None, True)
    verdict = judge([ProcessReport(info, Role.WORKER, Ranks(), threads=(thread,), samples=3)], _gpus(99, [100]),
                    SnapshotOptions(native=True))
    assert verdict.evidence[0].text.startswith("MainThread: cuCtxSynchronize_v2") and "0x" not in verdict.evidence[0].text


def test_the_same_wait_on_an_idle_gpu_is_a_deadlock():
    assert judge([_process(100)], _gpus(3, [100]), SnapshotOptions()).kind is Kind.DEADLOCKED


def test_a_busy_gpu_used_by_another_process_does_not_make_the_wait_slow():
    assert judge([_process(100)], _gpus(99, [555]), SnapshotOptions()).kind is Kind.DEADLOCKED


def test_in_a_container_whose_gpu_pids_differ_a_busy_gpu_still_counts():
    state = _gpus(99, [555], pid_note="no GPU process pid matches the captured tree")
    assert judge([_process(100)], state, SnapshotOptions()).kind is Kind.SLOW


def test_two_workers_in_a_cuda_sync_on_busy_gpus_stay_deadlocked():
    both = [_process(100, ranks=Ranks(tp=0)), _process(101, ranks=Ranks(tp=1))]
    assert judge(both, _gpus(99, [100, 101]), SnapshotOptions()).kind is Kind.DEADLOCKED


def test_a_worker_whose_name_shows_a_second_rank_has_a_peer_to_wait_for():
    alone = [_process(101, ranks=Ranks(tp=1))]
    assert judge(alone, _gpus(99, [101]), SnapshotOptions()).kind is Kind.DEADLOCKED
