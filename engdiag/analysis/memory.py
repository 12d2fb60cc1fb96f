"""GPU memory: fragmentation, exhaustion and KV-cache pressure.

Domain facts encoded here (docs/verdicts.md, "Memory"):

* PyTorch's OOM message says how much memory sat reserved-but-unallocated in its
  cache.  When that is at least the failed request (or half of a large one), the
  memory exists but is split: fragmentation (``kaito-oom-736mib-reserved-unallocated``,
  ``turboquant-continuation-prefill-oom-711mib-reserved``).  Otherwise the GPU is
  simply full: exhaustion (``nemotron-nano-startup-oom-33gib``).
* The KV cache not fitting after the weights is exhaustion at start-up.
* Preemption after preemption with KV usage near full is KV-cache pressure
  (``chunked-prefill-n8-swap-preemption-storm``,
  ``v1-long-prefill-fills-kv-97pct-preemption-loop``); usage climbing to the top
  while decoding starves is its early form (``kv-cache-97pct-freeze-2x4090``).
"""

from __future__ import annotations

import re
from dataclasses import fields, replace
from itertools import pairwise

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import KV_HIGH_PCT, Facts
from engdiag.analysis.signal_kinds import is_progress
from engdiag.analysis.verdict import Kind, MemoryKind, Role, Verdict
from engdiag.logs.events import CudaOom, Event, Failure, Memory, Phase, Preemption, Signal
from engdiag.logs.patterns import ALLOCATING, FORWARD
from engdiag.units import format_bytes


def _pad(text: str) -> str:
    return f" {text}" if text else ""


def _free(numbers: CudaOom) -> str:
    """", with N free" when the message's free figure survived the paste."""
    return f" with {format_bytes(numbers.free)} free" if numbers.free is not None else ""


_XLA = "Ran out of memory in memory space"
"""XLA's compile-time OOM (TPU): a program's figures against one memory space, no allocator cache involved."""
_BANKED = "Not enough space to allocate"
"""tt-metal's allocator, whose figures are per memory bank (engdiag.logs.patterns.memory)."""


def _numbers(facts: Facts, root: Event) -> CudaOom:
    """The OOM's numbers, with those a paste put on a line of their own right below it (an allocator's message
    cut before "(allocated: …, free: …)" reads as two records)."""
    numbers = facts.oom(root)
    for below in facts.t.of(Signal.CUDA_OOM):
        if numbers.free is not None:
            break
        if below.source == root.source and root.line < below.line <= root.line + 3:
            more = facts.oom(below)
            numbers = replace(numbers, **{f.name: getattr(more, f.name) for f in fields(numbers)
                                          if getattr(numbers, f.name) is None and getattr(more, f.name) is not None})
    return numbers


_FATAL_AFTER = frozenset({Signal.CUDA_OOM, Signal.CUDA_ERROR, Signal.FATAL_SIGNAL, Signal.ENGINE_FATAL,
                          Signal.ENGINE_DEAD, Signal.WORKER_DIED, Signal.WORKER_EXCEPTION, Signal.NCCL_WATCHDOG_TIMEOUT})


def survived(facts: Facts, root: Event) -> bool:
    """An OOM the process got past: the server became ready, or generated tokens, after it, and nothing fatal
    followed.  A caller that catches the OutOfMemoryError and tries something smaller (FlashInfer's
    autotuner: "[AutoTuner] memory allocation failed with OOM on device 0 …" during graph capture, then the
    server serving) was not killed by it."""
    later = facts.after(root)
    back = next((i for i, e in enumerate(later)
                 if e.signal is Signal.SERVER_READY or (e.signal is Signal.STATS and is_progress(e))), None)
    return back is not None and not any(e.signal in _FATAL_AFTER for e in later[back:])


