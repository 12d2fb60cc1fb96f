"""Waits seen without any failure: who went silent, and whether the party waited on was working.

Domain facts encoded here (docs/verdicts.md, "Without a failure"):

* An engine core that waits on workers gone silent, with no start-up work in
  progress, is most likely stuck (``dp-ep-ray-multinode-rendezvous-loopback-hang``);
  a worker waiting for new work while the engine is idle is benign
  (``idle-worker-shm-broadcast-info-benign``).
* Waits through start-up after the engine was seen starting, with nothing stuck, are its
  start-up RPCs doing the work the message names (``nemotron-super-lora-module-regex-startup-timeout``);
  a progress bar silent long past its own finishing time is work that stopped
  (``cpu-kv-offload-async-pinning-during-cudagraph-capture-hang``).
* Ray waiting to place GPUs for a minute or more, with nothing after it, is a placement that will not come
  (``gpustack-ray-pg-wait-gpu-detected-as-tpu``); the API server waiting on an engine that shows no work for
  minutes is stuck, not slow.
"""

from __future__ import annotations

from itertools import pairwise

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts, is_startup_work
from engdiag.analysis.timeline import is_progress
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.analysis.waits import (
    UNSATISFIABLE,
    interval,
    stopped_bar,
    worker_work,
    workers_silent_since,
)
from engdiag.logs.events import Event, Progress, Signal
from engdiag.roles import Role as ProcRole

SILENT_ENGINE_S = 90.0
"""An engine core that prints no start-up step for this long while the API server polls is blocked."""
_ROWS_PER_POLL = 4
"""The most physical lines one poll takes in a paste: wrapped at a width, and double-spaced."""
_API_WAIT_DEADLOCK_S = 120
"""An API server waiting this long on an engine that shows no work: stuck, not slow."""


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
        if len({r.proc.host for r in facts.t.proc_last if r.proc.host}) > 1:
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
    if not pg or not events:
        return None
    last = events[-1]
    if any(is_startup_work(e) or is_progress(e) for e in facts.after(last)):
        return None  # placed after all: the start-up went on
    if (pg[-1].seconds or 0) < PLACEMENT_STUCK_S:
        # one warning at Ray Serve's first 30 s (rayllm-replica-never-scheduled-no-resources): a cluster still
        # scaling up and one that lacks the GPUs read alike until the wait goes on
        draft = Draft(facts, Kind.UNKNOWN, 0.3, f"unknown: Ray had not placed the engine's resources after "
                      f"{pg[-1].seconds or 0:.0f} s, and the log ends there — a cluster still adding nodes and one "
                      "that lacks the GPUs asked for look the same this early")
        draft.cite(last, Role.ROOT_CAUSE, "a placement still pending")
        draft.undecided = ("`ray status`: pending demands the cluster can never meet (stuck), or an autoscaler adding "
                           "nodes (slow)")
        draft.step("see what Ray can place and what it is waiting for", "ray status")
        return draft.done()
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
    if _polls_alone(facts, waiting) and (wait.seconds or 0) >= SILENT_ENGINE_S:
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


def _polls_alone(facts: Facts, polls: list[Event]) -> bool:
    """Nothing printed between the API server's polls: each follows the last, or every one is the same number of
    lines after it — a paste wrapped at a width or double-spaced spaces every poll alike, while start-up output
    between polls does not — and no signal of any kind lies between them."""
    if any(b.source != a.source for a, b in pairwise(polls)):
        return False
    gaps = {b.line - a.line for a, b in pairwise(polls)}
    if not (gaps <= {1} or (len(gaps) == 1 and max(gaps) <= _ROWS_PER_POLL)):
        return False
    source, first, last = polls[0].source, polls[0].line, polls[-1].line
    return sum(1 for e in facts.events if e.source == source and first <= e.line <= last) == len(polls)
