"""Where a traceback was when its process raised, for tracebacks a paste cut before their exception: a step
that allocates most of the GPU, an allocating statement, or the model's forward computation.  What the
process was doing decides what the missing exception most likely was (docs/verdicts.md, "Memory").
"""

from __future__ import annotations

import re

_ALLOCATING_FRAMES = (
    # a frame ("in profile_run"), a call (".profile_run("), or V0's worker wrapper naming the method it ran
    # ("Exception in worker VllmWorkerProcess while processing method determine_num_available_blocks.":
    # qwen25vl-72b-gptq-10-images-video-profile-oom, its traceback and error past the paste)
    (re.compile(r"(?:\bin |\.|\bmethod )(?:determine_num_available_blocks|determine_available_memory|profile_run)\b"),
     "the memory-profiling run, which holds the largest batch it will ever see"),
    (re.compile(r"(?:\bin |\.)wake_up\b"), "sleep mode's wake-up, which re-allocates the weights and KV cache"),
    # allocating the KV-cache tensors right after the KV cache was sized (V1 and vllm-ascend model runners;
    # ascend-qwen3next-kv-init-oom-gpu-util-0.85: NPU OOM at gpu_memory_utilization 0.85, the error line cut)
    (re.compile(r"(?:\bin |\.)(?:initialize_kv_cache|initialize_from_config)\b"),
     "the KV-cache allocation, which takes what the memory profile left"),
    # the engine's KV-cache set-up, which profiles the peak, sizes the cache and allocates it, all three on
    # the GPU's last free memory; V0's ``initialize_cache`` is the allocation alone
    # (internvl3-78b-4xa100-40g-waiting-engine-then-kv-init-oom, trl-grpo-accelerate-vllm-kv-cache-init-oom:
    # both OOMs past the paste)
    (re.compile(r"\bin _initialize_kv_caches\b|\.initialize_cache\("),
     "the KV-cache set-up, which profiles the peak and then sizes and allocates the cache on what is left"),
    (re.compile(r"(?:\bin |\.)capture_model\b"),
     "CUDA-graph capture, which allocates the graphs' memory pools after the KV cache took its share"),
)
ALLOCATING = "allocating: "
"""Prefix of a traceback site where vLLM allocates most of the GPU at once."""


_FRAME = re.compile(r'File "([^"]*)", line \d+, in ([\w<>]+)')
_FORWARD_CODE = re.compile(r"model_executor/(?:models|layers)/|torch/nn/(?:modules/|functional\.py)|torch/_ops\.py|"
                           r"<eval_with_key>")
_NOT_THE_FORWARD = re.compile(r"/distributed/|layers/(?:sampler|rejection_sampler|logits_processor)\.py")
_FORWARD_CALL = re.compile(r"forward|_call_impl")
"""A frame of the forward itself (``forward``, ``_forward_core``, torch's ``_call_impl``): code under the model's
folders also builds the model (llm-d-dp16-dev-shm-exhausted-nccl-crashloop: a fused-MoE layer's set-up ran out of
/dev/shm, not of GPU memory)."""
_FUNCTION_APPLY = re.compile(r"torch/autograd/function\.py$")
"""``torch.autograd.Function.apply``, which runs the Function's ``forward``: the FLA kernels of linear attention
are called that way (qwen35-awq-rtx5090-triton-oom-solve-tril: ``ChunkGatedDeltaRuleFunction.apply`` on a
request's prefill, its Triton autotuner's OOM past the paste)."""
FORWARD = "the model's forward pass, whose activations grow with the batch"
_RERAISED_NOT_OOM = re.compile(r"line \d+, in _dummy_(?:sampler|pooler)_run[ \t]*\n[^\n]*?\sraise e[ \t]*$", re.MULTILINE)
"""V1's sampler and pooler warm-ups turn an out-of-memory RuntimeError into their own "CUDA out of memory occurred
when warming up …" and re-raise anything else with ``raise e`` (gpu_model_runner.py ``_dummy_sampler_run``): a
traceback through that ``raise e`` carries an error that was not an OOM (flashinfer-jit-nvcc-unknown-option:
FlashInfer's JIT of the sampling kernels, rejected by nvcc)."""


