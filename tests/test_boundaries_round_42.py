"""Readings added after blind round 42 (tests/corpus/HELDOUT.md), each on both sides of its line."""

from __future__ import annotations

from tests.conftest import analysis_of, verdict_of

_METAL = ("2026-06-30 20:54:48.928 | error    |           Metal | Timeout detected (metal_context.cpp:778)\n"
          "2026-06-30 20:54:48.928 | info     |           Metal | Serializing Inspector RPC data (metal_context.cpp:781)\n")


def test_tt_metals_dispatch_timeout_handler_is_its_operation_watchdog(tmp_path):
    """MetalContext::on_dispatch_timeout_detected logs 'Timeout detected' (then the Inspector's data, tt-triage) when
    TT_METAL_OPERATION_TIMEOUT_SECONDS runs out on the dispatch queue (tt-qwen36-27b-prefill-dispatch-timeout)."""
    result = analysis_of(tmp_path, _METAL)
    assert result.verdict.kind.value == "deadlocked" and "dispatch queue" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.knob == "TT_METAL_OPERATION_TIMEOUT_SECONDS"
    # the same words from anything but tt-logger's Metal component are no such guard
    assert verdict_of(tmp_path, "2026-06-30 20:54:48 WARNING Timeout detected while polling the queue\n").kind.value \
        != "deadlocked"


_UNPLACED = ('{{"levelname": "WARNING", "asctime": "2024-03-24 03:{m}:59,398", "component_name": "controller", '
             '"message": "deployment_state.py:2152 - Deployment \'VLLMDeployment:amazon--LightGPT\' in application '
             '\'ray-llm\' 1 replicas that have taken more than 30s to be scheduled. This may be due to waiting for the '
             'cluster to auto-scale or for a runtime environment to be installed. Resources required for each replica: '
             '[{{\\"GPU\\": 0.1}}], total resources available: {{}}. Use `ray status` for more details."}}\n')


def test_one_ray_serve_warning_at_30_s_is_a_placement_too_early_to_judge(tmp_path):
    """rayllm-replica-never-scheduled-no-resources: one warning, 30 s in — a cluster still scaling up reads the same
    (it read 'healthy' at 0.7 before, as if no wait were there)."""
    verdict = verdict_of(tmp_path, _UNPLACED.format(m="17"))
    assert verdict.kind.value == "unknown" and "ray status" in verdict.undecided
    # the same warning minutes on is a placement that will not come
    assert verdict_of(tmp_path, "".join(_UNPLACED.format(m=m) for m in ("17", "18", "19"))).kind.value == "deadlocked"


_CUT_IN_COLLECTIVE = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/llm_engine.py", line 421, in _initialize_kv_caches
    self.model_executor.determine_num_available_blocks())
  File "/usr/local/lib/python3.10/dist-packages/vllm/executor/uniproc_executor.py", line 137, in determine_num_available_blocks
    dist.all_reduce(a_tensor, group=cpu_group, op=dist.ReduceOp.MIN)
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py", line 83, in wrapper
    return func(*args, **kwargs)
"""


def test_a_traceback_cut_inside_a_collective_is_no_allocation_site(tmp_path):
    """V0's determine_num_available_blocks all-reduces the profiled block count over the CPU group after profiling: a
    traceback cut in that collective raised on its peers, not on memory, indented or flush left as a paste without
    a code block leaves it (verl-multinode-vllm-init-kv-blocks-allreduce-timeout)."""
    flush_left = "".join(line.lstrip() + "\n" for line in _CUT_IN_COLLECTIVE.splitlines())
    for text in (_CUT_IN_COLLECTIVE, flush_left):
        verdict = verdict_of(tmp_path, text)
        assert verdict.kind.value == "deadlocked" and "gloo" in verdict.headline, text
    # cut inside the profiling itself, the same frames read as the likely OOM they mostly are
    in_profile = _CUT_IN_COLLECTIVE.rsplit("  File", 2)[0] + (
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 229, in determine_num_available_blocks\n'
        "    self.model_runner.profile_run()\n")
    assert verdict_of(tmp_path, in_profile).kind.value == "fragmented"


def test_a_flush_left_frame_header_and_its_statement_stay_two_lines(tmp_path):
    """A paste without a code block loses the indents: the statement under a frame header is still its own line
    (a wrap join made '… in determine_num_available_blocksdist.all_reduce(…)', hiding the call)."""
    text = ('File "/usr/lib/python3.10/site-packages/vllm/v1/engine/core.py", line 283, in step_with_batch_queue_and_more\n'
            "raise RuntimeError('boom')\nRuntimeError: Engine core step failed\n")
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value == "unknown" and "RuntimeError: Engine core step failed" in verdict.headline
