"""Verdicts from the waits: a wait on a working party is slow, one that can never complete is a deadlock.

Domain facts encoded here (docs/verdicts.md, "Waits"):

* vLLM is a chain of waits: the API server waits on the engine core, the engine
  core on its workers (shared-memory queue, RPC), ranks on each other inside
  collectives, every process on the rendezvous at start-up.
* A wait on a party that is demonstrably working is slowness: the engine core
  logging its 60 s shared-memory wait while a worker keeps retrying a bounded
  set-up step (``mnnvl-allreduce-workspace-fd-exchange-30s-retries``).
* A wait that can never complete is a deadlock, and the party is named when the
  log shows it: ranks in different collectives (gloo ``op.preamble.length <=
  op.nbytes``, ``async-sched-dp-zero-token-step-gloo-size-mismatch``), a rendezvous
  short of members (``N/M clients joined``), a store nobody answers at, a placement
  group Ray cannot schedule, a transport link to a peer that failed
  (``roce-ib-error-first-allreduce-dual-spark-hang``), a communication kernel whose
  peers never sent (``wide-ep-deepep-dispatch-timeout-startup-hang``), a collective
  the NCCL watchdog saw never complete (``llama405b-fp8-gather-watchdog``).
* Waits seen without any failure (an engine core on silent workers, the API server on an engine, Ray placing
  GPUs, the start-up handshake) are judged in ``silent_waits.py``.
"""

from __future__ import annotations

import re

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts, stalled
from engdiag.analysis.guarded_waits import GUARDED_WAITS
from engdiag.analysis.rendezvous_kinds import kind_of
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.analysis.waits import KV_TRANSFER, KV_TRANSPORTS
from engdiag.logs.events import Event, NcclWork, Peer, Rendezvous, Signal, Timeout
from engdiag.logs.patterns.waits import ASCEND_TASK, DIVERGED_OUTPUTS, RAY_DP_GANG, STORE_LOST


def _comm_steps(draft: Draft, event: Event) -> None:
    signal = event.signal
    if signal is Signal.COLLECTIVE_MISMATCH and isinstance(event.data, Peer) and event.data.detail == DIVERGED_OUTPUTS:
        draft.step("upgrade vLLM: later releases sample on the driver rank alone and broadcast its tokens, so ranks "
                   "cannot disagree (the check that failed here, '# Make sure all workers have the same results.', "
                   "is gone with them)")
        draft.step("until then, the same requests on one GPU (tensor-parallel size 1) have no second rank to "
                   "disagree with", "--tensor-parallel-size 1")
    elif signal is Signal.COLLECTIVE_MISMATCH:
        draft.step("name the ranks and the collectives they disagree on", "export TORCH_DISTRIBUTED_DEBUG=DETAIL")
        draft.step("look for a rank that skips or adds a collective (a rank with no work this step, an uneven "
                   "batch across DP ranks, a different code path on one rank); upgrade if the release notes "
                   "name such a fix")
    elif signal is Signal.RENDEZVOUS_FAILED:
        for text, command in kind_of(event.data if isinstance(event.data, Rendezvous) else Rendezvous()).all_steps(event):
            draft.step(text, command)
    elif signal is Signal.PEER_LOST and isinstance(event.data, Peer) and event.data.cut:
        draft.step("name the ranks and the collectives they disagree on", "export TORCH_DISTRIBUTED_DEBUG=DETAIL")
        draft.step("read every data-parallel rank's log at that time: the rank that ran one collective fewer, or "
                   "died, is the cause")
    elif _store_lost(event):
        draft.step("read the log of the process that hosts the store (rank 0; with data parallelism the head node's "
                   "vLLM): why it exited is the cause")
        draft.step("the ranks left never recover on their own: stop every node's vLLM and start the group again")
    elif signal is Signal.PEER_LOST and isinstance(event.data, Peer) and (event.data.detail or "").startswith(KV_TRANSPORTS):
        draft.step("check that the other instance is up and reachable for KV transfer (after a restart, "
                   "restart its peer too: survivors keep the old endpoints)")
        draft.step("get UCX's account of the endpoint", "export UCX_LOG_LEVEL=debug")
    elif signal is Signal.PEER_LOST:
        draft.step("check the fabric between the nodes (link state, GID index, MTU)", "ibv_devinfo; ibstat")
        draft.step("get NCCL's account of the transport", "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET")
        draft.step("to isolate the transport, run once over TCP", "export NCCL_IB_DISABLE=1")
    elif signal is Signal.COMM_TIMEOUT and isinstance(event.data, Timeout) and event.data.guard in GUARDED_WAITS:
        for text, command in GUARDED_WAITS[event.data.guard].steps:
            draft.step(text, command)
    elif signal is Signal.COMM_TIMEOUT and isinstance(event.data, Timeout) and event.data.call == ASCEND_TASK:
        draft.step("make every rank log the collectives it enters, to find the one that never arrived",
                   "export HCCL_ENTRY_LOG_ENABLE=1")
        draft.step("read every rank's log at that time: HCCL's 'Notify register times out … remote rank' names the "
                   "peer that never signalled")
    elif signal is Signal.COMM_TIMEOUT and isinstance(event.data, Timeout) and event.data.guard in ("gloo", "hccl"):
        draft.step("name the ranks and the collectives they disagree on", "export TORCH_DISTRIBUTED_DEBUG=DETAIL")
        draft.step("find the rank that never reached this CPU collective (its own log, or engdiag snapshot on it)")
    elif signal is Signal.COMM_TIMEOUT:
        draft.step("check RDMA between the nodes for the expert-parallel kernels (NVSHMEM/IBGDA)",
                   "export NCCL_DEBUG=INFO NVSHMEM_DEBUG=INFO")
        draft.step("to isolate DeepEP, start once with another all-to-all backend", "--all2all-backend naive")


