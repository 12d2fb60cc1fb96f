"""Stalled progress: requests in flight and nothing produced, to the end of the log.

Domain facts (docs/verdicts.md): a stats interval with requests running and 0 tokens/s
means no engine step completed in it (``Running: 0`` at 0 tokens/s is idle, never a
stall); from 0.8.5 V1 prints exactly one such line and then drops to DEBUG, so a stall
leaves one line and silence (``tp8-llama70b-ray-allreduce-watchdog``).  Multi-GPU
offline generation stuck at ``0/N`` prompts after start-up is the first collective
never completing (``a6000-tp2-iommu-acs-stall``).
"""

from __future__ import annotations

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.timeline import is_progress
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Peer, Progress, Signal


def stalled_serving(facts: Facts) -> Verdict | None:
    """Requests running and not one token produced, to the end of the log."""
    trailing = facts.trailing_stalled_stats()
    progress_after = facts.t.last_progress
    if not trailing or (progress_after is not None and facts.at(progress_after) >= facts.at(trailing[0])):
        return None
    core = facts.shm_stalls(workers=False)
    draft = Draft(
        facts,
        Kind.DEADLOCKED,
        0.55 + (0.1 if len(trailing) >= 3 else 0) + (0.1 if core else 0),
        f"deadlocked: {trailing[-1].data.running} requests running, no token produced since "  # type: ignore[union-attr]
        f"{trailing[0].stamp.text if trailing[0].stamp else 'the last stats line'}",
    )
    draft.cite(trailing[0], Role.ROOT_CAUSE, "0 tokens/s with requests running: no engine step completed")
    for event in trailing[1:3]:
        draft.cite(event, Role.SUPPORTING)
    for event in core[-2:]:
        draft.cite(event, Role.SUPPORTING)
    draft.undecided = "a stack capture now (engdiag snapshot) shows where the workers wait"
    return draft.done()


def unscheduled_queue(facts: Facts) -> Verdict | None:
    """Requests waiting and none running in the last two intervals, the last without a token and the queue
    not shrinking, to the end of the log: the scheduler admits nothing.

    An idle engine has nothing waiting; one that waits for KV blocks or a lock still runs something.
    ``Running: 0 reqs, … Pending: 22 reqs`` at 0 tokens/s, interval after interval, is a scheduler that
    stopped (vllm-pr8378-multistep-chunked-pending-stall: multi-step with chunked prefill, a PR's load test).
    """
    tail = facts.stats[-2:]
    if len(tail) < 2 or not all(s.running == 0 and s.waiting > 0 for _, s in tail):
        return None
    if tail[-1][1].prompt_tps or tail[-1][1].generation_tps or tail[-1][1].waiting < tail[0][1].waiting:
        return None  # the last interval still produced, or the queue drained: work went on
    first_event, _ = tail[0]
    if any(is_progress(e) for e in facts.after(first_event)):
        return None
    last_event, last = tail[-1]
    draft = Draft(facts, Kind.DEADLOCKED, 0.5,
                  f"deadlocked: {last.waiting} requests wait and none is scheduled — nothing running, no token "
                  f"since {first_event.stamp.text if first_event.stamp else 'the first such stats line'}")
    draft.cite(first_event, Role.ROOT_CAUSE, "requests waiting with nothing running: the scheduler admits none")
    draft.cite(last_event, Role.SUPPORTING)
    draft.undecided = ("why the scheduler admits none: a prompt longer than the KV cache holds (V0 warns that it "
                       "exceeds the block manager's capacity), KV blocks a connector still holds, or a scheduler "
                       "bug; engdiag snapshot on the engine core shows where its loop is")
    return draft.done()


