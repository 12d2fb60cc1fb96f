"""Each rule learnt from the blind rounds, on both sides of its line: the fact that decides, and the
look-alike it must not catch (cases named in tests/corpus/HELDOUT.md)."""

from __future__ import annotations

from engdiag.analysis.analyze import analyze


def _verdict(tmp_path, text: str):
    path = tmp_path / "fragment.log"
    path.write_text(text)
    return analyze([str(path)]).verdict


_PROFILE = ("INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; "
            "PyTorch activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is {kv}GiB.\n"
            "INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: {blocks}, # CPU blocks: 4681\n")


def test_the_profilers_negative_kv_figure_is_exhaustion_and_a_positive_one_is_not(tmp_path):
    verdict = _verdict(tmp_path, _PROFILE.format(kv="-1.05", blocks=0))
    assert verdict.kind.value == "fragmented" and verdict.sub_kind.value == "exhaustion"
    assert _verdict(tmp_path, _PROFILE.format(kv="12.40", blocks=9000)).kind.value != "fragmented"


_HEARTBEAT = """\
ERROR 12-06 14:22:34 engine.py:159]   File "/m/model.py", line 180, in validate_input_shape
ERROR 12-06 14:22:34 engine.py:159] {exception}
ERROR 12-06 14:25:41 client.py:250] TimeoutError('No heartbeat received from MQLLMEngine')
"""


def test_a_heartbeat_lost_after_the_engine_raised_is_its_echo(tmp_path):
    verdict = _verdict(tmp_path, _HEARTBEAT.format(exception="AssertionError: Prefill only supports seq_len < 32768"))
    assert verdict.kind.value == "crashed" and "AssertionError" in verdict.headline
    assert [e.role.value for e in verdict.evidence][:2] == ["root cause", "consequence"]


def test_a_timeout_before_the_heartbeat_is_not_a_crash(tmp_path):
    verdict = _verdict(tmp_path, _HEARTBEAT.format(exception="TimeoutError: RPC call timed out"))
    assert verdict.kind.value == "slow"


def test_a_launcher_limit_under_a_minute_is_shorter_than_any_start_up(tmp_path):
    verdict = _verdict(tmp_path, """\
Jul 25 14:36:08 host lemond[594237]: Waiting for vllm-server to be ready (timeout: 0s)...
Jul 25 14:36:08 host lemond[594237]: 2026-07-25 14:36:08.362 [Error] (WrappedServer) vllm-server failed to start within timeout
""")
    assert verdict.kind.value == "slow" and "allowed 0 s" in verdict.headline and verdict.confidence >= 0.7


def test_a_start_up_limit_with_nothing_else_leans_slow_and_says_what_decides(tmp_path):
    verdict = _verdict(tmp_path, "E   RuntimeError: Server failed to start in time.\n")
    assert verdict.kind.value == "slow" and verdict.confidence <= 0.4 and verdict.undecided


_CAPTURE = """\
(Worker_TP1 pid=7) INFO 06-27 19:49:58 [gpu_worker.py:580] Completed CPU memory pinning: 16 tensors pinned in 1.392 s
Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   1%|          | 1/83 [00:00<00:43,  {rate}]
(EngineCore pid=5) INFO 06-27 19:50:58 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.
(EngineCore pid=5) INFO 06-27 19:51:58 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.
(EngineCore pid=5) INFO 06-27 19:52:58 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.
"""


def test_a_bar_silent_long_past_its_own_finishing_time_stopped(tmp_path):
    verdict = _verdict(tmp_path, _CAPTURE.format(rate="1.90it/s"))
    assert verdict.kind.value == "deadlocked" and "1/83" in verdict.headline


def test_a_slow_bar_still_within_its_own_pace_is_work(tmp_path):
    verdict = _verdict(tmp_path, _CAPTURE.format(rate="20.00s/it"))  # 82 items left at 20 s each: 27 minutes
    assert verdict.kind.value == "slow"


_PYNCCL = """\
(VllmWorkerProcess pid=49742) INFO 11-10 17:05:23 multiproc_worker_utils.py:215] Worker ready; awaiting tasks
INFO 11-10 17:05:23 pynccl.py:63] vLLM is using nccl==2.20.5
(VllmWorkerProcess pid=49742) INFO 11-10 17:05:23 pynccl.py:63] vLLM is using nccl==2.20.5
"""


def test_two_ranks_that_stop_as_pynccl_starts_its_communicator_wait_in_nccl_init(tmp_path):
    verdict = _verdict(tmp_path, _PYNCCL)
    assert verdict.kind.value == "deadlocked" and "NCCL init" in verdict.headline


def test_start_up_work_after_the_communicator_means_nccl_init_finished(tmp_path):
    verdict = _verdict(tmp_path, _PYNCCL + "INFO 11-10 17:05:40 model_runner.py:1077] Loading model weights took 9.1 GB\n")
    assert verdict.kind.value != "deadlocked"


def test_nccl_set_up_followed_by_minutes_of_waiting_is_stuck_and_alone_is_not(tmp_path):
    nccl = "pod-0:958:958 [1] NCCL INFO Channel 01/0 : 0[1] -> 1[2] via P2P/IPC\n"
    waits = "".join(f"(APIServer pid=1) DEBUG 08-09 20:5{m}:{s}0 [v1/engine/utils.py:1262] Waiting for 1 local, "
                    "0 remote core engine proc(s) to start.\n" for m in (5, 6) for s in range(6))
    assert _verdict(tmp_path, nccl + waits).kind.value == "deadlocked"
    assert _verdict(tmp_path, nccl).kind.value == "unknown"


def test_a_capture_of_ranks_compiling_is_slow_and_of_ranks_in_a_collective_is_not(tmp_path):
    compiling = """\
Worker_TP0:
    make_llir (triton/backends/nvidia/compiler.py:417)
    _forward_sparse_mla_prefill_triton (deepseek_v4/nvidia/flashmla.py:673)
"""
    waiting = """\
Worker_TP0:
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    forward (vllm/model_executor/layers/linear.py:1200)
"""
    assert _verdict(tmp_path, compiling).kind.value == "slow"
    assert _verdict(tmp_path, waiting).kind.value == "deadlocked"


def test_a_traceback_through_a_compiler_is_a_crash_site_not_work(tmp_path):
    verdict = _verdict(tmp_path, """\
Traceback (most recent call last):
  File "/venv/triton/compiler/compiler.py", line 300, in compile
    next_module = compile_ir(module, metadata)
RuntimeError: PTX assembly failed
""")
    assert verdict.kind.value != "slow"


def test_a_core_waiting_through_start_up_after_the_banner_leans_slow(tmp_path):
    stall = ("(EngineCore pid=26) INFO 04-29 02:2{m}:52 [shm_broadcast.py:681] No available shared memory broadcast "
             "block found in 60 seconds. This typically happens when some processes are hanging or doing some "
             "time-consuming work\n")
    banner = "(EngineCore pid=26) INFO 04-29 02:26:40 [core.py:90] Initializing a V1 LLM engine (v0.20.0) with config: model='m'\n"
    text = "".join(stall.format(m=m) for m in (7, 8, 9))
    assert _verdict(tmp_path, banner + text).kind.value == "slow"
    assert _verdict(tmp_path, text).kind.value == "deadlocked"  # waits alone, nothing starting: stuck workers
