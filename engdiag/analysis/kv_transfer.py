"""KV cache held outside one engine's own pool: what a prefill instance hands its decode side (docs/verdicts.md,
"KV handed between prefill and decode"), and a pool several engines share.

Domain facts encoded here:

* LMCache stages each KV chunk of a save in a fixed buffer and, when no block is free, sleeps and retries
  without end: the request waits on a buffer that only drains as the other side reads it
  (lmcache-nixl-buffer-alloc-retry-forever; LMCache issues 1030, 1339 and 1990 describe the same loop).
* The prefill side holds a request's KV blocks for its decode side only so long (vLLM's NixlConnector: a 30 s
  lease, before that VLLM_NIXL_ABORT_REQUEST_TIMEOUT), then frees them.  A decode worker that reads them after
  that was alive, only later than the lease: the guard was shorter than the decode side's queueing
  (nixl-kv-lease-expired-decode-read-after-free: a 550B model's decode read 21 s after the 30 s lease).
  A hold set far below its default (VLLM_NIXL_ABORT_REQUEST_TIMEOUT / VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT, 480 s)
  expires under load before a working decode side pulls (mooncake-kv-lease-force-free-dirty-kv: 10 s, P and D
  loaded; the decode side read the freed blocks and returned garbled text).
* An idle engine's KV cache is all free: V1 counts a cached block with no request on it as free, so usage
  falls to ~0 once nothing runs or waits.  A prefill instance whose connector delays the free of finished
  requests' blocks until the decode side pulls them, showing most of its KV cache in use with nothing running
  or waiting, holds KV for a decode side that is not taking it; new prompts find no room
  (ascend-pd-prefill-node-hang-preemption-disabled-kv-full: 84.6 % held, the prefill node hung).
* kvcached maps one elastic KV pool for all the engines on a GPU: an engine whose step needs more blocks than
  the pool has left gets none, and vLLM's block pool asserts on that (kvcached-shared-pool-exhausted-assert:
  six engines on one MI300X under load; kvcached issue 262).  The engines together outgrew the pool: memory
  pressure, whatever the assert says.
"""

from __future__ import annotations

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.verdict import Kind, MemoryKind, Role, Verdict
from engdiag.logs.events import Event, Failure, Signal, Timeout
from engdiag.logs.patterns.kv_transfer import (
    ASCEND_HOLD,
    LLMDD_HOLD,
    LMCACHE_CPU,
    MOONCAKE_HOLD,
    MOONCAKE_LEASE,
    OMNI_POOL,
    POOL_SHORT,
)

_DEATH = (Signal.ENGINE_FATAL, Signal.ENGINE_DEAD, Signal.EXCEPTION)
"""What shows the engine did not survive the failed allocation."""

_RETRIES_THAT_SETTLE_IT = 3
"""Retries of one save that show the loop, not one unlucky allocation."""


def buffer_full(facts: Facts) -> Verdict | None:
    """LMCache's transfer buffer had no free block and the save kept retrying."""
    full = facts.t.of(Signal.KV_BUFFER_FULL)
    if not full:
        return None
    if any(isinstance(e.data, Failure) and e.data.name == OMNI_POOL for e in full):
        return _omni_pool_full(facts, full)
    if all(isinstance(e.data, Failure) and e.data.name == LMCACHE_CPU for e in full):
        return _lmcache_cpu_full(facts, full)
    retries = facts.t.counts.get(Signal.KV_BUFFER_FULL, len(full))
    if retries == len(full):  # every line kept: the allocator's DEBUG reason for a retry is not one more retry
        retries = sum(1 for e in full if "retrying" in e.text) or retries
    draft = Draft(facts, Kind.FRAGMENTED, 0.7 if retries >= _RETRIES_THAT_SETTLE_IT else 0.5,
                  f"KV transfer buffer full: LMCache found no free block for a KV chunk and retried "
                  f"{retries} time{'s' if retries != 1 else ''}, without end — the request waits on the buffer")
    draft.sub_kind = MemoryKind.KV_PRESSURE
    draft.generic_steps = False  # the engine's own KV-cache knobs do not size LMCache's buffer
    draft.cite(full[0], Role.ROOT_CAUSE, "the buffer's allocator: no free block")
    if len(full) > 1:
        draft.cite(full[-1], Role.SUPPORTING, "still retrying")
    if any("pd_backend" in e.text for e in full):  # LMCache 0.4+: the PD backend's buffer, nixl_buffer_size renamed
        draft.step("give LMCache's PD transfer buffer more room (bytes; pd_buffer_size in its config file)",
                   "export LMCACHE_PD_BUFFER_SIZE=$((8 << 30))")
    else:
        draft.step("give LMCache's NIXL transfer buffer more room (bytes; nixl_buffer_size in its config file)",
                   "export LMCACHE_NIXL_BUFFER_SIZE=$((8 << 30))")
    draft.step("blocks are freed as the other side reads them: check that the decode instance is up and pulling "
               "(its log at the same time)")
    return draft.cite_consequences(full[0]).done()


