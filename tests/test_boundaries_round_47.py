"""Readings added after blind round 47 (tests/corpus/HELDOUT.md), each on both sides of its line."""

from __future__ import annotations

from tests.conftest import verdict_of

_SPLIT_OOM = "CUDA out of memory. Tried to allocate 24.43 GiB.\n15.36 GiB is free\n{resv} is reserved by PyTorch but unallocated\n"


def test_the_reserved_figure_on_a_line_of_its_own_still_decides_fragmentation(tmp_path):
    """glm52-pcp4-ci-moe-workspace-oom: the message broken over three lines; its fix was expandable_segments."""
    split = verdict_of(tmp_path, _SPLIT_OOM.format(resv="23.97 GiB"))
    assert split.kind.value == "fragmented" and split.sub_kind.value == "fragmentation"
    assert "23.97 GiB sat reserved but unallocated" in split.headline
    # a small reserved figure is a full GPU, as on one line
    full = verdict_of(tmp_path, _SPLIT_OOM.format(resv="12.00 MiB"))
    assert full.kind.value == "fragmented" and full.sub_kind.value == "exhaustion"


_FRAMES = """(EngineCore_DP0 pid=162)   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/fla/ops/chunk.py", line 207, in chunk_gated_delta_rule
(EngineCore_DP0 pid=162)     o, final_state = ChunkGatedDeltaRuleFunction.apply(
(EngineCore_DP0 pid=162)   File "/usr/local/lib/python3.12/dist-packages/torch/autograd/function.py", line 583, in {call}
(EngineCore_DP0 pid=162)     return super().apply(*args, **kwargs)  # type: ignore[misc]
(EngineCore_DP0 pid=162)   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/fla/ops/utils.py", line 113, in wrapper
(EngineCore_DP0 pid=162)     return fn(*contiguous_args, **contiguous_kwargs)
"""


def test_a_cut_inside_an_autograd_functions_apply_died_in_the_forward(tmp_path):
    """qwen35-awq-rtx5090-triton-oom-solve-tril: Function.apply runs the Function's forward (FLA's GDN kernels)."""
    verdict = verdict_of(tmp_path, _FRAMES.format(call="apply"))
    assert verdict.kind.value == "fragmented" and "(likely)" in verdict.headline and verdict.confidence <= 0.5
    # the same frames without a call that runs a forward may be a layer's set-up: no memory reading
    other = verdict_of(tmp_path, _FRAMES.format(call="load_weights"))
    assert other.kind.value != "fragmented"


_NPU_OOM = ("RuntimeError: NPU out of memory. Tried to allocate 4.50 GiB (NPU 1; 60.96 GiB total capacity; 52.87 GiB "
            "already allocated; 52.87 GiB current active; 2.77 GiB free; {resv} reserved in total by PyTorch) If reserved "
            "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.\n")


def test_torch_npus_oom_figures_are_read_as_pytorchs_old_cuda_message(tmp_path):
    """torch_npu mirrors PyTorch's old CUDA message, with a "current active" figure (ascend-qwen25vl-vit-allgather-
    npu-oom: 56.89 GiB reserved in total, 52.87 GiB allocated: 4.02 GiB unallocated against 4.50 GiB asked for)."""
    split = verdict_of(tmp_path, _NPU_OOM.format(resv="56.89 GiB"))
    assert split.sub_kind.value == "fragmentation" and split.headline.startswith("device memory fragmented: NPU OOM")
    full = verdict_of(tmp_path, _NPU_OOM.format(resv="53.00 GiB"))
    assert full.sub_kind.value == "exhaustion" and "NPU OOM asking for 4.50 GiB with 2.77 GiB free" in full.headline
