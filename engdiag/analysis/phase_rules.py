"""Verdicts from the phases: slow start-up, a long generation, a start-up that stopped.

Domain facts encoded here (docs/verdicts.md, "Phases"):

* A start-up activity still advancing (shards done/total moving at a steady s/it) is slow,
  not stuck (``nightly-161-shard-load-timeout-ascend``: 138/161 shards after 42 min).
* A start-up activity that ran longer than the engine-ready default (600 s) is an
  incident even when nothing fatal was printed: the next launch with the default,
  or an orchestrator's probe, kills it (``nemotron3-torch-compile-2222s-ray-data``:
  torch.compile took 2222 s).
* A server whose only request is still generating steadily is working: the
  "hang" is a long generation outlasting the client's wait
  (``qwen3-thinking-never-ends-engine-healthy-180tps``,
  ``qwen72b-int4-slow-generation-client-aborted``,
  ``tt-llama8b-dp16-eval-requests-aborted-at-10min-while-generating``).
* Ranks meet in process-group / NCCL set-up and kernel autotuning: a multi-rank start-up
  that stops there waits on a peer (``pp2-startup-hang-after-pynccl-p2p-ctrl-c-dump``,
  ``hami-libvgpu-tp2-nccl-init-stall-fused-line-waiting-engine``).
* CUDA graphs are captured after the KV cache took its share: stopping in capture at
  gpu_memory_utilization ≥ 0.95 leans to exhaustion
  (``ray-multinode-v0-cudagraph-capture-oom-gpu-util-098-lost-first-char``).
"""

from __future__ import annotations

import math

from engdiag.analysis.advice import P2P_DIAGNOSIS
from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts, is_startup_work
from engdiag.analysis.model import Activity
from engdiag.analysis.phases import ENGINE_READY_DEFAULT_S, NCCL_SETUP
from engdiag.analysis.signal_kinds import FATAL
from engdiag.analysis.verdict import Kind, MemoryKind, Role, Verdict
from engdiag.logs.events import Memory, Phase, Progress, Signal
from engdiag.logs.patterns.startup import P2P_CHANNEL


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _knob_steps(draft: Draft, activity: Activity, needed: float) -> None:
    limit = int(math.ceil(needed * 1.5 / 60) * 60)
    draft.step(
        f"give start-up more time than the {_minutes(needed)} this phase needs "
        "(0.14+; 0.9.1–0.13 have a fixed 600 s)",
        f"export VLLM_ENGINE_READY_TIMEOUT_S={limit}",
    )
    if activity.name == "weight loading":
        draft.step("load weights from local disk rather than network storage (copy the checkpoint to local NVMe)",
                   "--download-dir /local/nvme/models")
    elif activity.name in ("torch.compile", "kernel JIT warm-up"):
        draft.step("keep vLLM's compile cache between launches (a warm cache skips the compile)",
                   "export VLLM_CACHE_ROOT=/persistent/vllm-cache")
        draft.step("to confirm compilation is the cost (slower decode, no compile)", "--enforce-eager")
    elif activity.name == "CUDA-graph capture":
        draft.step("capture fewer batch sizes", "--compilation-config '{\"max_cudagraph_capture_size\": 64}'")


def _projected(facts: Facts, activity: Activity) -> float | None:
    """Seconds an advancing bar needs in all, at its own pace so far."""
    event = facts.event_at(activity.source, activity.line)
    bar = event.data if event is not None else None
    if not isinstance(bar, Progress) or not bar.total or bar.done <= 0 or bar.done >= bar.total:
        return None
    per_item = bar.seconds_per_item or ((activity.seconds or 0) / bar.done if activity.seconds else None)
    return (activity.seconds or 0) + (bar.total - bar.done) * per_item if per_item else None


def _projected_startup(facts: Facts) -> Verdict | None:
    """A start-up bar still advancing whose own pace puts its end past the start-up default.

    Projected, not yet spent: the guard has not fired, but at this pace it will
    (gaudi-bucket-warmup-graph-compile-30s-per-bucket: 8 of 56 buckets in 3 minutes).
    """
    for activity in facts.model.activities:
        total = _projected(facts, activity) if activity.startup and activity.advancing else None
        if total is None or total < ENGINE_READY_DEFAULT_S:
            continue
        draft = Draft(facts, Kind.SLOW, 0.55,
                      f"slow start-up: at its own pace {activity.name} ({activity.detail}) needs about "
                      f"{_minutes(total)} in all, longer than VLLM_ENGINE_READY_TIMEOUT_S's default of "
                      f"{ENGINE_READY_DEFAULT_S:.0f} s")
        event = facts.event_at(activity.source, activity.line)
        draft.cite(event, Role.ROOT_CAUSE, "advancing, but slowly: projected from its own rate")
        draft.undecided = "whether it finishes: the lines after this excerpt, or the server's /health later"
        draft.root = event
        _knob_steps(draft, activity, total)
        return draft.done()
    return None


