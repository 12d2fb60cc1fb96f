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
* An engine core that waits on workers gone silent, with no start-up work in
  progress, is most likely stuck (``dp-ep-ray-multinode-rendezvous-loopback-hang``);
  a worker waiting for new work while the engine is idle is benign
  (``idle-worker-shm-broadcast-info-benign``).
* Waits through start-up after the engine was seen starting, with nothing stuck, are its
  start-up RPCs doing the work the message names (``nemotron-super-lora-module-regex-startup-timeout``);
  a progress bar silent long past its own finishing time is work that stopped
  (``cpu-kv-offload-async-pinning-during-cudagraph-capture-hang``).
"""

from __future__ import annotations

import re

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts, is_startup_work, stalled
from engdiag.analysis.timeline import is_progress
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.analysis.waits import (
    UNSATISFIABLE,
    interval,
    stopped_bar,
    worker_work,
    workers_silent_since,
)
from engdiag.logs.events import Event, NcclWork, Peer, Progress, Rendezvous, Signal, Timeout
from engdiag.logs.patterns.waits import ASCEND_TASK, MOONCAKE, STORE_LOST, TT_METAL
from engdiag.roles import Role as ProcRole

SILENT_ENGINE_S = 90.0
"""An engine core that prints no start-up step for this long while the API server polls is blocked."""
_API_WAIT_DEADLOCK_S = 120
"""An API server waiting this long on an engine that shows no work: stuck, not slow."""


def _comm_steps(draft: Draft, event: Event) -> None:
    signal = event.signal
    if signal is Signal.COLLECTIVE_MISMATCH:
        draft.step("name the ranks and the collectives they disagree on", "export TORCH_DISTRIBUTED_DEBUG=DETAIL")
        draft.step("look for a rank that skips or adds a collective (a rank with no work this step, an uneven "
                   "batch across DP ranks, a different code path on one rank); upgrade if the release notes "
                   "name such a fix")
    elif signal is Signal.RENDEZVOUS_FAILED:
        meet = event.data if isinstance(event.data, Rendezvous) else Rendezvous()
        if meet.what == "placement":
            draft.step("see what Ray can place: GPUs per node against the parallel sizes", "ray status")
        elif meet.what == "hccl":
            draft.step("check every NPU's NIC link and that no other process holds HCCL's ports (on every node)",
                       "for i in 0 1 2 3 4 5 6 7; do hccn_tool -i $i -link -g; done")
            draft.step("a link that never forms is not slow: raise HCCL_CONNECT_TIMEOUT (120 s) only when ranks "
                       "start minutes apart", "export HCCL_CONNECT_TIMEOUT=600")
        elif meet.what == "mesh":
            draft.step("bind gloo to the interface the nodes reach each other on (on every node)",
                       "export GLOO_SOCKET_IFNAME=$(ip -o -4 route show default | awk '{print $5}')")
            draft.step("make every rank advertise a routable IP, never 127.0.0.1 on multi-node",
                       "export VLLM_HOST_IP=$(hostname -I | cut -d' ' -f1)")
        else:
            draft.step("make every member reach the master address: a routable IP, never 127.0.0.1 on multi-node",
                       "export VLLM_HOST_IP=$(hostname -I | cut -d' ' -f1)   # and MASTER_ADDR / --data-parallel-address")
            draft.step("check that every node and rank was launched and can open the port",
                       'nc -vz "$MASTER_ADDR" "${MASTER_PORT:-29500}"')
    elif signal is Signal.PEER_LOST and isinstance(event.data, Peer) and event.data.cut:
        draft.step("name the ranks and the collectives they disagree on", "export TORCH_DISTRIBUTED_DEBUG=DETAIL")
        draft.step("read every data-parallel rank's log at that time: the rank that ran one collective fewer, or "
                   "died, is the cause")
    elif _store_lost(event):
        draft.step("read the log of the process that hosts the store (rank 0; with data parallelism the head node's "
                   "vLLM): why it exited is the cause")
        draft.step("the ranks left never recover on their own: stop every node's vLLM and start the group again")
    elif signal is Signal.PEER_LOST and isinstance(event.data, Peer) and (event.data.detail or "").startswith(("UCX", "NIXL")):
        draft.step("check that the other instance is up and reachable for KV transfer (after a restart, "
                   "restart its peer too: survivors keep the old endpoints)")
        draft.step("get UCX's account of the endpoint", "export UCX_LOG_LEVEL=debug")
    elif signal is Signal.PEER_LOST:
        draft.step("check the fabric between the nodes (link state, GID index, MTU)", "ibv_devinfo; ibstat")
        draft.step("get NCCL's account of the transport", "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET")
        draft.step("to isolate the transport, run once over TCP", "export NCCL_IB_DISABLE=1")
    elif signal is Signal.COMM_TIMEOUT and isinstance(event.data, Timeout) and event.data.guard == MOONCAKE:
        draft.step("read the prefill instance's log for those request ids: scheduled and still running, or never "
                   "there (the proxy's routing, or a prefill engine that stopped)")
        draft.step("only if the prefill side was still working on them: raise VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT "
                   "(480 s by default) on both instances, above the longest prefill under that load")
    elif signal is Signal.COMM_TIMEOUT and isinstance(event.data, Timeout) and event.data.guard == TT_METAL:
        draft.step("reset the wedged device before starting again (tt-smi from Tenstorrent's tools)", "tt-smi -r")
        draft.step("tell a hang from a long operation: rerun with a longer watchdog (a hang still trips it)",
                   "export TT_METAL_OPERATION_TIMEOUT_SECONDS=60")
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
        Signal.PEER_LOST: f"deadlocked: the transport to {party} failed ({why}); the collective can never complete",
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
    it never completes: a cut traceback, or a guard that fires on long work too."""
    data = root.data
    if isinstance(data, Peer) and data.cut:
        return (("deadlocked (likely): a CPU collective of the data-parallel group raised, and a gloo collective "
                "fails only on its peers"), 0.5,
                ("the traceback's last line: 'Timed out waiting … for recv' (a rank that never entered), "
                "'Connection closed/reset by peer' (a rank that died), 'op.preamble.length' (ranks that diverged)"))
    if _store_lost(root):
        where = f" at {data.peer}" if isinstance(data, Peer) and data.peer else ""
        return ((f"deadlocked (likely): the TCP store's host{where} closed the connection — rank 0's process (the "
                "head node's vLLM with data parallelism) exited or crashed, and the ranks left wait on it"), 0.5,
                ("the store host's own log: a crash there is the cause; an operator's stop or a clean exit there "
                "makes this exit-time noise"))
    if not isinstance(data, Timeout):
        return None
    if data.call == ASCEND_TASK:  # a stream's work that never finished: a collective's peer, rarely a hung kernel
        return (("deadlocked (likely): a device stream's work never finished within Ascend's task timeout — on "
                "vLLM's NPU workers most often an HCCL collective waiting for a peer rank"), 0.6, None)
    if data.guard == MOONCAKE:
        return (("deadlocked (likely): the decode instance gave up pulling KV from the prefill instance, whose side "
                "never had it ready within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s by default)"), 0.5,
                ("the prefill instance's log at that time: those requests still prefilling there (a slow prefill "
                "under load) or never scheduled (stuck)"))
    if data.guard == TT_METAL:
        return (("deadlocked (likely): the device stopped answering its dispatch queue and tt-metal's operation "
                "watchdog reported a potential hang"), 0.6,
                ("how long the operation may run: a longer TT_METAL_OPERATION_TIMEOUT_SECONDS that still trips "
                "confirms a hang"))
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
    what = f"{work.op or 'a collective'}" + (f" #{work.seq}" if work.seq is not None else "")
    minutes = f" for {work.ran_ms / 60000:.0f} min" if work.ran_ms else ""
    working = _peer_still_starting(facts, root)
    if working is not None:
        return working
    draft = Draft(
        facts,
        Kind.DEADLOCKED,
        0.8,
        f"deadlocked: NCCL {what} never completed{minutes} "
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


_STUCK_SIGNS = (Signal.NCCL_WATCHDOG_TIMEOUT, Signal.COLLECTIVE_MISMATCH, Signal.PEER_LOST, Signal.RENDEZVOUS_FAILED,
                Signal.COMM_TIMEOUT, Signal.STACK_IN_COLLECTIVE)


def core_waits(facts: Facts) -> Verdict | None:
    """The engine core waiting on its workers, judged by what the workers were doing."""
    core = [w for w in facts.model.waits if w.on == "workers"]
    stalls = facts.shm_stalls(workers=False)
    if not core or not stalls:
        return None
    wait = max(core, key=lambda w: w.seconds or 0)
    first = stalls[0]
    repeated = len(stalls) >= 2
    served = facts.served_before(first)
    bars = [e for e in facts.before(first) if isinstance(e.data, Progress)]
    due = stopped_bar(bars[-1], stalls[-1]) if bars and repeated else None
    if due is not None and not facts.t.of(*UNSATISFIABLE):
        bar = bars[-1]
        draft = Draft(facts, Kind.DEADLOCKED, 0.6,
                      f"deadlocked: {bar.data.bar.strip()} stopped at {bar.data.done}/{bar.data.total} — at its own "  # type: ignore[union-attr]
                      f"rate it was due to finish within {due:.0f} s, and the engine core waited "
                      f"{facts.seconds(bar, stalls[-1]) or 0:.0f} s more without another step")
        draft.cite(bar, Role.ROOT_CAUSE, "the last step of work that never completed")
        draft.cite(stalls[-1], Role.SUPPORTING, f"{len(stalls)} consecutive waits on the workers")
        draft.undecided = "a stack capture of the workers now (engdiag snapshot): where inside that step they sit"
        return draft.done()
    if wait.satisfiable is True:
        # one wait is enough when the work it waited on is seen (a warm-up that outlasted the 60 s notice);
        # repeated waits on working parties are firmer
        phase = "slow" if served else "slow start-up"
        draft = Draft(facts, Kind.SLOW, 0.6 if repeated else 0.5,
                      f"{phase}: the engine core waited {wait.seconds:.0f} s on workers that were still working "
                      f"({wait.why.split(': ', 1)[-1][:100]})")
        work = worker_work(facts, first, stalls[-1], wait.waiter) or next(
            (e for e in facts.after(stalls[-1]) if is_startup_work(e)), None)
        draft.cite(work, Role.ROOT_CAUSE, "the party being waited on was working")
        for event in stalls[-2:]:
            draft.cite(event, Role.SUPPORTING, "the wait, minute after minute" if repeated else "the wait")
        draft.undecided = (
            "whether the steps complete: the next stats lines (tokens flowing) or a stack capture of the workers"
            if served else "whether start-up finished: the lines after this excerpt (Application startup complete)"
        )
        return draft.done()
    shown_work = bool(facts.startup_work_before(first)) or any(is_startup_work(e) for e in facts.events)
    launched = [e for e in facts.before(first) if e.signal is Signal.VERSION]
    if repeated and not served and not shown_work and launched and not facts.t.of(*_STUCK_SIGNS):
        # The engine was seen starting and never served: its waits are on the start-up RPCs (load, profile,
        # compile, capture), the time-consuming work the message itself names; nothing shows a worker stuck
        # (nemotron-super-lora-module-regex-startup-timeout: minutes in a slow per-module LoRA check).
        draft = Draft(facts, Kind.SLOW, 0.45,
                      f"slow start-up (likely): the engine core waited {wait.seconds or 0:.0f} s on its workers "
                      "during start-up, with nothing showing them stuck")
        draft.cite(launched[-1], Role.SUPPORTING, "the engine was starting")
        draft.cite(first, Role.ROOT_CAUSE, "the engine core waits on workers busy with start-up work")
        draft.cite(stalls[-1], Role.SUPPORTING, f"{len(stalls)} consecutive waits")
        draft.undecided = ("the workers' own lines during the wait, or a stack capture (engdiag snapshot): "
                           "loading, compiling or capturing means slow; a collective or rendezvous means stuck")
        return draft.done()
    if repeated and (served or not shown_work):
        by_proc = {w.waiter for w in core}
        draft = Draft(facts, Kind.DEADLOCKED, 0.55 + (0.1 if len(by_proc) > 1 else 0),
                      f"deadlocked: {len(by_proc)} engine process{'es' if len(by_proc) > 1 else ''} "
                      "waited on the shared-memory queue minute after minute without recovering")
        draft.cite(first, Role.ROOT_CAUSE, "the engine core waits for workers that never answer")
        draft.cite(stalls[-1], Role.SUPPORTING, f"{len(stalls)} consecutive waits")
        if not served:
            draft.confidence -= 0.05
            draft.notes.append("the excerpt shows no start-up work or serving around the waits; a wait that "
                               "repeats with nothing else logged is the engine core waiting on stuck workers")
        draft.undecided = "a stack capture now (engdiag snapshot) shows which collective the workers are in"
        return draft.done()
    silent = workers_silent_since(facts, first)
    later_work = [e for e in facts.after(first) if is_startup_work(e)]
    advancing = [a for a in facts.model.activities if a.startup and a.advancing]
    if not served and silent is not None and silent >= interval(first) and not later_work and not advancing:
        draft = Draft(facts, Kind.DEADLOCKED, 0.5,
                      f"deadlocked at start-up: the engine core waited on workers that had been silent for "
                      f"{silent:.0f} s, with no loading, compiling or warm-up in progress")
        draft.cite(first, Role.ROOT_CAUSE, "a wait on workers that show no work")
        last_worker = max((r for r in facts.t.proc_last if r.proc.role is ProcRole.WORKER and r.stamp),
                          key=lambda r: r.stamp.key)  # type: ignore[union-attr]
        draft.cite(facts.event_at(last_worker.source, last_worker.line), Role.SUPPORTING,
                   "the workers' last line before they went quiet")
        if any(r.proc.host for r in facts.t.proc_last):
            draft.notes.append("the workers span several nodes: a rendezvous or NCCL set-up that cannot reach a "
                               "remote node hangs silently like this")
        draft.undecided = ("the workers' own logs or a stack capture (engdiag snapshot / py-spy dump on a "
                           "worker) show whether they sit in a rendezvous or collective set-up")
        draft.step("make every node reach the rendezvous address (a routable IP, not 127.0.0.1)",
                   "export VLLM_HOST_IP=$(hostname -I | cut -d' ' -f1)")
        return draft.done()
    return None


PLACEMENT_STUCK_S = 60
"""Ray placing a placement group takes seconds when the GPUs exist; still waiting past this, they do not."""


def placement_wait(facts: Facts) -> Verdict | None:
    """The engine waiting for Ray to place its GPUs, with nothing after: resources the cluster lacks.

    vLLM's ``_wait_until_pg_ready`` (executor/ray_utils.py, 0.4–0.34) logs "Waiting for creating a
    placement group of specs for N seconds" at 10, 30, 70, 150 … s and gives up only after 1800 s.  A
    group still unplaced after a minute asks for more GPUs than the cluster has (or than Ray detected):
    gpustack-ray-pg-wait-gpu-detected-as-tpu — two GPUs asked, one GPU and one TPU seen.
    """
    pg = [w for w in facts.model.waits if w.via == "placement group" and w.satisfiable is None]
    events = [e for e in facts.t.of(Signal.WAITING) if (e.source, e.line) in {(w.source, w.line) for w in pg}]
    if not pg or not events or (pg[-1].seconds or 0) < PLACEMENT_STUCK_S:
        return None
    last = events[-1]
    if any(is_startup_work(e) or is_progress(e) for e in facts.after(last)):
        return None  # placed after all: the start-up went on
    draft = Draft(facts, Kind.DEADLOCKED, 0.55,
                  f"deadlocked at start-up: Ray had not placed the engine's GPUs after {pg[-1].seconds:.0f} s — "
                  "the cluster lacks what the placement group asks for, a wait that cannot complete as it stands")
    draft.cite(last, Role.ROOT_CAUSE, "placing GPUs that exist takes seconds")
    if len(events) > 1:
        draft.cite(events[0], Role.SUPPORTING, "the first of the waits")
    draft.undecided = ("`ray status`: pending placement groups and fewer GPUs than the specs ask confirm it; an "
                       "autoscaler still adding GPU nodes would make it slow instead")
    draft.step("see what Ray can place: GPUs per node against the parallel sizes", "ray status")
    draft.step("compare with the GPUs the engine asks for: tensor × pipeline × data parallel sizes",
               "ray list nodes --detail")
    return draft.done()


def api_waits(facts: Facts) -> Verdict | None:
    """The API server waiting on an engine that shows no work for minutes."""
    mq = [w for w in facts.model.waits if w.via == "RPC" and w.on.startswith("engine")]
    if not mq or (mq[0].seconds or 0) < _API_WAIT_DEADLOCK_S:
        return None
    wait = mq[0]
    events = facts.t.of(Signal.WAITING)
    before = [s for e, s in facts.stats if facts.at(e) <= facts.at(events[-1])]
    if before and before[-1].running == 0 and before[-1].waiting == 0:
        # V0's client logs "Waiting for output from MQLLMEngine" whenever no output arrives, idle included:
        # with nothing running or queued there is nothing to wait for (vLLM issue 20069, an accuracy report)
        return None
    if wait.satisfiable is True:
        draft = Draft(facts, Kind.SLOW, 0.5, f"slow: the API server waited {wait.seconds:.0f} s on an engine "
                      "that was still producing output")
        draft.cite(events[-1], Role.ROOT_CAUSE)
        return draft.done()
    draft = Draft(facts, Kind.DEADLOCKED, 0.55,
                  f"deadlocked: the API server waited {wait.seconds:.0f} s on the engine, which produced nothing")
    draft.cite(events[0], Role.ROOT_CAUSE, "the engine answers every step; minutes of silence mean it is stuck")
    draft.cite(events[-1], Role.SUPPORTING, f"still waiting {wait.seconds:.0f} s later")
    if facts.multi_rank:
        draft.notes.append("several GPUs: a peer-to-peer hang stops every step (NCCL_P2P_DISABLE=1 tells)")
    draft.undecided = "a stack capture of the engine process (engdiag snapshot) shows where it waits"
    return draft.done()


def handshake_wait(facts: Facts) -> Verdict | None:
    """The API server waiting for an engine core the log never shows: only its own output decides."""
    wait = next((w for w in facts.model.waits if w.via == "handshake" and w.satisfiable is None), None)
    if wait is None or any(a.startup and a.name != "start-up handshake" for a in facts.model.activities):
        return None  # start-up work the log does show decides (phase_rules.startup_stopped)
    waiting = [e for e in facts.t.of(Signal.STARTUP_PHASE) if getattr(e.data, "name", "") == "waiting_for_engine_cores"]
    unbroken = all(b.line == a.line + 1 and b.source == a.source for a, b in zip(waiting, waiting[1:]))
    if unbroken and (wait.seconds or 0) >= SILENT_ENGINE_S:
        # The engine core writes to the same stream as the API server: a start-up that loads, profiles or
        # compiles prints its steps between the polls.  Poll after poll with nothing between them for
        # minutes is an engine core blocked before its first step
        # (pr19316-batchfeature-dtype-cast-engine-core-startup-deadlock-waiting-local-proc).
        draft = Draft(facts, Kind.DEADLOCKED, 0.4,
                      f"deadlocked at start-up (likely): the API server polled {len(waiting)} times over "
                      f"{wait.seconds:.0f} s and not one line of the engine core's start-up appeared between them")
        draft.cite(waiting[0], Role.ROOT_CAUSE, "the engine core never reported a start-up step")
        draft.cite(waiting[-1], Role.SUPPORTING, "still waiting")
        draft.undecided = ("whether the engine core logs elsewhere (a separate file or a filtered paste), or a stack "
                           "capture of it now (engdiag snapshot): a lock or collective wait confirms it")
        return draft.done()
    draft = Draft(facts, Kind.UNKNOWN, 0.3,
                  f"unknown: the API server waited {wait.seconds or 0:.0f} s for the engine core to start, and the "
                  "log shows nothing from the engine core itself")
    draft.cite(waiting[0], Role.ROOT_CAUSE, "a wait on a party whose state the log does not show")
    draft.cite(waiting[-1], Role.SUPPORTING)
    draft.undecided = ("the engine core's own lines (EngineCore ... ): loading or compiling means slow start-up, a "
                       "traceback means a crash, silence means stuck; or engdiag snapshot on the EngineCore pid")
    return draft.done()