def _in_forward(text: str) -> bool:
    """Does the traceback end inside a model's forward computation, below any collective or sampler?

    An exception raised there comes from the computation itself: a tensor it could not allocate, a shape or
    dtype check, a device fault surfacing at a launch (asynchronous faults mostly surface later, at a sync in
    the sampler or output handling, which is excluded).  Most forward tracebacks of the corpus cut before
    their error were an OOM (mllama-vision-encoder-oom-fixed-by-max-num-seqs-16, single-3090-gdn-multiturn-
    accumulated-context-oom, deepseek-dp-ep-809-running-reqs-gpu-oom, ray-deserialize-error-hides-gpu-oom-
    pp2-tp8, rtx6kpro-ds4-long-context-prefill-delayed-cuda-oom; six of nine with the profile run's), and a long
    traceback is the one a paste cuts; the rest were a model or kernel the version did not support, raised in a
    start-up warm-up (speculators-qwen3vl-eagle3-drafter-dummy-run, qwen25vl-72b-awq-torch-compile-startup), so
    the reading stays "likely" at low confidence.  A collective inside the forward (tensor-parallel all-reduce)
    fails on its peers: not this reading.
    """
    frames = _FRAME.findall(text)
    if not frames or not _FORWARD_CODE.search(frames[-1][0]) or _RERAISED_NOT_OOM.search(text):
        return False
    below = frames[next(i for i, (path, _) in enumerate(frames) if _FORWARD_CODE.search(path)):]
    return (any(_FORWARD_CALL.search(function) or (function == "apply" and _FUNCTION_APPLY.search(path))
                for path, function in below)
            and not any(_NOT_THE_FORWARD.search(path) for path, _ in below))


_ALLOCATION_CALL = re.compile(
    r"\btorch\.(?:empty|zeros|ones|full|rand|randn|empty_strided)(?:_like)?\(|\.new_(?:empty|zeros|ones|full)\(|"
    r"\b(?!\w*(?:dealloc|delete|free|release))\w*alloc\w*\(", re.IGNORECASE)
ALLOCATION = "an allocation (the last statement its traceback shows)"


def _ends_allocating(text: str) -> bool:
    """Is the last statement of a traceback cut before its exception an allocation?

    A tensor factory (``torch.empty(...)``) calls no Python below it, so a traceback whose last frame's
    statement is one raised there, and a factory fails on memory: its arguments were fixed when the code was
    written.  A function named for allocating (``allocate_sm120_moe_workspace(``) says the same of the frames
    past the cut.  qwen3-moe-fused-experts-oom (``cache13 = torch.empty(`` in ``fused_experts_impl``) and
    b12x-moe-static-workspace-oom (a MoE kernel's static workspace at start-up): both OOMs past the paste.
    """
    frames = list(_FRAME.finditer(text))
    if not frames:
        return False
    statement = text[frames[-1].end() :].lstrip(" \t").partition("\n")[2].partition("\n")[0]
    return _ALLOCATION_CALL.search(statement) is not None


_COLLECTIVE_CODE = re.compile(r"torch/distributed/")


def _ends_in_collective(text: str) -> bool:
    """Does the traceback end inside torch.distributed?  A process that raised there raised in a collective, whose
    errors are its peers' (one that never came, or left), whatever step called it: V0's
    ``determine_num_available_blocks`` all-reduces the profiled block count over the CPU group after profiling
    (verl-multinode-vllm-init-kv-blocks-allreduce-timeout: its traceback cut in ``c10d_logger``'s wrapper)."""
    frames = _FRAME.findall(text)
    return bool(frames) and _COLLECTIVE_CODE.search(frames[-1][0]) is not None


def traceback_site(text: str) -> str | None:
    """Where in vLLM a traceback passes that says what the process was doing when it raised."""
    if _ends_in_collective(text):
        return None
    site = next((ALLOCATING + what for frames, what in _ALLOCATING_FRAMES if frames.search(text)), None)
    if site is None and _ends_allocating(text):
        site = ALLOCATING + ALLOCATION
    return site or (ALLOCATING + FORWARD if _in_forward(text) else None)