def oom(facts: Facts, root: Event) -> Verdict:
    """A CUDA OOM: fragmentation when the cache holds enough unallocated memory, else exhaustion."""
    numbers = _numbers(facts, root)
    when = {"start-up": "at start-up", "serving": "while serving"}.get(facts.phase_at(root) or "", "")
    draft = Draft(facts, Kind.FRAGMENTED, 0.8, "")
    tried, reserved = numbers.tried, numbers.reserved_unallocated
    largest, free = numbers.largest_free, numbers.free
    if tried is not None and largest is not None and free is not None and largest < tried <= free:
        # an allocator that names its largest free block: enough is free, none of it in one piece
        draft.sub_kind = MemoryKind.FRAGMENTATION
        draft.confidence = 0.85
        draft.headline = (f"device memory fragmented{_pad(when)}: {format_bytes(tried)} asked for per bank with "
                          f"{format_bytes(free)} free, but no free block larger than {format_bytes(largest)}")
        note = "free memory ≥ the request, largest free block < it: the memory exists but is split"
    elif tried is not None and reserved is not None and (reserved >= tried or reserved >= 0.5 * tried >= 256 << 20):
        draft.sub_kind = MemoryKind.FRAGMENTATION
        draft.confidence = 0.85 if reserved >= tried else 0.65
        draft.headline = (
            f"{_device(root.text)} memory fragmented{_pad(when)}: {_oom_name(root.text)} asking for {format_bytes(tried)} while "
            f"{format_bytes(reserved)} sat reserved but unallocated in PyTorch's cache"
        )
        note = "reserved-but-unallocated ≥ the failed request: the memory exists but is split"
    else:
        draft.sub_kind = MemoryKind.EXHAUSTION
        if tried is not None and reserved is not None:
            draft.headline = (
                f"{_device(root.text)} memory exhausted{_pad(when)}: {_oom_name(root.text)} asking for "
                f"{format_bytes(tried)}{_free(numbers)} and "
                f"only {format_bytes(reserved)} reserved-but-unallocated"
            )
            note = "little reserved-but-unallocated memory: not fragmentation, the GPU is full"
        elif tried is not None and _BANKED in root.text:
            draft.headline = (f"device memory exhausted{_pad(when)}: {format_bytes(tried)} asked for per bank with "
                              f"{format_bytes(numbers.free)} free")
            note = "the allocator's own per-bank figures: less is free than the request, the device is full"
        elif tried is not None and numbers.total is not None and numbers.free is None and _XLA in root.text:
            space = root.text.split(_XLA, 1)[1].split(".", 1)[0].strip()
            draft.headline = (f"device memory exhausted{_pad(when)}: the compiled program needs {format_bytes(tried)} "
                              f"of {space}, which holds {format_bytes(numbers.total)}")
            note = "XLA's own figures: the program needs more than the memory space holds"
        elif tried is not None:
            # older messages, other accelerators and cut pastes print no reserved figure: no claim either way
            draft.headline = (f"{_device(root.text)} memory exhausted{_pad(when)}: {_oom_name(root.text)} asking for "
                              f"{format_bytes(tried)}{_free(numbers)}")
            note = "the message prints no reserved-but-unallocated figure, so fragmentation is not ruled out"
        else:
            device = _device(root.text)
            draft.headline = f"{device} memory exhausted{_pad(when)}: {_excerpt(root.text)}"
            note = "the message carries no allocator numbers"
        if _BANKED not in root.text and _XLA not in root.text:
            draft.notes.append(
                "PyTorch prints the expandable_segments hint in every OOM; it only helps when "
                "reserved-but-unallocated memory is large"
            )
    draft.cite(root, Role.ROOT_CAUSE, note)
    if _SLEEP_ALLOCATOR in root.text or "wake_up" in root.text:
        # vLLM's sleep-mode allocator maps weights and KV cache back in at wake_up, next to whatever else took
        # the GPU while vLLM slept — a trainer's tensors in RL (rlhf-sleep-wakeup-cumem-oom), another instance
        # on the same GPU (llmd-fma-sleep-frees-half-wake-up-cuda-oom: "Call to wake_up method failed: CUDA
        # Error: out of memory")
        draft.step("free what the trainer holds before waking vLLM (torch.cuda.empty_cache() after its step), or "
                   "wake up in parts: llm.wake_up(tags=['weights']), then llm.wake_up(tags=['kv_cache'])")
    for event in facts.t.of(Signal.CUDA_OOM)[1:3]:
        draft.cite(event, Role.SUPPORTING)
    return draft.cite_consequences(root).done()


