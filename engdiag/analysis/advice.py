"""What ruled the other verdicts out, and what to do next, for each verdict.

The advice names vLLM's real knobs (see docs/timeouts.md for their version
ranges) and engdiag's own commands with the pids and files of this incident.
"""

from __future__ import annotations

import shlex

from engdiag.analysis.facts import KV_HIGH_PCT, Facts, stalled
from engdiag.analysis.verdict import Kind, MemoryKind, Step
from engdiag.logs.events import Event, Failure, NcclWork, Signal
from engdiag.logs.patterns.kernel import killed_by_oom_killer
from engdiag.timeouts import knobs
from engdiag.timeouts.advice import capture_advice, probe_advice, recommend_command, timeout_advice

P2P_DIAGNOSIS = Step("as a diagnosis step only: if this removes the hang, check IOMMU/ACS and the P2P topology",
                     "export NCCL_P2P_DISABLE=1")
"""GPU peer-to-peer traffic that IOMMU / PCIe ACS redirects hangs collectives; turning P2P off tells."""


def _names(facts: Facts) -> list[str]:
    return [s.name for s in facts.t.sources]


def _files(facts: Facts) -> str:
    return " ".join(shlex.quote(name) for name in _names(facts)) or "-"


def _snapshot_step(facts: Facts, when: str) -> Step:
    pids = facts.engine_pids()
    target = pids[0] if pids else "$(pgrep -f 'vllm serve' | head -1)"  # runnable as printed
    return Step(
        f"capture live stacks {when} (EngineCore or API-server pid; the pid in the log if it still runs)",
        f"engdiag snapshot {target}",
    )


def _timeout_knob(facts: Facts, root: Event | None) -> Step | None:
    """The knob that fired, raised to what ``recommend-timeout`` prints for the same log (one recommender)."""
    if root is None:
        return None
    startup = root.signal is Signal.ENGINE_READY_TIMEOUT or (
        root.signal is Signal.PROCESS_EXCEPTION and not facts.served_before(root)
    )
    stepping = root.signal in (
        Signal.ITERATION_TIMEOUT, Signal.HEARTBEAT_LOST, Signal.RPC_TIMEOUT, Signal.COMPILE,
        Signal.SCHEDULED_TOKENS, Signal.ENGINE_FATAL,
    )
    if not (startup or stepping):
        return None
    advice = timeout_advice(facts.t, "slow", _names(facts), prefer=knobs.ENGINE_READY if startup else None,
                            model=facts.model)
    return Step(advice.text, advice.command) if advice is not None else None


def _probe_step(facts: Facts, kind: Kind) -> list[Step]:
    """A Kubernetes probe the log shows failing: size it from the one recommender (say how it was detected)."""
    if not facts.t.of(Signal.EXTERNAL_GUARD):
        return []
    probe = probe_advice(facts.t, kind.value, _names(facts), facts.model)
    return [Step(probe.text, probe.command)] if probe is not None else []


