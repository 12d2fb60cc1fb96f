"""Timeouts: which guard fired, its limit, what it guarded — compared with the work in progress.

Domain facts encoded here (docs/verdicts.md, "Timeouts"):

* A timeout is a guard's opinion, not a diagnosis.  The same message ends a slow
  step and a stuck one; what decides is the work in progress when it fired.
* Kernels compiled during serving (JIT, autotuning) take minutes and outlast any
  step guard (``cutedsl-jit-during-inference-sample-tokens-300s``).
* Start-up work still advancing when the start-up guard fired is slow start-up
  (``163-shard-weight-load-exceeds-engine-ready-timeout``,
  ``dp16-deepgemm-warmup-engine-ready-timeout``).
* A step of a few decode tokens takes milliseconds: a step guard that fires on one
  means a worker never answered (``v1-single-decode-token-collective-rpc-timeout``).
* A guard that fired within seconds of the engine's last completed work has a limit
  shorter than one long step: Ray compiled graphs' 10 s ``RAY_CGRAPH_get_timeout``
  under a TP16 prefill (``v1-ray-cgraph-10s-timeout-tp16-deepseek-v3``), V0's 5 s
  health-check RPC during 15k-token prompts
  (``qwen72b-l40-15k-prompt-rpc-health-timeout``).
* V0's iteration and heartbeat guards fire on one long step (a long prefill,
  guided-decoding compilation) far more often than on a hang
  (``guided-json-complex-schema-iteration-timeout``).
* vLLM 0.33+'s watchdog (``--watchdog-config``) only dumps stacks after its feed
  timeout; it kills nothing, so the dump is a stall report to be judged like any wait.
"""

from __future__ import annotations

from engdiag.analysis import memory
from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import DECODE_STEP_TOKENS, HUGE_STEP_TOKENS, Facts, is_startup_work, stalled
from engdiag.analysis.guards import timeout_event
from engdiag.analysis.model import Guard
from engdiag.analysis.timeline import is_progress
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Iteration, Phase, Progress, Signal, Timeout
from engdiag.roles import Role as ProcRole
from engdiag.roles import role_of

LONG_STEP_MS = 10_000
"""A step this long (``Iteration(N): ... elapsed time``) is already a large share of any step guard."""
SHORT_LIMIT_S = 30.0
"""A step guard this short can be outlasted by one long prefill on a large model."""


def _limit_text(g: Guard | None) -> str:
    if g is None or g.limit_s is None:
        return ""
    return f" ({g.limit_s:g} s limit)"


# ---- rules ------------------------------------------------------------------------------


def timeout_verdict(facts: Facts) -> Verdict | None:
    """One of vLLM's guards fired: judged by the work in progress when it did."""
    event = timeout_event(facts)
    if event is None:
        return startup_death(facts)
    raised = raised_before(facts, event)
    if raised is not None:
        return _guard_after_a_crash(facts, event, raised)
    if event.signal is Signal.ENGINE_READY_TIMEOUT:
        return _startup_timeout(facts, event)
    if event.signal is Signal.ITERATION_TIMEOUT:
        return _iteration_timeout(facts, event)
    if event.signal is Signal.HEARTBEAT_LOST:
        draft = Draft(
            facts,
            Kind.SLOW,
            0.55,
            "slow: the V0 engine loop missed its heartbeat — usually one long step (prefill, guided decoding)",
        )
        draft.undecided = "a stack capture during the stall (engdiag snapshot) would show whether the loop was computing"
        return draft.cite(event, Role.ROOT_CAUSE).cite_consequences(event).done()
    return _step_timeout(facts, event)


_NOT_A_CRASH = ("TimeoutError", "CancelledError", "KeyboardInterrupt", "SystemExit", "DeadError", "Empty",
                "DistBackendError", "DistStoreError", "DistNetworkError", "gloo", "NCCL", "nccl", "Connection",
                "Worker failed")
"""Exceptions that are a guard or a wait giving up (or the engine-dead error after it), not a fault."""


def raised_before(facts: Facts, guard: Event) -> Event | None:
    """An exception the engine logged at ERROR before the guard fired, other than a timeout or its echoes."""
    for event in facts.before(guard):
        exception = facts.exception_of(event) or ""
        if (event.signal is Signal.EXCEPTION and exception and (event.level or "").upper() in ("ERROR", "CRITICAL")
                and event.line != guard.line and not any(name in exception for name in _NOT_A_CRASH)):
            return event
    return None