def _excerpt(text: str) -> str:
    """The message around "out of memory", not the prefix of a line nobody parsed (a controller's, kubectl's)."""
    found = _OUT_OF_MEMORY.search(text)
    start = text.rfind(" ", 0, found.start() - 20) + 1 if found is not None and found.start() > 80 else 0
    return text[start:start + 140]


_DEVICE_OOM = re.compile(r"\b(CUDA|HIP|NPU|XPU|HPU|MPS) out of memory")
"""The device an allocator's OOM message names (torch_npu's and IPEX's messages mirror CUDA's)."""

_SLEEP_ALLOCATOR = "cumem_allocator"
"""vLLM's sleep-mode allocator (csrc/cumem_allocator.cpp) names its file in its CUDA errors."""

_FREE_OF_TOTAL = re.compile(r"\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\)")
"""vLLM's start-up check: "Free memory on device (free/total GiB) on startup is less than desired …"."""


def kv_cache_does_not_fit(facts: Facts, root: Event) -> Verdict:
    """The KV cache does not fit in what the weights leave: exhaustion at start-up."""
    if "desired GPU memory utilization" in root.text or "on startup is less than desired" in root.text:
        # vLLM's start-up check (v1/worker/utils.py request_memory, gpu_worker.py init_device): the share asked
        # for exceeds what is free before anything loads; waiting never frees it
        # (eks-lws-ep16-decode-gpu-util-098-unreachable: 0.98 of a B200, the CUDA context and EFA took the rest)
        draft = Draft(facts, Kind.FRAGMENTED, 0.85,
                      "GPU memory exhausted at start-up: less GPU memory is free than --gpu-memory-utilization asks "
                      "for (another process or the engine's own CUDA context holds the rest)")
        free = _FREE_OF_TOTAL.search(root.text)
        share = float(free["free"]) / float(free["total"]) - 0.01 if free and float(free["total"]) > 0 else 0.9
        draft.step("ask for a share the free memory covers, or free the GPU first (nvidia-smi shows who holds it)",
                   f"--gpu-memory-utilization {max(share, 0.1):.2f}")
    else:
        draft = Draft(facts, Kind.FRAGMENTED, 0.85,
                      "GPU memory exhausted at start-up: the KV cache does not fit in what is left after the weights")
    draft.sub_kind = MemoryKind.EXHAUSTION
    return draft.cite(root, Role.ROOT_CAUSE).cite_consequences(root).done()