def slow_startup(facts: Facts) -> Verdict | None:
    """A start-up activity ran longer than the engine-ready default: slow start-up, fatal or not."""
    long = [a for a in facts.model.activities if a.startup and (a.seconds or 0) >= ENGINE_READY_DEFAULT_S]
    if not long:
        return _projected_startup(facts)
    activity = max(long, key=lambda a: a.seconds or 0)
    seconds = activity.seconds or 0
    state = "was still advancing after" if activity.advancing else ("took" if activity.finished else "ran for")
    draft = Draft(
        facts,
        Kind.SLOW,
        0.75 if activity.advancing or activity.finished else 0.65,
        f"slow start-up: {activity.name} {state} {_minutes(seconds)} ({activity.detail}), longer than "
        f"VLLM_ENGINE_READY_TIMEOUT_S's default of {ENGINE_READY_DEFAULT_S:.0f} s",
    )
    event = facts.event_at(activity.source, activity.line)
    draft.cite(event, Role.ROOT_CAUSE, "start-up work still in progress, not a hang" if activity.advancing
               else "how long this phase took")
    fatal = [e for e in facts.events if e.signal in (Signal.ENGINE_READY_TIMEOUT, Signal.ENGINE_FATAL,
                                                      Signal.PROCESS_EXCEPTION)]
    for later in fatal[:2]:
        draft.cite(later, Role.CONSEQUENCE, "the start-up wait gave up")
    if not fatal:
        draft.notes.append("nothing fatal was printed; with vLLM's default start-up limit, or a probe with a "
                           "shorter one, this launch is killed before it serves")
    draft.root = event
    _knob_steps(draft, activity, seconds)
    return draft.done()


def long_generation(facts: Facts) -> Verdict | None:
    """Requests still generating steadily at the end of the log: the engine works; the wait was long."""
    stats = facts.stats
    tail = stats[-3:]
    # Two steady intervals suffice when the client then aborted the running requests: the engine was
    # visibly working when the caller gave up (tt-llama8b-dp16-eval-requests-aborted-at-10min-while-generating).
    aborted_after = len(tail) >= 2 and any(e.signal is Signal.REQUEST_ABORTED for e in facts.after(tail[-1][0]))
    if len(tail) < (2 if aborted_after else 3):
        return None
    steady = all(s.running > 0 and s.generation_tps > 0 and s.waiting == 0 for _, s in tail)
    no_new_prompts = all(s.prompt_tps == 0 for _, s in tail[1:])
    if not (steady and no_new_prompts):
        return None
    last_event, last = tail[-1]
    aborted = [e for e in facts.after(tail[0][0]) if e.signal is Signal.REQUEST_ABORTED]
    draft = Draft(
        facts,
        Kind.SLOW,
        0.5 if aborted else 0.45,
        f"slow: the engine was still generating ({last.generation_tps:g} tok/s for {last.running} "
        f"request{'s' if last.running != 1 else ''}, no new prompts) — a long generation outlasted the "
        + ("client's wait (it aborted the request)" if aborted else "caller's wait; the engine itself is healthy"),
    )
    draft.cite(last_event, Role.ROOT_CAUSE, "tokens still flowing: the engine is alive and working")
    draft.cite(tail[0][0], Role.SUPPORTING, "the same requests running interval after interval")
    if aborted:
        draft.cite(aborted[0], Role.CONSEQUENCE, "the client gave up and disconnected")
    draft.step("bound the generation so a request cannot run for minutes: max_tokens in the request (or --max-model-len)")
    draft.step("give the client a timeout that covers the longest expected generation",
               "client request timeout ≥ max_tokens ÷ observed tok/s")
    draft.undecided = "the client's own timeout and the request's max_tokens decide whether this was expected"
    return draft.done()


_RANKS_MEET = {
    "process-group / NCCL init": "set-up takes seconds when every peer is reachable",
    "kernel autotune": "the autotuner synchronises ranks with collectives per tactic, so every rank must "
    "tune the same tactics",
}
"""Start-up phases where ranks synchronise: a multi-rank start-up that stops in one is waiting on a peer."""