def _guard_after_a_crash(facts: Facts, guard: Event, raised: Event) -> Verdict:
    """A guard that fired after the engine had already raised reports a dead engine, not a slow one."""
    exception = facts.exception_of(raised) or raised.text
    name = facts.model.guard.name if facts.model.guard is not None else guard.signal.value.replace("_", " ")
    draft = Draft(facts, Kind.CRASHED, 0.75,
                  f"crashed: the engine raised {exception[:160]}; the {name} that fired after it is its echo")
    draft.cite(raised, Role.ROOT_CAUSE, "the first exception: the engine died here")
    draft.cite(guard, Role.CONSEQUENCE, "a guard waiting on a process that had already died")
    return draft.cite_consequences(raised).done()


def _startup_timeout(facts: Facts, event: Event) -> Verdict:
    work = facts.startup_work_before(event)
    timeout = event.data if isinstance(event.data, Timeout) else Timeout()
    if timeout.guard == "omni-stage" and not work:
        # a download retried on network timeouts is start-up work too: the stage was still fetching the model
        # (vllm-omni issue 2616: Hugging Face read timeouts, then the stage's READY wait ran out)
        work = [e for e in facts.before(event) if e.signal is Signal.BUSY_RETRY]
    if timeout.guard == "dp-coordinator":
        # 0.32–0.34 coordinator.py:64: the coordinator only binds sockets and reports them; 120 s is fixed
        draft = Draft(facts, Kind.SLOW, 0.45,
                      "slow start-up: the DP coordinator process did not report its addresses within the fixed "
                      f"{timeout.limit_s or 120:g} s (a starved or hung helper process, not model work)")
        draft.cite(event, Role.ROOT_CAUSE, "the coordinator process's start-up outlasted its fixed limit")
        draft.undecided = ("the coordinator's own lines (Started DP Coordinator process) and the host's load at "
                           "start-up: a coordinator still importing (slow) or one that never runs (stuck)")
        return draft.cite_consequences(event).done()
    if timeout.guard == "omni-stage" and not work:
        # vllm-omni's stages log into the same stream: none of their start-up work before the wait ran out leaves a
        # stage that loaded slowly and one stuck on a broken checkpoint alike
        # (omni-stage-ready-timeout-incomplete-weights: --stage-init-timeout 600 did not help, re-downloading did)
        draft = Draft(facts, Kind.UNKNOWN, 0.35,
                      "unknown: a vllm-omni stage was not ready when its start-up limit ran out"
                      + _limit_text(facts.model.guard) + ", and this log shows none of its start-up work")
        draft.cite(event, Role.ROOT_CAUSE, "the stage's start-up limit fired")
        draft.undecided = ("the stage's own lines before the wait ran out: weight loading still advancing (slow: raise "
                           "--stage-init-timeout) or stopped / an error (a stuck stage, an incomplete checkpoint)")
        return draft.cite_consequences(event).done()
    who = ("new engine core processes (a scale-up) were" if timeout.call == "scale-up handshake"
           else "a vllm-omni stage was" if timeout.guard == "omni-stage" else "the engine was")
    draft = Draft(
        facts,
        Kind.SLOW,
        0.75 if work else 0.65,
        f"slow start-up: {who} still starting when the API server gave up waiting for it"
        + _limit_text(facts.model.guard),
    )
    draft.cite(event, Role.ROOT_CAUSE, "start-up timeouts are usually slow work, not a hang")
    for item in work[-3:]:
        draft.cite(item, Role.SUPPORTING, "start-up work was still advancing")
    if not work:
        draft.undecided = "the log shows no start-up progress lines; the full log from launch would show what was slow"
    if timeout.guard == "omni-stage":
        draft.generic_steps = False  # vLLM's own start-up variable is not the limit that fired
        draft.step("give each stage longer to become ready: raise vllm-omni's --stage-init-timeout (stage_init_timeout, "
                   "300 s by default) above the slowest stage's download, load and warm-up")
    return draft.cite_consequences(event).done()


