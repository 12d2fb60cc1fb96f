"""GPU memory: the profiler's figures (KV-cache size, concurrency, blocks, the weights / activation /
KV split), every accelerator's allocation failure with PyTorch's figures when it prints them, the KV cache
not fitting, and preemptions under KV-cache pressure.

The figures decide the memory sub-kind: fragmentation (PyTorch's cache held at least the failed request
reserved but unallocated), exhaustion, or KV-cache pressure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import CudaOom, Memory, Payload, Preemption, Signal
from engdiag.logs.patterns.base import Builder, Rule, _c, _i, last_exception

_UNITS = {"B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_UNITS |= {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_SIZE = r"\d+(?:\.\d+)? ?(?:bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)"
_SIZE_PARTS = re.compile(r"(\d+(?:\.\d+)?) ?(\w+)")


_XLA_SIZE = r"\d+(?:\.\d+)?[KMGT]?B?"
_XLA_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_SHM_SEGMENT = _c(r"Error while (?:creating|attaching to) shared memory segment (?P<path>\S+) \(size (?P<size>\d+)\)")
"""NCCL's failure to make room for a segment in /dev/shm."""


def _xla_bytes(text: str | None) -> int | None:
    """XLA's ``'76.58M'`` / ``'21.95G'`` / ``'0B'`` (binary units) → bytes."""
    if text is None:
        return None
    digits = text.rstrip("B")
    unit = digits[-1:] if digits[-1:] in _XLA_UNITS else ""
    return int(float(digits.removesuffix(unit) or 0) * _XLA_UNITS[unit])


def size_bytes(text: str | None) -> int | None:
    """``'736.86 MiB'`` → bytes."""
    if text is None:
        return None
    match = _SIZE_PARTS.fullmatch(text.strip())
    if match is None or match.group(2) not in _UNITS:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2)])


_BANK_NEEDS = re.compile(r"each\s*bank\s*needs\s*to\s*store\s*(\d+)\s*B")
_BANK_SIZE = re.compile(r"bank\s*size\s*is\s*(\d+)\s*B")
_BANK_STATE = re.compile(r"\(allocated:\s*(\d+)\s*B,\s*free:\s*(\d+)\s*B(?:,\s*largest\s*free\s*block:\s*(\d+)\s*B)?\)")
"""A wrapped paste drops the space at each cut, so every gap may be empty."""


_WARM_UP = re.compile(r"\bin _?warm_?up_model\b|\bin capture_model\b")
_ABOUT_THE_CACHE = re.compile(r"KV cache|cache blocks|memory", re.IGNORECASE)


def _past_sizing(text: str) -> bool:
    """Did V0's ``initialize_cache`` fail after the KV cache was sized and allocated?

    It sizes the cache, allocates it, then warms the model up (CUDA-graph capture; HPU graphs on Gaudi), so a
    traceback through ``_warm_up_model`` failed there, and a kept error about something else says what:
    gaudi-hpu-graph-nonsfg-collective-warmup (``collective nonSFG is not supported during hpu graph
    capturing``, a missing ``PT_HPU_ENABLE_LAZY_COLLECTIVES=1``).
    """
    ending = last_exception(text)
    return bool(_WARM_UP.search(text)) or (ending is not None and not _ABOUT_THE_CACHE.search(ending))


def _bank_oom(text: str) -> CudaOom:
    """tt-metal's per-bank numbers, as far as the paste kept them (its lines are often wrapped)."""
    needs, size, state = _BANK_NEEDS.search(text), _BANK_SIZE.search(text), _BANK_STATE.search(text)
    return CudaOom(
        tried=int(needs[1]) if needs else None,
        total=int(size[1]) if size else None,
        allocated=int(state[1]) if state else None,
        free=int(state[2]) if state else None,
        largest_free=int(state[3]) if state and state[3] else None,
    )


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None


