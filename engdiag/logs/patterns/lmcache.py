"""LMCache's own guards and fallbacks, printed in the vLLM processes it serves: a store skipped because its
CPU pool is full, a remote read or a lookup that lost to LMCache's own limit, its multi-process server not
answering.  Each costs cache hits (the request recomputes) and, for a blocking read, the step's time; none
stops the engine — except the MP server missing at start-up, which is a wait that can never complete.

Each wording was read in LMCache 0.3.3, 0.4.4 and 0.5.6 (``pip download lmcache==X --no-deps``); the comment
names the file and line.
"""

from __future__ import annotations

from engdiag.logs.events import Failure, Rendezvous, Signal, Timeout
from engdiag.logs.patterns.base import Rule, _c, _const, _f

LMCACHE_POOL = "LMCache CPU pool"
"""LMCache's pinned host-memory pool (max_local_cpu_size, 5 GB by default): full, a store is skipped."""
LMCACHE_PINS = "LMCache pin monitor"
"""LMCache's safety net for chunks pinned too long (pin_timeout_sec, 300 s): it unpins them by force."""
LMCACHE_HEALTH = "LMCache health monitor"
"""LMCache's monitor of its own backends (remote ping and put checks): unhealthy, it skips every cache operation."""
LMCACHE_REMOTE = "lmcache-remote"
"""The blocking read from LMCache's remote store (remote_backend.py, blocking_timeout_secs, 10 s)."""
LMCACHE_MOONCAKE = "lmcache-mooncake"
"""A put to the Mooncake store through LMCache's connector (extra_config transfer_timeout, 1 s)."""
LMCACHE_LOOKUP = "lmcache-lookup"
"""The scheduler's async lookup of a request's cached prefix (lookup_timeout_ms, 3000 ms)."""
LMCACHE_MP = "lmcache-mp"
"""Requests from vLLM to LMCache's multi-process server (kv_connector_extra_config lmcache.mp.mq_timeout, 300 s)."""
LMCACHE_AUTOSTART = "lmcache-autostart"
"""vLLM's wait for the LMCache MP server it started itself (lmcache.mp.autostart.wait_timeout, 90 s)."""
LMCACHE_SERVER = "lmcache-server"
"""The LMCache MP server as a party vLLM's start-up waits on (``Rendezvous.what``)."""