def _lmcache_cpu_full(facts: Facts, full: list[Event]) -> Verdict | None:
    """LMCache's CPU pool had nothing to evict and its store kept waiting: stuck there unless the engine served on."""
    if any(s.generation_tps > 0 and facts.at(e) > facts.at(full[-1]) for e, s in facts.stats):
        return None  # tokens after the waits: pressure on the offload tier, the engine went on
    retries = facts.t.counts.get(Signal.KV_BUFFER_FULL, len(full))
    draft = Draft(facts, Kind.FRAGMENTED, 0.6 if retries >= _RETRIES_THAT_SETTLE_IT else 0.4,
                  f"KV offload pool full: LMCache's CPU pool had no chunk it could evict and its store waited "
                  f"{retries} time{'s' if retries != 1 else ''}, without end — the worker waits inside LMCache")
    draft.sub_kind = MemoryKind.KV_PRESSURE
    draft.generic_steps = False  # the engine's own KV-cache knobs do not size LMCache's host pool
    draft.cite(full[0], Role.ROOT_CAUSE, "LMCache's CPU pool: every chunk in use, none to evict")
    if len(full) > 1:
        draft.cite(full[-1], Role.SUPPORTING, "still waiting")
    draft.undecided = "whether chunks stay pinned for good (a leak) or only while requests run (a pool too small)"
    draft.step("give LMCache's CPU pool more host memory (max_local_cpu_size in its config, GB, 5 by default), or "
               "offload less")
    draft.step("chunks pinned for good are a leak: an LMCache whose pin monitor frees them (pin_timeout_sec) ends it")
    return draft.cite_consequences(full[0]).done()


def _omni_pool_full(facts: Facts, full: list[Event]) -> Verdict:
    """vllm-omni's transfer pool had no room for a stage's payload: the next stage's wait for it is the echo."""
    draft = Draft(facts, Kind.FRAGMENTED, 0.65,
                  "transfer buffer full: a vllm-omni stage's transfer pool had no room for a payload, so it was never "
                  "sent — the next stage's wait for it runs out as a consequence")
    draft.sub_kind = MemoryKind.KV_PRESSURE
    draft.generic_steps = False  # the engine's KV-cache knobs do not size the connector's pool
    draft.cite(full[0], Role.ROOT_CAUSE, "the sending stage's pool: no room for the payload")
    draft.step("give the stages' connector a bigger transfer pool (memory_pool_size in its connector config, 1 GiB "
               "by default) above the largest payload a request sends")
    draft.step("check that the receiving stage collects its payloads (the sender's 'TTL expired … stale buffer' "
               "lines mean it does not)")
    return draft.cite_consequences(full[0]).done()


def pool_exhausted(facts: Facts) -> Verdict | None:
    """A KV pool shared by several engines (kvcached) had fewer free blocks than a step needed."""
    short = facts.t.of(Signal.KV_POOL_EXHAUSTED)
    if not short:
        return None
    found = POOL_SHORT.search(short[0].text)
    figures = f" ({found['free']} free where {found['need']} were needed)" if found else ""
    died = any(e.signal in _DEATH for e in facts.after(short[0]))
    draft = Draft(facts, Kind.FRAGMENTED, 0.7 if died else 0.5,
                  f"KV cache exhausted: the KV pool the engines share (kvcached) ran out of blocks for a step"
                  f"{figures}" + (", and the engine died on the failed allocation" if died else ""))
    draft.sub_kind = MemoryKind.KV_PRESSURE
    draft.generic_steps = False  # the pool is sized by kvcached across engines, not by one engine's flags
    draft.cite(short[0], Role.ROOT_CAUSE, "the shared pool: fewer free blocks than asked for")
    draft.step("give the shared pool more of the GPU, or put fewer engines (or shorter contexts) on it")
    draft.step("use a kvcached whose allocator hands an exhausted pool back to the scheduler (kvcached issue 262) "
               "instead of vLLM asserting on it")
    return draft.cite_consequences(short[0]).done()


