"""The rules learnt from blind rounds 36 and 37, each on both sides of its line (cases named in tests/corpus/HELDOUT.md)."""

from __future__ import annotations

from engdiag.analysis.analyze import analyze
from tests.conftest import verdict_of

_EVENT_WAIT = ("        The error from device(chipId:3, dieId:1), serial number is 18, event wait timeout occurred during "
               "task execution, stream_id:39, sq_id:10, task_id:24, event_id=37{limit}.[FUNC:ProcessStarsWaitTimeout"
               "ErrorInfo][FILE:device_error_proc.cc][LINE:1593]\n"
               "        Kernel Run failed. opType: 35, Sort\n")


def test_an_ascend_event_wait_that_ran_out_is_a_streams_work_that_never_finished(tmp_path):
    verdict = verdict_of(tmp_path, _EVENT_WAIT.format(limit=", timeout=234s"))
    assert verdict.kind.value == "deadlocked" and "Ascend's task timeout" in verdict.headline
    guard = analyze([str(tmp_path / "fragment.log")]).model.guard
    assert guard is not None and guard.limit_s == 234
    # without the printed limit the wait is the same fact, its guard's default unknown
    assert verdict_of(tmp_path, _EVENT_WAIT.format(limit="")).kind.value == "deadlocked"
    # an event recorded and waited for in the normal way is no timeout
    assert verdict_of(tmp_path, "        event wait occurred during task execution, stream_id:39\n").kind.value != "deadlocked"


_HOLD = ("(EngineCore_DP3 pid=546) INFO 08-29 09:12:36 [mooncake_connector.py:1910] Delaying free of 6 blocks for "
         "request chatcmpl-35-b6\n"
         "(Worker_DP3_TP1_EP25 pid=649) ERROR 08-29 09:12:47 [mooncake_connector.py:233] Force freed expired request: "
         "chatcmpl-35-b6. Reason: Request exceeded timeout threshold ({s} seconds). Action: Resources have been "
         "forcibly released to prevent memory leak.\n")


def test_a_kv_hold_set_far_below_its_default_is_a_guard_too_tight_for_the_load(tmp_path):
    verdict = verdict_of(tmp_path, _HOLD.format(s=10))
    assert verdict.kind.value == "slow" and "within 10 s" in verdict.headline and "480 s default" in verdict.headline
    assert any("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT above its 10 s" in s.text and s.command is None
               for s in verdict.next_steps)
    # at its default, a decode side that never pulled is no slow queue this rule can vouch for
    assert verdict_of(tmp_path, _HOLD.format(s=480)).kind.value != "slow"


_RUN_WORKERS = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.8/site-packages/vllm/engine/llm_engine.py", line 562, in step
    output = self._run_workers(
  File "/usr/local/lib/python3.8/site-packages/vllm/engine/llm_engine.py", line 718, in _run_workers
    {check}
AssertionError
"""


def test_v0_workers_that_returned_different_outputs_are_diverged_ranks(tmp_path):
    verdict = verdict_of(tmp_path, _RUN_WORKERS.format(check="assert output == other_output"))
    assert verdict.kind.value == "deadlocked" and "diverged" in verdict.headline
    assert any(s.text.startswith("upgrade vLLM") for s in verdict.next_steps)
    # another assert in the same function is no divergence
    assert verdict_of(tmp_path, _RUN_WORKERS.format(check="assert len(all_outputs) > 0")).kind.value != "deadlocked"


_PREEMPTED = ("WARNING 10-28 11:16:41 scheduler.py:1483] Sequence group chat-7e is preempted by PreemptionMode.SWAP mode "
              "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
              "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
              "total_num_cumulative_preemption=1\n")


def test_a_preemption_alone_is_kv_pressure_but_not_when_the_runner_raised_after_it(tmp_path):
    verdict = verdict_of(tmp_path, _PREEMPTED)
    assert verdict.kind.value == "fragmented" and verdict.sub_kind is not None
    assert verdict.sub_kind.value == "kv-pressure" and "SWAP mode" in verdict.headline
    # V0's dump of a failed execution right after: the preemption set off a crash (v063-priority-preemption-…)
    crashed = verdict_of(tmp_path, _PREEMPTED + "INFO 10-11 06:51:31 model_runner_base.py:120] Writing input of failed "
                                              "execution to /tmp/err_execute_model_input_20241011-065131.pkl...\n")
    assert crashed.kind.value != "fragmented"


def test_a_cuda_error_nccl_names_is_a_crash_and_its_out_of_memory_is_memory(tmp_path):
    line = "worker-6:56890:56890 [0] enqueue.cc:267 NCCL WARN Cuda failure '{e}'\n"
    verdict = verdict_of(tmp_path, line.format(e="dependency created on uncaptured work in another stream"))
    assert verdict.kind.value == "crashed" and "uncaptured work" in verdict.headline
    assert verdict_of(tmp_path, line.format(e="out of memory")).kind.value == "fragmented"


def test_a_store_wait_for_keys_a_process_group_needs_is_a_rendezvous_short_of_members(tmp_path):
    line = ("(VllmWorker rank=0 pid=4189097) ERROR 08-06 22:23:09 [multiproc_executor.py:487] "
            "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: {keys}\n")
    verdict = verdict_of(tmp_path, line.format(keys="/default_pg/0//54//cpu//0/2"))
    assert verdict.kind.value == "deadlocked" and "rendezvous can never complete" in verdict.headline
    # PyNccl's KV pipe waits on the store for the next tensor: an idle receiver times out the same way
    idle = verdict_of(tmp_path, line.format(keys="/send_to/0/8"))
    assert idle.kind.value == "unknown"


def test_intel_xe_driver_resetting_a_timed_out_job_is_a_device_fault(tmp_path):
    reset = ("xe 0000:04:00.0: [drm] Tile0: GT0: Timedout job: seqno=1, lrc_seqno=1, guc_id=35, flags=0x20 in "
             "VLLM::EngineCor [74]\n")
    assert verdict_of(tmp_path, reset).kind.value == "crashed"
    # the driver's other lines are no fault
    assert verdict_of(tmp_path, "xe 0000:04:00.0: [drm] Using GuC firmware from xe/bmg_guc_70.bin\n").kind.value != "crashed"