def unsatisfiable_wait(facts: Facts, root: Event) -> Verdict:
    """A wait that can never complete: deadlocked, naming the party."""
    if root.signal is Signal.NCCL_WATCHDOG_TIMEOUT:
        return collective_timeout(facts, root)
    if root.signal is Signal.COMM_TIMEOUT:
        working = _peer_still_starting(facts, root)
        if working is not None:
            return working
    if _frame(root) is not None:  # a line naming the members or the address says more than a frame
        root = next((e for e in facts.t.of(root.signal) if _frame(e) is None), root)
    same = {(e.source, e.line) for e in facts.t.of(root.signal)}
    candidates = [w for w in facts.model.waits if (w.source, w.line) in same]
    named = [w for w in candidates if w.on.startswith("peer ") or w.on.startswith("rank ")]
    wait = (named or candidates or [None])[0]
    party = wait.on if wait else "its peers"
    why = wait.why if wait else root.text[:120]
    headline = {
        Signal.COLLECTIVE_MISMATCH: f"deadlocked: ranks entered different collectives ({why}) — they can never meet",
        Signal.RENDEZVOUS_FAILED: f"deadlocked: the rendezvous can never complete — waiting on {party} ({why})",
        Signal.PEER_LOST: f"deadlocked: the transport to {party} failed ({why}); the "
        f"{'transfer and the request waiting on it' if wait and wait.via == KV_TRANSFER else 'collective'} can never "
        "complete",
        Signal.COMM_TIMEOUT: f"deadlocked: {wait.via if wait else 'a communication kernel'} gave up waiting on "
        f"{party} ({why})",
    }[root.signal]
    confidence = {Signal.COLLECTIVE_MISMATCH: 0.85, Signal.RENDEZVOUS_FAILED: 0.85}.get(root.signal, 0.75)
    frame = _frame(root)
    if frame is not None and (frame.error is None or _BIND_FAILED.search(frame.error)):
        return _rendezvous_raised(facts, root, frame.error)
    if frame is not None:  # only the traceback through the rendezvous, ending in an error that names no member
        confidence = 0.6
    likely = _likely(root)
    if likely is not None:
        headline, confidence, undecided = likely
    draft = Draft(facts, Kind.DEADLOCKED, confidence, headline)
    if likely is not None:
        draft.undecided = undecided
    draft.generic_steps = False
    draft.cite(root, Role.ROOT_CAUSE, "a wait that can never be satisfied")
    if any(e.signal is Signal.FATAL_SIGNAL for e in facts.events):
        draft.notes.append("not a crash: the `terminate called` / fatal signal is how the failed collective "
                           "ended the process, not a fault of its own")
    for event in facts.t.of(root.signal)[1:3]:
        draft.cite(event, Role.SUPPORTING)
    for event in facts.shm_stalls(workers=False)[-2:]:
        draft.cite(event, Role.CONSEQUENCE, "the engine core waits on the blocked workers")
    draft.cite_consequences(root)
    _comm_steps(draft, root)
    return draft.done()


