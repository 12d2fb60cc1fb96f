"""Device faults and fatal signals: CUDA's and the NPU / ROCm runtimes' errors, NCCL's own errors, GPU Xids,
and the signals and aborts that end a process.

A device fault is a crash of the process that hit it, never a wait; these rules sit inside
``STALLS_TIMEOUTS_FATALS`` (patterns/fatals.py) at their old place, since rule order decides which rule of
a shared literal gives a record its signal.
"""

from __future__ import annotations

from engdiag.logs.events import Failure, Signal
from engdiag.logs.patterns.base import Rule, _c, _const

DEVICE_FAULTS: tuple[Rule, ...] = (
    Rule(Signal.CUDA_ERROR, "illegal memory access", _c(r"an illegal memory access was encountered")),
    # Ascend's device faults: a kernel that failed or timed out on the AI core (driver/firmware side)
    # (ascend-dsv32-driver-24-1-moe-dispatch-aicore-timeout)
    Rule(Signal.CUDA_ERROR, "Aicore kernel execute failed", _c(r"Aicore kernel execute failed")),
    # torch_npu's text for ACL error 507014 / 507015, printed as "[Error]: The aicore execution times out."
    # when a kernel outran the AI core's watchdog or faulted (ascend-two-node-aicore-timeout-old-npu-driver)
    Rule(Signal.CUDA_ERROR, "The aicore execution ", _c(r"The aicore execution (?:times out|is abnormal)")),
    # torch_npu's report of a failed ACL / aclnn call, "NPU function error: call aclnnMoeDistributeDispatchV4
    # failed, error code is 561000" — the NPU runtime's counterpart of "CUDA error: …", a fault of the device or
    # its kernel (ascend-a2-2node-shm-broadcast-wait-then-moe-dispatch-hccl-crash: the dispatch failed on every
    # rank after two minutes of the engine core waiting on it).  HCCL's own calls (HcclAllreduce …) are
    # collectives, which fail on their peers, and a synchronize that timed out (AclrtSynchronizeStreamWithTimeout,
    # error 507048 "The execution of the internal task times out") waited on the stream's work, most often a
    # collective (patterns/waits.py): neither is matched here.
    Rule(Signal.CUDA_ERROR, "NPU function error: ",
         _c(r"NPU function error: (?:call )?(?![\w:]*(?:Hccl|Synchroniz))(?P<call>[\w:]+)[^\n]{0,40}?error code is "
            r"(?P<code>\d+)"),
         lambda m, t: [Failure(name=f"NPU {m['call']} error {m['code']}")]),
    # ROCm's runtime (ROCr) on a GPU page fault, before it aborts the process: "Memory access fault by GPU node-3
    # (Agent handle: 0x…) on address 0x…. Reason: Unknown." — AMD's illegal memory access
    # (minimax-m25-aiter-fmoe-memory-access-fault: right after an AITER fused-MoE kernel loaded)
    Rule(Signal.CUDA_ERROR, "Memory access fault by GPU",
         _c(r"Memory access fault by GPU node"), _const(Failure(name="ROCm memory access fault"))),
    # the HIP runtime's queue callback on the same kind of fault: ":0:rocdevice.cpp :3675: … Callback: Queue 0x…
    # aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond
    # the largest legal address." with the faulting kernel's name below (aiter-vskip-aperture-violation-deepseek-
    # r1-mi300x: an AITER fused-MoE kernel on MI300X)
    Rule(Signal.CUDA_ERROR, "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
         _c(r"HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"), _const(Failure(name="ROCm memory aperture violation"))),
    Rule(Signal.CUDA_ERROR, "device-side assert", _c(r"device-side assert triggered")),
    Rule(Signal.CUDA_ERROR, "unspecified launch failure", _c(r"unspecified launch failure")),
    Rule(Signal.CUDA_ERROR, "CUDA error: ", _c(r"CUDA error: (?!out of memory|CUBLAS_STATUS_ALLOC_FAILED)[^\n]{0,200}")),
    # the same check in PyTorch's ROCm build, hipified: "HIP error: invalid device function" (hipGetErrorString's
    # words; rocm-hip-invalid-device-function-v0: a kernel not built for the GPU's architecture)
    Rule(Signal.CUDA_ERROR, "HIP error: ", _c(r"HIP error: (?!out of memory)[^\n]{0,200}")),
    Rule(
        Signal.CUDA_ERROR,
        "NCCL error",
        _c(r"NCCL error(?: in: [^\n]*?)?:? (?P<e>unhandled (?:system|cuda) error|internal error|invalid usage)"),
        lambda m, t: [Failure(name=f"NCCL {m['e']}")],
    ),
    # NCCL's CUDACHECK / CUCHECK naming the CUDA error a call of its returned: "NCCL WARN Cuda failure 'dependency
    # created on uncaptured work in another stream'" (checks.h; out of memory is memory.py's) — a CUDA error, here a
    # collective enqueued during CUDA-graph capture (vllm-v040-tp2-capture-nccl-uncaptured-dependency)
    Rule(Signal.CUDA_ERROR, "Cuda failure ",
         _c(r"Cuda failure (?:\d+ )?'(?!out of memory')(?P<e>[^'\n]{1,160})'"),
         lambda m, t: [Failure(name=f"CUDA error in NCCL: {m['e']}")]),
    # CUTLASS's TMA copy set-up (cute's copy_traits_sm90_tma.hpp) when cuTensorMapEncodeTiled fails: it prints
    # the descriptor, "Error: Failed to initialize the TMA descriptor 700" (the CUresult: 1 an invalid value,
    # 700 an illegal address already sticky on the context) and asserts — a kernel library's device-side set-up
    # failing, in DeepGEMM, FlashMLA and FlashInfer builds (dsv4-flashmla-sparse-prefill-tma-assert;
    # qwen3-vl-235b-fp8-deepgemm-tma-descriptor-700, mid-traffic)
    Rule(Signal.CUDA_ERROR, "Failed to initialize the TMA descriptor",
         _c(r"Failed to initialize the TMA descriptor(?:, error code:)? (?P<code>\d+)"),
         lambda m, t: [Failure(name=f"TMA descriptor set-up failed in a CUTLASS kernel (CUresult {m['code']})")]),
    # a driver-API call that failed, as DeepGEMM's and torch's checks word it: "RuntimeError: CUDA driver error
    # (…/jit/handle.hpp:154): 800 (CUDA_ERROR_NOT_PERMITTED, …)", "CUDA driver error: device not ready"
    # (deepgemm-jit-not-permitted-graph-capture: a kernel loaded during graph capture;
    # wsl2-marlin-repack-device-not-ready-expandable-segments)
    Rule(Signal.CUDA_ERROR, "CUDA driver error", _c(r"CUDA driver error\b(?![^\n]{0,200}(?:out of memory|OUT_OF_MEMORY))"),
         _const(Failure(name="CUDA driver error"))),
    # HCCL's EI0007 on another resource than device memory: "Failed to allocate resource[qp] with info […]. Reason:
    # Memory resources are exhausted." then "Transport init error. Reason: [Create][DestLink]Create Dest error!" —
    # an RDMA queue pair HCCL could not create for a link between ranks, a driver or firmware limit (vllm-ascend
    # issue 9005: 20 GB free on every card, fixed by a newer NPU driver; #2754 and #5993 word it alike)
    Rule(Signal.CUDA_ERROR, "Failed to allocate resource[",
         _c(r"Failed to allocate resource\[(?P<r>(?!DeviceMemory\])[^\]\n]{1,40})\]"),
         lambda m, t: [Failure(name=f"HCCL could not create its transport: resource[{m['r']}] exhausted")]),
    # Intel's xe kernel driver timing out a GPU job and resetting the engine that ran it ("xe 0000:04:00.0: [drm]
    # Tile0: GT0: Timedout job: seqno=1, … in VLLM::EngineCor…", "Engine reset: engine_class=ccs"): the device
    # hung on the work and the process lost its context (xpu-b70-mtp2-160k-xe-ccs-engine-reset, dmesg)
    Rule(Signal.CUDA_ERROR, "[drm] ", _c(r"\[drm\][^\n]*?(?:Timedout job|Engine reset):"),
         _const(Failure(name="Intel GPU job timed out and its engine was reset (xe driver)"))),
    Rule(Signal.CUDA_ERROR, "fallen off the bus", _c(r"GPU has fallen off the bus")),
    Rule(Signal.CUDA_ERROR, "uncorrectable ECC error", _c(r"uncorrectable ECC error encountered")),
    Rule(Signal.CUDA_ERROR, "NVRM: Xid", _c(r"NVRM: Xid \([^)]*\): (?P<x>\d+)"), lambda m, t: [Failure(name=f"Xid {m['x']}")]),
    Rule(Signal.FATAL_SIGNAL, "Fatal Python error", _c(r"Fatal Python error: (?P<w>[^\n]{0,200})"), lambda m, t: [Failure(exception=m["w"])]),
    Rule(Signal.FATAL_SIGNAL, "Segmentation fault", _c(r"Segmentation fault")),
    Rule(Signal.FATAL_SIGNAL, " received at time=", _c(r"\*\*\* SIG(?P<s>[A-Z]+) received at time=")),
    Rule(
        Signal.FATAL_SIGNAL,
        "terminate called after throwing",
        _c(r"terminate called after throwing an instance of '(?P<w>[^']+)'"),
        lambda m, t: [Failure(exception=m["w"])],
    ),
)
