"""LMCache's fallbacks inside the engine, and its MP server's start-up (docs/verdicts.md, "LMCache").

Domain facts encoded here (each wording read in LMCache 0.3.3, 0.4.4 and 0.5.6; tests/test_lmcache_wordings.py):

* LMCache's store path allocates from its CPU pool without waiting and skips what does not fit; its pin monitor
  unpins by force what was held past pin_timeout_sec.  Neither holds the engine: later requests recompute what
  was not stored (LMCache issues 1756 and 3187: thousands of such lines from servers that kept serving).
* Its remote-store reads block the worker's step up to blocking_timeout_secs (10 s), its scheduler-side lookups
  up to lookup_timeout_ms (3 s), its MP adapter's requests up to lmcache.mp.mq_timeout (300 s); each then gives
  up and the request recomputes.  The engine is alive and slower, held by a cache tier that does not answer.
* The MP server vLLM started for LMCache has lmcache.mp.autostart.wait_timeout (90 s) to answer its health check;
  a server that had exited says so in another message, so this one is a server still starting or hung.
"""

from __future__ import annotations

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.model import Guard
from engdiag.analysis.timeline import FATAL
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Failure, Signal, Timeout
from engdiag.logs.patterns.lmcache import (
    LMCACHE_HEALTH,
    LMCACHE_LOOKUP,
    LMCACHE_MOONCAKE,
    LMCACHE_MP,
    LMCACHE_PINS,
    LMCACHE_POOL,
    LMCACHE_REMOTE,
)
from engdiag.units import plural


def _guarded(events: list[Event], guard: str) -> list[Event]:
    return [e for e in events if isinstance(e.data, Timeout) and e.data.guard == guard]


def _printed_limit(events: list[Event]) -> float | None:
    return next((e.data.limit_s for e in events if isinstance(e.data, Timeout) and e.data.limit_s), None)


def _fallbacks(facts: Facts) -> list[Event]:
    return [] if facts.t.of(*FATAL) else facts.t.of(Signal.LMCACHE_DEGRADED)


def slow_tier(facts: Facts) -> Verdict | None:
    """LMCache gave up on a read, a lookup or its server after its own limit: the engine waited, then recomputed."""
    events = _fallbacks(facts)
    if remote := _guarded(events, LMCACHE_REMOTE):
        return _slow_tier(facts, remote, f"LMCache's remote store did not answer {plural(len(remote), 'read')} "
                          "within its blocking_timeout_secs (10 s by default); each held the worker's step that long, "
                          "then the chunk was recomputed",
                          "check the remote store LMCache reads (its server's log, its latency from this node): a store "
                          "that is down or saturated times out every read",
                          "until it answers, a lower blocking_timeout_secs in LMCache's config bounds what each read "
                          "costs a step")
    if puts := _guarded(events, LMCACHE_MOONCAKE):
        return _slow_tier(facts, puts, f"the Mooncake store did not take {plural(len(puts), 'put')} of KV through "
                          "LMCache within its transfer_timeout (1 s by default); the decode side recomputes those "
                          "prefills",
                          "check the Mooncake store and its transfer engine (its master's log, the network between the "
                          "instances): a store that is down or saturated times out every put",
                          "if the store is healthy but the KV is large, raise transfer_timeout in LMCache's Mooncake "
                          "extra_config")
    if lookups := _guarded(events, LMCACHE_LOOKUP):
        limit = _printed_limit(lookups)
        within = f"{limit:g} s" if limit else "its lookup_timeout_ms (3000 ms by default)"
        return _slow_tier(facts, lookups, f"{plural(len(lookups), 'lookup')} of cached prefixes in LMCache took longer "
                          f"than {within}; vLLM recomputed those prompts instead of loading them",
                          "check the tier the lookups read (local disk, remote store): a slow one makes every lookup "
                          "lose to the limit",
                          "if that tier is slow but working, raise lookup_timeout_ms in LMCache's config")
    if server := _guarded(events, LMCACHE_MP):
        limit = _printed_limit(server)
        within = f"within {limit:g} s (lmcache.mp.mq_timeout)" if limit else "within lmcache.mp.mq_timeout (300 s)"
        return _slow_tier(facts, server, f"LMCache's MP server did not answer {within}; vLLM marked it unhealthy and "
                          "serves without the cache until it answers again",
                          "read the LMCache MP server's own log at that time: busy (a slow tier, a full pool) or "
                          "silent (hung)")
    return None