def kv_pressure(facts: Facts) -> Verdict | None:
    """Preemption storms with KV usage near full, or usage climbing to the top while decoding starves."""
    preemptions = facts.t.of(Signal.PREEMPTION)
    cumulative = max((e.data.cumulative or 0 for e in preemptions if isinstance(e.data, Preemption)), default=0)
    v1_preempt = [e for e, s in facts.stats if s.preemptions]
    peak = facts.kv_peak or 0.0
    if (cumulative >= 50 or len(v1_preempt) >= 3) and peak >= KV_HIGH_PCT:
        draft = Draft(
            facts,
            Kind.FRAGMENTED,
            0.7,
            f"KV-cache pressure: usage reached {peak:.1f}% and the scheduler kept preempting requests"
            + (f" ({cumulative} preemptions)" if cumulative else ""),
        )
        draft.sub_kind = MemoryKind.KV_PRESSURE
        draft.cite((preemptions or v1_preempt)[-1], Role.ROOT_CAUSE, "requests evicted for lack of KV space")
        draft.cite(max(facts.stats, key=lambda pair: pair[1].gpu_kv_pct or 0)[0], Role.SUPPORTING)
        return draft.done()
    series = [(e, s) for e, s in facts.stats if s.gpu_kv_pct is not None]
    tail = series[-3:]
    if len(tail) == 3 and tail[-1][1].gpu_kv_pct >= KV_HIGH_PCT:  # type: ignore[operator]
        values = [s.gpu_kv_pct for _, s in tail]
        if values == sorted(values) and values[-1] - values[0] >= 2:  # type: ignore[operator]
            last = tail[-1][1]
            starving = last.generation_tps < 0.05 * max(last.prompt_tps, 1.0)
            draft = Draft(
                facts,
                Kind.FRAGMENTED,
                0.55 if starving else 0.4,
                f"KV-cache pressure: GPU KV cache usage climbing to {values[-1]:.1f}%"
                + (" while decoding has almost stopped" if starving else ""),
            )
            draft.sub_kind = MemoryKind.KV_PRESSURE
            draft.cite(tail[-1][0], Role.ROOT_CAUSE, "usage near full and still rising")
            draft.cite(tail[0][0], Role.SUPPORTING)
            draft.undecided = "whether preemptions follow: the next stats lines (Preemptions: N) or /metrics"
            return draft.done()
    if preemptions and not facts.t.of(Signal.EXCEPTION, Signal.WORKER_EXCEPTION, Signal.PROCESS_EXCEPTION):
        # V0 warns at the first preemption and every 50th after (scheduler.py: num_cumulative_preemption % 50):
        # one line is at least one request evicted because the running batch outgrew the KV cache
        # (rllm-verl-32k-rollout-kv-preemption: n=8 × 32k tokens; vllm063-swap-preemption-stops-processing); a
        # process that raised after it is a crash the preemption set off, not the pressure
        # (v063-priority-preemption-first-preempt-crashes-model-runner)
        last = preemptions[-1]
        mode = f" ({last.data.mode} mode)" if isinstance(last.data, Preemption) and last.data.mode else ""
        draft = Draft(facts, Kind.FRAGMENTED, 0.35,
                      f"KV-cache pressure (likely): requests were preempted{mode} for lack of KV cache space — the "
                      "running batch outgrew the cache")
        draft.sub_kind = MemoryKind.KV_PRESSURE
        draft.cite(last, Role.ROOT_CAUSE, "a request evicted for lack of KV space")
        if peak:
            draft.cite(max(facts.stats, key=lambda pair: pair[1].gpu_kv_pct or 0)[0], Role.SUPPORTING)
        draft.undecided = "how often: the preemption count in later lines (every 50th is logged) or /metrics"
        return draft.done()
    return None


def _device(text: str) -> str:
    """What ran out: the GPU when the message says CUDA or GPU (NCCL writes "Cuda"), else the device (an NPU's
    or XLA's runtime names neither)."""
    return "GPU" if _GPU_WORDS.search(text) else "device"


_GPU_WORDS = re.compile(r"cuda|gpu", re.IGNORECASE)


def _oom_name(text: str) -> str:
    """The OOM as its message names it ("NPU OOM" for torch_npu's, which mirrors PyTorch's CUDA message)."""
    named = _DEVICE_OOM.search(text)
    return f"{named[1]} OOM" if named else "CUDA OOM" if _device(text) == "GPU" else "OOM"


def allocating_sites(facts: Facts) -> list[Event]:
    """Tracebacks through a step that allocates most of the GPU, their exception cut off or about memory.

    A traceback's exception line can land in another record than the frame (a long traceback, an engine's
    "EngineCore hit an exception: Traceback ..." line): any other exception raised from the site on decides
    (vLLM issues 15453, 18580, 18851: a ValueError, a Triton error, an AssertionError inside profile_run).
    """
    failures = [e for e in facts.t.of(Signal.EXCEPTION, Signal.WORKER_EXCEPTION) if isinstance(e.data, Failure)]
    sites = [e for e in failures if (e.data.name or "").startswith(ALLOCATING)  # type: ignore[union-attr]
             and (not e.data.exception or _OUT_OF_MEMORY.search(e.data.exception))]  # type: ignore[union-attr]
    if not sites:
        return []
    other = [e for e in failures if e.data.exception and not _OUT_OF_MEMORY.search(e.data.exception)  # type: ignore[union-attr]
             and facts.at(e) >= facts.at(sites[0])]
    return [] if other else sites


_OUT_OF_MEMORY = re.compile(r"out of memory|OutOfMemory|\bOOM\b|Tried to allocate|No available memory|"
                            r"memory allocation fail|failed to allocate", re.IGNORECASE)
