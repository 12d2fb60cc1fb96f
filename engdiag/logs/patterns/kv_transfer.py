"""KV cache held outside one engine's own pool: the buffer KV is staged in between prefill and decode instances
(disaggregated serving), how long the prefill side holds it for the decode side, and a pool several engines
share (kvcached).

Each wording was read in the source of the release that prints it; the comment names the file and line.
"""

from __future__ import annotations

from engdiag.logs.events import Failure, Signal, Timeout
from engdiag.logs.patterns.base import Rule, _c, _const, _failure, _i

NIXL_LEASE = "nixl-lease"
"""The guard of the KV blocks a prefill instance holds for its decode side (NixlConnector)."""
MOONCAKE_HOLD = "mooncake-hold"
"""The same guard in the MooncakeConnector (VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT)."""
LLMDD_HOLD = "llmdatadist-hold"
"""The same guard in vllm-ascend 0.9's LLMDataDistCMgrConnector (VLLM_LLMDD_ABORT_REQUEST_TIMEOUT, 120 s)."""
ASCEND_HOLD = "ascend-hold"
"""The same guard in vllm-ascend 0.11's Mooncake and LLMDataDist connectors, which read NIXL's variable
(VLLM_NIXL_ABORT_REQUEST_TIMEOUT) but have no lease to configure."""
MOONCAKE_LEASE = "mooncake-lease"
"""The MooncakeConnector's lease on those blocks, when leases are on (0.34: kv_lease_duration)."""

KV_HANDSHAKE = "handshake"
"""A KV connector's handshake with the other instance failed (``Failure.name`` of ``KV_LOAD_FAILED``)."""
KV_TRANSFER_FAILED = "transfer"
"""A KV read from the other instance failed after the handshake."""
KV_REQUESTS_FAILED = "requests failed"
"""The scheduler failed the requests whose KV did not load (kv_load_failure_policy=fail)."""
KV_RECOMPUTED = "requests recomputed"
"""The scheduler rescheduled them to compute their prompts here (kv_load_failure_policy=recompute)."""

LMCACHE_CPU = "LMCache CPU pool"
"""LMCache's local CPU backend, the host-memory tier of the KV cache (max_local_cpu_size, 5 GB by default)."""
OMNI_POOL = "vllm-omni transfer pool"
"""vllm-omni's connectors' buffer for payloads sent between stages (memory_pool_size, 1 GiB by default)."""

POOL_SHORT = _c(r"available_size\(\)=(?P<free>\d+(?:\.\d+)?) < need_size=(?P<need>\d+)")
"""kvcached's pool, short of blocks: how many were free (``9.0`` where a release logged the size as a float:
kvcached issue 191), how many the step needed."""

