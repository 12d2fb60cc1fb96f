"""Benign look-alikes: lines that read like an incident and are not one.

Domain facts encoded here (docs/verdicts.md, "Benign"):

* ``Engine core proc ... died unexpectedly`` after every request finished is the
  engine core exiting with the script (``benign-enginecore-died-at-script-exit``).
* An operator's stop (SIGTERM, a drain) before any fault is a clean shutdown: the
  ``engine core exited unexpectedly`` and engine-dead errors after it are the
  shutdown, not a crash (synthetic ``clean-operator-shutdown`` incident).
* A worker's shared-memory wait while the engine is idle is the worker waiting for
  work (``idle-worker-shm-broadcast-info-benign``); one engine-core wait during
  start-up work is that work.
* A request's chat template that did not render within VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT (vLLM 0.34's guard
  in the API server) failed that request alone: the engine never saw it; an elastic-EP scale whose running
  requests did not drain within drain_timeout was refused, and the engines went on serving them (source
  wordings, tests/test_vllm_source_wordings.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.timeline import FATAL, is_progress
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Failure, Peer, Progress, Signal, Stats, Timeout
from engdiag.logs.patterns.guards import DYNAMO_LEASE, PREEMPTED, TRITON_COUNTDOWN, TRITON_EXIT, TRITON_STOP
from engdiag.logs.patterns.progress import CHAT_TEMPLATE, EP_DRAIN
from engdiag.logs.patterns.waits import STORE_LOST
from engdiag.units import plural

_FAULTS = (FATAL - {Signal.WORKER_DIED, Signal.ENGINE_DEAD, Signal.ENGINE_FATAL, Signal.PROCESS_EXCEPTION}) | {
    Signal.COLLECTIVE_MISMATCH,
    Signal.PEER_LOST,
    Signal.RENDEZVOUS_FAILED,
    Signal.COMM_TIMEOUT,
    Signal.WORKER_EXCEPTION,
}
_TROUBLE = {Signal.EXTERNAL_GUARD, Signal.WAITING, Signal.STACK_DUMP}
"""Signs that something was already wrong when the stop came (a probe failing, a stall dump)."""
_SHUTDOWN_EXCEPTIONS = ("KeyboardInterrupt", "SystemExit", "CancelledError", "asyncio.exceptions.CancelledError")


def _store_gone(event: Event) -> bool:
    """torch's store client losing its server: after a stop, rank 0 exiting first (exit-time noise)."""
    return isinstance(event.data, Peer) and event.data.detail == STORE_LOST


def _is_stop_dump(event: Event) -> bool:
    """The 0.33+ watchdog's dump ``due to SIGTERM`` (or a worker's ``due to shutdown``): the stop itself, not a stall."""
    return event.signal is Signal.STACK_DUMP and isinstance(event.data, Timeout) and event.data.is_stop_dump


def _exit_expired(event: Event) -> bool:
    return isinstance(event.data, Timeout) and event.data.guard == TRITON_EXIT


def _stop(facts: Facts) -> Event | None:
    stops = facts.t.of(Signal.OPERATOR_STOP)
    dumps = [e for e in facts.t.of(Signal.STACK_DUMP) if _is_stop_dump(e)]
    expired = [e for e in facts.t.of(Signal.SHUTDOWN) if _exit_expired(e)]  # its own line, where the stop's is cut
    found = sorted([*stops, *dumps, *expired], key=facts.at)
    return found[0] if found else None


@dataclass(frozen=True)
class _Stop:
    """A stop that came from outside the engine: what it was, and who can say why (``{exit}`` in the headline: what
    Triton's exit timeout cut off, when it ran out)."""

    headline: str
    why: str
    undecided: str
    steps: tuple[tuple[str, str | None], ...] = ()


_OPERATOR = _Stop("healthy: an operator stopped the server and it shut down{exit}; the errors after the stop are the "
                  "shutdown, not a failure", "the stop was requested",
                  "who sent the signal: the orchestrator's events (kubectl describe pod, systemd journal)")
_OUTSIDE_STOPS = {
    PREEMPTED: _Stop("healthy (for the engine): the cloud took the replica's spot machine back{exit}; what follows is "
                     "the stop, not a failure of vLLM", "a spot preemption",
                     "SkyServe's own view: `sky serve status` and `sky serve logs --controller` (spot capacity)"),
    TRITON_STOP: _Stop("healthy: Triton was stopped and shut its models down{exit}; what follows is the stop, not a "
                       "failure",
                       "Triton began stopping: waiting for in-flight requests",
                       "who stopped it: the orchestrator's events (kubectl describe pod), or Triton's own lines before"),
    DYNAMO_LEASE: _Stop("healthy (for the engine): Dynamo's runtime lost its etcd lease and shut the worker down{exit}; "
                        "what follows is the stop, not a failure of vLLM",
                        "the lease was lost: etcd unreachable, or no keep-alive within the lease's TTL",
                        "etcd's health at that time, and whether this worker's host stalled past the lease's TTL",
                        (("check etcd is up and reachable from the worker's host (ETCD_ENDPOINTS)",
                          "etcdctl endpoint health"),)),
}


