"""Waits: who waits on whom, and whether that wait can ever be satisfied.

vLLM is a chain of waits: the API server waits on the engine core, the engine core on
its workers (shared-memory queue, RPC), ranks on each other inside collectives, every
process on the rendezvous at start-up.  This module reconstructs them (waiter, party,
channel, how long, satisfiable or not and why); ``wait_rules`` judges them
(docs/verdicts.md, "Waits").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.analysis.facts import Facts, is_startup_work
from engdiag.analysis.guarded_waits import GUARDED_WAITS
from engdiag.analysis.model import Wait
from engdiag.analysis.rendezvous_kinds import kind_of
from engdiag.analysis.timeline import is_progress
from engdiag.logs.events import Event, NcclWork, Peer, Phase, Progress, Rendezvous, ShmStall, Signal, Timeout
from engdiag.logs.patterns.waits import STORE_LOST
from engdiag.roles import Role as ProcRole

UNSATISFIABLE = (
    Signal.COLLECTIVE_MISMATCH,
    Signal.RENDEZVOUS_FAILED,
    Signal.PEER_LOST,
    Signal.COMM_TIMEOUT,
)
"""Signals that prove a wait can never complete."""


KV_TRANSPORTS = ("UCX", "NIXL")
"""Transports that carry KV between a prefill and a decode instance: a peer lost there is the other instance."""
KV_TRANSFER = "KV transfer"


def _label(event: Event, default: str) -> str:
    return event.proc.label if event.proc is not None else default


def interval(event: Event) -> int:
    return event.data.interval_s if isinstance(event.data, ShmStall) else 60


def worker_work(facts: Facts, first: Event, last: Event, waiter: str) -> Event | None:
    """A line from another process showing work while ``waiter`` waited."""
    start = first.stamp.key - interval(first) if first.stamp is not None else None
    for event in facts.events:
        if event.proc is not None and event.proc.label == waiter:
            continue
        if event.stamp is None or start is None or last.stamp is None:
            continue
        reported = event.data.seconds if isinstance(event.data, Phase) and event.data.seconds else 0.0
        if not start <= event.stamp.key <= last.stamp.key and not (
            # a phase reported after the wait whose own duration covers it
            # (dual-3090-x4x4-shm-broadcast-notice-during-62s-warmup-bench-ok: "warmup run took 62.77 s")
            event.stamp.key > last.stamp.key and event.stamp.key - reported <= last.stamp.key
        ):
            continue
        working = event.signal in (Signal.BUSY_RETRY, Signal.COMPILE) or is_startup_work(event) or (
            isinstance(event.data, Progress) and event.data.done > 0
        )
        if working and stopped_bar(event, last) is None:
            return event
    return None


def stopped_bar(event: Event, later: Event) -> float | None:
    """Seconds a progress bar was due to finish in, when ``later`` came long after that: the bar stopped.

    A bar's own rate says when it ends; waits that go on for minutes past twice that (plus a minute for
    a slow last item) mean its work stopped (cpu-kv-offload-async-pinning-during-cudagraph-capture-hang:
    capture at 1/83, 1.9 it/s, then three minutes of the engine core waiting).
    """
    data = event.data
    if not (isinstance(data, Progress) and data.total and data.seconds_per_item and data.done < data.total):
        return None
    if event.stamp is None or later.stamp is None:
        return None
    due = (data.total - data.done) * data.seconds_per_item
    return due if later.stamp.key - event.stamp.key > 2 * due + 60 else None


def workers_silent_since(facts: Facts, first: Event) -> float | None:
    """Seconds between the workers' last line and the first wait on them (None: unknown)."""
    rows = [r for r in facts.t.proc_last if r.proc.role is ProcRole.WORKER and r.stamp is not None]
    if not rows or first.stamp is None:
        return None
    latest = max(r.stamp.key for r in rows)  # type: ignore[union-attr]
    return float(first.stamp.key - latest)


def _blocker(facts: Facts) -> Event | None:
    found = facts.t.of(*UNSATISFIABLE, Signal.NCCL_WATCHDOG_TIMEOUT)
    return found[0] if found else None