"""An exception about memory running out.  Not any exception naming memory: vLLM's profiling assertion
("Error in memory profiling. Initial free memory 30.3 GiB, current free memory 30.3 GiB") is a check that
failed (xpu-memory-profiling-assert-equal-free-memory: equal figures on XPU, fixed by relaxing > to >=)."""


def died_allocating(facts: Facts) -> Verdict | None:
    """A traceback through a step that allocates most of the GPU, its exception cut off: most often OOM.

    The profiling run pushes max_num_seqs dummy requests (dummy images for vision models) through the
    model to measure peak activations (mllama-11b-vision-l20-profile-run-256-dummy-images-oom-max-num-seqs);
    sleep mode's wake_up re-allocates weights and KV cache next to whatever else holds the GPU
    (verl-fsdp-rollout-wake-up-oom-after-empty-cache-removed).
    """
    raised = allocating_sites(facts)
    if not raised:
        return None
    where = raised[0].data.name.removeprefix(ALLOCATING)  # type: ignore[union-attr]
    forward = where == FORWARD
    draft = Draft(facts, Kind.FRAGMENTED, 0.4 if forward else 0.5,
                  f"GPU memory exhausted (likely): the process died inside {where}")
    draft.sub_kind = MemoryKind.EXHAUSTION
    draft.cite(raised[0], Role.ROOT_CAUSE, "the traceback ends in that computation" if forward
               else "the traceback passes through that allocation")
    draft.undecided = ("the traceback's last line: torch.OutOfMemoryError confirms it; a shape, dtype or CUDA "
                       "error names another fault" if forward
                       else "the traceback's last line: torch.OutOfMemoryError confirms it")
    if not forward:  # a forward pass's steps are the general ones: headroom for activations, a smaller step
        draft.step("leave more of the GPU free", "--gpu-memory-utilization 0.8")
    return draft.done()


_SIZED = ("available_kv_cache", "gpu_blocks", "kv_cache_tokens")


def died_after_sizing(facts: Facts) -> Verdict | None:
    """A traceback, its exception cut off, right after the KV cache was sized and before any later step.

    Sizing hands the KV cache all that profiling left of ``gpu_memory_utilization``; the next steps
    allocate it and capture CUDA graphs on what remains, so they are where the GPU is fullest
    (grpo-deepspeed-vllm-init-oom-gpu-util-0.9: 71 GiB of KV cache at 0.9 next to a DeepSpeed trainer).
    """
    if facts.t.serving_started:
        return None
    sized = [e for e in facts.t.of(Signal.MEMORY) if isinstance(e.data, Memory) and e.data.name in _SIZED]
    raised = facts.t.of(Signal.EXCEPTION, Signal.PROCESS_EXCEPTION)
    if not sized or not raised or any(isinstance(e.data, Failure) and e.data.exception for e in raised):
        return None
    first = raised[0]
    if facts.at(first) < facts.at(sized[-1]) or any(
            facts.at(sized[-1]) < facts.at(e) <= facts.at(first) for e in facts.t.of(Signal.STARTUP_PHASE)):
        return None
    draft = Draft(facts, Kind.FRAGMENTED, 0.45, "GPU memory exhausted at start-up (likely): a process raised right "
                  "after the KV cache was sized, in the allocation and CUDA-graph capture that take what is left")
    draft.sub_kind = MemoryKind.EXHAUSTION
    draft.cite(first, Role.ROOT_CAUSE, "the traceback follows the sizing, before any later start-up step")
    draft.cite(sized[-1], Role.SUPPORTING, "the KV cache's share of the GPU")
    draft.undecided = "the traceback's last line: torch.OutOfMemoryError confirms it"
    draft.step("leave more of the GPU to everything else on it", "--gpu-memory-utilization 0.8")
    return draft.done()