def startup_death(facts: Facts) -> Verdict | None:
    """A process died during start-up while weights were still loading: the ready timeout."""
    deaths = facts.t.of(Signal.PROCESS_EXCEPTION)
    if not deaths:
        return None
    death = deaths[0]
    work = facts.startup_work_before(death)
    if facts.served_before(death) or not work or facts.exception_of(death):
        return None
    if raised_before(facts, death) is not None:
        return None  # the process logged why it failed just before: a crash, not a limit (vLLM issue 20670)
    if role_of(getattr(death.data, "name", None) or "") in (ProcRole.ENGINE_CORE, ProcRole.WORKER):
        # the engine core or a worker raising is the start-up work failing, not a waiter giving up on it: the
        # ready timeout raises in the API server (163-shard-weight-load-exceeds-engine-ready-timeout: ApiServer_5)
        # (vllm-gh200-multinode-capture-ima: EngineCore_DP0 raised 2/83 into CUDA-graph capture)
        return None
    if memory.allocating_sites(facts):
        # the dying process's own traceback runs through the allocation it was doing: that work raised, no
        # waiter gave up on it (mllama-11b-profile-run-oom-default-max-num-seqs: the profiling run)
        return None
    draft = Draft(facts, Kind.SLOW, 0.55, "slow start-up: a vLLM process died while start-up work was still advancing")
    draft.cite(work[-1], Role.SUPPORTING, "start-up was still making progress")
    draft.cite(death, Role.ROOT_CAUSE, "the exception is cut off in this log")
    draft.undecided = (
        "the end of the traceback: TimeoutError('Timed out waiting for engine core processes to start') "
        "confirms the start-up timeout"
    )
    return draft.cite_consequences(death).done()


def _iteration_timeout(facts: Facts, event: Event) -> Verdict:
    stalls = [e for e, s in facts.stats if stalled(s) and facts.at(e) < facts.at(event)]
    if facts.multi_rank and len(stalls) >= 3:
        draft = Draft(facts, Kind.DEADLOCKED, 0.6,
                      "deadlocked: requests ran without producing a token until the V0 iteration timeout fired")
        draft.cite(event, Role.ROOT_CAUSE)
        for stall in stalls[-2:]:
            draft.cite(stall, Role.SUPPORTING, "running requests, 0 tokens/s")
        return draft.cite_consequences(event).done()
    draft = Draft(
        facts,
        Kind.SLOW,
        0.65,
        "slow: one V0 engine step outlasted VLLM_ENGINE_ITERATION_TIMEOUT_S "
        "(a long prefill, guided decoding or a loaded CPU), and the engine was declared dead",
    )
    draft.cite(event, Role.ROOT_CAUSE, "V0 iteration timeouts are usually a busy engine, not a dead one")
    last = facts.stats[-1] if facts.stats else None
    if last is not None and last[1].running == 0 and stalled(last[1]) is False:
        draft.cite(last[0], Role.CONTEXT, "Running 0 at 0 tokens/s: idle or CPU-side work, not a stuck batch")
    return draft.cite_consequences(event).done()


def _in_flight(facts: Facts, event: Event) -> Event | None:
    """The latest sign that requests were being worked on before the guard fired."""
    for earlier in reversed(facts.before(event)):
        if earlier.signal in (Signal.REQUEST_RECEIVED, Signal.REQUEST_ADDED, Signal.PROMPT_LENGTH):
            return earlier
        if earlier.signal is Signal.STATS and getattr(earlier.data, "running", 0) > 0:
            return earlier
    return None


