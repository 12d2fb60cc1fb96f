"""The rules learnt from blind rounds 32 to 35, each on both sides of its line (cases named in tests/corpus/HELDOUT.md)."""

from __future__ import annotations

from engdiag.analysis.analyze import analyze
from engdiag.logs.lines import pieces
from engdiag.logs.tags import process_tag
from tests.conftest import verdict_of

_DUMP = """\
Process 4242: VLLM::EngineCore
Python v3.12.3 (/usr/bin/python3.12)

Thread 4242 (active+gil): "MainThread"
    {frame:<24} (torch/cuda/streams.py:197)
    import_event             (lmcache/v1/platform/base/event_ipc.py:225)
    run_busy_loop            (vllm/v1/engine/core.py:801)
"""


def test_a_captured_thread_waiting_on_a_device_event_is_a_device_not_finishing(tmp_path):
    verdict = verdict_of(tmp_path, _DUMP.format(frame="from_ipc_handle"))
    assert verdict.kind.value == "deadlocked" and "from_ipc_handle" in verdict.headline
    assert "second capture" in (verdict.undecided or "")
    assert verdict_of(tmp_path, _DUMP.format(frame="synchronize")).kind.value == "deadlocked"


def test_the_same_frame_in_an_exceptions_traceback_is_where_it_raised_not_a_wait(tmp_path):
    verdict = verdict_of(tmp_path, """\
ERROR 08-04 06:53:21 [core.py:700] Traceback (most recent call last):
ERROR 08-04 06:53:21 [core.py:700]   File "/x/torch/cuda/streams.py", line 197, in synchronize
ERROR 08-04 06:53:21 [core.py:700]     super().synchronize()
ERROR 08-04 06:53:21 [core.py:700] RuntimeError: CUDA error: an illegal memory access was encountered
""")
    assert verdict.kind.value == "crashed"


def test_tokens_after_the_capture_mean_the_wait_ended(tmp_path):
    stats = ("INFO 08-04 06:54:21 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
             "throughput: 41.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%\n")
    assert verdict_of(tmp_path, _DUMP.format(frame="synchronize") + stats).kind.value != "deadlocked"


_HCCL = """\
[rank7]:[E804 06:53:22.977007643 ProcessGroupHCCL.cpp:1869] [Rank 3] HCCL watchdog thread terminated with exception:
terminate called after throwing an instance of 'std::runtime_error'
[ERROR] RUNTIME(2817,):2026-08-04-06:53:21.438.346 [device_error_proc.cc:1587]3154 ProcessStarsWaitTimeoutErrorInfo:\
The error from device(chipId:3, dieId:1), serial number is 27, {what}, stream_id:142, sq_id:146, task_id:28598, \
notify_id=671, timeout=204s.
"""


def test_ascends_notify_wait_timeout_is_a_collective_that_never_completed_and_comes_first(tmp_path):
    verdict = verdict_of(tmp_path, _HCCL.format(what="notify wait timeout occurred during task execution"))
    assert verdict.kind.value == "deadlocked"
    root = verdict.evidence[0]
    assert root.role.value == "root cause" and "notify wait timeout" in root.text and root.line == 3


def test_another_device_error_is_no_notify_wait(tmp_path):
    assert verdict_of(tmp_path, _HCCL.format(what="aicpu exception occurred during task execution")).kind.value != "deadlocked"


def test_the_plog_stamp_gives_its_line_a_time_and_a_level():
    piece = pieces("[ERROR] RUNTIME(2817,):2026-08-04-06:53:21.437.447 [stars_engine.cc:1548]3154 Task run failed", 1)[0]
    assert piece.stamp is not None and piece.stamp.text.endswith("08-04 06:53:21") and piece.level == "ERROR"
    assert "Task run failed" in piece.msg
    torch_npu = pieces("[ERROR] 2026-08-04-06:53:22 (PID:2817, Device:3, RankID:-1) ERR02005 DIST internal error", 1)[0]
    assert torch_npu.stamp is not None and "ERR02005" in torch_npu.msg
    assert pieces("[ERROR] the model's config is missing", 1)[0].stamp is None


_SAMPLER = """\
ERROR 08-21 07:45:43 [core.py:700] Traceback (most recent call last):
ERROR 08-21 07:45:43 [core.py:700]   File "/v/vllm/v1/worker/gpu_model_runner.py", line 2470, in _dummy_sampler_run
ERROR 08-21 07:45:43 [core.py:700]     {statement}
ERROR 08-21 07:45:43 [core.py:700]   File "/v/vllm/v1/worker/gpu_model_runner.py", line 2460, in _dummy_sampler_run
ERROR 08-21 07:45:43 [core.py:700]     sampler_output = self.sampler(logits=logits,
ERROR 08-21 07:45:43 [core.py:700]   File "/t/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl
ERROR 08-21 07:45:43 [core.py:700]     return self._call_impl(*args, **kwargs)
"""


def test_the_sampler_warm_ups_raise_e_carries_no_out_of_memory(tmp_path):
    verdict = verdict_of(tmp_path, _SAMPLER.format(statement="raise e"))
    assert verdict.kind.value != "fragmented"