def _pynccl_started(activity: Activity) -> bool:
    """Did the last start-up step begin a pynccl communicator?

    pynccl.py prints ``vLLM is using nccl==`` only for a group of more than one rank (``world_size == 1``
    returns before it), then broadcasts NCCL's unique id over gloo, runs ``ncclCommInitRank`` and a warm-up
    all_reduce: every step needs every rank, so a log that stops there shows ranks waiting on each other,
    even when only rank 0's line is in it (l40s-custom-allreduce-p2p-init-hang, tp2-a6000-nccl-p2p-startup-
    hang: both fixed by NCCL_P2P_DISABLE=1; read in 0.6.4, 0.10.1 and 0.34.0's pynccl.py).
    """
    return activity.name == "process-group / NCCL init" and activity.detail.endswith("pynccl communicator set-up")


NCCL_SETUP_S = 60.0
"""NCCL communicator set-up takes seconds when every peer is reachable; a minute of silence after it is a hang."""


def _silence_after(facts: Facts, activity: Activity) -> float | None:
    """Seconds the log runs on after an activity's last line (other processes' stamped lines)."""
    event = facts.event_at(activity.source, activity.line)
    stamped = [e for e in facts.after(event) if e.stamp is not None] if event is not None else []
    if not stamped:
        return None
    start = event.stamp if event.stamp is not None else stamped[0].stamp
    return float(stamped[-1].stamp.key - start.key)  # type: ignore[union-attr]


_SET_UP = ("nccl_comm_setup", "nccl_comm_ready", "nccl_communicator_init", "process_group_init")


def _p2p_risk_before_any_work(facts: Facts) -> Verdict | None:
    """RCCL warned that P2P can hang (no ``iommu=pt``), and start-up never got past communicator set-up."""
    warned = [e for e in facts.t.of(Signal.STARTUP_PHASE) if isinstance(e.data, Phase)
              and e.data.name.startswith("p2p_risk")]
    if not warned or facts.t.of(Signal.EXCEPTION, *FATAL):
        return None
    if any(is_startup_work(e) and not (isinstance(e.data, Phase) and e.data.name.startswith(_SET_UP))
           for e in facts.after(warned[0])):
        return None  # weights loading, compiling...: the collectives it warns about passed
    draft = Draft(facts, Kind.DEADLOCKED, 0.45,
                  "deadlocked at start-up (likely): RCCL warns that the kernel command line lacks iommu=pt, "
                  "which can hang GPU peer-to-peer traffic, and start-up goes no further than setting up the "
                  "communicators")
    draft.cite(warned[0], Role.ROOT_CAUSE, "RCCL: \"can lead to system instability or hang\"")
    draft.undecided = ("the lines after communicator set-up (weight loading means the collectives passed), or a "
                       "stack capture (engdiag snapshot) showing ranks inside all_reduce")
    draft.step(P2P_DIAGNOSIS.text, P2P_DIAGNOSIS.command)
    draft.step("then add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX) and reboot, as ROCm's "
               "multi-GPU set-up requires")
    return draft.done()


def _stops_at_first_collective(facts: Facts, last: Activity) -> bool:
    """A multi-rank start-up whose last line is NCCL's ``Init COMPLETE``: ranks are in the first collective."""
    if last.name != "process-group / NCCL init" or not last.finished or not facts.multi_rank:
        return False
    end = facts.event_at(last.source, last.line)
    if end is None or not (isinstance(end.data, Phase) and end.data.name == "nccl_comm_ready"):
        return False
    return not any(is_startup_work(e) for e in facts.after(end)
                   if not (isinstance(e.data, Phase) and e.data.name == "nccl_comm_ready"))


def _stops_connecting_p2p(facts: Facts, last: Activity) -> bool:
    """Two or more ranks' last lines connect channels to peer GPUs "via P2P", and nothing follows.

    NCCL connects channels during set-up, or lazily in the first collective (runtime connect, 2.22+); once
    several ranks have connected theirs, the next thing is data crossing the P2P link, which IOMMU / PCIe ACS
    can block for good (tp2-nccl-allreduce-hang-p2p-cumem-sanity-check: both ranks' channels, then nothing;
    "stuck at the NCCL allreduce", the maintainer's reading).  One rank's channel line alone is set-up the
    paste caught under way.
    """
    if last.name != "process-group / NCCL init" or last.finished:
        return False
    end = facts.event_at(last.source, last.line)
    if end is None or not (isinstance(end.data, Phase) and end.data.name == P2P_CHANNEL):
        return False
    channels = [e for e in facts.t.of(Signal.STARTUP_PHASE) if isinstance(e.data, Phase) and e.data.name == P2P_CHANNEL]
    return len({e.proc for e in channels if e.proc is not None}) >= 2