def died_after_compile(facts: Facts) -> Verdict | None:
    """A traceback, its exception cut off, right after torch.compile finished and before the KV cache was sized.

    V1 compiles on the profiling run's first forward; what follows before sizing is the rest of that run (the
    sampler's warm-up with max_num_seqs dummy requests) and the check that memory is left for the KV cache
    ("No available memory for the cache blocks", a max_model_len the cache cannot hold), so memory is the likely
    end (cosyvoice-vllm-no-cache-blocks, and blind round 40's a800-v1-no-cache-blocks: both that ValueError).
    A traceback cut before compile finished ("… in total") is no such sign: an illegal memory access in the
    profiling forward ends the same way (llama4-maverick-ima-cutlass-moe), and so does a kill mid-compile
    (k8s-vllm-exit-during-torch-compile).
    """
    compiled = [e for e in facts.t.of(Signal.COMPILE) if isinstance(e.data, Phase) and e.data.name == "torch_compile"]
    raised = facts.t.of(Signal.EXCEPTION, Signal.PROCESS_EXCEPTION)
    if facts.t.serving_started or not compiled or not raised or any(
            isinstance(e.data, Failure) and e.data.exception for e in raised):
        return None
    first, done = raised[0], compiled[-1]
    sized = [e for e in facts.t.of(Signal.MEMORY) if isinstance(e.data, Memory) and e.data.name in _SIZED]
    if sized or facts.at(first) < facts.at(done) or any(
            facts.at(done) < facts.at(e) <= facts.at(first) for e in facts.t.of(Signal.STARTUP_PHASE)):
        return None
    draft = Draft(facts, Kind.FRAGMENTED, 0.4, "GPU memory exhausted at start-up (likely): a process raised right "
                  "after torch.compile finished, before the KV cache was sized — in the end of the profiling run "
                  "or the check that memory is left for the KV cache")
    draft.sub_kind = MemoryKind.EXHAUSTION
    draft.cite(first, Role.ROOT_CAUSE, "the traceback follows the compile, before any later start-up step")
    draft.cite(done, Role.SUPPORTING, "compiled on the profiling run's first forward")
    draft.undecided = ("the traceback's last line: 'No available memory for the cache blocks' or "
                       "torch.OutOfMemoryError confirms it; a CUDA or compile error names another fault")
    draft.step("leave the KV cache more of the GPU", "--gpu-memory-utilization 0.9")
    draft.step("or profile with fewer dummy sequences", "--max-num-seqs 128")
    return draft.done()


SLEEP_FREED_SHARE = 0.1
"""Sleep releases the weights and the KV cache, nearly all a GPU holds; under a tenth of it freed is a failure."""


def sleep_kept_memory(facts: Facts) -> Verdict | None:
    """Sleep mode that freed almost nothing: the memory it exists to hand back stays held.

    Sleep releases what vLLM allocated through its CuMemAllocator pool; memory allocated around that pool
    (PyTorch's expandable segments) stays, and the trainer or model that counted on it runs out
    (sleep-mode-frees-0gib-with-expandable-segments: 0.00 GiB freed, 63.15 GiB still in use).
    """
    figures = [e for e in facts.t.of(Signal.MEMORY) if isinstance(e.data, Memory)]
    for freed, held in pairwise(figures):
        if not (freed.data.name == "sleep_freed" and held.data.name == "sleep_still_in_use"  # type: ignore[union-attr]
                and freed.line == held.line):
            continue
        gone, kept = freed.data.value, held.data.value  # type: ignore[union-attr]
        if kept >= 1.0 and gone < SLEEP_FREED_SHARE * (gone + kept):
            draft = Draft(facts, Kind.FRAGMENTED, 0.5,
                          f"GPU memory not released: sleep mode freed {gone:.2f} GiB and left {kept:.2f} GiB in use — "
                          "what was meant to be handed back (to a trainer, another model) is still held")
            draft.sub_kind = MemoryKind.EXHAUSTION
            draft.cite(freed, Role.ROOT_CAUSE, "sleep released almost nothing")
            draft.undecided = "the allocator settings of the vLLM process (PYTORCH_CUDA_ALLOC_CONF)"
            draft.step("sleep mode cannot release memory PyTorch's expandable segments allocated: start vLLM "
                       "without expandable_segments in PYTORCH_CUDA_ALLOC_CONF", "unset PYTORCH_CUDA_ALLOC_CONF")
            return draft.done()
    return None