def offline_stall(facts: Facts) -> Verdict | None:
    """Offline generation stopped mid-way and the log went silent."""
    bars = [e for e in facts.t.of(Signal.PROGRESS_BAR) if e.data.bar.startswith("Processed prompts")]  # type: ignore[union-attr]
    if not bars:
        return None
    last = bars[-1]
    progress: Progress = last.data  # type: ignore[assignment]
    if progress.total is None or progress.done >= progress.total:
        return None
    if [e for e in facts.after(last) if e.signal is not Signal.PROGRESS_BAR]:
        return None
    first: Progress = bars[0].data  # type: ignore[assignment]
    if progress.done > first.done and progress.done > 0:
        rate = f", {progress.seconds_per_item:.2f} s/prompt" if progress.seconds_per_item else ""
        draft = Draft(facts, Kind.SLOW, 0.4,
                      f"slow: offline generation was still advancing ({progress.done}/{progress.total} prompts{rate}) "
                      "when the log ends — working, not stuck")
        draft.cite(last, Role.ROOT_CAUSE, "prompts still completing")
        draft.cite(bars[0], Role.SUPPORTING, "where this excerpt began")
        draft.undecided = "whether it finished: the rest of the output, or engdiag snapshot on the process"
        return draft.done()
    if not facts.multi_rank:
        draft = Draft(facts, Kind.UNKNOWN, 0.3,
                      f"unknown: generation stopped at {progress.done}/{progress.total} prompts and the log ends")
        draft.cite(last, Role.CONTEXT)
        draft.undecided = "whether the process is still computing: engdiag snapshot on it"
        return draft.done()
    draft = Draft(
        facts,
        Kind.DEADLOCKED,
        0.5,
        f"deadlocked: multi-GPU generation stuck at {progress.done}/{progress.total} prompts "
        "right after start-up, nothing logged since",
    )
    draft.cite(last, Role.ROOT_CAUSE, "no prompt completed and the log went silent")
    draft.cite(facts.t.last_of(Signal.PARALLEL_CONFIG), Role.CONTEXT,
               "GPUs talk over NCCL: a peer-to-peer hang stops the first step")
    draft.undecided = "a stack capture now (engdiag snapshot) shows whether the ranks sit in a collective"
    return draft.done()


def queueing(facts: Facts) -> Verdict | None:
    """A working engine with a queue that does not drain: requests wait on a party that is busy → slow.

    Domain fact: V1's ``Waiting: N reqs`` counts requests admitted to the engine but not yet
    scheduled; when it stays up interval after interval while tokens keep flowing, every
    request's latency includes the queue, and a client's timeout fires although nothing is stuck.
    """
    tail = facts.stats[-3:]
    if len(tail) < 3:
        return None
    busy = all(s.waiting > 0 and (s.generation_tps > 0 or s.prompt_tps > 0) for _, s in tail)
    waiting = [s.waiting for _, s in tail]
    if not busy or waiting != sorted(waiting):
        return None
    last_event, last = tail[-1]
    draft = Draft(facts, Kind.SLOW, 0.5,
                  f"slow: the engine kept working ({last.generation_tps:g} tok/s generated) while {last.waiting} "
                  "requests queued behind the running ones — their wait includes the queue")
    draft.cite(last_event, Role.ROOT_CAUSE, "requests waiting while the engine works: overload, not a hang")
    draft.cite(tail[0][0], Role.SUPPORTING, "the queue did not drain")
    draft.step("serve more requests at once if memory allows, or add replicas", "--max-num-seqs 512")
    draft.step("give clients a timeout that covers queueing at peak load",
               "client request timeout ≥ queue length × mean request time ÷ concurrency")
    draft.undecided = "request latencies (/metrics: vllm:request_queue_time_seconds) show how long requests queued"
    return draft.done()


def _who_and_where(capture: Event, somewhere: str) -> tuple[str, str]:
    """The captured process and the frame its stack sits in."""
    where = capture.data.detail if isinstance(capture.data, Peer) and capture.data.detail else somewhere
    return (capture.proc.label if capture.proc is not None else "a process"), where


def stack_in_compile(facts: Facts) -> Verdict | None:
    """A captured stack inside compilation: the rank everyone waits on is working — slow, not stuck.

    Kernels compiled on first use (Triton, Inductor, FlashInfer / DeepGEMM JIT) for a shape warm-up did
    not cover take minutes, while the engine core and the other ranks wait on it
    (dsv4-sm120-tp2-48x100k-prefill-stall-pyspy-triton-jit-not-deadlock: both TP workers in ``make_llir``,
    the engine core in ``acquire_read``; 20 s later the batch drained).
    """
    stacks = facts.t.of(Signal.STACK_IN_COMPILE)
    if not stacks:
        return None
    first = stacks[0]
    who, where = _who_and_where(first, "a compiler")
    draft = Draft(facts, Kind.SLOW, 0.6,
                  f"slow: a captured stack shows {who} compiling ({where}) — first-use kernel compilation takes "
                  "minutes while everyone else waits on it; it is working, not stuck")
    draft.cite(first, Role.ROOT_CAUSE, "compiling: the party being waited on is working")
    for event in facts.t.of(Signal.STACK_IN_COLLECTIVE, Signal.SHM_STALL)[:2]:
        draft.cite(event, Role.CONSEQUENCE, "waiting on the compiling rank")
    draft.undecided = "a second capture a minute later: a different stack (or tokens flowing) confirms it moved on"
    draft.step("warm the compile caches before serving (the same shapes once at start-up), or persist them",
               "export VLLM_CACHE_ROOT=/persistent/vllm-cache TRITON_CACHE_DIR=/persistent/triton-cache")
    return draft.done()