def _p2p_hang(facts: Facts, last: Activity, where: str, note: str, undecided: str) -> Verdict:
    """Ranks stopped where the first data crosses the GPU peer-to-peer link: deadlocked, low confidence."""
    draft = Draft(facts, Kind.DEADLOCKED, 0.4, f"deadlocked at start-up (likely): {where}")
    draft.cite(facts.event_at(last.source, last.line), Role.ROOT_CAUSE, note)
    draft.undecided = undecided
    draft.step(P2P_DIAGNOSIS.text, P2P_DIAGNOSIS.command)
    return draft.done()


HIGH_UTILIZATION = 0.95
"""A --gpu-memory-utilization this high leaves no headroom for CUDA-graph pools and allocator slack."""


def _utilization(facts: Facts) -> float | None:
    """The share of the GPU vLLM was told to use (V0's ``total_gpu_memory (T) x gpu_memory_utilization (U)``)."""
    figures = {e.data.name: e.data.value for e in facts.t.of(Signal.MEMORY) if isinstance(e.data, Memory)}
    total, usable = figures.get("total_gpu_memory"), figures.get("usable_gpu_memory")
    return usable / total if total and usable is not None else None


def _launched_only(facts: Facts) -> Verdict | None:
    """The engine's banner and nothing after it: a start-up the excerpt does not follow, never health
    (v040-mixtral-ray-tp2-startup-stuck-s3-backed-weights-read-5h: five hours reading weights from S3)."""
    banner = facts.t.of(Signal.VERSION)
    if not banner:
        return None
    draft = Draft(facts, Kind.UNKNOWN, 0.3, "unknown: the log ends during start-up — the engine was launched and "
                                            "no start-up step after it completed")
    draft.cite(banner[-1], Role.ROOT_CAUSE, "the engine started here")
    draft.cite(facts.t.last_progress or facts.events[-1], Role.CONTEXT, "the last line")
    draft.undecided = ("the lines after launch, or a stack capture of the engine now (engdiag snapshot): weight "
                       "loading or compiling means slow start-up; a rendezvous or collective wait means stuck")
    if facts.multi_rank:
        # several GPUs' first collectives come right after launch; a P2P hang stops there with no line
        # (tp4-openai-server-startup-stall-nccl-p2p, ray-tp2-model-load-stuck-after-engine-init-p2p)
        draft.step(P2P_DIAGNOSIS.text, P2P_DIAGNOSIS.command)
    return draft.done()


HUB_DOWNLOAD = "model download from the Hugging Face Hub"