def operator_stop(facts: Facts) -> Verdict | None:
    """Someone stopped the server before anything failed: what follows is the shutdown."""
    stop = _stop(facts)
    if stop is None:
        return None
    before = facts.before(stop)
    if any(e.signal in _FAULTS or (e.signal in _TROUBLE and not _is_stop_dump(e)) for e in before):
        return None
    if any(e.signal is Signal.SHM_STALL and not (e.proc and e.proc.role.value == "worker") for e in before):
        return None  # the engine core was already waiting on its workers: a stop of a hung server
    if any(isinstance(e.data, Stats) and e.data.running > 0 and e.data.prompt_tps == 0
           and e.data.generation_tps == 0 for e in before[-3:]):
        return None  # requests running, nothing produced: the operator stopped a stalled server
    if not facts.served_before(stop) and any(a.startup for a in facts.model.activities):
        return _stopped_during_start_up(facts, stop)
    after = facts.after(stop)
    if any(e.signal in _FAULTS - {Signal.RPC_TIMEOUT} and not _store_gone(e) for e in after):
        return None
    for event in after:
        exception = facts.exception_of(event)
        if event.signal in (Signal.ENGINE_FATAL, Signal.WORKER_EXCEPTION) and exception and not exception.startswith(
            _SHUTDOWN_EXCEPTIONS
        ):
            return None
    outside = _OUTSIDE_STOPS.get(stop.data.name if isinstance(stop.data, Failure) else None, _OPERATOR)
    if _exit_expired(stop):
        outside = _OUTSIDE_STOPS[TRITON_STOP]
    expired = next((e for e in [stop, *after] if e.signal is Signal.SHUTDOWN and _exit_expired(e)), None)
    cut = _cut_off(facts, expired) if expired else ""
    draft = Draft(facts, Kind.HEALTHY, 0.75, outside.headline.format(exit=cut))
    draft.cite(stop, Role.ROOT_CAUSE, outside.why)
    drained = [e for e in after if e.signal is Signal.SHUTDOWN]
    draft.cite(drained[-1] if drained else None, Role.SUPPORTING, "the server finished shutting down")
    for event in [e for e in after if e.signal in FATAL][:3]:
        draft.cite(event, Role.CONSEQUENCE, "printed while the processes exit")
    draft.cite(facts.t.last_progress, Role.CONTEXT, "last work before the stop")
    draft.undecided = outside.undecided
    for text, command in outside.steps:
        draft.step(text, command)
    if expired is not None:
        draft.cite(expired, Role.SUPPORTING, "Triton's exit timeout ran out")
        draft.step("give in-flight generations time to finish when Triton stops (longer than the longest generation), or "
                   "drain traffic first: tritonserver --exit-timeout-secs=<seconds> (30 by default)")
    return draft.done()


def _cut_off(facts: Facts, expired: Event) -> str:
    """What Triton's exit timeout cut off: inferences still running, or a model (the vLLM engine) still unloading."""
    counts = [found for e in facts.t.of(Signal.SHUTDOWN) if facts.at(e) <= facts.at(expired)
              and (found := TRITON_COUNTDOWN.search(e.text)) is not None]
    last = counts[-1] if counts else None
    if last is not None and last["inflight"] and int(last["n"]) > 0:
        what = f"with {last['n']} model version(s) still running inferences — those requests were cut off"
    elif last is not None and last["requests"] is not None and int(last["n"]) > 0:
        what = f"with {last['n']} model(s) still unloading — the vLLM engine's shutdown outlasted it"
    else:
        what = "before its in-flight inferences finished or its models unloaded"
    return f", but its exit timeout (--exit-timeout-secs) ran out {what}"


def exit_after_work(facts: Facts) -> Verdict | None:
    """``Engine core proc ... died unexpectedly`` after all requests finished is a normal exit."""
    deaths = facts.t.of(Signal.WORKER_DIED)
    others = [e for e in facts.t.of(*FATAL) if e.signal is not Signal.WORKER_DIED]
    if not deaths or others or not all("Engine core proc" in e.text for e in deaths):
        return None
    death = deaths[0]
    finished = [
        e
        for e in facts.before(death)
        if isinstance(e.data, Progress) and e.data.total and e.data.done >= e.data.total
        and e.data.bar.startswith("Processed prompts")
    ]
    last_stats = [s for e, s in facts.stats if facts.at(e) < facts.at(death)]
    idle = bool(last_stats) and last_stats[-1].running == 0
    shutdown = facts.t.first_of(Signal.SHUTDOWN)
    if not (finished or idle or shutdown):
        return None
    draft = Draft(facts, Kind.HEALTHY, 0.75,
                  "healthy: the engine core exited after all work finished (a benign message at shutdown)")
    draft.cite(finished[-1] if finished else shutdown, Role.SUPPORTING, "all requests had finished")
    draft.cite(death, Role.CONTEXT, "printed at normal process exit; not a failure")
    return draft.done()