def _slow_tier(facts: Facts, events: list[Event], what: str, *steps: str) -> Verdict:
    draft = Draft(facts, Kind.SLOW, 0.5, f"slow: {what}")
    draft.generic_steps = False  # the engine's own limits did not fire: LMCache's did
    draft.cite(events[0], Role.ROOT_CAUSE, "LMCache's own limit, inside the engine's process")
    if len(events) > 1:
        draft.cite(events[-1], Role.SUPPORTING, "still giving up")
    draft.cite(facts.t.last_progress, Role.CONTEXT, "the engine's last work")
    draft.undecided = "whether the cache tier is slow or down: its own log and its latency from this node"
    for step in steps:
        draft.step(step)
    return draft.done()


def offload_skipped(facts: Facts) -> Verdict | None:
    """LMCache went without a store (its CPU pool full, its backend failing its health checks) or unpinned leaked
    chunks: the engine served on.  Judged after every stall rule: a skipped store is background to an engine that
    waited on its workers."""
    named = {name: [e for e in _fallbacks(facts) if isinstance(e.data, Failure) and e.data.name == name]
             for name in (LMCACHE_HEALTH, LMCACHE_POOL, LMCACHE_PINS)}
    sick, full, pins = named[LMCACHE_HEALTH], named[LMCACHE_POOL], named[LMCACHE_PINS]
    if sick:
        draft = Draft(facts, Kind.HEALTHY, 0.5,
                      "healthy (offload degraded): LMCache's health monitor found its backend failing and LMCache "
                      f"went without it ({plural(len(sick), 'line')}); the engine served on, recomputing what the "
                      "cache would have held")
        draft.cite(sick[0], Role.ROOT_CAUSE, "LMCache's backend failing its health checks, not the engine")
        draft.undecided = "which backend: the monitor's own lines before it (Ping timeout, Put timeout) and its log"
        draft.step("check the backend LMCache's health checks reach (the remote store or its server): up, and "
                   "answering within their ping timeout from this node")
    elif full or pins:
        if full:
            draft = Draft(facts, Kind.HEALTHY, 0.55,
                          f"healthy (offload degraded): LMCache's CPU pool was full {plural(len(full), 'time')}, so it "
                          "skipped storing KV there; the engine served on and later requests recompute what was not "
                          "stored")
            draft.cite(full[0], Role.ROOT_CAUSE, "LMCache's host pool full: the store was skipped, nothing waited")
            draft.cite(pins[0] if pins else None, Role.SUPPORTING, "chunks held past pin_timeout_sec: a pin leak fills it")
        else:
            draft = Draft(facts, Kind.HEALTHY, 0.55,
                          f"healthy: LMCache's pin monitor freed chunks pinned past pin_timeout_sec "
                          f"({plural(len(pins), 'time')}) — a leak or an abandoned read, cleaned up")
            draft.cite(pins[0], Role.ROOT_CAUSE, "LMCache's safety net for pins, not an engine fault")
        draft.step("give LMCache's CPU pool more host memory (max_local_cpu_size in its config, GB, 5 by default) if "
                   "cache hits matter at this load")
        draft.step("a pool that stays full at low load is a pin leak: upgrade LMCache if its release notes name one")
    else:
        return None
    draft.generic_steps = False
    draft.cite(facts.t.last_progress, Role.CONTEXT, "the engine's last work")
    return draft.done()


def server_start(facts: Facts, event: Event, guard: Guard) -> Verdict:
    """The MP server vLLM started for LMCache did not answer its health check in time."""
    limit = f"{guard.limit_s:g} s" if guard.limit_s else "its limit"
    draft = Draft(facts, Kind.SLOW, 0.4,
                  f"slow start-up (likely): vLLM's wait for the LMCache MP server it started ran out after {limit} "
                  "(lmcache.mp.autostart.wait_timeout): the server was still running but had not answered its health "
                  "check")
    draft.generic_steps = False
    draft.cite(event, Role.ROOT_CAUSE, "LMCache's start-up limit, not vLLM's or a platform's")
    draft.undecided = ("the MP server's own output: still allocating its pinned pool = slow; silent = hung (an exited "
                       "server says 'exited before becoming healthy' instead)")
    draft.step("give the MP server longer to start, in --kv-transfer-config's kv_connector_extra_config: "
               "\"lmcache.mp.autostart.wait_timeout\": 600, or start it yourself before vLLM")
    return draft.cite_consequences(event).done()
