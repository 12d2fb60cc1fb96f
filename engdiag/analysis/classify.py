"""Timeline → verdict: slow, deadlocked, fragmented, crashed, healthy or unknown.

The reasoning lives in one module per family of evidence — ``phases`` and ``phase_rules`` (what each
process was doing and for how long), ``waits``, ``wait_rules`` and ``stalls`` (who waited on whom,
whether it could ever be satisfied, and progress that stopped), ``timeouts`` (the
guard that fired, reconstructed by ``guards``, against the work in progress),
``external_guards``, ``memory``, ``crashes`` and ``benign``.  This module only orders them, most
decisive first (docs/verdicts.md):

1. an operator's stop before any fault makes the rest of the log its shutdown;
2. the first hard fault in time is the root cause — a memory fault, a crash, or a
   wait that can never complete (collective mismatch, short rendezvous, lost peer,
   a collective the NCCL watchdog saw never finish);
3. an engine that exited after finishing its work is healthy;
4. a guard that fired is judged by the work in progress (slow) or its absence (stuck);
5. a start-up phase longer than the start-up default is slow, fatal line or not;
6. any other fatal error is a crash;
7. without a failure: waits on silent or working parties, stalled serving,
   KV-cache pressure, a long generation, then benign lines.
"""

from __future__ import annotations

from collections.abc import Callable

from engdiag.analysis import (
    benign,
    crashes,
    external_guards,
    guards,
    host_memory,
    kv_load,
    kv_transfer,
    lmcache,
    memory,
    phase_rules,
    silent_waits,
    stalls,
    timeouts,
    traces,
    wait_rules,
    waits,
)
from engdiag.analysis.advice import next_steps
from engdiag.analysis.facts import Facts
from engdiag.analysis.timeline import Timeline
from engdiag.analysis.verdict import Kind, Verdict
from engdiag.logs.events import Event, Rendezvous, Signal
from engdiag.logs.patterns.kernel import killed_by_oom_killer

_HARD = (
    Signal.CUDA_OOM,
    Signal.HOST_OOM,
    Signal.KV_CACHE_INSUFFICIENT,
    Signal.CUDA_ERROR,
    Signal.FATAL_SIGNAL,
    Signal.NCCL_WATCHDOG_TIMEOUT,
    *waits.UNSATISFIABLE,
)


def root_fault(facts: Facts) -> Verdict | None:
    """The first hard fault in time decides; the family it belongs to explains it."""
    faults = [e for e in facts.t.of(*_HARD) if e.signal is not Signal.CUDA_OOM or not memory.survived(facts, e)]
    killed = crashes.killed_worker(facts)
    if killed is not None:
        faults = sorted([*faults, killed], key=facts.at)
    if any(e.signal in waits.UNSATISFIABLE for e in faults):
        faults = [e for e in faults if not crashes.is_comm_abort(e)]
    if not faults:
        return None
    root = _explained(facts, faults[0])
    guard = guards.timeout_event(facts)
    if guard is not None and facts.at(guard) < facts.at(root) and root.signal not in (Signal.CUDA_OOM, Signal.CUDA_ERROR):
        return None  # a step guard fired first: the collective timeouts after it are its consequences
    if root.signal is Signal.CUDA_OOM:
        return memory.oom(facts, root)
    if root.signal is Signal.HOST_OOM or killed_by_oom_killer(root):
        return host_memory.kernel_oom(facts, root)
    if root.signal is Signal.SHM_TOO_SMALL:
        return crashes.shm_too_small(facts)
    if root.signal is Signal.KV_CACHE_INSUFFICIENT:
        return memory.kv_cache_does_not_fit(facts, root)
    if root.signal in (Signal.PEER_LOST, Signal.RENDEZVOUS_FAILED) and _not_placement(root) and (
            raised := timeouts.raised_before(facts, root)) is not None:
        # the peer closed the connection, or never joined the rendezvous, because it died: its exception is
        # the cause (neuron-tp64-cold-compile-neuronxcc-70-gloo-tp-barrier-peer-closed: a compiler failure,
        # then gloo; vLLM issue 12189: workers raised "Cannot re-initialize CUDA in forked subprocess", then the
        # store timed out waiting for them)
        return crashes.crash(facts, raised)
    if root.signal is Signal.COMM_TIMEOUT and any(facts.at(e) <= facts.at(root)
                                                  for e in facts.t.of(Signal.KV_BUFFER_FULL)):
        # the payload the wait is for never left a full transfer pool (vllm-omni issue 3743)
        return kv_transfer.buffer_full(facts)
    if root.signal is Signal.NCCL_WATCHDOG_TIMEOUT or root.signal in waits.UNSATISFIABLE:
        return wait_rules.unsatisfiable_wait(facts, root)
    return crashes.crash(facts, root)