def _step_timeout(facts: Facts, event: Event) -> Verdict:
    """A step guard (execute_model RPC, Ray compiled graph, V0 RPC): slow step or stuck worker?"""
    g = facts.model.guard
    call = event.data.call if isinstance(event.data, Timeout) and event.data.call else "execute_model"
    name = g.name if g is not None else f"{call} step timeout"
    before = [e for e in facts.before(event) if e.signal is not Signal.EXCEPTION]  # its own traceback is no evidence
    served = facts.served_before(event)
    compiles = [e for e in before if e.signal is Signal.COMPILE and (facts.served_before(e) or "inference" in e.text)]
    compiles += [e for e in before if isinstance(e.data, Progress) and "Compiling FSM index" in e.data.bar]
    startup = [e for e in before if is_startup_work(e)]
    dump = facts.last_crash_dump
    core_stalls = [e for e in facts.shm_stalls(workers=False) if facts.at(e) < facts.at(event)]
    stalled_stats = [e for e, s in facts.stats if stalled(s) and facts.at(e) < facts.at(event)]
    if compiles:
        draft = Draft(facts, Kind.SLOW, 0.8,
                      f"slow: a worker was compiling kernels during inference when the {name} fired{_limit_text(g)}")
        draft.cite(compiles[-1], Role.ROOT_CAUSE, "JIT/compilation outside warm-up can take minutes")
        draft.cite(event, Role.SUPPORTING)
        for stall in core_stalls[-2:]:
            draft.cite(stall, Role.CONTEXT, "the engine core waited on the compiling worker")
        draft.step("warm the shapes production uses so kernels compile before serving (FlashInfer/Triton/"
                   "DeepGEMM/CuteDSL caches kept between launches)", "export VLLM_CACHE_ROOT=/persistent/vllm-cache")
        return draft.cite_consequences(event).done()
    if not served and startup:
        draft = Draft(facts, Kind.SLOW, 0.6,
                      f"slow start-up: the {name} fired during warm-up, before the engine served requests")
        draft.cite(startup[-1], Role.SUPPORTING, "start-up work was in progress")
        return draft.cite(event, Role.ROOT_CAUSE).cite_consequences(event).done()
    if dump is not None and dump.total <= DECODE_STEP_TOKENS and dump.new_requests == 0:
        draft = Draft(
            facts,
            Kind.DEADLOCKED,
            0.85,
            f"deadlocked: the {name} fired on a decode step of {dump.total} tokens, "
            "which takes milliseconds — a worker never answered",
        )
        draft.cite(event, Role.ROOT_CAUSE)
        draft.cite(facts.t.last_of(Signal.SCHEDULED_TOKENS), Role.SUPPORTING, "a decode step cannot be slowness")
        for stall in stalled_stats[-1:]:
            draft.cite(stall, Role.SUPPORTING, "requests running, 0 tokens/s: no step completed after this")
        for stall in core_stalls[-2:]:
            draft.cite(stall, Role.SUPPORTING, "the engine core waited on the workers")
        return draft.cite_consequences(event).done()
    if dump is not None and (dump.total >= HUGE_STEP_TOKENS or (dump.largest_new_prompt or 0) >= HUGE_STEP_TOKENS):
        draft = Draft(facts, Kind.SLOW, 0.55,
                      f"slow: the {name} fired on a very large step ({dump.total} tokens scheduled)")
        draft.cite(facts.t.last_of(Signal.SCHEDULED_TOKENS), Role.ROOT_CAUSE, "an unchunked long prefill")
        draft.cite(event, Role.SUPPORTING)
        draft.undecided = "whether the GPU was busy: a snapshot during the next stall shows compute vs a wait"
        return draft.cite_consequences(event).done()
    long_steps = [e for e in before if isinstance(e.data, Iteration) and e.data.elapsed_ms >= LONG_STEP_MS]
    if long_steps:
        step: Iteration = long_steps[-1].data  # type: ignore[assignment]
        draft = Draft(facts, Kind.SLOW, 0.65,
                      f"slow: steps were already taking {step.elapsed_ms / 1000:.0f} s "
                      f"({step.context_tokens} prefill tokens) when the {name} fired{_limit_text(g)}")
        draft.cite(long_steps[-1], Role.ROOT_CAUSE, "a step this long can outlast the guard")
        draft.cite(event, Role.SUPPORTING)
        draft.step("bound the longest step", "--max-num-batched-tokens 8192   # chunked prefill")
        return draft.cite_consequences(event).done()
    short = _short_guard(facts, event, g)
    if short is not None and not stalled_stats:
        return short
    if not before or all(e.line >= event.line - 2 and e.source == event.source for e in before):
        draft = Draft(facts, Kind.UNKNOWN, 0.3,
                      f"unknown: the {name} fired, and the excerpt holds nothing else to judge the step by")
        draft.cite(event, Role.ROOT_CAUSE, "a guard's opinion, not a diagnosis")
        draft.undecided = (
            "the lines before the timeout: a kernel JIT/autotuning or compile line (slow), the scheduler dump "
            "of the step (a decode step means stuck), the workers' last lines, or a stack capture during the "
            "next stall (engdiag snapshot)"
        )
        return draft.cite_consequences(event).done()
    confidence = 0.6 + (0.1 if core_stalls else 0) + (0.05 if len(core_stalls) >= 3 else 0)
    confidence += 0.05 if stalled_stats else 0
    draft = Draft(facts, Kind.DEADLOCKED, confidence,
                  f"deadlocked: a worker did not answer before the {name} fired{_limit_text(g)}, "
                  "with no sign of slow work")
    draft.cite(event, Role.ROOT_CAUSE)
    for stall in core_stalls[-3:]:
        draft.cite(stall, Role.SUPPORTING, "the engine core waited on the workers, minute after minute")
    for stall in stalled_stats[-1:]:
        draft.cite(stall, Role.SUPPORTING, "requests running, 0 tokens/s")
    if not core_stalls and not stalled_stats:
        draft.undecided = (
            "the log shows no stall lines or crash dump; a snapshot during the next stall "
            "(engdiag snapshot) or the scheduler dump would decide"
        )
    return draft.cite_consequences(event).done()


def before_guard(facts: Facts, event: Event) -> list[Event]:
    """Events before the guard fired."""
    return facts.before(event)


