"""What an event says: the vocabulary every rule family, the timeline and the classifier share.

Kept apart from the payloads in ``engdiag.logs.events`` (which re-exports it) so that the list of signals,
which grows with each family of evidence, stays readable on its own.
"""

from __future__ import annotations

from enum import Enum


class Signal(str, Enum):
    """What an event says.  Grouped by the question it answers."""

    # progress
    STATS = "stats"
    PREFIX_CACHE = "prefix_cache"
    ITERATION = "iteration"
    REQUEST_RECEIVED = "request_received"
    REQUEST_ADDED = "request_added"
    REQUEST_FINISHED = "request_finished"
    REQUEST_ABORTED = "request_aborted"
    REQUEST_FAILED = "request_failed"
    RESPONSE_GENERATED = "response_generated"
    PROGRESS_BAR = "progress_bar"
    HTTP_ERROR = "http_error"
    # prompt sizes
    PROMPT_LENGTH = "prompt_length"
    SCHEDULED_TOKENS = "scheduled_tokens"
    # start-up
    VERSION = "version"
    PARALLEL_CONFIG = "parallel_config"
    STARTUP_PHASE = "startup_phase"
    SERVER_READY = "server_ready"
    COMPILE = "compile"
    # memory
    MEMORY = "memory"
    CUDA_OOM = "cuda_oom"
    KV_CACHE_INSUFFICIENT = "kv_cache_insufficient"
    PREEMPTION = "preemption"
    # stalls, timeouts and fatals
    SHM_STALL = "shm_stall"
    ITERATION_TIMEOUT = "iteration_timeout"
    HEARTBEAT_LOST = "heartbeat_lost"
    RPC_TIMEOUT = "rpc_timeout"
    ENGINE_READY_TIMEOUT = "engine_ready_timeout"
    ENGINE_FATAL = "engine_fatal"
    ENGINE_DEAD = "engine_dead"
    WORKER_EXCEPTION = "worker_exception"
    WORKER_DIED = "worker_died"
    PROCESS_EXCEPTION = "process_exception"
    NCCL_WATCHDOG_TIMEOUT = "nccl_watchdog_timeout"
    NCCL_WORK_STATUS = "nccl_work_status"
    NCCL_ABORT = "nccl_abort"
    NCCL_INIT = "nccl_init"
    CUDA_ERROR = "cuda_error"
    FATAL_SIGNAL = "fatal_signal"
    STACK_DUMP = "stack_dump"
    SHUTDOWN = "shutdown"
    # waits and the parties they wait on
    WAITING = "waiting"
    """A process says it is waiting on another (the V0 API server on MQLLMEngine)."""
    COLLECTIVE_MISMATCH = "collective_mismatch"
    """Ranks entered different collectives (sizes or ops disagree): they can never meet."""
    PEER_LOST = "peer_lost"
    """A transport to a peer rank failed (NCCL IB/socket error, gloo connection closed)."""
    RENDEZVOUS_FAILED = "rendezvous_failed"
    """A rendezvous that cannot complete: members missing, store unreachable, placement unschedulable."""
    COMM_TIMEOUT = "comm_timeout"
    """A communication kernel gave up waiting for its peers (DeepEP dispatch/combine)."""
    BUSY_RETRY = "busy_retry"
    """A bounded wait that timed out and was retried: the process is working, slowly."""
    RECOVERY_TIMEOUT = "recovery_timeout"
    """vLLM's fault tolerance gave up waiting for recovery ([FT] No recovery within N s)."""
    EXTERNAL_GUARD = "external_guard"
    """A guard outside vLLM fired: a Kubernetes probe, a Ray Serve health check."""
    STACK_IN_COLLECTIVE = "stack_in_collective"
    """A captured stack (faulthandler, py-spy, vLLM's call tracer) that sits inside a collective."""
    TRACE_CALL = "trace_call"
    """A line of vLLM's call tracer (VLLM_TRACE_FUNCTION=1): a call entered or returned.  The last one of a trace
    says where its thread was when the trace stopped."""
    EXCEPTION = "exception"
    """A Python exception line (``AssertionError: ...``): a traceback's end, whoever printed it."""
    STACK_IN_COMPILE = "stack_in_compile"
    """A captured stack inside kernel or graph compilation (Triton, Inductor, FlashInfer/DeepGEMM JIT)."""
    STACK_IN_LAUNCH = "stack_in_launch"
    """A captured stack blocked on the device (launching a kernel, waiting for an event or a stream): the device is
    not finishing earlier work."""
    OPERATOR_STOP = "operator_stop"
    """Someone asked the server to stop (SIGTERM, a drain)."""
    HOST_OOM = "host_oom"
    """The kernel's OOM killer (dmesg): an allocation found the host's memory, or a container's memory cgroup, full;
    it kills a process to free memory, which dies without a word of its own."""
    DRIVER_NO_MEMORY = "driver_no_memory"
    """The NVIDIA kernel driver could not get memory for an allocation (NVRM ``NV_ERR_NO_MEMORY``, or its allocator
    in the OOM killer's call trace): on a machine whose GPU shares host memory, the GPU's memory ran out."""
    SHM_TOO_SMALL = "shm_too_small"
    """A shared-memory segment that /dev/shm has no room for (NCCL's, vLLM's broadcast buffer): a container's."""
    KV_BUFFER_FULL = "kv_buffer_full"
    """A KV-cache transfer buffer with no free block (LMCache's NIXL buffer): the save retries without end."""
    KV_POOL_EXHAUSTED = "kv_pool_exhausted"
    """A KV-cache pool shared by several engines (kvcached) had fewer free blocks than a step asked for."""
    KV_HELD = "kv_held"
    """A prefill instance's KV connector keeps a finished request's blocks until its decode side reads them."""
    KV_LEASE_EXPIRED = "kv_lease_expired"
    """The prefill side released KV blocks the decode side had not read before their lease expired."""
    KV_READ_LATE = "kv_read_late"
    """The decode side read KV blocks the prefill side no longer held: it came after their lease."""
    KV_LOAD_FAILED = "kv_load_failed"
    """A KV connector could not load requests' KV from the other instance (a failed handshake or transfer); the
    engine recomputes those requests or fails them (kv_load_failure_policy) and serves on."""
    LMCACHE_DEGRADED = "lmcache_degraded"
    """LMCache fell back inside the engine: a store skipped (its CPU pool full), a remote read or lookup past its
    own limit, its MP server not answering; the request recomputes, the engine serves on."""