def next_steps(facts: Facts, kind: Kind, sub_kind: MemoryKind | None, root: Event | None) -> list[Step]:
    """Concrete next steps for this verdict, most useful first."""
    files = _files(facts)
    steps: list[Step] = []
    if kind is Kind.SLOW:
        knob = _timeout_knob(facts, root)
        if knob is not None:
            steps.append(knob)
        steps.extend(_probe_step(facts, kind))
        if facts.t.of(Signal.COMPILE):
            steps.append(
                Step(
                    "warm up the shapes production uses, or keep the compile cache between restarts, "
                    "so compilation happens before serving",
                    "--enforce-eager   # only to confirm that compilation is the cost",
                )
            )
        steps.append(_snapshot_step(facts, "if it stalls again, before the timeout fires, to confirm it computes"))
    elif kind is Kind.DEADLOCKED and _hccl(facts):
        steps.append(_snapshot_step(facts, "while it hangs"))
        steps.append(Step("make every rank log the collectives it enters, to find the one that never arrived",
                          "export HCCL_ENTRY_LOG_ENABLE=1"))
        steps.append(Step("read HCCL's own account on every node (a remote rank named as stuck or unreachable)",
                          "grep -rn ERROR ~/ascend/log/debug/plog | tail -50"))
    elif kind is Kind.DEADLOCKED:
        steps.append(_snapshot_step(facts, "while it hangs"))
        capture = capture_advice(facts.t, kind.value, facts.model)
        steps.append(Step(capture.text, capture.command))
        steps.append(
            Step(
                "record collectives so the next hang names the rank that diverged",
                "export NCCL_DEBUG=INFO TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1",
            )
        )
        steps.append(Step("rule out CUDA graphs interfering with NCCL", "--enforce-eager"))
        steps.append(P2P_DIAGNOSIS)
    elif kind is Kind.FRAGMENTED:
        steps.extend(_memory_steps(facts, sub_kind))
    elif kind is Kind.CRASHED and _on_npu(facts):
        steps.append(Step("find the operator that faulted (slow; for a reproduction only)", "export ASCEND_LAUNCH_BLOCKING=1"))
        steps.append(Step("read the NPU runtime's own log of the fault (plog)",
                          "grep -rn ERROR ~/ascend/log/debug/plog | tail -50"))
    elif kind is Kind.CRASHED and not _device_fault(facts):
        # an exception raised in Python, no kernel or signal behind it: nothing for CUDA_LAUNCH_BLOCKING or Xid to
        # find (gb10-triton-ptxas-sm121a-enginecore-failed: a compiler that does not know the GPU;
        # deepgemm-missing-warmup-bf16-h100: a package not installed)
        steps.append(Step("read the first exception's traceback whole, from the process that raised first: its last "
                          "line names the cause, and the frames above it the step that raised"))
        steps.append(Step("log the engine's steps before it", "export VLLM_LOGGING_LEVEL=DEBUG"))
    elif kind is Kind.CRASHED:
        steps.append(Step("find the kernel that faulted (slow; for a reproduction only)", "export CUDA_LAUNCH_BLOCKING=1"))
        steps.append(Step("check the kernel log for GPU faults (Xid)", "sudo dmesg -T | grep -i xid"))
        if any("custom_all_reduce" in e.text for e in facts.events):
            steps.append(Step("rule out vLLM's custom all-reduce kernel", "--disable-custom-all-reduce"))
    elif kind is Kind.UNKNOWN:
        steps.extend(_probe_step(facts, kind))
        steps.append(_snapshot_step(facts, "if the server is still up"))
        steps.append(Step("analyse the full log from launch, every process and rank: add the other ranks' logs to this",
                          f"engdiag analyze {files}"))
    if kind in (Kind.SLOW, Kind.HEALTHY) and facts.t.prompt_lengths.count:
        steps.append(Step("size every timeout from this traffic", recommend_command(_names(facts))))
    return steps


def _device_fault(facts: Facts) -> bool:
    """Did a device, a signal or a torn-down communicator end a process (not only a Python exception)?"""
    return bool(facts.t.of(Signal.CUDA_ERROR, Signal.FATAL_SIGNAL, Signal.WORKER_DIED, Signal.NCCL_ABORT))


def _hccl(facts: Facts) -> bool:
    """The collective that never completed is torch_npu's (HCCL): NCCL's knobs do not reach it."""
    return any(isinstance(e.data, NcclWork) and e.data.backend == "HCCL"
               for e in facts.t.of(Signal.NCCL_WATCHDOG_TIMEOUT))


def _on_npu(facts: Facts) -> bool:
    """The device fault is an Ascend NPU's (torch_npu's and ACL's wording): CUDA's knobs do not reach it."""
    return any("NPU function error" in e.text or "aicore" in e.text.lower()
               or (isinstance(e.data, Failure) and (e.data.name or "").startswith("HCCL"))
               for e in facts.t.of(Signal.CUDA_ERROR))


