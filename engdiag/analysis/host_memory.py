"""Host memory: the kernel's OOM killer, and when the memory it ran out of was the GPU's.

Domain facts encoded here (docs/verdicts.md, "Memory"):

* The kernel's OOM killer ends a process with SIGKILL, so the process writes nothing; the kernel's own lines
  (``<comm> invoked oom-killer``, ``Out of memory: Killed process N (name)``, ``Memory cgroup out of memory: …``
  inside a container) are the account.  The memory that ran out is the host's, or the container's limit: the
  GPU's allocator never calls the OOM killer on a discrete GPU (``lmmr1-ray-memory-monitor-kills-llmrayactors-
  host-oom`` is Ray's monitor doing the same for host RAM).
* Where the GPU shares the host's memory (DGX Spark's GB10, Jetson), the GPU driver takes its allocations from
  host RAM: the NVIDIA driver refusing one (NVRM ``NV_ERR_NO_MEMORY``) or its allocator in the OOM killer's
  call trace says the allocation that found memory full was the GPU's — the KV cache or the weights did not
  fit (``dgx-spark-ds4-kv-alloc-oom-killer``: ``VLLM::Worker_TP invoked oom-killer`` with
  ``sysmemAllocResources+0xa8/0x2a0 [nvidia]`` in its trace).
"""

from __future__ import annotations

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.verdict import Kind, MemoryKind, Role, Verdict
from engdiag.logs.events import Event, Failure, Signal
from engdiag.logs.patterns.kernel import OOM_KILLED, killed_by_oom_killer

_TRACE_LINES = 200
"""How far from the OOM killer's first line its report reaches (call trace, memory info, task list)."""


def _name(event: Event) -> str:
    """The process a kernel line names, without the victim's mark."""
    name = event.data.name if isinstance(event.data, Failure) and event.data.name else "a process"
    return name.replace(f" ({OOM_KILLED})", "")


def kernel_oom(facts: Facts, root: Event) -> Verdict:
    """The OOM killer woke (or its victim's line is all there is): GPU memory on unified memory, else host memory."""
    woke = [e for e in facts.t.of(Signal.HOST_OOM) if e.source == root.source]
    victims = [e for e in facts.t.of(Signal.WORKER_DIED) if killed_by_oom_killer(e)]
    driver = [e for e in facts.t.of(Signal.DRIVER_NO_MEMORY) if e.source == root.source
              and abs(e.line - root.line) <= _TRACE_LINES]
    victim = f", and it killed {_name(victims[0])}" if victims else ""
    asker = _name(woke[0]) if woke else None
    if driver and woke:
        draft = Draft(facts, Kind.FRAGMENTED, 0.75,
                      f"GPU memory exhausted: the GPU driver's allocation for {asker} found the memory it shares "
                      f"with the host full, and the kernel's OOM killer fired{victim}")
        draft.sub_kind = MemoryKind.EXHAUSTION
        draft.cite(root, Role.ROOT_CAUSE, "the allocation that found memory full")
        draft.cite(driver[0], Role.SUPPORTING, "the NVIDIA driver's allocation: the GPU takes its memory from host RAM")
        draft.step("see what the kernel reports and how much memory is left", "sudo dmesg -T | grep -i -e oom -e NVRM; free -h")
        draft.step("on unified memory --gpu-memory-utilization is a share of the RAM the OS and every other process "
                   "also need: ask for less", "--gpu-memory-utilization 0.7")
        draft.step("or make the KV cache smaller", "--max-model-len 32768   # and/or --max-num-seqs 64")
    else:
        headline = (f"crashed: host memory ran out — the kernel's OOM killer fired on {asker}'s allocation{victim}"
                    if asker else f"crashed: host memory ran out — the kernel's OOM killer killed {_name(root)}")
        draft = Draft(facts, Kind.CRASHED, 0.85, headline)
        draft.cite(root, Role.ROOT_CAUSE, "the allocation that found host memory full" if woke and root is woke[0]
                   else "the kernel ended it for host memory; the process could log nothing")
        draft.step("see how much memory the host (or the container's limit) has and who used it",
                   "sudo dmesg -T | grep -i -A3 -e 'out of memory' -e 'invoked oom-killer'; free -h")
        draft.step("give the container more memory, or use less host RAM (no --cpu-offload-gb, a smaller "
                   "--swap-space, fewer API-server processes)", "--swap-space 0")
    draft.generic_steps = False  # no kernel faulted and no CUDA allocator split: its steps do not apply
    for event in victims[:1]:
        draft.cite(event, Role.CONSEQUENCE)
    return draft.cite_consequences(root).done()