def _oom(match: re.Match[str], text: str) -> Iterable[Payload]:
    line_end = text.find("\n", match.start())
    line = text[match.start() : line_end if line_end != -1 else None]
    new = _OOM_NEW.search(line)
    if new is not None:
        yield CudaOom(
            tried=size_bytes(new["tried"]),
            total=size_bytes(new["total"]),
            free=size_bytes(new["free"]),
            allocated=size_bytes(_group(_OOM_ALLOC, line, "alloc")),
            reserved_unallocated=size_bytes(_group(_OOM_ALLOC, line, "resv")),
            private_pools=size_bytes(_group(_OOM_ALLOC, line, "pools")),
            process_in_use=size_bytes(_group(_OOM_INUSE, line, "inuse")),
            device=int(new["dev"]),
        )
        return
    old = _OOM_OLD.search(line)
    if old is not None:
        allocated, reserved = size_bytes(old["alloc"]), size_bytes(old["resv"])
        unallocated = reserved - allocated if reserved is not None and allocated is not None else None
        yield CudaOom(
            tried=size_bytes(old["tried"]),
            total=size_bytes(old["total"]),
            free=size_bytes(old["free"]),
            allocated=allocated,
            reserved_unallocated=unallocated,
            device=int(old["dev"]),
        )
        return
    # the message's figures on lines of their own (a paste that broke it up), or only some of them left
    yield CudaOom(tried=size_bytes(_group(_OOM_TRIED, line, "v")), free=size_bytes(_group(_OOM_FREE, line, "v")),
                  reserved_unallocated=size_bytes(_group(_OOM_RESERVED, line, "v")))


def _group(pattern: re.Pattern[str], text: str, name: str) -> str | None:
    found = pattern.search(text)
    return found[name] if found is not None else None


_OOM_NEW = re.compile(
    rf"Tried to allocate (?P<tried>{_SIZE})\. GPU (?P<dev>\d+) has a total capacity of "
    rf"(?P<total>{_SIZE}) of which (?P<free>{_SIZE}) is free"
)
_OOM_ALLOC = re.compile(
    rf"Of the allocated memory (?P<alloc>{_SIZE}) is allocated by PyTorch, "
    rf"(?:with (?P<pools>{_SIZE}) allocated in private pools \(e\.g\., CUDA Graphs\), )?"
    rf"and (?P<resv>{_SIZE}) is reserved by PyTorch but unallocated"
)
_OOM_INUSE = re.compile(
    rf"(?:Including non-PyTorch memory, this process has|Process \d+ has) (?P<inuse>{_SIZE}) memory in use"
)
_OOM_TRIED = re.compile(rf"Tried to allocate (?P<v>{_SIZE})")
_OOM_FREE = re.compile(rf"(?P<v>{_SIZE}) (?:is )?free\b")
_OOM_RESERVED = re.compile(rf"(?P<v>{_SIZE}) is reserved by PyTorch but unallocated")
_OOM_OLD = re.compile(
    rf"Tried to allocate (?P<tried>{_SIZE}) \((?:GPU|NPU) (?P<dev>\d+); (?P<total>{_SIZE}) total capacity; "
    rf"(?P<alloc>{_SIZE}) already allocated; (?:{_SIZE} current active; )?(?P<free>{_SIZE}) free; "
    rf"(?P<resv>{_SIZE}) reserved in total by PyTorch\)"
)


def _memory(*fields: tuple[str, str, str]) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        for name, group, unit in fields:
            value = match[group]
            if value is not None:
                yield Memory(name, float(value.replace(",", "")), unit)

    return build