def _memory_steps(facts: Facts, sub_kind: MemoryKind | None) -> list[Step]:
    if sub_kind is MemoryKind.FRAGMENTATION and any("Not enough space to allocate" in e.text
                                                     for e in facts.t.of(Signal.CUDA_OOM)):
        return [  # tt-metal's allocator: PyTorch's allocator settings do not reach it
            Step("bound the largest buffer a step places", "--max-num-batched-tokens 2048"),
            Step("leave the device's allocator more room (the KV cache takes less)", "--gpu-memory-utilization 0.3"),
        ]
    if sub_kind is MemoryKind.FRAGMENTATION:
        return [
            Step(
                "let the allocator grow segments instead of splitting them (not with sleep mode or KV connectors)",
                "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ),
            Step("bound the largest activation", "--max-num-batched-tokens 4096"),
        ]
    if sub_kind is MemoryKind.KV_PRESSURE:
        return [
            Step("give the KV cache more memory, or more GPUs", "--gpu-memory-utilization 0.95   # or a larger --tensor-parallel-size"),
            Step("admit fewer concurrent sequences", "--max-num-seqs 128"),
            Step("cap the context if long prompts dominate", "--max-model-len 32768"),
        ]
    faults = facts.t.of(Signal.CUDA_OOM, Signal.KV_CACHE_INSUFFICIENT)
    if faults and facts.phase_at(faults[0]) == "start-up" or facts.t.counts.get(Signal.KV_CACHE_INSUFFICIENT):
        return [
            Step("leave more memory for warm-up (sampler, CUDA graphs)", "--max-num-seqs 256   # and/or --gpu-memory-utilization 0.85"),
            Step("shorten the context or add GPUs if the KV cache cannot fit", "--max-model-len 16384   # or --tensor-parallel-size 2"),
        ]
    return [
        Step("leave more headroom for activations", "--gpu-memory-utilization 0.85"),
        Step("bound the largest step", "--max-num-batched-tokens 4096   # or --max-num-seqs 128"),
    ]


def _oom_killer(facts: Facts) -> bool:
    """Did the kernel's OOM killer wake, or report a process it killed?"""
    return bool(facts.t.counts.get(Signal.HOST_OOM)) or any(map(killed_by_oom_killer, facts.t.of(Signal.WORKER_DIED)))


def ruled_out(facts: Facts, kind: Kind) -> list[str]:
    """One sentence per other verdict saying why it does not fit."""
    t = facts.t
    reasons: list[str] = []
    if kind is not Kind.FRAGMENTED and not t.counts.get(Signal.CUDA_OOM) and _oom_killer(facts):
        reasons.append("not GPU memory: the kernel's OOM killer freed host memory; no CUDA out-of-memory error")
    elif kind is not Kind.FRAGMENTED and not t.counts.get(Signal.CUDA_OOM):
        peak = facts.kv_peak
        if peak is None or peak < KV_HIGH_PCT:
            kv = f"KV cache usage peaked at {peak:.1f}%" if peak is not None else "no KV usage figures"
            preempt = "some preemptions" if t.counts.get(Signal.PREEMPTION) else "no preemptions"
            reasons.append(f"not memory: no CUDA out-of-memory error, {kv}, {preempt}")
    if kind is not Kind.CRASHED and not t.counts.get(Signal.CUDA_ERROR) and not t.counts.get(Signal.FATAL_SIGNAL):
        reasons.append("not a crash: no CUDA error, illegal memory access or fatal signal")
    if kind is not Kind.DEADLOCKED:
        if not t.counts.get(Signal.NCCL_WATCHDOG_TIMEOUT):
            stalls = sum(1 for _, s in facts.stats if stalled(s))
            core = len(facts.shm_stalls(workers=False))
            reasons.append(
                "not a deadlock: no NCCL watchdog timeout"
                + (f", {core} shared-memory wait{'s' * (core != 1)} from the engine core" if core
                   else ", no engine-core shared-memory waits")
                + (f", {stalls} stalled stats interval{'s' * (stalls != 1)}" if stalls else "")
            )
    if kind is not Kind.SLOW and kind in (Kind.DEADLOCKED, Kind.CRASHED):
        dump = facts.last_crash_dump
        compiles = t.counts.get(Signal.COMPILE, 0)
        if dump is not None:
            reasons.append(f"not slow: the last scheduled step held {dump.total} tokens")
        elif not compiles:
            reasons.append("not slow: no compilation, start-up work or long step before the failure")
    return reasons