_HELD_PCT = 50.0
"""KV usage on an idle engine that no cached prefix explains: most of the cache held by something."""


def held_for_decode(facts: Facts) -> Verdict | None:
    """A prefill instance keeps most of its KV cache for a decode side that does not read it."""
    held = facts.t.of(Signal.KV_HELD)
    idle = [(e, s) for e, s in facts.stats
            if s.running == 0 and s.waiting == 0 and (s.gpu_kv_pct or 0) >= _HELD_PCT]
    if not held or not idle:
        return None
    event, stats = idle[-1]
    draft = Draft(facts, Kind.FRAGMENTED, 0.6 if len(idle) > 1 else 0.45,
                  f"KV cache held for the decode side: {stats.gpu_kv_pct:.1f}% of the prefill engine's KV cache in use "
                  "with nothing running or waiting — blocks the KV connector keeps until the decode side reads them; "
                  "new prompts find no room")
    draft.sub_kind = MemoryKind.KV_PRESSURE
    draft.generic_steps = False  # a bigger KV cache fills the same way while the decode side does not read
    draft.cite(event, Role.ROOT_CAUSE, "an idle engine's KV cache is free: this much is held")
    draft.cite(held[-1], Role.SUPPORTING, "the connector delays the free until the decode side pulls")
    draft.undecided = "the decode instance's log at the same time: transfers failing, or no pulls at all"
    draft.step("check that the decode instance is up and pulling KV from this prefill instance (its log: the "
               "KV transfer lines for these requests)")
    draft.step("bound how long the connector holds finished requests' blocks (its abort / lease timeout), so a "
               "decode side that never reads cannot fill the prefill instance")
    return draft.done()


_HOLD_DEFAULT_S = 480
"""VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT's default (vllm/envs.py, 0.11–0.34), and VLLM_NIXL_ABORT_REQUEST_TIMEOUT's
from 0.14 (120 s in 0.11)."""