def _core_waits(facts: Facts) -> Iterable[Wait]:
    by_proc: dict[str, list[Event]] = {}
    for event in facts.shm_stalls(workers=False):
        by_proc.setdefault(_label(event, "engine core"), []).append(event)
    blocker = _blocker(facts)
    for waiter, events in by_proc.items():
        first, last = events[0], events[-1]
        seconds = float(sum(interval(e) for e in events))
        work = worker_work(facts, first, last, waiter)
        silent = workers_silent_since(facts, first)
        # the workers came back with the next start-up step: the wait was on the step before it
        # (glm52-fp8-8xb200-4min-shm-notices-before-deepgemm-warmup-server-serves: DeepGEMM warm-up next)
        resumed = next((e for e in facts.after(last) if is_startup_work(e) and not facts.served_before(e)
                        and (e.proc is None or e.proc.label != waiter)), None)
        if blocker is not None:
            state, why = False, f"a peer can never answer: {blocker.text[:120]}"
        elif work is not None:
            state, why = True, f"the workers were working: {work.text[:120]}"
        elif resumed is not None:
            state, why = True, f"the workers went on to the next start-up step: {resumed.text[:120]}"
        elif silent is not None and silent >= interval(first):
            state, why = None, f"the workers had been silent for {silent:.0f} s"
        else:
            state, why = None, "the log does not show what the workers were doing"
        yield Wait(waiter, "workers", "shared-memory queue", state, why, seconds, last.source, last.line)
    workers = facts.shm_stalls(workers=True)
    if workers:
        yield Wait(_label(workers[0], "worker"), "engine core (new work)", "shared-memory queue", None,
                   "a worker waiting for the next step: idle, unless the engine core is stuck",
                   float(sum(interval(e) for e in workers)), workers[-1].source, workers[-1].line)


_OVER = re.compile(r"for over (\d+) s")
"""Ray Serve's unscheduled-replica warning: the first was printed this long after the replica was asked for."""
_WAITED = re.compile(r"waited (\d+) s")


def _api_waits(facts: Facts) -> Iterable[Wait]:
    waiting = facts.t.of(Signal.WAITING)
    mq = [e for e in waiting if isinstance(e.data, Peer) and e.data.peer == "engine"]
    if mq:
        first, last = mq[0], mq[-1]
        progress = [e for e in facts.events if is_progress(e) and facts.at(first) <= facts.at(e) <= facts.at(last)]
        yield Wait(_label(first, "API server"), "engine (MQLLMEngine)", "RPC", True if progress else None,
                   "the engine produced output meanwhile" if progress else "no engine progress while it waited",
                   facts.seconds(first, last), last.source, last.line)
    placing = [e for e in waiting if isinstance(e.data, Peer) and e.data.peer == "Ray placement group"]
    for event in placing:
        failed = facts.t.of(Signal.RENDEZVOUS_FAILED)
        detail = event.data.detail or "" if isinstance(event.data, Peer) else ""
        waited = _WAITED.search(detail)
        seconds = float(waited[1]) if waited else None
        if (over := _OVER.search(detail)) is not None:
            # Ray Serve repeats "taken more than 30s to be scheduled" every 30 s: the wait runs from its first
            seconds = float(over[1]) + (facts.seconds(placing[0], event) or 0.0)
        yield Wait(_label(event, "engine"), "Ray placement group", "placement group", False if failed else None,
                   detail, seconds, event.source, event.line)


