"""What the Linux kernel prints about memory (dmesg, ``journalctl -k``): the OOM killer and the NVIDIA driver.

A process the kernel's OOM killer ends dies of SIGKILL without a line of its own, so these lines are the only
account of it, and operators paste them beside vLLM's log.  Read in the kernel's mm/oom_kill.c and the NVIDIA
open kernel modules' nvassert.c.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import Event, Failure, Payload, Signal
from engdiag.logs.patterns.base import Rule, _c

OOM_KILLED = "killed by the kernel's OOM killer"
"""How a victim's name ends (``engdiag.analysis.host_memory`` tells it from other killed processes)."""



def killed_by_oom_killer(event: Event) -> bool:
    """A process death the kernel's OOM killer reported (its "Killed process" line, read by the rules below)."""
    return event.signal is Signal.WORKER_DIED and OOM_KILLED in (getattr(event.data, "name", None) or "")


def _victim(match: re.Match[str], text: str) -> Iterable[Payload]:
    yield Failure(name=f"{match['n']} pid {match['pid']} ({OOM_KILLED})", exit_code=-9)


KERNEL = (
    # mm/oom_kill.c dump_header(): pr_warn("%s invoked oom-killer: gfp_mask=%#x(%pGg), order=%d, …", current->comm, …)
    # — the process whose allocation found memory full (15 bytes of its name: vLLM 0.11+ names its processes
    # "VLLM::Worker_TP0", "VLLM::EngineCore"), not necessarily the one killed (dgx-spark-ds4-kv-alloc-oom-killer)
    Rule(Signal.HOST_OOM, "invoked oom-killer", _c(r"(?P<comm>\S+) invoked oom-killer: gfp_mask="),
         lambda m, t: [Failure(name=m["comm"])]),
    # __oom_kill_process(): pr_err("%s: Killed process %d (%s) total-vm:…", message, pid, victim->comm) with message
    # "Out of memory", or "Memory cgroup out of memory" when a container's limit was hit; kernels before 4.19:
    # "Out of memory: Kill process %d (%s) score %u or sacrifice child"
    # (the literals start past "out of memory", CUDA's literal, as a record's literals are found without overlaps;
    # "Killed" is the shell's literal too, whose rule runs after these)
    Rule(Signal.WORKER_DIED, "Killed",
         _c(r"(?:Out|Memory cgroup out) of memory: Killed process (?P<pid>\d+) \((?P<n>[^)]+)\)"), _victim),
    Rule(Signal.WORKER_DIED, "Kill process",
         _c(r"(?:Out|Memory cgroup out) of memory: Kill process (?P<pid>\d+) \((?P<n>[^)]+)\)"), _victim),
    # nvCheckOkFailedNoLog(): "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)
    # returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359".  Alone it is routine (a caller that tries
    # again smaller prints it by the hundred on a healthy GB10); beside the OOM killer it says whose allocation it was
    Rule(Signal.DRIVER_NO_MEMORY, "[NV_ERR_NO_MEMORY]", _c(r"NVRM: [^\n]*\[NV_ERR_NO_MEMORY\]")),
    # a frame of the OOM killer's call trace in the driver's memory allocator ("sysmemAllocResources+0xa8/0x2a0
    # [nvidia]"): the GPU's allocation took host memory
    Rule(Signal.DRIVER_NO_MEMORY, " [nvidia]", _c(r"\b\w*[Aa]lloc\w*\+0x[0-9a-f]+/0x[0-9a-f]+ \[nvidia\]")),
)