def _likely(root: Event) -> tuple[str, float, str | None] | None:
    """(headline, confidence, what would decide) of a wait read from a line that cannot say for certain that
    it never completes (a cut traceback, a guard that fires on long work too), or that is no collective's own
    failure (V0's check that the ranks' outputs agree)."""
    data = root.data
    if isinstance(data, Peer) and data.cut:
        return (("deadlocked (likely): a CPU (gloo) collective raised, and a gloo collective fails only on its "
                "peers"), 0.5,
                ("the traceback's last line: 'Timed out waiting … for recv' (a rank that never entered), "
                "'Connection closed/reset by peer' (a rank that died), 'op.preamble.length' (ranks that diverged)"))
    if _store_lost(root):
        where = f" at {data.peer}" if isinstance(data, Peer) and data.peer else ""
        return ((f"deadlocked (likely): the TCP store's host{where} closed the connection — rank 0's process (the "
                "head node's vLLM with data parallelism) exited or crashed, and the ranks left wait on it"), 0.5,
                ("the store host's own log: a crash there is the cause; an operator's stop or a clean exit there "
                "makes this exit-time noise"))
    if isinstance(data, Peer) and data.detail == DIVERGED_OUTPUTS:  # the check itself says so: certain, a crash
        return (("deadlocked: the tensor-parallel ranks diverged — they returned different outputs for one step "
                "(V0's check that every worker agrees failed), and ranks that disagree cannot run one model on"), 0.75,
                None)
    if isinstance(data, Rendezvous) and data.what == RAY_DP_GANG:  # a rank 0 still starting also lets it run out
        return (("deadlocked (likely): a Ray Serve LLM data-parallel replica gave up waiting for its gang's rank-0 "
                 "replica to publish its master address" + (f" ({data.limit_s:g} s)" if data.limit_s else "")),
                0.55, "the rank-0 replica's state: pending for GPUs or dead (stuck for good), or still loading (slow)")
    if not isinstance(data, Timeout):
        return None
    if data.call == ASCEND_TASK:  # a stream's work that never finished: a collective's peer, rarely a hung kernel
        return (("deadlocked (likely): a device stream's work never finished within Ascend's task timeout — on "
                "vLLM's NPU workers most often an HCCL collective waiting for a peer rank"), 0.6, None)
    if (known := GUARDED_WAITS.get(data.guard or "")) is not None:
        return known.headline, known.confidence, known.decides
    return None


def _store_lost(event: Event) -> bool:
    """torch's TCP store client lost its server: the store's host process is gone."""
    return isinstance(event.data, Peer) and event.data.detail == STORE_LOST


def _frame(event: Event) -> Rendezvous | None:
    """The rendezvous failure read from a traceback's frame only, if that is what this event is."""
    return event.data if isinstance(event.data, Rendezvous) and event.data.from_frame else None


_BIND_FAILED = re.compile(r"server socket has failed to (?:bind|listen)|EADDRINUSE|[Aa]ddress already in use")
"""torch's TCPStore could not listen on its port (c10d socket.cpp / TCPStoreLibUvBackend.cpp wording)."""