KV_TRANSFER: tuple[Rule, ...] = (
    # LMCache 0.3.x's NIXL connector (storage_backend/connector/nixl_connector_v3.py:567) allocates each KV chunk
    # of a save from its transfer buffer in a loop that sleeps 10 ms and retries without end, warning "Failed to
    # allocate memory object, retrying..." each time; the paged allocator's DEBUG line says why
    # (memory_management.py:992, "Failed to allocate memory for tensor(…) because no free blocks is available")
    # (lmcache-nixl-buffer-alloc-retry-forever: the request never finished).
    Rule(Signal.KV_BUFFER_FULL, "Failed to allocate memory object, retrying",
         _c(r"Failed to allocate memory object, retrying")),
    Rule(Signal.KV_BUFFER_FULL, "because no free blocks is available",
         _c(r"Failed to allocate memory for tensor\([^\n]*because no free blocks is available")),
    # kvcached's elastic KV pool, shared by the engines on one GPU: KVCacheManager._alloc warns "available_size()=%d
    # < need_size=%d" and returns None (kvcached/kv_cache_manager.py; its C++ block manager prints the same), which
    # vLLM's block pool then asserts on (kvcached-shared-pool-exhausted-assert: six engines on one MI300X).
    Rule(Signal.KV_POOL_EXHAUSTED, "< need_size=", POOL_SHORT),
    # LMCache's local CPU backend with nothing it may evict (every chunk in use or pinned) loops while the store
    # waits: "No eviction candidates found in local cpu backend. Local cpu memory is under pressure. Waiting for 0.1
    # seconds before retrying." (0.4.4 local_cpu_backend.py:569/:693, 0.5.6 :724/:860; no attempt limit)
    Rule(Signal.KV_BUFFER_FULL, "No eviction candidates found in local cpu", _c(r"No eviction candidates found in local cpu"),
         _const(Failure(name=LMCACHE_CPU))),
    # vllm-omni's stage-to-stage connectors (0.22–0.30 mooncake_transfer_engine_connector.py:462, the MORI one's :433):
    # "Pool exhausted, cannot put data size 220042915" / "Pool exhausted for N bytes" — the sending stage's transfer
    # pool (memory_pool_size, 1 GiB) has no room, the put fails and the payload is never sent, so the next stage's
    # wait for it runs out (vllm-omni issue 3743: fixed by a bigger memory_pool_size)
    Rule(Signal.KV_BUFFER_FULL, "Pool exhausted", _c(r"Pool exhausted(?:, cannot put data size| for) \d+"),
         _const(Failure(name=OMNI_POOL))),
    # vLLM's and vllm-ascend's MooncakeConnector on the prefill side, as a request finishes for remote decode:
    # "Delaying free of %d blocks for request %s" (mooncake_connector.py request_finished): the blocks stay
    # allocated until the decode side pulls them (ascend-pd-prefill-node-hang-preemption-disabled-kv-full).
    Rule(Signal.KV_HELD, "Delaying free of", _c(r"Delaying free of \d+ blocks for request")),
    # vLLM's NixlConnector on the prefill side: "Releasing expired KV blocks for request %s which were retrieved
    # by %d decode worker(s) within %d seconds." (nixl_connector.py, 0.10: VLLM_NIXL_ABORT_REQUEST_TIMEOUT) or
    # "… by %d remote worker(s) before lease expired." (nixl/base_worker.py, 0.3x: kv_lease_duration, 30 s);
    # then "Potentially invalid KV blocks for unrecognized request %s were retrieved by a decode worker. They may
    # have expired." when the decode side reads them after all (nixl-kv-lease-expired-decode-read-after-free).
    Rule(Signal.KV_LEASE_EXPIRED, "Releasing expired KV blocks",
         _c(r"Releasing expired KV blocks for request\s+\S+?\s+which were\s+retrieved by \d+ (?:decode|remote) "
            r"worker\(s\)\s+(?:within (?P<s>\d+) seconds|before lease expired)"),
         lambda m, t: [Timeout(call="the KV blocks held for the decode side", limit_s=_i(m["s"]), guard=NIXL_LEASE)]),
    # vLLM's and vllm-ascend's MooncakeConnector on the prefill side, when the decode side has not pulled a finished
    # request's blocks within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s default, vllm/envs.py): "Force freed expired
    # request: %s. Reason: Request exceeded timeout threshold (%s seconds). Action: Resources have been forcibly
    # released to prevent memory leak." (mooncake_connector.py; a later fork: "Reason: exceeded timeout (%s
    # seconds).") (mooncake-kv-lease-force-free-dirty-kv: set to 10 s, decode under load)
    Rule(Signal.KV_LEASE_EXPIRED, "Force freed expired request",
         _c(r"Force freed expired request: \S+? Reason: (?:Request )?exceeded timeout(?: threshold)? \((?P<s>\d+) seconds\)"),
         lambda m, t: [Timeout(call="the KV blocks held for the decode side", limit_s=_i(m["s"]), guard=MOONCAKE_HOLD)]),
    # upstream vLLM's MooncakeConnector for the same events (mooncake_connector.py, read in 0.14 and 0.34): "Request
    # %s timed out after %d seconds without being sent. Freeing its blocks on the producer side.", the decode side
    # told "Request %s expired before sending on P side.", with leases on (0.34) "KV lease of request %s expired
    # before the decoder pulled it. …", and the decode side reading late: "Requests %s were pulled after their KV
    # expired on P side."
    Rule(Signal.KV_LEASE_EXPIRED, "seconds without being sent",
         _c(r"timed out after (?P<s>\d+) seconds without being sent\. Freeing its blocks"),
         lambda m, t: [Timeout(call="the KV blocks held for the decode side", limit_s=_i(m["s"]), guard=MOONCAKE_HOLD)]),
    Rule(Signal.KV_LEASE_EXPIRED, "expired before sending on P side", _c(r"expired before sending on P side"),
         _const(Timeout(call="the KV blocks held for the decode side", guard=MOONCAKE_HOLD))),
    Rule(Signal.KV_LEASE_EXPIRED, "expired before the decoder pulled it",
         _c(r"KV lease of request \S+ expired before the decoder pulled it"),
         _const(Timeout(call="the KV blocks held for the decode side", guard=MOONCAKE_LEASE))),
    # vllm-ascend's connectors for the same hold: 0.11's MooncakeConnector "Force freed request: %s" (INFO, once
    # VLLM_NIXL_ABORT_REQUEST_TIMEOUT passed, mooncake_connector.py:124) and LLMDataDistCMgrConnector's "Some
    # requests in prefill node fail to receive KV Cache transfer done signal in 120s. …" (0.9.1, its own
    # VLLM_LLMDD_ABORT_REQUEST_TIMEOUT; 0.11 drops the seconds and names VLLM_NIXL_ABORT_REQUEST_TIMEOUT)
    Rule(Signal.KV_LEASE_EXPIRED, "Force freed request: ", _c(r"Force freed request: \S+"),
         _const(Timeout(call="the KV blocks held for the decode side", guard=ASCEND_HOLD))),
    Rule(Signal.KV_LEASE_EXPIRED, "fail to receive KV Cache transfer done signal",
         _c(r"fail to receive KV Cache transfer done signal(?: in (?P<s>\d+)s)?"),
         lambda m, t: [Timeout(call="the KV blocks held for the decode side", limit_s=_i(m["s"]),
                               guard=LLMDD_HOLD if m["s"] else ASCEND_HOLD)]),
    # A KV connector that could not load a request's KV from the other instance.  vLLM's NixlConnector from 0.14
    # logs every failure one way, with the exception's traceback after it ("NIXL transfer failure: %s | Context:
    # %s", nixl_connector.py:1191 in 0.14, nixl/base_worker.py:1454 in 0.34; the types: handshake_failed,
    # handshake_setup_failed, push_(reg_)handshake_failed, transfer_failed, transfer_exception,
    # transfer_setup_failed, notification_failed); 0.9–0.13 (and MoRIIO to 0.34) logger.exception "Handshake with
    # %s failed" and 0.11–0.13 "Handshake failed for request %s, marking blocks as invalid" (vLLM issue 27083:
    # an engine-ID mismatch, VLLM_NIXL_SIDE_CHANNEL_HOST unset; the decode node recomputed the prompts)
    Rule(Signal.KV_LOAD_FAILED, "NIXL transfer failure: ", _c(r"NIXL transfer failure: \w*handshake\w*"),
         _failure(KV_HANDSHAKE)),
    Rule(Signal.KV_LOAD_FAILED, "NIXL transfer failure: ", _c(r"NIXL transfer failure: \w+"),
         _failure(KV_TRANSFER_FAILED)),
    Rule(Signal.KV_LOAD_FAILED, "Handshake with ", _c(r"Handshake with \S+ failed"), _failure(KV_HANDSHAKE)),
    Rule(Signal.KV_LOAD_FAILED, "Handshake failed for request", _c(r"Handshake failed for request"),
         _failure(KV_HANDSHAKE)),
    # vllm-ascend's Mooncake connector on the decode side, when the transfer engine's batch read fails (ret < 0: a link
    # error, or ASCEND_TRANSFER_TIMEOUT, about 33 s): 0.11 "Mooncake transfer failed for request %s" and the caller's
    # "Failed to transfer KV cache for request %s: Mooncake transfer failed, ret: -1" (mooncake_connector.py:410/:329),
    # 0.22 "Mooncake transfer failed for request. remote_request_id=%s, ret=%d." (kv_p2p/mooncake_connector.py:816),
    # which marks the request's blocks invalid for vLLM's scheduler
    Rule(Signal.KV_LOAD_FAILED, "Mooncake transfer failed", _c(r"Mooncake transfer failed(?: for request|, ret: -?\d+)"),
         _failure(KV_TRANSFER_FAILED)),
    # the scheduler, once a step reports the requests whose KV did not load (v1/core/sched/scheduler.py: 0.12
    # recomputes them; from 0.14 kv_load_failure_policy decides, "recompute" by default in 0.14, "fail" in 0.34):
    # "Failing %d request(s) due to KV load failure (failure_policy=fail, %d tokens affected). Request IDs: %s" /
    # "Recovered from KV load failure: %d request(s) rescheduled (%d tokens affected)."
    Rule(Signal.KV_LOAD_FAILED, "due to KV load failure", _c(r"Failing \d+ request\(s\) due to KV load failure"),
         _const(Failure(name=KV_REQUESTS_FAILED))),
    Rule(Signal.KV_LOAD_FAILED, "Recovered from KV load failure", _c(r"Recovered from KV load failure: \d+ request"),
         _const(Failure(name=KV_RECOMPUTED))),
    Rule(Signal.KV_READ_LATE, "after their KV expired on P side", _c(r"were pulled after their KV expired on P side")),
    Rule(Signal.KV_READ_LATE, "Potentially invalid KV blocks",
         _c(r"Potentially invalid KV blocks for\s+unrecognized request")),
)