_DETAIL_LINES = 20
"""How far below a device error its runtime's detail block reaches (Ascend prints EL0004 / EZ9999 blocks)."""


def _explained(facts: Facts, root: Event) -> Event:
    """A device error whose runtime detail right below it says memory ran out is that OOM, reported through
    the call that failed (ascend-mc2-moe-dispatch-hccl-2gib-device-memory-exhausted: "NPU function error: call
    aclnnMoeDistributeDispatchV2 failed", then ACL's "EL0004 … Memory resources are exhausted"); one whose
    detail says /dev/shm had no room is that (NCCL's "unhandled system error", then "Last error: Error while
    creating shared memory segment": nccl-shm-segment-docker-tp)."""
    if root.signal is not Signal.CUDA_ERROR:
        return root
    return next((e for e in facts.t.of(Signal.CUDA_OOM, Signal.SHM_TOO_SMALL) if e.source == root.source
                 and root.line < e.line <= root.line + _DETAIL_LINES), root)


def _not_placement(event: Event) -> bool:
    """Ray placing GPUs waits on resources, not on processes that could have died."""
    return not (isinstance(event.data, Rendezvous) and event.data.what == "placement")


RULES: tuple[Callable[[Facts], Verdict | None], ...] = (
    benign.operator_stop,
    root_fault,
    benign.exit_after_work,
    kv_transfer.buffer_full,
    kv_transfer.pool_exhausted,
    kv_transfer.held_for_decode,
    kv_transfer.read_after_lease,
    kv_transfer.hold_set_short,
    timeouts.timeout_verdict,
    timeouts.watchdog_stall,
    external_guards.external_guard,
    phase_rules.slow_startup,
    memory.died_allocating,
    memory.died_after_sizing,
    memory.died_after_compile,
    memory.sleep_kept_memory,
    crashes.shm_too_small,
    crashes.other_fatal,
    stalls.stack_in_compile,
    stalls.stack_in_launch,
    stalls.stack_in_collective,
    traces.stopped_traces,
    lmcache.slow_tier,
    silent_waits.core_waits,
    silent_waits.api_waits,
    silent_waits.placement_wait,
    silent_waits.handshake_wait,
    stalls.stalled_serving,
    stalls.unscheduled_queue,
    stalls.offline_stall,
    memory.kv_pressure,
    stalls.queueing,
    phase_rules.long_generation,
    phase_rules.startup_stopped,
    kv_transfer.hold_expired,
    kv_load.load_failed,
    benign.refused_operation,
    lmcache.offload_skipped,
    benign.quiet,
)


def classify(timeline: Timeline) -> Verdict:
    """The verdict for a timeline."""
    return judge(Facts(timeline))


def judge(facts: Facts) -> Verdict:
    """The verdict for a timeline's facts (the caller keeps ``facts.model`` to show it)."""
    if not facts.t.events and any(s.first is not None for s in facts.t.sources):
        return Verdict(
            kind=Kind.UNKNOWN,
            confidence=0.1,
            headline="unknown: the vLLM lines here carry no progress, timeout, stall, memory or crash signal",
            undecided="the lines around the failure: the full log from launch, or the traceback's last line",
            next_steps=tuple(next_steps(facts, Kind.UNKNOWN, None, None)),
        )
    if not facts.t.events:
        return Verdict(
            kind=Kind.UNKNOWN,
            confidence=0.0,
            headline="unknown: no vLLM lines found",
            undecided="a vLLM server or engine log (API server stdout, kubectl logs, journald)",
        )
    for rule in RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    raise AssertionError("the last rule always decides")  # pragma: no cover