LMCACHE: tuple[Rule, ...] = (
    # The store path allocates without waiting (force_store_wait off by default) and skips what does not fit:
    # "Local cpu memory under pressure so choosing to not store the KV cache." (0.4.4 cache_engine.py:671, 0.5.6
    # :717), "… choosing to store only  %d total chunks of KV cache." (:485 / :521); 0.3.3 "Failed to allocate
    # memory for the KV cache.\nThe KV cache will not be stored." (cache_engine.py:223/:331); the pool's own
    # "Failed to allocate memory block of size %d because no memory is available" (memory_management.py:1069 /
    # :1454, first fit; the caller gets None).  Serving goes on; later requests miss the cache (LMCache issues
    # 1756, 1285, 3187: 17k such lines in 4 h of a healthy server).
    Rule(Signal.LMCACHE_DEGRADED, "Local cpu memory under pressure so choosing",
         _c(r"Local cpu memory under pressure so choosing to (?:not store|store only)"),
         _const(Failure(name=LMCACHE_POOL))),
    Rule(Signal.LMCACHE_DEGRADED, "Failed to allocate memory for the KV cache",
         _c(r"Failed to allocate memory for the KV cache\."), _const(Failure(name=LMCACHE_POOL))),
    Rule(Signal.LMCACHE_DEGRADED, "because no memory is available",
         _c(r"Failed to allocate memory block of size \d+\s+because no memory is available"),
         _const(Failure(name=LMCACHE_POOL))),
    # The pin monitor: "Pin timeout detected for MemoryObj %s. Pin count: %s, Elapsed time: %.2fs. Forcing unpin
    # to 0." (0.4.4 pin_monitor.py:169, 0.5.6 :180) and "Force unpinned %d timeout objects …" (:141 / :152): a
    # leaked or abandoned pin freed after pin_timeout_sec (LMCache PR 2785) — the usual end of a full pool.
    Rule(Signal.LMCACHE_DEGRADED, "Pin timeout detected for MemoryObj",
         _c(r"Pin timeout detected for MemoryObj"), _const(Failure(name=LMCACHE_PINS))),
    Rule(Signal.LMCACHE_DEGRADED, "timeout objects in", _c(r"Force unpinned \d+ timeout objects in"),
         _const(Failure(name=LMCACHE_PINS))),
    # The health monitor finding a backend failing (0.4.4 health_monitor/base.py:300, 0.5.6 :282: "HealthMonitor:
    # System unhealthy, entering degraded mode"; its remote check's "Put timeout, check failed." / "Ping timeout",
    # remote_backend_check.py:300/:249), then the engine skipping LMCache: "LMCache is unhealthy, skipping store
    # operation" (and store_layer / retrieve / retrieve_layer / lookup; 0.4.4 cache_engine.py:392…, 0.5.6 :417…)
    Rule(Signal.LMCACHE_DEGRADED, "System unhealthy, entering degraded mode",
         _c(r"HealthMonitor: System unhealthy, entering degraded mode"), _const(Failure(name=LMCACHE_HEALTH))),
    Rule(Signal.LMCACHE_DEGRADED, "LMCache is unhealthy, skipping",
         _c(r"LMCache is unhealthy, skipping \w+ operation"), _const(Failure(name=LMCACHE_HEALTH))),
    # A read from the remote store (LMCache server, Redis/Valkey, Mooncake…) waits future.result(
    # blocking_timeout_secs), then cancels and treats the chunk as a miss: "get blocking timeout, trigger cancel
    # the future task" (0.3.3 remote_backend.py:228, 0.4.4 :370/:461, 0.5.6 :370/:462), "batched get blocking
    # timeout, …" (:428), "batched_async_contains timed out" (:536/:537), "batched_get_non_blocking timed out".
    Rule(Signal.LMCACHE_DEGRADED, "blocking timeout, trigger cancel",
         _c(r"get blocking timeout, trigger cancel the future task"),
         _const(Timeout(call="a read from LMCache's remote store", guard=LMCACHE_REMOTE))),
    Rule(Signal.LMCACHE_DEGRADED, "batched_async_contains timed out", _c(r"batched_async_contains timed out"),
         _const(Timeout(call="a lookup in LMCache's remote store", guard=LMCACHE_REMOTE))),
    Rule(Signal.LMCACHE_DEGRADED, "batched_get_non_blocking timed out", _c(r"batched_get_non_blocking timed out"),
         _const(Timeout(call="a read from LMCache's remote store", guard=LMCACHE_REMOTE))),
    # The Mooncake store through LMCache's connector, on the prefill side (0.4.4 mooncakestore_connector.py:527/:560,
    # 0.5.6 :743/:776/:811; 0.3.3 "Timeout when putting key … from mooncake store." :221): "Timeout during
    # batch_put_from; some decoders may redo prefill.", "Timeout when putting key %s using put_from. Decode instance
    # may redo prefill." — asyncio.wait_for(transfer_timeout, 1 s by default): the KV never reaches the store
    Rule(Signal.LMCACHE_DEGRADED, "Timeout during batch_put_from", _c(r"Timeout during batch_put_from"),
         _const(Timeout(call="a put to the Mooncake store", guard=LMCACHE_MOONCAKE))),
    Rule(Signal.LMCACHE_DEGRADED, "Timeout when putting key", _c(r"Timeout when putting key \S+ (?:using|from)"),
         _const(Timeout(call="a put to the Mooncake store", guard=LMCACHE_MOONCAKE))),
    # The scheduler polls a request's async lookup and gives up after lookup_timeout_ms: "Request %s is still
    # waiting for async lookup after %d seconds, returning 0 lmcache cached tokens so vllm can recompute"
    # (0.4.4 and 0.5.6 lmcache_async_lookup_client.py:179; the seconds are the limit, lookup_timeout_ms // 1000).
    Rule(Signal.LMCACHE_DEGRADED, "still waiting for async lookup",
         _c(r"still waiting for async lookup\s+after (?P<s>\d+) seconds"),
         lambda m, t: [Timeout(call="a request's LMCache lookup", limit_s=_f(m["s"]) or None,
                               guard=LMCACHE_LOOKUP)]),
    # The MP adapter's requests to LMCache's server: "LOOKUP to %s timed out after %ss. Marking server as
    # unhealthy." (0.5.6 vllm_multi_process_adapter.py:1307; 0.4.4 "LOOKUP request timed out after %ss. …" :380),
    # "QUERY_PREFETCH_STATUS to %s timed out. Marking unhealthy." (0.5.6 :1045; 0.4.4 "… timed out after %ss."
    # :426), then "LMCache server is unhealthy — entering degraded mode" (:614 / :177): vLLM serves without the
    # cache until a heartbeat finds the server again.
    Rule(Signal.LMCACHE_DEGRADED, "Marking server as unhealthy",
         _c(r"LOOKUP (?:to \S+|request) timed out after (?P<s>\d+(?:\.\d+)?)s\. Marking server as unhealthy"),
         lambda m, t: [Timeout(call="a LOOKUP to LMCache's MP server", limit_s=_f(m["s"]), guard=LMCACHE_MP)]),
    Rule(Signal.LMCACHE_DEGRADED, "QUERY_PREFETCH_STATUS",
         _c(r"QUERY_PREFETCH_STATUS (?:to \S+ )?timed out(?: after (?P<s>\d+(?:\.\d+)?)s)?"),
         lambda m, t: [Timeout(call="a prefetch query to LMCache's MP server", limit_s=_f(m["s"]),
                               guard=LMCACHE_MP)]),
    Rule(Signal.LMCACHE_DEGRADED, "LMCache server is unhealthy", _c(r"LMCache server is unhealthy"),
         _const(Timeout(call="LMCache's MP server", guard=LMCACHE_MP))),
    # Start-up against an MP server that never answers: "ConnectionError: LMCache server did not respond to
    # register_kv_caches within %ss. Is the server running?" (0.4.4 :734, 0.5.6 :1676) or "LMCache server did not
    # respond within %ss. …" (0.4.4 :273/:635): not running, or not reachable from this node (LMCache issue 3618).
    Rule(Signal.RENDEZVOUS_FAILED, "Is the server running?",
         _c(r"LMCache server did not respond (?:to register_kv_caches )?within (?P<s>\d+(?:\.\d+)?)s"),
         lambda m, t: [Rendezvous(limit_s=_f(m["s"]), what=LMCACHE_SERVER)]),
)