MEMORY: tuple[Rule, ...] = (
    # memory --------------------------------------------------------------------------
    Rule(
        Signal.MEMORY,
        "Available KV cache memory",
        _c(r"Available KV cache memory: (?P<v>-?\d+(?:\.\d+)?) GiB"),
        _memory(("available_kv_cache", "v", "GiB")),
    ),
    Rule(
        Signal.MEMORY,
        "KV cache size:",
        _c(r"KV cache size: (?P<v>[\d,]+) tokens"),
        _memory(("kv_cache_tokens", "v", "tokens")),
    ),
    Rule(
        Signal.MEMORY,
        "Maximum concurrency for",
        _c(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>\d+(?:\.\d+)?)x"),
        _memory(("max_model_len", "len", "tokens"), ("max_concurrency", "x", "x")),
    ),
    Rule(
        Signal.MEMORY,
        "# CPU blocks:",
        _c(r"# (?!CPU)\w+ blocks: (?P<g>\d+), # CPU blocks: (?P<c>\d+)"),
        _memory(("gpu_blocks", "g", "blocks"), ("cpu_blocks", "c", "blocks")),
    ),
    Rule(
        Signal.MEMORY,
        "model weights take",
        _c(
            r"model weights take (?P<w>\d+(?:\.\d+)?)GiB; non_torch_memory takes (?P<n>\d+(?:\.\d+)?)GiB; "
            r"PyTorch activation peak memory takes (?P<a>\d+(?:\.\d+)?)GiB; "
            r"the rest of the memory reserved for KV Cache is (?P<k>-?\d+(?:\.\d+)?)GiB"
        ),
        _memory(
            ("weights", "w", "GiB"),
            ("non_torch", "n", "GiB"),
            ("activation_peak", "a", "GiB"),
            ("kv_cache_reserved", "k", "GiB"),
        ),
    ),
    Rule(
        Signal.MEMORY,
        "gpu_memory_utilization (",
        _c(r"total_gpu_memory \((?P<t>\d+(?:\.\d+)?)GiB\) x gpu_memory_utilization \(\d+(?:\.\d+)?\) = (?P<u>\d+(?:\.\d+)?)GiB"),
        _memory(("total_gpu_memory", "t", "GiB"), ("usable_gpu_memory", "u", "GiB")),
    ),
    Rule(
        Signal.MEMORY,
        "Sleep mode freed",
        _c(r"Sleep mode freed (?P<f>\d+(?:\.\d+)?) GiB memory(?:, (?P<u>\d+(?:\.\d+)?) GiB memory is still in use)?"),
        _memory(("sleep_freed", "f", "GiB"), ("sleep_still_in_use", "u", "GiB")),
    ),
    # torch's own OOM; its CUDA check's "CUDA error: out of memory", which ROCm builds print as "HIP error: out of
    # memory" (hipGetErrorString's wording for hipErrorOutOfMemory, ROCm clr hip_error.cpp); vLLM's sleep-mode
    # allocator (csrc/cumem_allocator.cpp CUDA_CHECK): "[vllm_allocator_adaptor_c] CUDA Error: out of memory at
    # .../cumem_allocator.cpp:N", before 0.8 without the tag (rlhf-sleep-wakeup-cumem-oom: wake_up on a full GPU)
    # Triton's CUDA driver check (third_party/nvidia/backends/driver.c gpuAssert: "Triton Error [CUDA]: %s" with
    # cuGetErrorString's "out of memory"), as an autotuner's benchmark buffers or a kernel launch find the GPU full
    # (qwen35-35b-5090-triton-autotune-oom: the GDN kernels' autotune on the first request)
    Rule(Signal.CUDA_OOM, "out of memory",
         _c(r"(?:CUDA|HIP) out of memory|(?:CUDA|HIP) (?:driver )?[Ee]rror: out of memory|"
            r"Triton Error \[CUDA\]: out of memory"), _oom),
    Rule(Signal.CUDA_OOM, "hipErrorOutOfMemory", _c(r"hipErrorOutOfMemory"), _oom),
    # PyTorch's caching allocator warning as an allocation fails for want of device memory (torch 2.9+:
    # "[W804 …  CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 3 while trying to
    # allocate 26229080064 bytes (free: 16487546880, total: 191503007744).", lm-eval-pcp-b200-glm52-oom-26gb);
    # the OutOfMemoryError follows unless the caller catches it (an autotuner trying a smaller config)
    Rule(Signal.CUDA_OOM, "memory allocation failed with OOM on device",
         _c(r"memory allocation failed with OOM on device (?P<dev>\d+) while trying to allocate (?P<b>\d+) bytes"
            r"(?: \(free: (?P<f>\d+), total: (?P<t>\d+)\))?"),
         lambda m, t: [CudaOom(tried=int(m["b"]), free=_int(m["f"]), total=_int(m["t"]), device=int(m["dev"]))]),
    # the CPU back-end's pooler warm-up (0.34 v1/worker/cpu/pooling_runner.py): its memory is the host's
    Rule(Signal.CUDA_OOM, "Out of memory while warming up", _c(r"Out of memory while warming up the pooler"), _oom),
    # Intel GPUs: the Unified Runtime's and Level Zero's out-of-device-memory results, as SYCL / IPEX report them
    # ("UR backend returns:39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"; ur_api.h, ze_api.h)
    Rule(Signal.CUDA_OOM, "_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", _c(r"(?:UR|ZE)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
         _oom),
    # Other accelerators' allocation failures: torch_npu "NPU out of memory", Ascend's runtime
    # "Memory_Allocation_Failure(EL0004)" (omni-qwen-image-npu-second-inference-stuck-memory-allocation-failure),
    # Intel "XPU out of memory", Rebellions "SYS_EBUSY: Lack of device memory"
    # (rbln-minimax-kv-blocks-device-memory-api-server-waits-probe-kill).
    Rule(Signal.CUDA_OOM, "out of memory", _c(r"\b(?:NPU|XPU|HPU|MPS) out of memory"), _oom),
    Rule(Signal.CUDA_OOM, "Memory_Allocation_Failure", _c(r"Memory_Allocation_Failure"), _oom),
    # Ascend's runtime: "EL0004: ... Failed to allocate memory." and "Failed to allocate
    # resource[DeviceMemory] ... Reason: Memory resources are exhausted."
    # (ascend-mc2-moe-dispatch-hccl-2gib-device-memory-exhausted).  The same reason after another resource
    # (EI0007's "resource[qp]", an RDMA queue pair) is HCCL's transport set-up, not device memory
    # (patterns/device_faults.py).
    Rule(Signal.CUDA_OOM, "Memory resources are exhausted",
         _c(r"(?m)^(?![^\n]*resource\[(?!DeviceMemory\])[^\]\n]*\])[^\n]*?Memory resources are exhausted"), _oom),
    Rule(Signal.CUDA_OOM, "EL0004", _c(r"EL0004:[^\n]*Failed to allocate memory"), _oom),
    Rule(Signal.CUDA_OOM, "Lack of device memory", _c(r"Lack of device memory"), _oom),
    # NCCL allocating its own buffers (lazily, at a communicator's first collectives): CUDACHECK's "Cuda failure
    # 'out of memory'", the driver API's CUCHECK "Cuda failure 2 'out of memory'" (checks.h, cudawrap.h), and
    # alloc.h's "Failed to CUDA malloc|calloc [async] N bytes" — torch repeats the first under "Last error:"
    # in its DistBackendError (read in NCCL's master source)
    Rule(Signal.CUDA_OOM, "'out of memory'", _c(r"Cuda failure (?:\d+ )?'out of memory'"), _oom),
    Rule(Signal.CUDA_OOM, "Failed to CUDA ", _c(r"Failed to CUDA (?:malloc|calloc)(?: async)? \d+ bytes"), _oom),
    # Ascend's runtime reporting a failed call: "alloc device memory failed, runtime result = 207001" under
    # "Possible Cause: Available memory is insufficient." (207001: the runtime's memory-allocation error;
    # ascend-qwen3vl32b-npu-oom-midrun, wordings as the thread pastes them)
    Rule(Signal.CUDA_OOM, "alloc device memory failed", _c(r"alloc device memory failed"), _oom),
    Rule(Signal.CUDA_OOM, "Available memory is insufficient", _c(r"Possible Cause: Available memory is insufficient"),
         _oom),
    # Apple's Metal (vllm-metal, MLX): a command buffer the GPU could not run for lack of memory, "[METAL] Command
    # buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    # (metal-command-buffer-oom-guidellm, as pasted)
    Rule(Signal.CUDA_OOM, "kIOGPUCommandBufferCallbackErrorOutOfMemory",
         _c(r"kIOGPUCommandBufferCallbackErrorOutOfMemory"), _oom),
    # Gaudi's PyTorch bridge: "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::134217728 (128)MB"
    # (gaudi-inc-fp8-70b-1card-premove-bf16-weights-devmem-alloc-failed)
    Rule(Signal.CUDA_OOM, "PT_DEVMEM Allocation failed", _c(r"PT_DEVMEM Allocation failed"), _oom),
    # Tenstorrent's tt-metal bank manager (allocator/bank_manager.cpp), under the vLLM TT plugin: "Out of
    # Memory: Not enough space to allocate N B DRAM buffer across K banks, where each bank needs to store X B,
    # but bank size is Y B (allocated: A B, free: F B, largest free block: L B)" — per bank, and the largest
    # free block only in newer releases (tt-p150-chunked-prefill-b32-trace-warmup-dram-fragmentation-oom: F ≥ X
    # but L < X, fragmented; tt-t3k-batched-prefill-32slot-allgather-dram-oom: F < X, full).
    Rule(Signal.CUDA_OOM, "Not enough space to allocate",
         _c(r"Out of Memory: Not enough space to allocate \d+ B (?:DRAM|L1) buffer"), lambda m, t: [_bank_oom(t)]),
    # its tail on lines of their own (a paste cut it after "buffer" and before "(allocated"), read as the same
    # failure's numbers (memory.oom joins them to the line above)
    Rule(Signal.CUDA_OOM, "each bank needs to store", _BANK_NEEDS, lambda m, t: [_bank_oom(t)]),
    Rule(Signal.CUDA_OOM, "(allocated: ", _BANK_STATE, lambda m, t: [_bank_oom(t)]),
    # /dev/shm with no room for a segment: NCCL's "Error while creating shared memory segment %s (size %ld)" and
    # "Error: failed to extend %s to %ld bytes" (src/os/linux.cc, read in NCCL's master source; torch repeats them
    # under "Last error:"), vLLM 0.34's "Insufficient space in %s for %s: %s MiB required, %s MiB free"
    # (shm_broadcast.py) — Docker gives a container 64 MiB (nccl-shm-segment-docker-tp, prodstack-nccl-shm-64m-tp2)
    Rule(Signal.SHM_TOO_SMALL, "Error while creating shared memory segment", _SHM_SEGMENT),
    Rule(Signal.SHM_TOO_SMALL, "Error while attaching to shared memory segment", _SHM_SEGMENT),
    Rule(Signal.SHM_TOO_SMALL, "failed to extend /dev/shm", _c(r"Error: failed to extend (?P<path>/dev/shm/\S+) to "
                                                                      r"(?P<size>\d+) bytes")),
    Rule(Signal.SHM_TOO_SMALL, "Insufficient space in ",
         _c(r"Insufficient space in (?P<path>\S+) for [^\n:]*: \d+(?:\.\d+)? MiB required, \d+(?:\.\d+)? MiB free")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "blocks of KV cache", _c(r"Not enough memory for \d+ blocks of KV cache")),
    # 0.34's max_model_len auto-fit (v1/core/kv_cache_planning.py): "Cannot auto-fit max_model_len: not enough GPU
    # memory available to serve even a single token."
    Rule(Signal.KV_CACHE_INSUFFICIENT, "Cannot auto-fit max_model_len",
         _c(r"Cannot auto-fit max_model_len: not enough GPU memory")),
    # vllm-metal's own sizing: "ValueError: Paged attention: not enough Metal memory for KV cache." with its
    # budget (…, kv_budget=-0.38GB) after it (metal-kv-budget-negative-parsehawk, as pasted)
    Rule(Signal.KV_CACHE_INSUFFICIENT, "not enough Metal memory for KV cache",
         _c(r"not enough Metal memory for KV cache")),
    # V0's worker wrapper logs "Error executing method initialize_cache. This might cause deadlock in distributed
    # execution." (worker_base.py, 0.4–0.10) for any exception there; in initialize_cache that is the KV cache not
    # fitting (raise_if_cache_size_invalid), the "deadlock" being a generic warning
    # (openrlhf-70b-ppo-initialize-cache-kv-6048-lt-8192-deadlock-warning) — unless its traceback goes on into
    # the warm-up initialize_cache runs once the cache is sized, or keeps an error about something else.
    Rule(Signal.KV_CACHE_INSUFFICIENT, "Error executing method initialize_cache",
         _c(r"Error executing method initialize_cache"), lambda m, t: [] if _past_sizing(t) else [None]),
    Rule(Signal.CUDA_OOM, "CUBLAS_STATUS_ALLOC_FAILED", _c(r"CUBLAS_STATUS_ALLOC_FAILED"), _oom),
    Rule(Signal.CUDA_OOM, "OutOfMemoryError", _c(r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError"), _oom),
    # XLA (TPU: tpu-inference, vLLM's TPU backend): a program that does not fit a memory space when compiled
    # ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space vmem. Used 76.58M
    # of 64.00M vmem." tpu-inference-v7x-vmem-oom-precompile), or a buffer / program the runtime could not place
    # ("Attempting to allocate 1.2G. That was not possible. There are 1.0G free.").
    Rule(Signal.CUDA_OOM, "Ran out of memory in memory space",
         _c(rf"Ran out of memory in memory space \w+\. Used (?P<used>{_XLA_SIZE}) of (?P<cap>{_XLA_SIZE}) \w+"),
         lambda m, t: [CudaOom(tried=_xla_bytes(m["used"]), total=_xla_bytes(m["cap"]))]),
    Rule(Signal.CUDA_OOM, "That was not possible",
         _c(rf"Attempting to (?:allocate|reserve) (?P<size>{_XLA_SIZE})\b[^\n]*?That was not possible\."
            rf"(?: There are (?P<free>{_XLA_SIZE}) free)?"),
         lambda m, t: [CudaOom(tried=_xla_bytes(m["size"]), free=_xla_bytes(m["free"]))]),
    # torch's caching allocator's own sentence, "Tried to allocate 136.00 MiB. GPU 0 has a total capacity of
    # ...", when a paste kept it without the "CUDA out of memory." before it
    # (cudagraph-capture-oom-at-0.98-gpu-util-5090-laptop: three wrapped lines of the message, nothing else).
    Rule(Signal.CUDA_OOM, "Tried to allocate ", _c(rf"Tried to allocate {_SIZE}(?:\. GPU \d+ has a total| \(GPU \d+;)"), _oom),
    # its reserved-but-unallocated figure, which tells fragmentation from a full GPU, on a line of its own below
    # the rest (glm52-pcp4-ci-moe-workspace-oom: "CUDA out of memory. Tried to allocate 24.43 GiB." / "15.36 GiB is
    # free" / "23.97 GiB is reserved by PyTorch but unallocated"); only PyTorch's OOM message says it
    Rule(Signal.CUDA_OOM, "is reserved by PyTorch but unallocated",
         _c(rf"{_SIZE} is reserved by PyTorch but unallocated"), _oom),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "No available memory for the cache blocks", _c(r"No available memory for the cache blocks")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "larger than the available KV cache memory", _c(r"larger than the available KV cache memory")),
    # The same ValueError's opening, the rest cut by a paste ("… max seq len (100000), (4.26 GiB KV cach":
    # arc-b70-kv-cache-memory-bytes-10mib-short); "models's" until 0.9, "model's" after.
    Rule(Signal.KV_CACHE_INSUFFICIENT, "To serve at least one request with the",
         _c(r"To serve at least one request with the models?'s max seq len")),
    # A traceback whose deepest frame is ``raise ValueError(`` in kv_cache_utils.py's
    # ``_check_enough_kv_cache_memory`` (``check_enough_kv_cache_memory`` before 0.10): both of its raises say
    # the KV cache does not fit (no memory for the blocks; one max-length request needs more), so the frame
    # decides when the message is cut off (rtx3090-boot-oom-kv-cache-check-defaults-fixed).
    Rule(Signal.KV_CACHE_INSUFFICIENT, "check_enough_kv_cache_memory",
         _c(r"in _?check_enough_kv_cache_memory[ \t]*\n[ \t]*raise ValueError\(")),
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "stored in KV cache",
        _c(r"larger than the maximum number of tokens that can be stored in KV cache"),
    ),
    # The profiler's own figures saying nothing is left for the KV cache: V0's worker.py
    # ("... reserved for KV Cache is -1.05GiB"), executor_base.py ("# cuda blocks: 0, # CPU blocks: N",
    # the device key is "GPU" in older releases) and the concurrency both engines print
    # (rtx4060-8gb-qwen7b-kv-cache-negative-zero-blocks: the ValueError itself fell past the excerpt).
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "the rest of the memory reserved for KV Cache is -",
        _c(r"the rest of the memory reserved for KV Cache is -\d+(?:\.\d+)?GiB"),
    ),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "Available KV cache memory", _c(r"Available KV cache memory: -\d+(?:\.\d+)? GiB")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "# CPU blocks:", _c(r"# (?!CPU)\w+ blocks: 0, # CPU blocks:")),
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "Maximum concurrency for",
        _c(r"Maximum concurrency for [\d,]+ tokens per request: 0\.00x"),
    ),
    # vLLM's start-up check, "Free memory on device (f/t GiB) on startup is less than desired GPU memory
    # utilization (u, n GiB)", pasted wrapped at a word (the join drops the space): after "than"
    # (eks-lws-ep16-decode-gpu-util-098-unreachable) or after "desired" (the same cluster's other pod in
    # blind round 20, lws-ep16-decode-gpu-mem-util-098-free-memory-check).  Two literals that do not overlap
    # (the literal search reports the leftmost of overlapping ones only): any single wrap leaves one whole.
    Rule(Signal.KV_CACHE_INSUFFICIENT, "desired GPU memory utilization", _c(r"desired GPU memory utilization")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "on startup is less than",
         _c(r"on startup is less than ?desired(?! ?GPU memory utilization)")),
    Rule(
        Signal.PREEMPTION,
        "is preempted by",
        _c(r"is preempted by (?:PreemptionMode\.)?(?P<mode>\w+) mode(?:.*?total_num_cumulative_preemption=(?P<n>\d+))?"),
        lambda m, t: [Preemption(_i(m["n"]), m["mode"])],
    ),
)
