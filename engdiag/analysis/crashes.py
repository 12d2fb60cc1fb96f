"""Crashes: faults that are not timeouts, waits or memory — and the first one in time is the cause.

Domain facts encoded here (docs/verdicts.md, "Crashes"):

* The first hard fault in time is the root cause; the NCCL aborts, engine-dead
  errors and shared-memory waits after it are its consequences
  (``shm-broadcast-then-custom-allreduce-ima-startup``: the wait comes first, the
  illegal memory access decides).
* ``ncclCommWatchdog`` frames without "Watchdog caught collective operation
  timeout" are the watchdog tearing the process down after a CUDA error, not a
  stuck collective (``illegal-memory-access-nccl-watchdog-frames``).
* A worker killed by SIGKILL is the host's OOM killer or an operator; SIGSEGV and
  SIGABRT are native crashes.
* A C++ ``terminate called`` raised by a communication library (gloo, c10d) is how a
  failed collective ends a process: the collective decides, not the abort
  (``async-sched-dp-zero-token-step-gloo-size-mismatch``).
* NCCL keeps each intra-node channel's buffers in /dev/shm and fails the collective when it cannot make room
  there; Docker gives a container 64 MiB of it.  The NCCL error that follows ("unhandled system error") is
  that, not a device fault (``nccl-shm-segment-docker-tp``, ``prodstack-nccl-shm-64m-tp2``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Signal
from engdiag.logs.patterns.fatals import SHELL_KILLED

KILLED = {-9: "SIGKILL", 137: "SIGKILL", -11: "SIGSEGV", 139: "SIGSEGV", -6: "SIGABRT", 134: "SIGABRT"}
_COMM_ABORTS = ("gloo", "c10d", "DistBackendError", "DistStoreError", "DistNetworkError", "nccl")


def killed_worker(facts: Facts) -> Event | None:
    """A worker that died of a signal (exit code), not of an exception."""
    for event in facts.t.of(Signal.WORKER_DIED):
        if getattr(event.data, "exit_code", None) in KILLED:
            return event
    return None


def is_comm_abort(event: Event) -> bool:
    """A ``terminate called`` whose exception comes from a communication library."""
    exception = getattr(event.data, "exception", None) or ""
    return event.signal is Signal.FATAL_SIGNAL and any(name in exception for name in _COMM_ABORTS)


def crash(facts: Facts, root: Event) -> Verdict:
    """A CUDA error, a fatal signal or a killed worker as the first fault."""
    if root.signal is Signal.WORKER_DIED:
        signal_name = KILLED.get(getattr(root.data, "exit_code", 0) or 0, "a signal")
        who = SHELL_KILLED if getattr(root.data, "name", None) == SHELL_KILLED else "a worker process"
        headline = f"crashed: {who} was killed by {signal_name}"
        if signal_name == "SIGKILL":
            headline += " (the host's OOM killer or an operator)"
            draft = Draft(facts, Kind.CRASHED, 0.8, headline)
            draft.generic_steps = False
            draft.cite(root, Role.ROOT_CAUSE, "SIGKILL: nothing in the process could log why")
            draft.step("see whether the kernel's OOM killer chose it", "sudo dmesg -T | grep -i -e 'out of memory' -e killed")
            draft.step("give the container more host memory, or use less of it (smaller --swap-space, "
                       "no --cpu-offload-gb, fewer API-server processes)", "--swap-space 0")
            return draft.cite_consequences(root).done()
    else:
        headline = "crashed: " + root.text.replace("\n", " ")[:160]  # a record of several lines reads as one
    draft = Draft(facts, Kind.CRASHED, 0.85, headline)
    earlier_stalls = [e for e in facts.before(root) if e.signal is Signal.SHM_STALL]
    draft.cite(root, Role.ROOT_CAUSE)
    for event in earlier_stalls[-2:]:
        draft.cite(event, Role.CONTEXT, "the wait before a crash is the crash in progress, not a deadlock")
    last_work = next((e for e in reversed(facts.before(root)) if e.signal in (Signal.STATS, Signal.PROGRESS_BAR,
                                                                                Signal.REQUEST_FINISHED)), None)
    draft.cite(last_work, Role.CONTEXT, "the last progress before the fault")
    return draft.cite_consequences(root).done()


def shm_too_small(facts: Facts) -> Verdict | None:
    """A shared-memory segment /dev/shm had no room for: the container's /dev/shm is too small."""
    full = facts.t.of(Signal.SHM_TOO_SMALL)
    if not full:
        return None
    whose = "vLLM's shared-memory broadcast buffer" if "Insufficient space" in full[0].text else "an NCCL segment"
    draft = Draft(facts, Kind.CRASHED, 0.85,
                  f"crashed: /dev/shm had no room for {whose} — the container's /dev/shm is too small "
                  "(Docker gives 64 MiB), and the collective that needed it failed")
    draft.generic_steps = False  # no kernel faulted: CUDA_LAUNCH_BLOCKING and Xid say nothing here
    draft.cite(full[0], Role.ROOT_CAUSE, "the segment that did not fit")
    draft.step("see how much /dev/shm the container has", "df -h /dev/shm")
    draft.step("give the container a larger /dev/shm: docker run's --shm-size 16g or --ipc=host; on Kubernetes an "
               "emptyDir of medium Memory mounted at /dev/shm")
    draft.step("or keep NCCL out of /dev/shm (slower intra-node transfers)", "export NCCL_SHM_DISABLE=1")
    return draft.cite_consequences(full[0]).done()