@dataclass(frozen=True)
class _RefusedOperation:
    """A guard in the API server on one operation that is not the engine's work: what is said when it fires."""

    default: str
    """The guard and its default, for a line that prints no limit."""
    headline: str
    """With ``{within}``: the limit, printed or default."""
    why: str
    undecided: str | None
    steps: tuple[str, ...]


_REFUSED = {
    # vLLM 0.34 renderers/hf.py _render_with_timeout (tests/test_vllm_source_wordings.py)
    CHAT_TEMPLATE: _RefusedOperation(
        "VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT (30 s by default)",
        "healthy: the API server gave up rendering a request's chat template after {within} and refused that request; "
        "the engine never saw it",
        "a guard on one request in the API server, not on the engine",
        "which request: a very long conversation, or a template that loops on it (the access log's error responses at "
        "that time)",
        (("the render thread that timed out keeps running until the server restarts: if the API server's CPU stays "
         "high, restart it"),
         ("only for a trusted template and long conversations, raise VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT (seconds) on the "
         "server"))),
    # vLLM 0.11–0.34 v1/engine/async_llm.py, elastic_ep/api_router.py (tests/test_vllm_source_wordings.py)
    EP_DRAIN: _RefusedOperation(
        "drain_timeout (120 s by default)",
        "healthy: an elastic-EP scale was refused after {within} because requests were still running; the engines went "
        "on serving them",
        "the scale's wait for running requests, not a guard on the engine",
        None,
        (("scale when the load is low, or give the scale longer: drain_timeout (seconds) in the POST /scale_elastic_ep "
         "body, above the longest request's time"),)),
}


def refused_operation(facts: Facts) -> Verdict | None:
    """The API server gave up on one operation that is not the engine's work (a request's chat template, an
    elastic-EP scale's drain): that operation was refused; the engine served on."""
    if facts.t.of(*FATAL):
        return None
    refused = [(e, e.data) for e in facts.t.of(Signal.REQUEST_FAILED)
               if isinstance(e.data, Timeout) and e.data.guard in _REFUSED]
    if not refused:
        return None
    first, guard = refused[0][0], refused[0][1].guard or ""
    known = _REFUSED[guard]
    limit = next((t.limit_s for _, t in refused if t.guard == guard and t.limit_s), None)
    draft = Draft(facts, Kind.HEALTHY, 0.6, known.headline.format(within=f"{limit:g} s" if limit else known.default))
    draft.cite(first, Role.ROOT_CAUSE, known.why)
    draft.cite(facts.t.last_progress, Role.CONTEXT, "the engine's last work")
    draft.undecided = known.undecided
    for step in known.steps:
        draft.step(step)
    return draft.done()


def _bare_core_stall(facts: Facts, stalls: list[Event]) -> Verdict:
    """The engine core's 60 s shared-memory notice with nothing around it: no serving, no start-up work, no failure.

    The notice says the workers are hanging or doing long work; alone it cannot say which.  Four collectors labelled
    such pastes slow (dsv32-h200-long-load-shm-broadcast-warning, vllm-ascend-npu-graph-compile-shm-broadcast-60s),
    deadlocked (wan22-omni-video-gen-shm-no-block-after-14h) and memory (gb10-dual-spark-unified-memory-sample-
    tokens-timeout), never benign: what the workers were doing decides.
    """
    draft = Draft(facts, Kind.UNKNOWN, 0.3, "unknown: the engine core waited on its workers past the shared-memory "
                  "notice's 60 s, and nothing else here says whether they were working (a long step, compilation, "
                  "weight loading: slow) or stuck")
    draft.cite(stalls[0], Role.ROOT_CAUSE, "the engine core waiting on its workers")
    draft.undecided = ("what the workers were doing then: their own lines (loading, compiling, a long prefill) or a "
                       "stack capture (engdiag snapshot); the notice repeating minute after minute with nothing else "
                       "means stuck")
    return draft.done()


