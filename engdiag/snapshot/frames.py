"""Frame rules as data: which functions mean a thread is in a collective, a CUDA sync, the allocator...

Each rule names the real vLLM / PyTorch functions behind it (read in the
released vLLM wheels and pytorch/pytorch; docs/snapshot.md lists which rule
covers which vLLM version).  A stack is read in two passes: first the specific
rules (vLLM, PyTorch, the standard library's known idle waits) from the
innermost frame outwards, then the generic ones (a sleep, a poll, a socket, a
``with lock:`` line) the same way.  So the most specific frame on the stack
wins: a collective called from a model layer is a collective, and a
shared-memory reader sleeping in ``zmq Poller.poll`` (0.34) or ``time.sleep(0)``
(older Pythons) is a shared-memory wait, not an idle poll.  Generic libc waits
(futex, condition variables) in native frames are skipped on purpose: the
Python frame around them says more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engdiag.roles import Role
from engdiag.snapshot.model import Category, Frame


@dataclass(frozen=True)
class Rule:
    """A frame matches when every given part matches."""

    category: Category
    why: str
    file: str | None = None
    """Substring of the frame's file path."""
    func: re.Pattern[str] | None = None
    code: re.Pattern[str] | None = None
    """Pattern on the frame's source line (read where the file is readable)."""
    native: bool = False
    """Only native frames (``--native``)."""
    generic: bool = False
    """A generic wait (sleep, poll, socket, lock line): only decides when no specific rule matches."""

    def matches(self, frame: Frame) -> bool:
        if self.native != frame.native:
            return False
        if self.file is not None and self.file not in frame.filename:
            return False
        if self.func is not None and not self.func.search(frame.name):
            return False
        return self.code is None or (frame.code is not None and bool(self.code.search(frame.code)))