def other_fatal(facts: Facts) -> Verdict | None:
    """Any other fatal error: a crash whose first exception is named when the log has it."""
    fatal = facts.t.of(
        Signal.ENGINE_FATAL,
        Signal.ENGINE_DEAD,
        Signal.WORKER_EXCEPTION,
        Signal.WORKER_DIED,
        Signal.PROCESS_EXCEPTION,
        Signal.NCCL_ABORT,
        Signal.RECOVERY_TIMEOUT,
    )
    if not fatal:
        return None
    root = fatal[0]
    exception = next((facts.exception_of(e) for e in fatal if facts.exception_of(e)), None)
    cut = _cut_traceback(facts) if exception is None else None
    if cut is not None:
        # the dying process's own error is there but its last line is not: out of memory, a CUDA error and a
        # timeout all end such a traceback (r1-awq-a800-gpu-util-097-oom-mqllmengine-dead: a worker's traceback
        # cut after its first line, then "MQLLMEngine is already dead"; the thread's cause was an OOM)
        draft = Draft(facts, Kind.UNKNOWN, 0.35, "unknown: the engine died after a process raised, and the "
                      "exception's name is cut off — running out of memory, a CUDA error or a timeout all end this way")
        draft.cite(cut, Role.ROOT_CAUSE, "a process raised here; the exception line is cut off")
        draft.cite(root, Role.CONSEQUENCE)
        draft.undecided = "the traceback's last line (the exception's name), in the full log"
        return draft.done()
    report = _reported_only(facts, fatal) if exception is None else None
    if report is not None:
        draft = Draft(facts, Kind.UNKNOWN, 0.3, report.headline)
        draft.cite(root, Role.ROOT_CAUSE, report.note)
        draft.undecided = report.undecided
        if "Failed core proc(s): {}" in root.text:
            draft.notes.append(_UNNAMED)
        return draft.done()
    node = getattr(root.data, "name", None) or ""
    if root.signal is Signal.WORKER_DIED and node.startswith("Ray node") and not exception:
        # Ray's GCS marks a node dead when its raylet stops answering: crashed, OOM-killed, preempted — or too
        # busy to answer, which the node's own logs tell apart
        draft = Draft(facts, Kind.CRASHED, 0.6, f"crashed: Ray lost {node.removeprefix('Ray ')} (its raylet stopped answering "
                      "heartbeats) — every worker on it is gone, and the ranks elsewhere cannot go on")
        draft.cite(root, Role.ROOT_CAUSE, "a whole node gone: crashed, OOM-killed or preempted")
        draft.undecided = "that node's raylet.out and `dmesg -T` (an OOM kill or a reboot), or the cloud's preemption notice"
        draft.step("read why the node went: its Ray logs and kernel log",
                   "tail -n 50 /tmp/ray/session_latest/logs/raylet.out; sudo dmesg -T | grep -i -e oom -e killed")
        draft.step("see which nodes Ray still has", "ray status")
        return draft.cite_consequences(root).done()
    headline = "crashed: the engine died with " + (exception[:160] if exception else "an error (no timeout, no OOM)")
    if root.signal is Signal.WORKER_DIED and node and not exception:
        # the process that died is named (a worker, a Ray Serve replica, Triton's stub, a Dynamo worker)
        headline = f"crashed: {node[:120]} died — nothing in the log shows a timeout or an OOM before it"
    if root.signal is Signal.NCCL_ABORT and not exception:
        headline = "crashed: the NCCL watchdog tore the engine process down after a GPU error (no collective timed out)"
    draft = Draft(facts, Kind.CRASHED, 0.65 if exception else 0.55, headline)
    if root.signal is Signal.NCCL_ABORT:
        draft.notes.append(
            "ncclCommWatchdog frames without 'Watchdog caught collective operation timeout' are the "
            "watchdog tearing the process down after a CUDA error, not a stuck collective"
        )
    draft.cite(root, Role.ROOT_CAUSE)
    if not exception:
        draft.undecided = "the first error of the dying process (often a CUDA error) is not in this log"
    unnamed = next((e for e in fatal if "Failed core proc(s): {}" in e.text), None)
    if unnamed is not None:
        draft.notes.append(_UNNAMED)
        draft.undecided = "the engine core's own last lines, and `dmesg -T | grep -i -e oom -e killed` on the host"
    return draft.cite_consequences(root).done()