def _executor_set_up(event: Event) -> bool:
    """The Ray executor logging its compiled-graph limit: no step can have started before it."""
    return isinstance(event.data, Phase) and event.data.name.startswith("ray_cgraph_configured")


def _short_guard(facts: Facts, event: Event, g: Guard | None) -> Verdict | None:
    """A guard whose limit is shorter than one long step, firing while requests were in flight."""
    last_work = next((e for e in reversed(facts.before(event)) if is_progress(e) or _executor_set_up(e)), None)
    gap = facts.seconds(last_work, event) if last_work is not None else None
    limit = g.limit_s if g is not None else None
    short_limit = limit is not None and limit <= SHORT_LIMIT_S
    # a step can only have started after the last completed work (or the executor's set-up): the guard's
    # effective limit is at most that gap, whatever its configured value claims
    short_gap = gap is not None and gap <= SHORT_LIMIT_S
    in_flight = _in_flight(facts, event)
    printed = short_limit and g is not None and g.limit_origin == "printed"
    if not (short_limit or short_gap) or (in_flight is None and last_work is None and not printed):
        return None
    bound = f"{limit:g} s" if limit is not None else f"at most {gap:.0f} s (it fired {gap:.0f} s after the last completed work)"
    busy = " while requests were in flight" if in_flight or last_work else ""
    draft = Draft(facts, Kind.SLOW, 0.6 if busy else 0.5,
                  f"slow: the {g.name if g else 'step guard'} allows {bound} — shorter than one long step "
                  f"(a long prefill on a large or multi-node model) — and it fired{busy}")
    draft.cite(event, Role.ROOT_CAUSE, "a guard shorter than the work it guards")
    configured = [e for e in before_guard(facts, event) if isinstance(e.data, Phase)
                  and e.data.name.startswith("ray_cgraph_configured")]
    if configured and gap is not None and gap < float(configured[-1].data.name.split()[-1]):  # type: ignore[union-attr]
        draft.notes.append(f"the log says the limit was set to {configured[-1].data.name.split()[-1]} s, "  # type: ignore[union-attr]
                           f"yet the guard fired {gap:.0f} s after the set-up: the setting did not reach the guard")
        draft.cite(configured[-1], Role.SUPPORTING, "the configured value that did not take effect")
    draft.cite(last_work, Role.SUPPORTING, "the engine was completing work seconds before")
    draft.cite(in_flight, Role.SUPPORTING, "requests in flight when the guard fired")
    if g is not None and g.knob == "RAY_CGRAPH_get_timeout":
        draft.step("raise Ray's compiled-graph read and submit limits (vLLM sets 300 s from 0.8.5)",
                   "export RAY_CGRAPH_get_timeout=300 RAY_CGRAPH_submit_timeout=300")
    draft.step("bound the longest step so it fits any guard", "--max-num-batched-tokens 8192   # chunked prefill")
    draft.undecided = "a stack capture during the next stall shows the workers computing (slow) or waiting (stuck)"
    return draft.cite_consequences(event).done()


def watchdog_stall(facts: Facts) -> Verdict | None:
    """vLLM 0.33+'s watchdog dumped stacks: a loop made no progress for its feed timeout (300 s default)."""
    dumps = [e for e in facts.t.of(Signal.STACK_DUMP)
             if not (isinstance(e.data, Timeout) and e.data.is_stop_dump)]
    if not dumps:
        return None
    event = dumps[0]
    running = [a for a in facts.model.activities if a.advancing and a.name != "serving"]
    if running:
        activity = running[-1]
        draft = Draft(facts, Kind.SLOW, 0.6,
                      f"slow: the watchdog saw no loop progress for its timeout while {activity.name} was advancing "
                      f"({activity.detail})")
        draft.cite(facts.event_at(activity.source, activity.line), Role.ROOT_CAUSE, "work in progress")
        draft.cite(event, Role.SUPPORTING, "the watchdog dumps stacks; it does not kill")
        return draft.done()
    draft = Draft(facts, Kind.DEADLOCKED, 0.5,
                  "deadlocked: vLLM's watchdog saw no progress for its feed timeout and dumped the stacks")
    g = facts.model.guard
    limit = f"{g.limit_s:g} s, {g.limit_origin}" if g is not None and g.limit_s is not None else "300 s default"
    draft.cite(event, Role.ROOT_CAUSE, f"no loop iteration completed within the watchdog timeout ({limit})")
    draft.undecided = "the dumped stack file this line names: a thread in a collective or queue wait (stuck) or in compute (slow)"
    draft.step("read the stack dump the watchdog wrote", "cat VLLM_STACK_DUMP_for_*.log")
    return draft.done()