def _collective_waits(facts: Facts) -> Iterable[Wait]:
    for event in facts.t.of(Signal.NCCL_WATCHDOG_TIMEOUT)[:8]:
        work = event.data if isinstance(event.data, NcclWork) else NcclWork(None)
        what = f"{work.op or 'collective'} #{work.seq}" if work.seq is not None else (work.op or "a collective")
        yield Wait(f"rank {work.rank}" if work.rank is not None else _label(event, "a rank"),
                   f"the other ranks in {what}", "collective", False,
                   f"never completed in {work.ran_ms / 1000:.0f} s" if work.ran_ms else "never completed",
                   (work.ran_ms or 0) / 1000 or None, event.source, event.line)
    for event in facts.t.of(Signal.COLLECTIVE_MISMATCH)[:4]:
        peer = event.data if isinstance(event.data, Peer) else Peer()
        yield Wait(_label(event, "a rank"), peer.peer or "its peers", "collective", False,
                   peer.detail or "the ranks entered different collectives", None, event.source, event.line)
    for event in facts.t.of(Signal.PEER_LOST)[:4]:
        peer = event.data if isinstance(event.data, Peer) else Peer()
        store = peer.detail == STORE_LOST
        if (peer.detail or "").startswith(KV_TRANSPORTS):  # disaggregated serving: an instance, not a rank
            yield Wait(_label(event, "a KV-transfer worker"), "the other instance", KV_TRANSFER, False, peer.detail
                       or "the link to it failed", None, event.source, event.line)
            continue
        yield Wait(_label(event, "a rank"), f"peer {peer.peer}" if peer.peer else "a peer rank",
                   "TCP store" if store else "collective", False, peer.detail or "the link to the peer failed", None,
                   event.source, event.line)
    for event in facts.t.of(Signal.COMM_TIMEOUT)[:2]:
        timeout = event.data if isinstance(event.data, Timeout) else Timeout()
        call = timeout.call
        known = GUARDED_WAITS.get(timeout.guard or "")
        if known is not None:
            yield Wait(_label(event, known.waiter), known.on, known.via or call or "dispatch", False, known.why,
                       timeout.limit_s, event.source, event.line)
            continue
        if call and call.startswith(("gloo", "HCCL")):
            yield Wait(_label(event, "a rank"), "its peer ranks", call, False,
                       "the peer never sent its part of the " + ("CPU collective" if call.startswith("gloo")
                                                                 else "collective"),
                       event.data.limit_s,  # type: ignore[union-attr]
                       event.source, event.line)
            continue
        yield Wait(_label(event, "an EP rank"), "the other EP ranks", call or "all-to-all", False,
                   "their tokens never arrived before the kernel's timeout", None, event.source, event.line)


def _rendezvous(facts: Facts) -> Iterable[Wait]:
    failed = facts.t.of(Signal.RENDEZVOUS_FAILED)
    named = [e for e in failed if not (isinstance(e.data, Rendezvous) and e.data.from_frame)]
    for event in (named or failed)[:2]:  # a traceback's frame only where no line says more
        meet = event.data if isinstance(event.data, Rendezvous) else Rendezvous()
        if meet.from_frame:
            yield Wait(_label(event, "process-group rendezvous"), "the process-group store", "rendezvous", None,
                       meet.error[:160] if meet.error else "it raised; the error line is cut off", None,
                       event.source, event.line)
            continue
        kind = kind_of(meet)
        yield Wait(_label(event, kind.waiter), kind.party(meet), kind.channel, False, kind.why(meet), meet.limit_s,
                   event.source, event.line)


def _handshake(facts: Facts) -> Iterable[Wait]:
    """The API server waiting for engine cores to start (the start-up handshake)."""
    waiting = [e for e in facts.t.of(Signal.STARTUP_PHASE)
               if getattr(e.data, "name", "") == "waiting_for_engine_cores"]
    if not waiting:
        return
    first, last = waiting[0], waiting[-1]
    ready = any(e.signal is Signal.SERVER_READY for e in facts.after(first))
    work = [e for e in facts.events if is_startup_work(e)]
    satisfiable = True if ready or work else None
    why = ("the engine became ready" if ready else f"start-up work in progress: {work[-1].text[:100]}" if work
           else "the log shows nothing from the engine core itself")
    yield Wait(_label(first, "API server"), "engine core start-up", "handshake", satisfiable, why,
               facts.seconds(first, last), last.source, last.line)


def waits(facts: Facts) -> list[Wait]:
    """Every wait the log shows."""
    return [*_core_waits(facts), *_api_waits(facts), *_handshake(facts), *_collective_waits(facts),
            *_rendezvous(facts)]


# ---- rules ------------------------------------------------------------------------------
