"""The kernel's OOM killer (dmesg lines pasted beside vLLM's log): host memory, or the GPU's on unified memory.

Wordings from the kernel's mm/oom_kill.c (dump_header, __oom_kill_process) and the NVIDIA open kernel modules
(nvCheckOkFailedNoLog); the unified-memory case is dgx-spark-ds4-kv-alloc-oom-killer (tests/corpus).
"""

from __future__ import annotations

import pytest

from tests.conftest import verdict_of

INVOKED = "[ 8123.456789] VLLM::Worker_TP invoked oom-killer: gfp_mask=0x102cc2(GFP_HIGHUSER), order=0, oom_score_adj=0\n"
NVRM = ("[ 8123.401234] NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
        "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359\n")
FRAME = "[ 8123.456901]  sysmemAllocResources+0xa8/0x2a0 [nvidia]\n"
KILLED = ("[ 8123.789012] Out of memory: Killed process 4242 (VLLM::Worker_TP) total-vm:91234567kB, "
          "anon-rss:81234567kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:160000kB oom_score_adj:0\n")
SERVING = ("INFO 05-01 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 512.0 tokens/s, Avg generation "
           "throughput: 80.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.0%, Prefix cache "
           "hit rate: 0.0%\n")


@pytest.mark.parametrize("victim", [
    KILLED,
    # inside a container: its memory cgroup's limit
    "Memory cgroup out of memory: Killed process 918703 (python3) total-vm:23870700kB, anon-rss:16736460kB\n",
    # kernels before 4.19
    "Out of memory: Kill process 1234 (python3) score 900 or sacrifice child\n",
])
def test_a_process_the_oom_killer_ended_is_host_memory_not_an_unexplained_sigkill(tmp_path, victim):
    verdict = verdict_of(tmp_path, SERVING + victim)
    assert verdict.kind.value == "crashed"
    assert "host memory ran out" in verdict.headline and "operator" not in verdict.headline
    assert any("not GPU memory" in reason for reason in verdict.ruled_out)
    commands = " ".join(step.command or "" for step in verdict.next_steps)
    assert "dmesg" in commands and "CUDA_LAUNCH_BLOCKING" not in commands


def test_the_allocation_that_woke_the_killer_is_named_with_its_victim(tmp_path):
    verdict = verdict_of(tmp_path, SERVING + INVOKED + KILLED)
    assert verdict.kind.value == "crashed"
    assert "fired on VLLM::Worker_TP's allocation" in verdict.headline and "killed VLLM::Worker_TP pid 4242" in verdict.headline
    assert verdict.evidence[0].line == 2


@pytest.mark.parametrize("driver", [NVRM, FRAME])
def test_the_gpu_drivers_allocation_in_the_killers_report_is_gpu_memory_on_unified_memory(tmp_path, driver):
    """GB10 / Jetson: the GPU takes its memory from host RAM, and the NVIDIA driver's allocator says so."""
    verdict = verdict_of(tmp_path, SERVING + driver + INVOKED + KILLED)
    assert verdict.kind.value == "fragmented" and verdict.sub_kind is not None and verdict.sub_kind.value == "exhaustion"
    assert "GPU memory exhausted" in verdict.headline
    assert any("--gpu-memory-utilization" in (step.command or "") for step in verdict.next_steps)


def test_the_drivers_refusal_alone_is_routine_not_an_oom(tmp_path):
    """A caller that retries smaller prints NVRM's NV_ERR_NO_MEMORY by the hundred on a healthy GB10."""
    verdict = verdict_of(tmp_path, SERVING + NVRM * 3 + SERVING)
    assert verdict.kind.value not in ("fragmented", "crashed")


def test_an_nvidia_frame_that_is_no_allocator_says_nothing_about_memory(tmp_path):
    verdict = verdict_of(tmp_path, SERVING + INVOKED + "[ 8123.456901]  _nv012345rm+0x1c/0x30 [nvidia]\n")
    assert verdict.kind.value == "crashed" and "host memory ran out" in verdict.headline