def _rendezvous_raised(facts: Facts, root: Event, error: str | None) -> Verdict:
    """init_process_group raised inside the rendezvous, where the TCP store is made.

    Its error says which of two different faults it was: members that never all joined (``N/M clients
    joined``: deadlocked; dgx-spark-2node-rank1-never-joins-hardwrapped) or a store that could not listen on its
    port (EADDRINUSE: an earlier run or another job holds it, a set-up fault;
    skyrl-vllm-engine-restart-eaddrinuse-rendezvous).  With the error cut off, the frame cannot tell them apart.
    """
    if error is not None:
        draft = Draft(facts, Kind.CRASHED, 0.7, "crashed at start-up: the process-group store could not listen on "
                      f"its port ({error[:120]}) — another process holds it, or the address is not this host's")
        draft.cite(root, Role.ROOT_CAUSE, "the rendezvous failed to open its store")
        draft.step("see what holds the store's port (an earlier run that did not exit, another job)",
                   'ss -ltnp "sport = :${MASTER_PORT:-29500}"')
        draft.step("or give this run a free port", "export MASTER_PORT=$((20000 + RANDOM % 20000))")
        draft.generic_steps = False
        return draft.done()
    draft = Draft(facts, Kind.UNKNOWN, 0.35, "unknown: init_process_group raised inside the rendezvous and its error "
                  "is cut off — members that never joined (deadlocked) and a store port already in use (a set-up "
                  "fault) both end this way")
    draft.cite(root, Role.ROOT_CAUSE, "the rendezvous raised here; the error line is cut off")
    draft.undecided = ("the traceback's last line: 'N/M clients joined' names members that never arrived; "
                       "EADDRINUSE / 'failed to listen' names a port already taken")
    _comm_steps(draft, root)
    draft.step("see whether something already holds the store's port", 'ss -ltnp "sport = :${MASTER_PORT:-29500}"')
    draft.generic_steps = False
    return draft.done()


def _peer_still_starting(facts: Facts, root: Event) -> Verdict | None:
    """A collective that timed out before serving while a peer's start-up work still advanced: slow."""
    peer_working = [a for a in facts.model.activities if a.startup and a.advancing]
    if not peer_working or facts.served_before(root):
        return None
    activity = peer_working[-1]
    draft = Draft(facts, Kind.SLOW, 0.55,
                  f"slow start-up: a rank gave up waiting in a collective for a peer that was still in "
                  f"{activity.name} ({activity.detail}) — a wait on a party that was working")
    draft.cite(facts.event_at(activity.source, activity.line), Role.ROOT_CAUSE, "the peer was still working")
    draft.cite(root, Role.SUPPORTING, "the collective's timeout is shorter than the peer's start-up work")
    draft.step("give collectives longer than the slowest rank's start-up (0.18+)", "--distributed-timeout-seconds 3600")
    draft.undecided = "the other ranks' logs: still loading or compiling when this rank timed out confirms it"
    return draft.cite_consequences(root).done()


def collective_timeout(facts: Facts, root: Event) -> Verdict:
    """The NCCL watchdog saw a collective never complete; diverging SeqNums name the rank that left."""
    reports = facts.t.of(Signal.NCCL_WATCHDOG_TIMEOUT)
    work = root.data if isinstance(root.data, NcclWork) else NcclWork(None)
    ranks = {getattr(e.data, "rank", None) for e in reports} - {None}
    seqs = {getattr(e.data, "rank", None): getattr(e.data, "seq", None) for e in reports}
    what = (f"{work.backend} {work.op}" if work.op else f"an {work.backend} collective") + (
        f" #{work.seq}" if work.seq is not None else "")
    minutes = f" for {work.ran_ms / 60000:.0f} min" if work.ran_ms else ""
    working = _peer_still_starting(facts, root)
    if working is not None:
        return working
    draft = Draft(
        facts,
        Kind.DEADLOCKED,
        0.8,
        f"deadlocked: {what} never completed{minutes} "
        f"({len(ranks) or 1} rank{'s' if len(ranks) > 1 else ''} reported it)",
    )
    distinct = set(seqs.values()) - {None}
    if len(ranks) > 1 and len(distinct) == 1:
        draft.confidence += 0.1
        draft.notes.append(f"ranks {sorted(ranks)} are all stuck at the same collective (SeqNum {distinct.pop()})")
    elif len(distinct) > 1:
        behind = min(seqs.items(), key=lambda kv: kv[1] or 0)
        draft.headline += f"; ranks diverged (SeqNums {sorted(distinct)}), rank {behind[0]} is behind"
    draft.cite(root, Role.ROOT_CAUSE, "only this message marks a collective that never completed")
    for event in reports[1:4]:
        draft.cite(event, Role.SUPPORTING)
    for event in facts.t.of(Signal.NCCL_WORK_STATUS)[:3]:
        draft.cite(event, Role.SUPPORTING, "last enqueued vs completed collective on this rank")
    stalls = [e for e, s in facts.stats if stalled(s) and facts.at(e) < facts.at(root)]
    if stalls:
        draft.cite(stalls[-1], Role.SUPPORTING, "requests running, no tokens produced")
    return draft.cite_consequences(root).done()