_HOLD_KNOBS = {
    MOONCAKE_HOLD: ("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", f"{_HOLD_DEFAULT_S} s"),
    LLMDD_HOLD: ("VLLM_LLMDD_ABORT_REQUEST_TIMEOUT", "120 s"),
    ASCEND_HOLD: ("VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "120 s in vLLM 0.11, 480 s from 0.14"),
}
"""The environment variable behind each connector's hold, and its default; NIXL's (and vllm-ascend 0.11's, which
reuse it) otherwise."""


def _hold_step(draft: Draft, expired: Event, limit: float) -> None:
    """The environment variable behind a hold that names its seconds, raised to cover the decode side's queueing."""
    guard = expired.data.guard if isinstance(expired.data, Timeout) else None
    knob, default = _HOLD_KNOBS.get(guard or "", ("VLLM_NIXL_ABORT_REQUEST_TIMEOUT",
                                                  f"{_HOLD_DEFAULT_S} s from 0.14, 120 s in 0.11"))
    # no number to export: the decode side's worst queueing, which sets it, is in its own log, not this one
    draft.step(f"hold the KV blocks longer than the decode side's queueing: on the prefill instance, raise {knob} "
               f"above its {limit:g} s (the default: {default}) to the decode side's worst queueing time")


def _lease_step(draft: Draft, expired: Event) -> None:
    """The setting behind a hold that does not name its seconds: the connector's lease, or its environment variable."""
    guard = expired.data.guard if isinstance(expired.data, Timeout) else None
    if guard in _HOLD_KNOBS:
        knob, default = _HOLD_KNOBS[guard]
        draft.step("hold the KV blocks longer than the decode side's queueing: on the prefill instance, raise "
                   f"{knob} (by default {default}) to its worst queueing time")
        return
    # the prefill side's role: MooncakeConnector's producer (0.34 mooncake_connector.py), NIXL's both
    connector, role = ("MooncakeConnector", "kv_producer") if guard == MOONCAKE_LEASE else ("NixlConnector", "kv_both")
    draft.step("hold the KV blocks longer than the decode side's queueing (on the prefill instance)",
               f"--kv-transfer-config '{{\"kv_connector\": \"{connector}\", \"kv_role\": \"{role}\", "
               "\"kv_connector_extra_config\": {\"kv_lease_duration\": 300}}'")


def read_after_lease(facts: Facts) -> Verdict | None:
    """The decode side read KV blocks after the prefill side's lease on them had expired: late, not dead."""
    expired = facts.t.of(Signal.KV_LEASE_EXPIRED)
    late = [e for e in facts.t.of(Signal.KV_READ_LATE) if expired and facts.at(e) >= facts.at(expired[0])]
    if not late:
        return None
    data = expired[0].data
    limit = data.limit_s if isinstance(data, Timeout) else None
    lease = f"{limit:g} s hold" if limit is not None else "lease"
    draft = Draft(facts, Kind.SLOW, 0.7,
                  f"slow (for its guard): the decode side read KV blocks after the prefill side's {lease} on them "
                  "had expired — alive, but later than the lease")
    draft.generic_steps = False  # the step guard's knobs and a stack capture say nothing of the lease
    draft.cite(expired[0], Role.ROOT_CAUSE, "the prefill side freed blocks nobody had read yet")
    draft.cite(late[0], Role.SUPPORTING, "the decode side read them after all: it was working, only late")
    if limit is not None:  # a wording that names the seconds names the environment variable's value
        _hold_step(draft, expired[0], limit)
    else:
        _lease_step(draft, expired[0])
    draft.step("blocks read after they were freed may hold another request's KV: compare those requests' outputs")
    return draft.cite_consequences(expired[0]).done()


def hold_set_short(facts: Facts) -> Verdict | None:
    """The prefill side's hold expired, and it was set far below its default: a guard too tight for the load.

    Freeing the blocks is the guard firing, not the decode side failing: at a quarter of the default or less, a
    decode side that queues requests under load pulls later than the hold (mooncake-kv-lease-force-free-dirty-kv).
    Mooncake's hold only: NIXL's default was 120 s in 0.11 and 480 s from 0.14, so its printed seconds alone do
    not say whether someone shortened it.
    """
    short = [e for e in facts.t.of(Signal.KV_LEASE_EXPIRED) if isinstance(e.data, Timeout) and e.data.guard == MOONCAKE_HOLD
             and e.data.limit_s is not None and e.data.limit_s * 4 <= _HOLD_DEFAULT_S]
    if not short:
        return None
    expired = short[0]
    limit = expired.data.limit_s if isinstance(expired.data, Timeout) else None
    assert limit is not None
    draft = Draft(facts, Kind.SLOW, 0.45,
                  f"slow (for its guard): the prefill side freed KV blocks its decode side had not pulled within "
                  f"{limit:g} s — a hold set far below its {_HOLD_DEFAULT_S} s default, which a decode side queueing "
                  "under load outlasts")
    draft.generic_steps = False
    draft.cite(expired, Role.ROOT_CAUSE, "the hold fired: blocks freed before the decode side read them")
    for event in short[1:3]:
        draft.cite(event, Role.SUPPORTING)
    draft.undecided = "the decode instance's log: the same requests queued, then pulled late (alive) or never (down)"
    _hold_step(draft, expired, limit)
    draft.step("blocks read after they were freed may hold another request's KV: compare those requests' outputs")
    return draft.cite_consequences(expired).done()


def hold_expired(facts: Facts) -> Verdict | None:
    """The prefill side's hold fired and nothing says whether the decode side was late or gone.

    A decode instance queueing under load reads the blocks after the hold (slow), and one that died or lost
    its link never does (stuck): the prefill side's line is the same.  The guard fired, so it is no healthy log.
    """
    expired = facts.t.of(Signal.KV_LEASE_EXPIRED)
    if not expired:
        return None
    data = expired[0].data
    limit = f" within {data.limit_s:g} s" if isinstance(data, Timeout) and data.limit_s is not None else ""
    draft = Draft(facts, Kind.UNKNOWN, 0.3,
                  f"unknown: the prefill side freed KV blocks its decode side had not pulled{limit} — a decode side "
                  "queued under load (slow) and one that is gone (stuck) leave the same line here")
    draft.generic_steps = False
    draft.cite(expired[0], Role.ROOT_CAUSE, "the hold fired: blocks freed before the decode side read them")
    draft.undecided = "the decode instance's log at that time: the same requests pulled late (alive) or never (down)"
    draft.step("read the decode instance's log for those request ids: queued and pulled late, or nothing at all")
    if isinstance(data, Timeout) and data.limit_s is not None:
        _hold_step(draft, expired[0], data.limit_s)
    else:
        _lease_step(draft, expired[0])
    return draft.cite_consequences(expired[0]).done()