def quiet(facts: Facts) -> Verdict | None:
    """No incident: at most shared-memory waits that idle workers and start-up work print."""
    if not facts.events:
        return None
    worker_stalls = facts.shm_stalls(workers=True)
    core_stalls = facts.shm_stalls(workers=False)
    if worker_stalls or core_stalls:
        stalls = worker_stalls + core_stalls
        if worker_stalls and not core_stalls:
            reason = "a worker waiting for work while the engine is idle"
        elif facts.served_before(core_stalls[0]):
            reason = "a long step while serving (not repeated minute after minute)"
        elif facts.startup_work_before(core_stalls[0]):
            reason = "start-up work (compile, weight loading, warm-up)"
        else:
            return _bare_core_stall(facts, core_stalls)
        draft = Draft(facts, Kind.HEALTHY, 0.6, f"healthy: the shared-memory wait lines are {reason}")
        for event in stalls[:2]:
            draft.cite(event, Role.CONTEXT, "benign on an idle worker and during start-up")
        return draft.done()
    raised = facts.t.of(Signal.EXCEPTION)
    if raised:
        # An exception is not health, and alone it does not say which process died or why
        # (pie-vllm-driver-cold-jit-90s-exceeds-60s-shmem-timeout: a ValueError downstream of a killed step).
        named = [e for e in raised if facts.exception_of(e)]
        raised = named or raised  # the traceback that ends in its exception says what was raised
        exception = facts.exception_of(raised[0]) or "an exception (its last line is cut off)"
        draft = Draft(facts, Kind.UNKNOWN, 0.3, f"unknown: a process raised {exception[:160]}, and nothing around it "
                                                "says whether the engine died, hung or was cut off by a guard")
        draft.cite(raised[0], Role.ROOT_CAUSE, "the only error in the log")
        draft.undecided = ("the lines before the exception (what the engine was doing), whether a timeout fired, "
                           "and the traceback's last line")
        return draft.done()
    added = facts.t.of(Signal.REQUEST_ADDED, Signal.REQUEST_RECEIVED)
    if added and not any(is_progress(e) for e in facts.after(added[0])):
        # Requests taken in and not one token or finish after them: the excerpt ends in the middle of work
        # it never shows completing (tt-metal-qwen3-32b-t3k-3k-token-prefill-nd-device-hang-silent).
        draft = Draft(facts, Kind.UNKNOWN, 0.3, f"unknown: {len(added)} request(s) came in and the log ends before "
                                                "any produced a token or finished")
        draft.cite(added[0], Role.ROOT_CAUSE, "work taken in")
        draft.undecided = ("the lines after this excerpt: stats with tokens flowing (working) or minutes of silence "
                           "(stuck); or engdiag snapshot on the engine now")
        return draft.done()
    aborted = facts.t.of(Signal.REQUEST_ABORTED)
    if aborted and not any(is_progress(e) for e in facts.events):
        # An abort is somebody's limit firing (a client's, an orchestrator's); with no token or finish anywhere
        # in the log it is a wait the excerpt never shows satisfied (qwen3-tts-dropped-payload-stage1-300s-wait:
        # vllm-omni aborted requests at its 300 s payload wait while a stage kept polling for them).
        draft = Draft(facts, Kind.UNKNOWN, 0.3, f"unknown: {plural(len(aborted), 'abort')} of requests the log never "
                                                "shows producing a token or finishing")
        draft.cite(aborted[0], Role.ROOT_CAUSE, "somebody's limit fired on this request")
        draft.undecided = ("what the engine did meanwhile: stats with tokens flowing (a slow request) or none (a "
                           "request stuck, or a payload that never came)")
        return draft.done()
    draft = Draft(facts, Kind.HEALTHY, 0.7, "healthy: no timeout, stall, memory or crash signal in the log")
    draft.cite(facts.t.last_progress, Role.CONTEXT, "last progress")
    if not draft.items and facts.events:
        draft.cite(facts.events[-1], Role.CONTEXT, "the last vLLM line")
    return draft.done()


def _stopped_during_start_up(facts: Facts, stop: Event) -> Verdict | None:
    """A stop that came before the server was ready: something outside gave up on a start-up."""
    running = [a for a in facts.model.activities if a.startup and a.advancing]
    if not running:
        return None
    activity = running[-1]
    draft = Draft(facts, Kind.SLOW, 0.5,
                  f"slow start-up: the server was stopped before it became ready, while {activity.name} was still "
                  f"advancing ({activity.detail}) — an orchestrator's or operator's start-up limit gave up on it")
    draft.cite(facts.event_at(activity.source, activity.line), Role.ROOT_CAUSE, "start-up work still in progress")
    draft.cite(stop, Role.SUPPORTING, "the stop came from outside vLLM")
    draft.step("give start-up its own probe or limit, longer than this phase needs",
               "startupProbe failureThreshold × periodSeconds ≥ the observed start-up")
    draft.undecided = "who stopped it and with what limit: the orchestrator's events (kubectl describe pod)"
    return draft.done()