def test_a_forward_traceback_cut_before_its_error_still_reads_as_memory(tmp_path):
    verdict = verdict_of(tmp_path, _SAMPLER.format(statement="output = self._sample(logits)"))
    assert verdict.kind.value == "fragmented"


def test_skypilots_task_tag_names_the_job_and_the_vllm_tag_inside_names_the_process():
    proc, rest = process_tag("(vllm-test, pid=2150) (EngineCore_0 pid=3966) ERROR 08-21 07:45:43 [core.py:700] x")
    assert proc is not None and proc.name == "EngineCore_0" and proc.pid == 3966
    assert rest.startswith("ERROR 08-21")
    alone, _ = process_tag("(vllm-test, pid=2150) INFO 08-21 07:45:43 [api_server.py:1] up")
    assert alone is not None and alone.name == "vllm-test" and alone.pid == 2150
    assert process_tag("(see above, the log) INFO x")[0] is None


_LOAD = """\
INFO 10-02 08:07:17 shm_broadcast.py:241] vLLM message queue communication handle: Handle(connect_ip='127.0.0.1')
INFO 10-02 08:07:18 model_runner.py:1014] Starting to load model mistralai/Mistral-Large-Instruct-2407...
(VllmWorkerProcess pid=2089121) INFO 10-02 08:07:18 model_runner.py:1014] Starting to load model mistralai/Mistral-Large-Instruct-2407...
INFO 10-02 08:07:20 weight_utils.py:242] Using model weights format ['*.safetensors']
"""


def test_a_load_that_began_and_never_reported_its_end_is_where_the_log_stops(tmp_path):
    verdict = verdict_of(tmp_path, _LOAD)
    assert verdict.kind.value == "unknown" and "weight loading running" in verdict.headline
    assert verdict.evidence and verdict.evidence[0].line in (2, 3)  # a rank's start of loading


def test_a_load_that_reported_its_end_is_not_still_running(tmp_path):
    done = "INFO 10-02 08:09:20 model_runner.py:1025] Loading model weights took 57.2 GB\n"
    assert "weight loading running" not in verdict_of(tmp_path, _LOAD + done).headline


_OMNI = """\
(Worker_TP0 pid=585436) INFO 05-14 19:21:12 [kv_transfer_manager.py:920] KV transfer OK: img_edit-8a02, 220042915 bytes across 1 key(s), 0.151s, 1393.7 MB/s
ERROR 05-14 19:21:15 [kv_transfer_manager.py:1116] Timeout waiting for KV cache for request {request} after 30.0s
"""


def test_a_stage_that_never_got_a_requests_kv_waited_on_the_stage_before(tmp_path):
    verdict = verdict_of(tmp_path, _OMNI.format(request="img_edit-ac7be4b5a8295c04"))
    assert verdict.kind.value == "deadlocked" and "stage before" in verdict.headline
    assert "stage before's log" in (verdict.undecided or "")


def test_the_profile_runs_dummy_request_waits_on_no_one(tmp_path):
    assert verdict_of(tmp_path, _OMNI.format(request="dummy_req_id")).kind.value != "deadlocked"


_DEATH = """\
Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   2%|▏         | 2/83 [00:01<00:56,  1.43it/s]
({proc} pid=230522) Process {proc}:
({proc} pid=230522) Traceback (most recent call last):
({proc} pid=230522)   File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap
({proc} pid=230522)     self.run()
"""


def test_the_api_server_dying_while_start_up_advances_is_its_wait_giving_up(tmp_path):
    assert verdict_of(tmp_path, _DEATH.format(proc="ApiServer_5")).kind.value == "slow"


def test_the_engine_core_dying_while_start_up_advances_is_the_work_failing(tmp_path):
    verdict = verdict_of(tmp_path, _DEATH.format(proc="EngineCore_DP0"))
    assert verdict.kind.value != "slow"


_HSA = (":0:rocdevice.cpp            :3675: 2139490044663 us:  Callback: Queue 0x7ee7b4200000 aborting with error : "
        "{status}: The agent attempted to access memory beyond the largest legal address. code: 0x29\n"
        "Kernel Name: _ZN5aiter50fmoe_bf16_blockscaleFp8_g1u1_vs_silu_1tg_ps_32x256E\n")


def test_hips_aperture_violation_is_amds_illegal_memory_access(tmp_path):
    verdict = verdict_of(tmp_path, _HSA.format(status="HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"))
    assert verdict.kind.value == "crashed"


def test_another_queue_error_is_not_read_as_that_fault(tmp_path):
    assert verdict_of(tmp_path, _HSA.format(status="HSA_STATUS_ERROR_OUT_OF_RESOURCES")).kind.value != "crashed"


def test_the_notify_waits_printed_limit_is_the_guards_limit(tmp_path):
    path = tmp_path / "plog.log"
    path.write_text(_HCCL.format(what="notify wait timeout occurred during task execution"))
    fired = analyze([str(path)]).model.guard
    assert fired is not None and fired.limit_s == 204 and fired.limit_origin == "printed"