def stack_in_launch(facts: Facts) -> Verdict | None:
    """A captured stack blocked launching a kernel: the GPU is not finishing the work queued before it.

    A launch returns at once unless the device's queue is full or launches are synchronous
    (CUDA_LAUNCH_BLOCKING=1), so a hang capture sitting in ``cudaLaunchKernel`` points at a kernel that
    does not complete (gb10-flashinfer-radix-topk-multicta-wedge-pyspy-quoted, fixed by a FlashInfer upgrade).
    """
    stacks = facts.t.of(Signal.STACK_IN_LAUNCH)
    if not stacks or facts.t.of(Signal.STACK_IN_COMPILE) or any(is_progress(e) for e in facts.after(stacks[0])):
        return None
    first = stacks[0]
    kernel = first.data.detail if isinstance(first.data, Peer) else "a kernel"
    if isinstance(first.data, Peer) and first.data.peer == "device event":
        # the same fact one call later: an event's or a stream's wait returns when the work queued before the
        # event finishes (lmcache-rocm-from-ipc-handle-deadlock: an imported IPC event that never completed)
        draft = Draft(facts, Kind.DEADLOCKED, 0.45,
                      f"deadlocked (likely): a captured stack shows a thread waiting on the device in {kernel} — the "
                      "work that would complete that event or stream is not finishing")
        draft.cite(first, Role.ROOT_CAUSE, "this wait returns only when the device finishes the work before it")
    else:
        draft = Draft(facts, Kind.DEADLOCKED, 0.45,
                      f"deadlocked (likely): a captured stack shows a thread blocked launching {kernel} — the GPU is "
                      "not finishing the kernels queued before it")
        draft.cite(first, Role.ROOT_CAUSE, "a launch only blocks when the device does not drain its queue")
    draft.undecided = ("a second capture, and GPU utilisation (nvidia-smi): the same stack with the GPU busy and no "
                       "tokens means a kernel that never ends")
    draft.step("name the kernel: run once with synchronous launches so the hang sits on it", "export CUDA_LAUNCH_BLOCKING=1")
    return draft.done()


def stack_in_collective(facts: Facts) -> Verdict | None:
    """A captured stack inside a collective, and no progress after it: the rank waits for peers that never come.

    Logs carry stacks only when someone captured them during a hang (py-spy, faulthandler,
    vLLM's call tracer), so a frame in ``all_reduce`` / ``_gather_ipc_meta`` with nothing
    advancing afterwards is a rank blocked in a collective (``vllm-2731``-style hangs with
    CUDA graphs and custom all-reduce).
    """
    stacks = facts.t.of(Signal.STACK_IN_COLLECTIVE)
    if not stacks:
        return None
    first = stacks[0]
    if any(is_progress(e) for e in facts.after(first)):
        return None
    who, where = _who_and_where(first, "a collective")
    draft = Draft(facts, Kind.DEADLOCKED, 0.6,
                  f"deadlocked: a captured stack shows {who} inside {where} — a collective that waits for every "
                  "rank — and nothing progressed after it")
    draft.cite(first, Role.ROOT_CAUSE, "blocked in a collective")
    for event in stacks[1:3]:
        draft.cite(event, Role.SUPPORTING)
    stats = facts.stats
    if stats and stats[-1][1].running > 0:
        draft.cite(stats[-1][0], Role.CONTEXT, "requests were in flight")
    draft.notes.append("a stack taken during a hang names where the rank waits; the rank missing from the "
                       "collective is the one whose stack is elsewhere")
    draft.undecided = "every rank's stack (engdiag snapshot on each worker): the one not in the collective is the culprit"
    draft.step("rule out CUDA graphs and custom all-reduce around the collective", "--enforce-eager --disable-custom-all-reduce")
    return draft.done()