def _f(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_TORCH_COLLECTIVES = (
    r"^(\w+\.)?(all_reduce|all_gather|all_gather_into_tensor|_all_gather_base|reduce_scatter|reduce_scatter_tensor|"
    r"broadcast|barrier|monitored_barrier|send|recv|isend|irecv|broadcast_object_list|all_gather_object|"
    r"gather|scatter|all_to_all|all_to_all_single|batch_isend_irecv|wait_tensor)$"
)
_VLLM_GROUP_OPS = (
    r"^(\w+\.)?_?(all_reduce|all_gather|reduce_scatter|gather|broadcast|broadcast_tensor_dict|broadcast_object|"
    r"broadcast_object_list|send|recv|send_tensor_dict|recv_tensor_dict|send_object|recv_object|barrier|"
    r"all_to_all|dispatch|combine|cpu_all_reduce)\w*$"
)
JOIN_WHY = "waiting for a thread to finish (join)"
LOCK_WHY = "a lock acquire"
_RUNNER_FILES = ("vllm/v1/worker/", "vllm/v1/sample/", "vllm/worker/", "vllm/model_executor/layers/sampler")

RULES: tuple[Rule, ...] = (
    # the allocator: PyTorch's caching allocator and vLLM's CuMem allocator (sleep mode)
    Rule(Category.ALLOCATOR, "CUDA caching allocator", native=True,
         func=_f(r"CUDACachingAllocator|DeviceCachingAllocator|NativeCachingAllocator|release_cached_blocks|"
                 r"garbage_collect|cudaMalloc|cuMemAlloc|cuMemCreate|cuMemMap|cudaFree|cuMemFree")),
    Rule(Category.ALLOCATOR, "torch.cuda memory call", file="torch/cuda/memory.py",
         func=_f(r"^(empty_cache|memory_stats|mem_get_info|caching_allocator_alloc|reset_peak_memory_stats)$")),
    Rule(Category.ALLOCATOR, "vLLM CuMem allocator", file="vllm/device_allocator/cumem.py"),
    # waiting for the GPU
    Rule(Category.CUDA_SYNC, "CUDA synchronisation", native=True,
         func=_f(r"cudaStreamSynchronize|cuStreamSynchronize|cudaDeviceSynchronize|cuCtxSynchronize|"
                 r"cudaEventSynchronize|cuEventSynchronize|_local_scalar_dense|cudaMemcpy(?!Async)")),
    Rule(Category.CUDA_SYNC, "torch.cuda synchronize", file="torch/cuda/", func=_f(r"^(synchronize|Event\.synchronize|Stream\.synchronize)$")),
    Rule(Category.CUDA_SYNC, "model runner device sync", file="vllm/v1/worker/", func=_f(r"^(\w+\.)?(_to_list|_sync_device)$")),
    *(Rule(Category.CUDA_SYNC, "a device-to-host copy (.item/.tolist/.cpu)", file=f,
           code=_f(r"\.(item|tolist|cpu|synchronize)\(")) for f in _RUNNER_FILES),
    # collectives: vLLM's own communicators and torch.distributed
    Rule(Category.COLLECTIVE, "NCCL call", native=True, func=_f(r"^(nccl[A-Z]\w*|ncclKernel\w*)|ProcessGroupNCCL")),
    Rule(Category.COLLECTIVE, "vLLM PyNccl communicator", file="vllm/distributed/device_communicators/pynccl"),
    Rule(Category.COLLECTIVE, "vLLM custom all-reduce", file="vllm/distributed/device_communicators/custom_all_reduce"),
    Rule(Category.COLLECTIVE, "vLLM device communicator", file="vllm/distributed/device_communicators/",
         func=_f(r"^(\w+\.)?(all_reduce|all_gather|reduce_scatter|gather|broadcast|send|recv|all_to_all|dispatch|combine)\w*$")),
    Rule(Category.COLLECTIVE, "vLLM parallel group op", file="vllm/distributed/parallel_state.py",
         func=_f(_VLLM_GROUP_OPS)),
    Rule(Category.COLLECTIVE, "vLLM tensor-parallel op", file="vllm/distributed/communication_op.py"),
    Rule(Category.COLLECTIVE, "torch.distributed collective", file="torch/distributed/distributed_c10d.py",
         func=_f(_TORCH_COLLECTIVES)),
    Rule(Category.COLLECTIVE, "torch functional collective", file="torch/distributed/_functional_collectives.py"),
    *(Rule(Category.COLLECTIVE, "DP all-reduce (dp_utils)", file=f,
           func=_f(r"^(\w+\.)?(_run_ar|_synchronize_dp_ranks|coordinate_batch_across_dp|sync_cudagraph_and_dp_padding|"
                   r"get_batch_metadata_across_dp|dispatch_cg_and_sync_dp)$"))
      for f in ("vllm/v1/worker/dp_utils.py", "vllm/v1/worker/gpu/dp_utils.py")),
    Rule(Category.COLLECTIVE, "StatelessProcessGroup store wait / CPU all-reduce", file="vllm/distributed/utils.py",
         func=_f(r"^(\w+\.)?(barrier|recv_obj|broadcast_obj|all_gather_obj|recv|broadcast|all_reduce|cpu_all_reduce_)$")),
    # vLLM's shared-memory message queue between the engine core and its workers
    Rule(Category.SHM_WAIT, "shared-memory queue wait", file="vllm/distributed/device_communicators/shm_broadcast.py",
         func=_f(r"^(\w+\.)?(acquire_read|acquire_write|dequeue|enqueue|broadcast_object|spin|wait_until_ready|"
                 r"_wait_until_readable|spin_until_readable|wait|recv)$")),
    # compilation and JIT
    *(Rule(Category.COMPILE, "compilation", file=f) for f in (
        "torch/_dynamo/", "torch/_inductor/", "torch/fx/", "triton/compiler/", "triton/backends/", "triton/runtime/",
        "vllm/compilation/", "deep_gemm/", "flashinfer/jit/", "torch/utils/cpp_extension.py")),
    # weight loading
    *(Rule(Category.WEIGHT_LOADING, "weight loading", file=f) for f in (
        "vllm/model_executor/model_loader/", "safetensors/", "huggingface_hub/")),
    Rule(Category.WEIGHT_LOADING, "model load_weights", file="vllm/model_executor/models/", func=_f(r"load_weights$")),
    # known idle waits of vLLM and the standard library (specific: they win over a lock line or a poll)
    Rule(Category.IDLE, "engine core waiting for requests", file="vllm/v1/engine/core.py",
         func=_f(r"^(\w+\.)?_process_input_queue$")),
    Rule(Category.IDLE, "vLLM watchdog thread", file="vllm/utils/watch_dog.py", func=_f(r"^(\w+\.)?_check_loop$")),
    Rule(Category.IDLE, "multiprocessing resource tracker", file="multiprocessing/resource_tracker.py"),
    # several consumers of one queue: all but one wait on its reader lock (SemLock.__enter__, no Python frame)
    Rule(Category.IDLE, "multiprocessing queue get", file="multiprocessing/queues.py", func=_f(r"^(\w+\.)?get$")),
    Rule(Category.IDLE, "multiprocessing pool worker", file="multiprocessing/pool.py", func=_f(r"^(\w+\.)?worker$")),
    # waiting for work (generic: decide only when nothing more specific is on the stack)
    Rule(Category.IO_POLL, "ZMQ socket", file="zmq/", generic=True),
    Rule(Category.IO_POLL, "selector poll", file="selectors.py", func=_f(r"select$"), generic=True),
    Rule(Category.IO_POLL, "asyncio loop", file="asyncio/", func=_f(r"_run_once$|run_forever$|select$"), generic=True),
    Rule(Category.IO_POLL, "socket", file="socket.py", generic=True),
    Rule(Category.IO_POLL, "pipe or connection", file="multiprocessing/connection.py", generic=True),
    Rule(Category.IO_POLL, "uvloop", file="uvloop/", generic=True),
    # pyzmq's Socket.recv / poll are Cython (no Python frame): the caller's line tells
    Rule(Category.IO_POLL, "a socket receive or poll (called from this line)",
         code=_f(r"\w*(sock|socket)\w*\.(recv\w*|poll)\("), generic=True),
    Rule(Category.IDLE, "condition or event wait", file="threading.py", func=_f(r"^(\w+\.)?wait$"), generic=True),
    Rule(Category.IDLE, "queue get", file="queue.py", func=_f(r"^(\w+\.)?get$"), generic=True),
    Rule(Category.IDLE, "thread-pool worker", file="concurrent/futures/thread.py", func=_f(r"_worker$"), generic=True),
    Rule(Category.IDLE, "sleep", code=_f(r"\b(time|asyncio)\.sleep\("), generic=True),
    # plain Python locks (after the standard library's own waits, which are idle)
    Rule(Category.LOCK_WAIT, JOIN_WHY, file="threading.py", func=_f(r"^(\w+\.)?(join|_wait_for_tstate_lock)$"),
         generic=True),
    # a blocked `with name:` enters a lock-like object (other context managers are usually calls)
    Rule(Category.LOCK_WAIT, LOCK_WHY, code=_f(r"\.acquire\(|^with\s+[\w.]+\s*:"), generic=True),
    Rule(Category.LOCK_WAIT, LOCK_WHY, file="threading.py", func=_f(r"^(\w+\.)?acquire$"), generic=True),
    # the model itself
    *(Rule(Category.COMPUTE, "model forward", file=f) for f in (
        "vllm/model_executor/models/", "vllm/model_executor/layers/", "vllm/attention/", "vllm/v1/attention/",
        "torch/nn/modules/", "vllm/v1/sample/", "vllm/v1/spec_decode/")),
    *(Rule(Category.COMPUTE, "model runner step", file=f,
           func=_f(r"^(\w+\.)?(execute_model|_model_forward|sample_tokens|_dummy_run|_dummy_sampler_run)$"))
      for f in ("vllm/v1/worker/gpu_model_runner.py", "vllm/v1/worker/gpu/model_runner.py")),
)
_SPECIFIC = tuple(rule for rule in RULES if not rule.generic)
_GENERIC = tuple(rule for rule in RULES if rule.generic)


def categorize(frames: tuple[Frame, ...]) -> tuple[Category, str]:
    """Category of a stack and the frame that decided it (most specific rule, then innermost frame)."""
    category, reason, _ = categorize_at(frames)
    return category, reason


def categorize_at(frames: tuple[Frame, ...]) -> tuple[Category, str, int | None]:
    """``categorize`` plus the index of the deciding frame (None when no rule matched)."""
    for rules in (_SPECIFIC, _GENERIC):
        for index, frame in enumerate(frames):
            for rule in rules:
                if rule.matches(frame):
                    return rule.category, f"{rule.why}: {frame.where}", index
    if not frames:
        return Category.IDLE, "no Python frames (a native thread, or the interpreter between calls)", None
    return Category.UNKNOWN, f"no rule matched; innermost {frames[0].where}", None


_ROLE_FRAMES: tuple[tuple[Role, str, re.Pattern[str]], ...] = (
    (Role.ENGINE_CORE, "vllm/v1/engine/core.py", _f(r"run_busy_loop|run_engine_core")),
    (Role.ENGINE_CORE, "vllm/engine/multiprocessing/engine.py", _f(r"run_engine_loop|run_mp_engine")),
    (Role.WORKER, "vllm/v1/executor/multiproc_executor.py", _f(r"worker_busy_loop|worker_main")),
    (Role.WORKER, "vllm/executor/multiproc_worker_utils.py", _f(r"_run_worker_process")),
    (Role.API_SERVER, "vllm/entrypoints/", _f(r"run_server|main|serve")),
)


def role_from_stacks(stacks: list[tuple[Frame, ...]]) -> Role | None:
    """A role told by the busy loop a process runs (engine core, worker, API server)."""
    for role, file, func in _ROLE_FRAMES:
        if any(file in f.filename and func.search(f.name) for frames in stacks for f in frames):
            return role
    return None


_WAITS_ON_WORKERS = (
    ("vllm/v1/executor/", _f(r"collective_rpc|get_response|execute_model|sample_tokens|_wait_for_response|"
                             r"wait_for_response|wait_briefly")),
    ("vllm/executor/", _f(r"_run_workers|_driver_execute_model|execute_model")),
)


def waits_on_workers(frames: tuple[Frame, ...]) -> bool:
    """Is this (engine-core) thread waiting for its workers' answer to a step?"""
    return any(file in f.filename and func.search(f.name) for file, func in _WAITS_ON_WORKERS for f in frames)


_OP_WORD = _f(r"^(cpu_all_reduce_?|all_reduce|all_gather\w*|_?all_gather_base|reduce_scatter\w*|broadcast\w*|barrier|monitored_barrier|"
              r"send\w*|recv\w*|isend|irecv|gather|scatter|all_to_all\w*|batch_isend_irecv|wait_tensor|dispatch|combine|"
              r"reduce|_run_ar|coordinate_batch_across_dp)$")
_DP_SYNC = _f(r"_has_global_unfinished_reqs|has_unfinished_dp|sync_dp_state|num_tokens_across_dp|get_dp_padding")
_RECEIVE = _f(r"^i?recv")
_SEND = _f(r"^i?send")
_COLLECTIVE_RULES = tuple(rule for rule in _SPECIFIC if rule.category is Category.COLLECTIVE)


def collective_op(frames: tuple[Frame, ...]) -> tuple[str, str | None] | None:
    """The collective a stack is in (``all_reduce``, ``recv``…) and its group where the frames show it."""
    hits = [f for f in frames if any(rule.matches(f) for rule in _COLLECTIVE_RULES)]
    if not hits:
        return None
    names = [f.name.rsplit(".", 1)[-1].lstrip("_") for f in hits]
    op = next((n for n in names if _OP_WORD.match(n)), names[0])
    op = op.removeprefix("cpu_").rstrip("_")
    if op in ("run_ar", "coordinate_batch_across_dp"):
        op = "all_reduce"
    group = None
    if any(_DP_SYNC.search(f.name) or f.filename.endswith("dp_utils.py") for f in frames):
        group = "DP"
    elif any("vllm/distributed/utils.py" in f.filename for f in hits):
        group = "StatelessProcessGroup"
    elif any("tensor_model_parallel" in f.name for f in frames):
        group = "TP"
    return op, group


def is_receive(op: str) -> bool:
    """A point-to-point receive (it needs a matching send on its peer)."""
    return bool(_RECEIVE.match(op))


def is_send(op: str) -> bool:
    """A point-to-point send."""
    return bool(_SEND.match(op))


_LOCK_NAME = _f(r"^with\s+([\w.]+)\s*:|([\w.]+)\.acquire\(")


def lock_wanted(thread_reason: str, frames: tuple[Frame, ...]) -> str | None:
    """The lock a thread blocks on, from its ``with x:`` / ``x.acquire(`` line (None for a join or unknown)."""
    if not thread_reason.startswith(LOCK_WHY):
        return None
    for frame in frames:
        if frame.code:
            match = _LOCK_NAME.search(frame.code)
            if match:
                return match.group(1) or match.group(2)
    return None


def is_join(thread_reason: str) -> bool:
    """A thread waiting for other threads to finish: a consequence of what they wait on."""
    return thread_reason.startswith(JOIN_WHY)


def waits_for_work(category: Category, frames: tuple[Frame, ...]) -> bool:
    """A worker's busy loop blocked reading the next broadcast: idle unless the engine core waits on it."""
    return category is Category.SHM_WAIT and any(_WORK_LOOP.search(f.name) for f in frames)


_WORK_LOOP = _f(r"worker_busy_loop|worker_main|_run_worker_process|start_worker_execution_loop")