def startup_stopped(facts: Facts) -> Verdict | None:
    """The log ends during start-up, with nothing fatal: not evidence of health, nor of a hang."""
    if facts.t.serving_started or facts.t.of(Signal.SERVER_READY):
        return None
    if (risky := _p2p_risk_before_any_work(facts)) is not None:
        return risky
    startup = [a for a in facts.model.activities if a.startup]
    if facts.shm_stalls(workers=True):
        return None
    if not startup:
        return _launched_only(facts)
    # the API server's handshake wait only says the engine is not up; the engine's own last step says where
    engine_side = [a for a in startup if a.name != "start-up handshake"]
    last = (engine_side or startup)[-1]
    step = facts.event_at(last.source, last.line)
    if step is not None and any(facts.exception_of(e) for e in facts.after(step) if e.signal is Signal.EXCEPTION):
        return None  # start-up raised after its last step: that exception, not "nothing fatal" (vLLM issue 8066)
    state = "still advancing" if last.advancing else ("finished" if last.finished else "running")
    nccl_only = last.name == "process-group / NCCL init" and NCCL_SETUP in last.detail
    # NCCL's INFO lines alone, with no sign of time passing after them, are set-up under way
    brief = nccl_only and (_silence_after(facts, last) or 0) < NCCL_SETUP_S
    if last.name in _RANKS_MEET and (facts.multi_rank or nccl_only or _pynccl_started(last)) \
            and not (last.advancing or last.finished or brief):
        draft = Draft(facts, Kind.DEADLOCKED, 0.45,
                      f"deadlocked at start-up: the log stops inside {last.name} ({last.detail}); "
                      f"ranks wait there for each other: {_RANKS_MEET[last.name]}")
        if "cached" in last.detail:
            draft.notes.append("some ranks loaded cached tuning configs: a rank that skips tuning skips the "
                               "cross-rank collectives the tuning ranks wait in (delete the cache to confirm)")
        draft.cite(facts.event_at(last.source, last.line), Role.ROOT_CAUSE, "the last start-up step: ranks meet here")
        draft.undecided = ("whether every rank reached this line (all ranks' logs), or a stack capture "
                           "(engdiag snapshot) showing ranks in init_process_group / ncclCommInitRank")
        draft.step(P2P_DIAGNOSIS.text, P2P_DIAGNOSIS.command)
        draft.step("make every rank reach the rendezvous address (multi-node: a routable IP)",
                   "export VLLM_HOST_IP=$(hostname -I | cut -d' ' -f1)")
        return draft.done()
    if _stops_connecting_p2p(facts, last):
        return _p2p_hang(facts, last,
                         "the log stops while NCCL connects channels to peer GPUs via P2P, where the first data "
                         "crosses the link; blocked GPU peer-to-peer traffic hangs every rank there",
                         "the last channel set up; nothing after it",
                         "the lines after this point (\"Connected all rings\", \"Init COMPLETE\" or weight loading "
                         "mean the link works), or a stack capture (engdiag snapshot) showing ranks in all_reduce")
    if _stops_at_first_collective(facts, last):
        # pynccl.py: ncclCommInitRank (NCCL prints "Init COMPLETE"), then "A small all_reduce for warmup" and a
        # stream sync; the worker's init_device does the same right after the process group comes up.  P2P
        # traffic that IOMMU / PCIe ACS redirects never arrives, and every rank waits there
        # (xinference-tp2-ada-iommu-p2p-hang-after-nccl-init: both ranks' Init COMPLETE, then nothing).
        return _p2p_hang(facts, last,
                         f"the log stops right after NCCL's communicator came up ({last.detail}); the next step is "
                         "the warm-up all-reduce every rank must join, where blocked GPU peer-to-peer traffic hangs",
                         "the communicator is up; nothing after it",
                         "the lines after this point (weight loading starting means the all-reduce passed), or a "
                         "stack capture (engdiag snapshot) showing ranks inside all_reduce / synchronize")
    if last.name.startswith(HUB_DOWNLOAD):
        # the network is the slow party: start-up goes on once the Hub answers, unless a limit fires first
        # (ci-hf-hub-504-outage-stall-until-harness-timeout: a Hub outage, the harness's timeout killed it)
        draft = Draft(facts, Kind.SLOW, 0.4,
                      f"slow start-up (likely): start-up waits on the Hugging Face Hub, whose requests fail and are "
                      f"retried ({last.detail}); nothing shows the engine stuck")
        draft.cite(facts.event_at(last.source, last.line), Role.ROOT_CAUSE, "the model's files are not there yet")
        draft.undecided = "the lines after the retries: the download finishing, or a start-up limit firing first"
        draft.step("download the model ahead of start-up (huggingface-cli download), then start without the network",
                   "export HF_HUB_OFFLINE=1")
        return draft.done()
    share = _utilization(facts)
    if last.name == "CUDA-graph capture" and not last.finished and share is not None and share >= HIGH_UTILIZATION:
        # CUDA graphs are captured after the KV cache took its share: at ≥ 0.95 of the GPU nothing is left
        # for the graphs' own pools (ray-multinode-v0-cudagraph-capture-oom-gpu-util-098-lost-first-char).
        draft = Draft(facts, Kind.FRAGMENTED, 0.45,
                      f"GPU memory exhausted at start-up (likely): the log stops in CUDA-graph capture with "
                      f"gpu_memory_utilization at {share:.2f} — the graphs need memory beyond what profiling left")
        draft.sub_kind = MemoryKind.EXHAUSTION
        draft.cite(facts.event_at(last.source, last.line), Role.ROOT_CAUSE, "capture started and never reported its end")
        draft.undecided = "the lines after capture started: a CUDA out-of-memory traceback confirms it"
        draft.step("leave the graphs room, or skip them", "--gpu-memory-utilization 0.9")
        return draft.done()
    draft = Draft(facts, Kind.UNKNOWN, 0.35,
                  f"unknown: the log ends during start-up — {last.name} {state} ({last.detail}) — with "
                  "nothing fatal and no sign the server became ready")
    draft.cite(facts.event_at(last.source, last.line), Role.ROOT_CAUSE, "the last start-up work in the log")
    draft.undecided = ("the lines after this point, or a stack capture of the EngineCore now (engdiag snapshot): "
                       "compiling, capturing or loading means slow start-up; a collective or queue wait means stuck")
    return draft.done()