@dataclass(frozen=True)
class _Report:
    """A line that reports a death whose cause is printed elsewhere: with nothing else fatal in the log, an OOM, a
    CUDA error and a timeout all end the same way, and the line that would decide is named."""

    is_report: Callable[[Event], bool]
    headline: str
    note: str
    undecided: str
    alone: bool
    """Only where no other line of the log names an error (one beside it is the cause)."""


def _start_up_report(event: Event) -> bool:
    """The API server's report that an engine core process ended during start-up, pointing at the cause above it."""
    return event.signal is Signal.ENGINE_FATAL and "See root cause above" in event.text


def _step_dump(event: Event) -> bool:
    """The engine core's dump of a model step's input, printed only when that step raised."""
    return event.signal is Signal.ENGINE_FATAL and "Dumping input data for V1 LLM engine" in event.text


_REPORTS = (
    # the API server's word that the engine died (EngineDeadError, "Engine loop is not running"): the engine core's
    # own error is not here (llm-scaler-glm47-flash-enginedead-mem9996: the maintainer suspected memory)
    _Report(lambda e: e.signal is Signal.ENGINE_DEAD,
            "unknown: the engine was reported dead (by the API server, or by the layer that runs it), and the engine "
            "core's own error is not in this log — running out of memory, a CUDA error or a step timeout all end "
            "this way", "a consequence: the engine had already died",
            "the engine core's lines before this (its 'EngineCore encountered a fatal error' traceback and the "
            "exception that ends it)", alone=False),
    # "Engine core initialization failed. See root cause above. Failed core proc(s): {}" (v1/engine/utils.py
    # wait_for_engine_startup): the core's own error is above it in the full log; a start-up step past the ready
    # timeout ends this way too (cold-flashinfer-jit-engine-ready-timeout-gb10: a 600 s cold JIT, this line alone)
    _Report(_start_up_report,
            "unknown: an engine core died during start-up, and only the API server's report of it is in this log — a "
            "start-up step that outlasted its timeout (weight loading, compilation, kernel JIT), running out of "
            "memory or a crash all end this way", "a consequence: the API server saw the engine core process end",
            "the engine core's own lines above this one: the start-up step it was in and the exception that ended it "
            "(or `dmesg -T | grep -i -e oom -e killed` where it left none)", alone=True),
    # V1's dump of a step's input (core.py execute_model_with_error_logging, 0.9+), its exception cut off
    # (pp-multinode-slingshot-ray-hang: the dump 8 minutes after a Ray compiled graph's first step began)
    _Report(_step_dump,
            "unknown: a model step raised (the engine core dumped its input for it), and its exception is not in this "
            "log — a step that outlasted its timeout, a worker that died, a CUDA error or running out of memory all "
            "end this way", "the engine core dumps a step's input only when that step raised",
            "the exception after the dump: the last line of the engine core's 'EngineCore encountered a fatal error' "
            "traceback", alone=True),
)


def _reported_only(facts: Facts, fatal: list[Event]) -> _Report | None:
    """The kind of report every fatal line of the log is, when they are all one kind (and alone where it must be)."""
    for report in _REPORTS:
        if all(report.is_report(e) for e in fatal) and not (report.alone and _other_errors(facts)):
            return report
    return None


_UNNAMED = ("'Failed core proc(s): {}' means a start-up process exited without an exit code vLLM could read: its "
            "own traceback, or the host's OOM killer (dmesg), is the root cause")


_ERROR_LINE = re.compile(r"^.*\b[A-Za-z_]\w*(?:Error|Exception): .*$", re.MULTILINE)
"""A line naming an exception (``RuntimeError: …``, behind any process tag or log prefix)."""


def _other_errors(facts: Facts) -> bool:
    """Does any line of the log's exceptions name an error other than the API server's start-up report?  The engine
    core's own error, pasted beside a report, is the cause (nemo-retriever-deepgemm-unavailable-engine-init-failed)."""
    raised = facts.t.of(Signal.EXCEPTION, Signal.WORKER_EXCEPTION, Signal.PROCESS_EXCEPTION)
    return any("See root cause above" not in line for e in raised for line in _ERROR_LINE.findall(e.text))


def _cut_traceback(facts: Facts) -> Event | None:
    """The first traceback in the log, when no traceback in it names an exception (the paste cut them off).

    A cut traceback beside a named one is only where the paste ends, or a paste whose blank lines split
    one traceback into pieces (ampere-fp8-kv-chunked-prefill-triton-crash-rpc-unhealthy: the client's
    traceback after the engine's; vLLM issue 12899, double-spaced).
    """
    raised = facts.t.of(Signal.EXCEPTION, Signal.WORKER_EXCEPTION, Signal.PROCESS_EXCEPTION)
    if any(facts.exception_of(e) for e in raised):
        return None
    return next((e for e in raised if "Traceback (most recent call last)" in e.text), None)
