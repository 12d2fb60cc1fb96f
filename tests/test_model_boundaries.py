"""Each rule learnt from the blind rounds, on both sides of its line: the fact that decides, and the
look-alike it must not catch (cases named in tests/corpus/HELDOUT.md)."""

from __future__ import annotations

import pytest

from engdiag.analysis.analyze import analyze
from engdiag.logs.lines import pieces
from engdiag.logs.records import Join, joins
from tests.conftest import verdict_of

_PROFILE = ("INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; "
            "PyTorch activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is {kv}GiB.\n"
            "INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: {blocks}, # CPU blocks: 4681\n")


def test_the_profilers_negative_kv_figure_is_exhaustion_and_a_positive_one_is_not(tmp_path):
    verdict = verdict_of(tmp_path, _PROFILE.format(kv="-1.05", blocks=0))
    assert verdict.kind.value == "fragmented" and verdict.sub_kind.value == "exhaustion"
    assert verdict_of(tmp_path, _PROFILE.format(kv="12.40", blocks=9000)).kind.value != "fragmented"


_HEARTBEAT = """\
ERROR 12-06 14:22:34 engine.py:159]   File "/m/model.py", line 180, in validate_input_shape
ERROR 12-06 14:22:34 engine.py:159] {exception}
ERROR 12-06 14:25:41 client.py:250] TimeoutError('No heartbeat received from MQLLMEngine')
"""


def test_a_heartbeat_lost_after_the_engine_raised_is_its_echo(tmp_path):
    verdict = verdict_of(tmp_path, _HEARTBEAT.format(exception="AssertionError: Prefill only supports seq_len < 32768"))
    assert verdict.kind.value == "crashed" and "AssertionError" in verdict.headline
    assert [e.role.value for e in verdict.evidence][:2] == ["root cause", "consequence"]


def test_a_timeout_before_the_heartbeat_is_not_a_crash(tmp_path):
    verdict = verdict_of(tmp_path, _HEARTBEAT.format(exception="TimeoutError: RPC call timed out"))
    assert verdict.kind.value == "slow"


def test_a_launcher_limit_under_a_minute_is_shorter_than_any_start_up(tmp_path):
    verdict = verdict_of(tmp_path, """\
Jul 25 14:36:08 host lemond[594237]: Waiting for vllm-server to be ready (timeout: 0s)...
Jul 25 14:36:08 host lemond[594237]: 2026-07-25 14:36:08.362 [Error] (WrappedServer) vllm-server failed to start within timeout
""")
    assert verdict.kind.value == "slow" and "allowed 0 s" in verdict.headline and verdict.confidence >= 0.7


def test_a_start_up_limit_with_nothing_else_leans_slow_and_says_what_decides(tmp_path):
    verdict = verdict_of(tmp_path, "E   RuntimeError: Server failed to start in time.\n")
    assert verdict.kind.value == "slow" and verdict.confidence <= 0.4 and verdict.undecided


_CAPTURE = """\
(Worker_TP1 pid=7) INFO 06-27 19:49:58 [gpu_worker.py:580] Completed CPU memory pinning: 16 tensors pinned in 1.392 s
Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   1%|          | 1/83 [00:00<00:43,  {rate}]
(EngineCore pid=5) INFO 06-27 19:50:58 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.
(EngineCore pid=5) INFO 06-27 19:51:58 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.
(EngineCore pid=5) INFO 06-27 19:52:58 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.
"""


def test_a_bar_silent_long_past_its_own_finishing_time_stopped(tmp_path):
    verdict = verdict_of(tmp_path, _CAPTURE.format(rate="1.90it/s"))
    assert verdict.kind.value == "deadlocked" and "1/83" in verdict.headline


def test_a_slow_bar_still_within_its_own_pace_is_work(tmp_path):
    verdict = verdict_of(tmp_path, _CAPTURE.format(rate="20.00s/it"))  # 82 items left at 20 s each: 27 minutes
    assert verdict.kind.value == "slow"


_PYNCCL = """\
(VllmWorkerProcess pid=49742) INFO 11-10 17:05:23 multiproc_worker_utils.py:215] Worker ready; awaiting tasks
INFO 11-10 17:05:23 pynccl.py:63] vLLM is using nccl==2.20.5
(VllmWorkerProcess pid=49742) INFO 11-10 17:05:23 pynccl.py:63] vLLM is using nccl==2.20.5
"""


def test_two_ranks_that_stop_as_pynccl_starts_its_communicator_wait_in_nccl_init(tmp_path):
    verdict = verdict_of(tmp_path, _PYNCCL)
    assert verdict.kind.value == "deadlocked" and "NCCL init" in verdict.headline


def test_one_rank_that_stops_as_pynccl_starts_its_communicator_waits_on_the_others_and_a_nccl_notice_does_not(tmp_path):
    # l40s-custom-allreduce-p2p-init-hang: only rank 0 prints pynccl's line (info_once), and pynccl prints it
    # only for a group of more than one rank: the unique-id broadcast, ncclCommInitRank and the warm-up
    # all_reduce that follow need every rank
    alone = verdict_of(tmp_path, "Detected torchrun environment: world_size=2, rank=0/1\n"
                               "INFO 12-01 10:00:01 [pynccl.py:113] vLLM is using nccl==2.28.9\n")
    assert alone.kind.value == "deadlocked" and "NCCL init" in alone.headline
    assert any(step.command == "export NCCL_P2P_DISABLE=1" for step in alone.next_steps)
    # a rank that printed only NCCL's own first INFO line, with no time passing, is set-up under way
    notice = verdict_of(tmp_path, "host:410550:410550 [0] NCCL INFO NET/Plugin: Using internal network plugin.\n")
    assert notice.kind.value != "deadlocked"


_GLOO_LOOPBACK = "".join(
    f"[rank{rank}]:[W806 14:25:2{rank}.650991133 ProcessGroupGloo.cpp:524] Warning: Unable to resolve hostname to a "
    "(local) address. Using the loopback address as fallback. Manually set the network interface to bind to with "
    "GLOO_SOCKET_IFNAME. (function operator())\n" for rank in range(4))


def test_ranks_that_stop_as_gloo_builds_a_cpu_group_wait_on_each_other_and_later_work_means_it_formed(tmp_path):
    # l40s-tp8-stuck-at-init-p2p-disable-loads: each rank's warning comes as its CPU group is created, right
    # before the group connects its full mesh; the warning itself is harmless on one node
    stopped = verdict_of(tmp_path, _GLOO_LOOPBACK)
    assert stopped.kind.value == "deadlocked" and "gloo CPU group" in stopped.headline
    loaded = verdict_of(tmp_path, _GLOO_LOOPBACK + "INFO 08-06 14:26:40 [gpu_model_runner.py:1770] Model loading took "
                                                   "9.1 GiB and 60.1 seconds\n")
    assert loaded.kind.value != "deadlocked"


def test_start_up_work_after_the_communicator_means_nccl_init_finished(tmp_path):
    verdict = verdict_of(tmp_path, _PYNCCL + "INFO 11-10 17:05:40 model_runner.py:1077] Loading model weights took 9.1 GB\n")
    assert verdict.kind.value != "deadlocked"


def test_nccl_set_up_followed_by_minutes_of_waiting_is_stuck_and_alone_is_not(tmp_path):
    nccl = "pod-0:958:958 [1] NCCL INFO Channel 01/0 : 0[1] -> 1[2] via P2P/IPC\n"
    waits = "".join(f"(APIServer pid=1) DEBUG 08-09 20:5{m}:{s}0 [v1/engine/utils.py:1262] Waiting for 1 local, "
                    "0 remote core engine proc(s) to start.\n" for m in (5, 6) for s in range(6))
    assert verdict_of(tmp_path, nccl + waits).kind.value == "deadlocked"
    assert verdict_of(tmp_path, nccl).kind.value == "unknown"


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
    assert verdict_of(tmp_path, compiling).kind.value == "slow"
    assert verdict_of(tmp_path, waiting).kind.value == "deadlocked"


def test_a_traceback_through_a_compiler_is_a_crash_site_not_work(tmp_path):
    verdict = verdict_of(tmp_path, """\
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
    assert verdict_of(tmp_path, banner + text).kind.value == "slow"
    assert verdict_of(tmp_path, text).kind.value == "deadlocked"  # waits alone, nothing starting: stuck workers


# Blind round 6 ------------------------------------------------------------------------------------------

_PG_WAIT = ("(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of "
            "specs for {s} seconds. specs=[{{'GPU': 1.0}}, {{'GPU': 1.0}}]. Check `ray status` and `ray list nodes` "
            "to see if you have enough resources.\n")


def test_a_placement_group_unplaced_for_minutes_is_a_wait_that_cannot_complete(tmp_path):
    verdict = verdict_of(tmp_path, _PG_WAIT.format(s=70) + _PG_WAIT.format(s=150).replace("13:55", "15:15"))
    assert verdict.kind.value == "deadlocked" and "150 s" in verdict.headline
    assert any(step.command == "ray status" for step in verdict.next_steps)


def test_a_placement_group_placed_in_the_end_or_briefly_waited_for_is_no_deadlock(tmp_path):
    placed = _PG_WAIT.format(s=150) + ("(RayWorkerWrapper pid=9) INFO 06-07 18:14:30 [default_loader.py:268] "
                                       "Loading weights took 12.39 seconds\n")
    assert verdict_of(tmp_path, placed).kind.value != "deadlocked"
    assert verdict_of(tmp_path, _PG_WAIT.format(s=30)).kind.value != "deadlocked"


def test_a_gloo_mesh_that_cannot_connect_is_a_rendezvous_that_never_completes(tmp_path):
    verdict = verdict_of(tmp_path, (
        "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152]\n"
        "  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:<port>\n"
        "  (rank=8, size=16, local=[127.0.0.1])\n"))
    assert verdict.kind.value == "deadlocked" and "127.0.0.1" in verdict.headline and "loopback" in verdict.headline
    assert any("GLOO_SOCKET_IFNAME" in (step.command or "") for step in verdict.next_steps)


_KV_ALLOC = """\
(EngineCore_DP0 pid=712) INFO 12-16 02:36:34 [kv_cache_utils.py:1286] GPU KV cache size: 282,240 tokens
(Worker_TP0 pid=849) ERROR 12-16 02:36:34 [multiproc_executor.py:822] WorkerProc hit an exception.
(Worker_TP0 pid=849) ERROR 12-16 02:36:34 [multiproc_executor.py:822] Traceback (most recent call last):
(Worker_TP0 pid=849) ERROR 12-16 02:36:34 [multiproc_executor.py:822]   File "/v/worker_base.py", line 320, in initialize_from_config
(Worker_TP0 pid=849) ERROR 12-16 02:36:34 [multiproc_executor.py:822]     self.model_runner.initialize_kv_cache(kv_cache_config)
"""


def test_a_traceback_cut_inside_the_kv_cache_allocation_leans_exhaustion(tmp_path):
    verdict = verdict_of(tmp_path, _KV_ALLOC)
    assert verdict.kind.value == "fragmented" and "KV-cache allocation" in verdict.headline
    assert "last line" in verdict.undecided


def test_the_kv_cache_allocation_raising_something_else_is_no_oom(tmp_path):
    raised = _KV_ALLOC + ("(Worker_TP0 pid=849) ERROR 12-16 02:36:34 [multiproc_executor.py:822] NotImplementedError: "
                          "hybrid KV cache groups are not supported by this attention backend\n")
    assert verdict_of(tmp_path, raised).kind.value != "fragmented"


def test_a_traceback_through_the_profiling_run_after_loading_is_no_start_up_timeout(tmp_path):
    verdict = verdict_of(tmp_path, (
        "INFO 10-23 19:55:16 model_runner.py:1067] Loading model weights took 19.8557 GB\n"
        "INFO 10-23 19:55:16 enc_dec_model_runner.py:301] Starting profile run for multi-modal models.\n"
        "Process SpawnProcess-1:\nTraceback (most recent call last):\n"
        '  File "/v/engine/llm_engine.py", line 483, in _initialize_kv_caches\n'
        "    self.model_executor.determine_num_available_blocks())\n"))
    assert verdict.kind.value == "fragmented" and "profiling run" in verdict.headline


def test_torchs_allocator_sentence_alone_is_an_oom_and_a_look_alike_is_not(tmp_path):
    verdict = verdict_of(tmp_path, "    Tried to allocate 136.00 MiB. GPU 0 has a total capacity of 22.36 GiB of\n"
                                 "    which 120.88 MiB is free.\n")
    assert verdict.kind.value == "fragmented"
    look_alike = "INFO 01-01 00:00:00 [cache.py:10] Tried to allocate the prefix cache index, retrying\n"
    assert verdict_of(tmp_path, look_alike).kind.value != "fragmented"


# Blind round 7 ------------------------------------------------------------------------------------------

def test_the_watchdogs_work_description_wrapped_off_its_first_line_is_still_a_collective_timeout(tmp_path):
    verdict = verdict_of(tmp_path, (
        "[Rank 1] Watchdog caught collective operation timeout:\n"
        "WorkNCCL(SeqNum=12590, OpType=_ALLGATHER_BASE, NumelIn=1404928, NumelOut=2809856,\n"
        "         Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"))
    assert verdict.kind.value == "deadlocked" and "_ALLGATHER_BASE #12590" in verdict.headline
    unrelated = "INFO 01-01 00:00:00 [x.py:1] Work item ran for 600060 milliseconds\n"
    assert verdict_of(tmp_path, unrelated).kind.value != "deadlocked"


def test_an_orchestrators_start_up_limit_leans_slow_and_needs_a_timeout_to_fire(tmp_path):
    fired = ('  File "/w/vllm_omni/engine/async_omni_engine.py", line 285, in __init__\n'
             '    raise TimeoutError(f"Orchestrator did not become ready within {startup_timeout}s") from e\n'
             "TimeoutError: Orchestrator did not become ready within 600s\n")
    verdict = verdict_of(tmp_path, fired)
    assert verdict.kind.value == "slow" and "start-up" in verdict.headline
    # the same wait raising something else is the stage's own failure, not the limit
    other = ('  File "/w/vllm_omni/engine/async_omni_engine.py", line 314, in __init__\n'
             "    startup_future.result(timeout=startup_timeout)\n"
             "ValueError: stage 0 has no devices\n")
    assert verdict_of(tmp_path, other).kind.value != "slow"


def test_start_up_retrying_the_hub_leans_slow_and_a_finished_download_does_not(tmp_path):
    retry = ("HTTP Error 504 thrown while requesting HEAD https://huggingface.co/org/model/resolve/main/config.json\n"
             "Retrying in 8s [Retry 4/5].\n")
    verdict = verdict_of(tmp_path, retry)
    assert verdict.kind.value == "slow" and "Hugging Face Hub" in verdict.headline
    assert any(step.command == "export HF_HUB_OFFLINE=1" for step in verdict.next_steps)
    served = retry + ("(APIServer pid=1) INFO 01-01 00:10:00 [api_server.py:1] Starting vLLM API server on "
                      "http://0.0.0.0:8000\n(APIServer pid=1) INFO:     Application startup complete.\n")
    assert verdict_of(tmp_path, served).kind.value != "slow"


_SIZED = """\
INFO 01-30 05:50:16 worker.py:266] the current vLLM instance can use total_gpu_memory (79.10GiB) x gpu_memory_utilization (0.90) = 71.19GiB
INFO 01-30 05:50:16 executor_base.py:108] # CUDA blocks: 39874, # CPU blocks: 2240
[rank0]: Traceback (most recent call last):
[rank0]:   File "/t/train.py", line 173, in <module>
[rank0]:     trainer = GRPOTrainer(
"""


def test_a_cut_traceback_right_after_kv_sizing_leans_exhaustion(tmp_path):
    verdict = verdict_of(tmp_path, _SIZED)
    assert verdict.kind.value == "fragmented" and "KV cache was sized" in verdict.headline


def test_a_traceback_after_kv_sizing_with_its_exception_or_after_later_steps_is_not_that(tmp_path):
    raised = _SIZED + "[rank0]: ValueError: Unknown quantization method: foo\n"
    assert verdict_of(tmp_path, raised).kind.value != "fragmented"
    later = _SIZED.replace("[rank0]: Traceback", "INFO 01-30 05:51:40 model_runner.py:1500] Graph capturing finished "
                           "in 84 secs, took 0.56 GiB\n[rank0]: Traceback")
    assert "KV cache was sized" not in verdict_of(tmp_path, later).headline


# The engine-ready timeout bounds start-up only for API servers run apart from the engines --------------

_LOADING = "".join(f"Loading safetensors checkpoint shards:  8{i}% Completed | {132 + i}/161 [4{i}:09<06:11, 12.82s/it]\n"
                   for i in range(5))
_SERVE = ('  File "/v/vllm/entrypoints/cli/serve.py", line 118, in cmd\n'
          "    {call}(args)\n"
          '  File "/v/vllm/entrypoints/cli/serve.py", line 279, in {call}\n'
          "    with launch_core_engines(\n")


def test_a_cut_start_up_wait_of_api_servers_run_apart_is_their_ready_timeout(tmp_path):
    verdict = verdict_of(tmp_path, _LOADING + "Traceback (most recent call last):\n"
                       + _SERVE.format(call="run_multi_api_server"))
    assert verdict.kind.value == "slow"
    assert analyze([str(tmp_path / "fragment.log")]).model.guard.knob == "VLLM_ENGINE_READY_TIMEOUT_S"


def test_one_api_servers_start_up_wait_has_no_deadline_so_its_end_is_no_ready_timeout(tmp_path):
    # wait_for_engine_startup polls without a deadline (0.9.2-0.34): only a process exit ends it
    analyze_result = analyze([str(_write(tmp_path, _LOADING + "Traceback (most recent call last):\n"
                                         + _SERVE.format(call="run_api_server_worker_proc")))])
    guard = analyze_result.model.guard
    assert guard is None or guard.knob != "VLLM_ENGINE_READY_TIMEOUT_S"


def _write(tmp_path, text: str):
    path = tmp_path / "fragment.log"
    path.write_text(text)
    return path


# Found running the tool over 418 vLLM issue bodies it had never seen (none labelled; misreadings only) ----

def test_a_rendezvous_short_of_members_that_crashed_first_is_that_crash(tmp_path):
    crashed_first = (
        "(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] Exception in worker "
        "VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess.\n"
        "(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] RuntimeError: Cannot "
        "re-initialize CUDA in forked subprocess.\n"
        "Traceback (most recent call last):\n"
        '  File "/t/torch/distributed/distributed_c10d.py", line 1520, in init_process_group\n'
        "    store, rank, world_size = next(rendezvous_iterator)\n")
    verdict = verdict_of(tmp_path, crashed_first)
    assert verdict.kind.value == "crashed" and "re-initialize CUDA" in verdict.headline
    alone = crashed_first.split("Traceback", 1)[1]  # no crash before it, and its own error cut off
    assert verdict_of(tmp_path, "Traceback" + alone).kind.value == "unknown"


def test_an_exception_traceback_through_inductor_is_no_capture_of_compiling(tmp_path):
    frames = ('  File "/usr/lib/python3.10/dist-packages/torch/_inductor/compiler_bisector.py", line 125{sep} in get_dir\n'
              "    return cache_dir()\n")
    assert verdict_of(tmp_path, frames.format(sep=",")).kind.value != "slow"
    faulthandler = 'Thread 0x00007f (most recent call first):\n' + frames.format(sep="")
    assert verdict_of(tmp_path, faulthandler).kind.value == "slow"


def test_v0s_client_waiting_on_an_idle_engine_is_no_incident(tmp_path):
    stats = ("INFO 06-25 10:{m}:10 metrics.py:486] Avg prompt throughput: 0.3 tokens/s, Avg generation throughput: "
             "30.2 tokens/s, Running: {r} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV "
             "cache usage: 0.0%.\n")
    waits = "".join(f"DEBUG 06-25 10:{m}:40 client.py:165] Waiting for output from MQLLMEngine.\n" for m in range(11, 17))
    idle = stats.format(m=10, r=0) + waits
    assert verdict_of(tmp_path, idle).kind.value in ("healthy", "unknown")
    busy = stats.format(m=10, r=3) + waits
    assert verdict_of(tmp_path, busy).kind.value in ("slow", "deadlocked")


def test_a_profiling_frame_whose_exception_lands_in_a_later_record_is_that_exception(tmp_path):
    site = ("ERROR 03-25 08:34:50 [core.py:340] EngineCore hit an exception: Traceback (most recent call last):\n"
            '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 1400, in profile_run\n'
            "    hidden_states = self._dummy_run(self.max_num_tokens)\n")
    assert verdict_of(tmp_path, site).kind.value == "fragmented"
    later = site + ("ERROR 03-25 08:34:51 [core.py:390] ValueError: not enough values to unpack (expected 22, got 21)\n")
    assert verdict_of(tmp_path, later).kind.value != "fragmented"


def test_an_old_versionless_banner_with_nothing_after_is_a_start_up_the_log_does_not_follow(tmp_path):
    banner = ("INFO 01-24 13:57:39 llm_engine.py:70] Initializing an LLM engine with config: model='m', "
              "tokenizer='m', tensor_parallel_size=2\n")
    verdict = verdict_of(tmp_path, banner)
    assert verdict.kind.value == "unknown" and "start-up" in verdict.headline
    served = banner + "INFO 01-24 13:59:02 api_server.py:100] Started server process\nINFO:     Application startup complete.\n"
    assert verdict_of(tmp_path, served).kind.value != "unknown"


def test_aborts_of_requests_never_seen_working_are_undecided_and_aborts_amid_serving_are_not(tmp_path):
    abort = "(APIServer pid=1) INFO 05-01 10:05:00 [async_llm.py:400] Aborted request chatcmpl-1.\n"
    verdict = verdict_of(tmp_path, abort)
    assert verdict.kind.value == "unknown" and "abort" in verdict.headline
    serving = ("(APIServer pid=1) INFO 05-01 10:04:50 [loggers.py:120] Engine 000: Avg prompt throughput: 120.0 tokens/s, "
               "Avg generation throughput: 300.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
               "Prefix cache hit rate: 0.0%\n")
    assert verdict_of(tmp_path, serving + abort).kind.value == "healthy"


def test_an_oom_without_the_reserved_figure_claims_nothing_about_it(tmp_path):
    verdict = verdict_of(tmp_path, "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8 GiB of which 1 MiB is free\n")
    assert verdict.kind.value == "fragmented" and "2.00 GiB" in verdict.headline
    assert "?" not in verdict.headline and "reserved" not in verdict.headline
    assert "not ruled out" in verdict.evidence[0].note
    full = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "8.00 GiB of which 1.00 MiB is free. Of the allocated memory 7.50 GiB is allocated by PyTorch, and "
            "20.00 MiB is reserved by PyTorch but unallocated.\n")
    assert "20.00 MiB reserved-but-unallocated" in verdict_of(tmp_path, full).headline


_DYNAMO = """\
INFO 09-01 20:56:48 weight_utils.py:1] Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:00<00:00,  9.48it/s]
ERROR 09-01 20:56:51 worker_base.py:464] Error executing method determine_num_available_blocks. This might cause deadlock in distributed execution.
ERROR 09-01 20:56:51 worker_base.py:464] Traceback (most recent call last):
ERROR 09-01 20:56:51 worker_base.py:464]   File "/v/vllm/worker/tpu_worker.py", line 118, in determine_num_available_blocks
ERROR 09-01 20:56:51 worker_base.py:464]     self.model_runner._dummy_run(
ERROR 09-01 20:56:51 worker_base.py:464]   File "/v/vllm/worker/tpu_model_runner.py", line 237, in _dummy_run
ERROR 09-01 20:56:51 worker_base.py:464]     self.model(token_ids,
ERROR 09-01 20:56:51 worker_base.py:464] {ending}
ERROR 09-01 20:56:51 worker_base.py:464]
ERROR 09-01 20:56:51 worker_base.py:464] You can suppress this exception and fall back to eager by setting:
ERROR 09-01 20:56:51 worker_base.py:464]     torch._dynamo.config.suppress_errors = True
"""


def test_a_module_qualified_exception_ends_a_profiling_traceback_and_is_no_oom(tmp_path):
    # vLLM issue 8066: Dynamo's ``Unsupported`` (no "Error" in its name) raised inside the profiling run
    verdict = verdict_of(tmp_path, _DYNAMO.format(ending="torch._dynamo.exc.Unsupported: Graph break due to unsupported builtin"))
    assert verdict.kind.value == "unknown" and "torch._dynamo.exc.Unsupported" in verdict.headline
    assert "nothing fatal" not in verdict.headline
    # the same traceback with its last line cut off still leans exhaustion (the profiling run's usual death)
    cut = verdict_of(tmp_path, _DYNAMO.format(ending="  File \"/t/torch/_dynamo/eval_frame.py\", line 465, in _fn"))
    assert cut.kind.value == "fragmented"


def test_rays_wrapped_cause_is_read_as_the_exception(tmp_path):
    verdict = verdict_of(tmp_path, """\
INFO 09-01 20:56:48 weight_utils.py:1] Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:00<00:00,  9.48it/s]
ERROR 09-01 20:56:51 worker_base.py:464] Traceback (most recent call last):
ERROR 09-01 20:56:51 worker_base.py:464]   File "/v/vllm/executor/ray_utils.py", line 9, in execute_method
ERROR 09-01 20:56:51 worker_base.py:464] ray.exceptions.RayTaskError(ValueError): ray::RayWorkerWrapper.execute_method() failed
""")
    assert "RayTaskError(ValueError)" in verdict.headline


_AUTOTUNE = ("(EngineCore pid=7) INFO 09-01 15:39:04 [shm_broadcast.py:801] No available shared memory broadcast block "
             "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.\n"
             "[AutoTuner]: Tuning flashinfer::trtllm_fp4_block_scale_moe:  55%|█████▎    | 12/22 [{elapsed}<07:10, {rate}]\n")


def test_an_autotune_whose_own_pace_outlasts_the_start_up_default_is_slow_and_a_quick_one_is_not(tmp_path):
    # kimi-k3-flashinfer-autotune-reruns-shm-broadcast-wait: FlashInfer's autotuner at 43 s a profile, its
    # tqdm unit "profile" (s/profile), with the engine core's shared-memory notice while the workers tune
    verdict = verdict_of(tmp_path, _AUTOTUNE.format(elapsed="06:58", rate="43.03s/profile"))
    assert verdict.kind.value == "slow" and "kernel autotune" in verdict.headline and "14 min" in verdict.headline
    alone = _AUTOTUNE.format(elapsed="06:58", rate="43.03s/profile").split("\n", 1)[1]
    assert verdict_of(tmp_path, alone).kind.value == "slow"  # the projection needs no wait beside it
    quick = _AUTOTUNE.format(elapsed="00:20", rate="1.70s/profile").split("\n", 1)[1]
    assert verdict_of(tmp_path, quick).kind.value != "slow"


@pytest.mark.parametrize("line", [
    # launchers' own words for their start-up deadline (shell and Python wrappers around `vllm serve`)
    "ERROR: vLLM server failed to start within 600s",
    "vLLM server failed to start within timeout.",
    "RuntimeError: Server did not start within 15 minutes",
    "TimeoutError: Timed out waiting for vLLM server to be online after 900 seconds.",
    "SystemExit: Timed out waiting for vLLM after 600s: ConnectError: [Errno 111] Connection refused",
    "Timed out waiting for vLLM server to become ready",
])
def test_a_launchers_start_up_deadline_in_its_own_words_leans_slow(tmp_path, line):
    verdict = verdict_of(tmp_path, line + "\n")
    assert verdict.kind.value == "slow" and "start-up" in verdict.headline and verdict.undecided


def test_a_launcher_deadline_reads_its_unit_and_a_short_one_is_shorter_than_any_start_up(tmp_path):
    assert "allowed 30 s" in verdict_of(tmp_path, "Error: Server did not start within 30000ms\n").headline
    assert verdict_of(tmp_path, "vLLM server failed to start within 10 minutes\n").confidence < 0.7  # 600 s: no claim


def test_a_launcher_deadline_while_weights_load_is_slow_and_vllms_own_wait_is_not_a_launchers(tmp_path):
    loading = ("Loading safetensors checkpoint shards:  40% Completed | 12/30 [02:48<04:12,  14.0s/it]\n"
               "Timed out waiting for vLLM server to become ready\n")
    verdict = verdict_of(tmp_path, loading)
    assert verdict.kind.value == "slow" and "weight loading" in verdict.headline and verdict.confidence >= 0.6
    own = verdict_of(tmp_path, "ERROR 01-01 00:00:00 [utils.py:1] Timed out waiting for engines to send initial "
                             "message on input socket.\n")
    assert "platform" not in own.headline and "launcher" not in own.headline


def test_a_log_that_ends_while_start_up_work_advances_stays_undecided(tmp_path):
    # arbor-inference-job-timeout-while-downloading-model (slow: torch.compile under way when the paste ends)
    # and ascend-glm5-w4a8-safetensors-load-hangs-forever (deadlocked: the shard bar froze at 14/99 for good)
    # end the same way: a bar's last rate says nothing of whether it moved again
    moving = ("INFO 05-02 10:00:00 [model_runner.py:1] Starting to load model meta-llama/Llama-3.1-70B...\n"
              "Loading safetensors checkpoint shards:  40% Completed | 12/30 [02:48<04:12,  14.0s/it]\n")
    verdict = verdict_of(tmp_path, moving)
    assert verdict.kind.value == "unknown" and "weight loading" in verdict.headline and verdict.undecided


_COMM_UP = """\
(VllmWorkerProcess pid=2602361) INFO 07-12 19:04:18 pynccl.py:63] vLLM is using nccl==2.20.5
nvidia5:3312182:3312204 [0] NCCL INFO comm 0x5654d4843400 rank 0 nranks 2 cudaDev 0 nvmlDev 2 busId 41000 commId 0x737c - Init COMPLETE
nvidia5:3312183:3312205 [1] NCCL INFO comm 0x561a161881d0 rank 1 nranks 2 cudaDev 1 nvmlDev 3 busId 61000 commId 0x737c - Init COMPLETE
"""


def test_ranks_whose_log_stops_at_init_complete_are_in_the_warm_up_all_reduce(tmp_path):
    # xinference-tp2-ada-iommu-p2p-hang-after-nccl-init: pynccl's ncclCommInitRank, then "A small all_reduce
    # for warmup" that IOMMU-redirected P2P traffic never completes
    verdict = verdict_of(tmp_path, _COMM_UP)
    assert verdict.kind.value == "deadlocked" and "warm-up all-reduce" in verdict.headline
    assert any("NCCL_P2P_DISABLE=1" in (step.command or "") for step in verdict.next_steps)
    later = _COMM_UP + "INFO 07-12 19:04:40 model_runner.py:160] Loading model weights took 17.9828 GB\n"
    assert verdict_of(tmp_path, later).kind.value != "deadlocked"  # the all-reduce passed: weights came next


def test_a_log_that_ends_after_v0s_weights_loaded_line_is_a_start_up_not_health(tmp_path):
    # qwen2-gptq8-2080ti-32k-kv-oom-max-model-len: three ranks' "Loading model weights took 17.98 GB", then
    # the paste ends (the KV-cache reservation that failed next is past it)
    line = "(VllmWorkerProcess pid=7) INFO 06-30 18:37:30 model_runner.py:160] Loading model weights took 17.9828 GB\n"
    verdict = verdict_of(tmp_path, line)
    assert verdict.kind.value == "unknown" and "weight loading finished" in verdict.headline


_RCCL = """\
supllm:402:402 [0] /src/rccl/hipify/src/init.cc:179 NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!
supllm:402:402 [0] NCCL INFO RCCL version : 2.22.3-HEAD:271856d
supllm:461:461 [1] NCCL INFO Bootstrap : Using enp203s0:192.168.100.86<0>
"""


def test_rccls_iommu_warning_before_any_start_up_work_is_a_p2p_hang_and_after_work_it_is_not(tmp_path):
    # rocm-multi-gpu-rccl-p2p-hang-missing-iommu-pt: RCCL's own warning, then communicator set-up and nothing
    verdict = verdict_of(tmp_path, _RCCL)
    assert verdict.kind.value == "deadlocked" and "iommu=pt" in verdict.headline
    loaded = _RCCL + "INFO 07-12 19:04:40 model_runner.py:160] Loading model weights took 17.9828 GB\n"
    assert verdict_of(tmp_path, loaded).kind.value != "deadlocked"


def test_an_exception_naming_memory_is_no_oom_unless_memory_ran_out(tmp_path):
    # xpu-memory-profiling-assert-equal-free-memory: vLLM's profiling check failed on equal free-memory figures
    check = verdict_of(tmp_path, _DYNAMO.format(ending="AssertionError: Error in memory profiling. Initial free memory "
                                                     "30.3 GiB, current free memory 30.3 GiB."))
    assert check.kind.value != "fragmented" and "Error in memory profiling" in check.headline
    oom = verdict_of(tmp_path, _DYNAMO.format(ending="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert oom.kind.value == "fragmented"


def test_a_kv_transfer_peer_that_stops_answering_is_a_lost_peer_and_a_transport_set_up_error_is_not(tmp_path):
    # lmcache-pd-ucx-tcp-endpoint-timeout, nixl-pd-stale-endpoint-after-decode-restart-kv-stall
    lost = verdict_of(tmp_path, "W0613 08:28:11.555796    7053 ucx_utils.cpp:43] Unexpected UCX error: Endpoint timeout\n"
                              "ERROR 06-13 08:28:11 [dump_input.py:69] Dumping input data\n")
    assert lost.kind.value == "deadlocked" and "UCX" in lost.headline
    assert any("UCX_LOG_LEVEL" in (step.command or "") for step in lost.next_steps)
    assert not any("NCCL_IB_DISABLE" in (step.command or "") for step in lost.next_steps)
    # dynamo-2node-disagg-ucx-ibv-create-ah-timeout-nixl-backend-error (other): UCX could not set up at all
    setup = verdict_of(tmp_path, "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND\n")
    assert setup.kind.value != "deadlocked"


_PROBE = ('2026-08-11T17:08:45.907Z 5m49s Warning Unhealthy pod/launcher-6w58s Liveness probe failed: '
          'Get "http://10.129.7.110:8001/health": {how}\n')


def test_a_probe_refused_at_start_up_found_nothing_listening_and_one_that_timed_out_did_not(tmp_path):
    # llmd-launcher-liveness-kill-slow-container-start: the container was still starting
    refused = verdict_of(tmp_path, _PROBE.format(how="dial tcp 10.129.7.110:8001: connect: connection refused"))
    assert refused.kind.value == "slow" and "refused" in refused.headline
    late = verdict_of(tmp_path, _PROBE.format(how="context deadline exceeded (Client.Timeout exceeded while awaiting headers)"))
    assert "refused" not in late.headline


_GLOG_WATCHDOG = ("(ActorModelRayActor pid=207260, ip=10.0.1.75) [E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught "
                  "collective operation timeout: WorkNCCL(SeqNum=385\n"
                  "6, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800268 milliseconds "
                  "before timing out.\n")


def test_a_glog_line_cut_at_the_paste_width_keeps_its_tail_and_a_line_of_its_own_stays_apart(tmp_path):
    # openrlhf-vllm-weight-sync-group-docker-bridge-ip-unreachable: a paste wrapped at 150 columns
    wrapped = verdict_of(tmp_path, _GLOG_WATCHDOG)
    assert wrapped.kind.value == "deadlocked" and "#3856" in wrapped.headline
    # a C++ frame after a glog line starts a word: a line of its own, not the glog line's tail
    glog = pieces("[E ProcessGroupNCCL.cpp:475] [Rank 3] Some NCCL operations have failed or timed out. Due to the "
                  "asynchronous nature of CUDA kernels, subsequent GPU operations", 1)[0]
    assert joins(glog, pieces("frame #0: c10::Error::Error(c10::SourceLocation) + 0x57", 2)[0]) is None
    assert joins(glog, pieces("6, OpType=ALLREDUCE, NumelIn=1)", 2)[0]) is Join.WRAP


_STORE = ("(RayWorkerVllm pid=207931, ip=10.0.1.75) [E socket.cpp:922] [c10d] The client socket has timed out after "
          "{limit} while trying to connect to (172.17.0.2, 44737).\n")


@pytest.mark.parametrize("limit", ["1800s", "1800000ms"])
def test_a_store_nobody_answers_is_an_unsatisfiable_rendezvous_in_seconds_or_milliseconds(tmp_path, limit):
    # openrlhf-vllm-weight-sync-group-docker-bridge-ip-unreachable: the store sat on a docker-bridge address
    verdict = verdict_of(tmp_path, _STORE.format(limit=limit))
    assert verdict.kind.value == "deadlocked" and "172.17.0.2" in verdict.headline


_FREE_CHECK = ("ValueError: Free memory on device cuda:3 (173.8/178.35 GiB) on startup is less than{wrap}"
               "desired GPU memory utilization (0.98, 174.78 GiB). Decrease GPU memory utilization or\n"
               "reduce GPU memory used by other processes.\n")


@pytest.mark.parametrize("wrap", [" ", "\n"])
def test_less_free_memory_than_the_utilization_asks_for_is_exhaustion_with_a_share_that_fits(tmp_path, wrap):
    # eks-lws-ep16-decode-gpu-util-098-unreachable: 0.98 asked, 0.974 free; the paste wrapped at a word
    verdict = verdict_of(tmp_path, _FREE_CHECK.format(wrap=wrap))
    assert verdict.kind.value == "fragmented" and "gpu-memory-utilization" in verdict.headline
    assert verdict.next_steps[0].command == "--gpu-memory-utilization 0.96"
    # the KV cache not fitting after the weights keeps its own reading
    kv = verdict_of(tmp_path, "ValueError: No available memory for the cache blocks. Try increasing "
                            "`gpu_memory_utilization` when initializing the engine.\n")
    assert kv.kind.value == "fragmented" and "after the weights" in kv.headline


_SLEEP = "INFO 02-25 19:13:26 worker.py:133] Sleep mode freed {freed} GiB memory, {kept} GiB memory is still in use.\n"


def test_sleep_that_freed_almost_nothing_kept_the_memory_and_one_that_freed_it_is_healthy(tmp_path):
    # sleep-mode-frees-0gib-with-expandable-segments: expandable segments kept 63 GiB out of sleep's reach
    kept = verdict_of(tmp_path, _SLEEP.format(freed="0.00", kept="63.15") * 2)
    assert kept.kind.value == "fragmented" and "not released" in kept.headline
    assert any(step.command == "unset PYTORCH_CUDA_ALLOC_CONF" for step in kept.next_steps)
    assert verdict_of(tmp_path, _SLEEP.format(freed="61.90", kept="1.25")).kind.value == "healthy"


_READ = """\
(EngineCore_DP0 pid=224) ERROR 03-03 10:59:11 [core.py:938]   File "/w/vllm/distributed/device_communicators/shm_broadcast.py", line 536, in acquire_read
(EngineCore_DP0 pid=224) ERROR 03-03 10:59:11 [core.py:938]     {raised}
(EngineCore_DP0 pid=224) ERROR 03-03 10:59:11 [core.py:938] {ending}
"""


def test_a_shm_read_that_timed_out_is_the_step_guard_and_one_that_failed_otherwise_is_not(tmp_path):
    # ascend-dsv32-a2-dual-node-rpc-timeout-acl-graph: the executor's read of the workers' answer, past its limit
    timed_out = verdict_of(tmp_path, _READ.format(raised="raise TimeoutError", ending="TimeoutError"))
    assert "step timeout" in timed_out.headline and timed_out.kind.value != "crashed"
    failed = verdict_of(tmp_path, _READ.format(raised="raise RuntimeError(\"cancelled\")", ending="RuntimeError: cancelled"))
    assert "step timeout" not in failed.headline


def _channels(pids: tuple[int, ...]) -> str:
    return "".join(f"host:{pid}:{pid + 400} [{rank}] NCCL INFO Channel 0{c}/0 : {rank}[{rank}] -> {1 - rank}[{1 - rank}] "
                   f"via P2P/CUMEM\n" for c in range(4) for rank, pid in enumerate(pids))


def test_ranks_that_stop_after_connecting_p2p_channels_are_stuck_and_one_ranks_line_or_later_work_is_not(tmp_path):
    # tp2-nccl-allreduce-hang-p2p-cumem-sanity-check: both ranks' channels, then nothing
    both = verdict_of(tmp_path, _channels((820398, 820399)))
    assert both.kind.value == "deadlocked" and "P2P" in both.headline
    assert any(step.command == "export NCCL_P2P_DISABLE=1" for step in both.next_steps)
    assert verdict_of(tmp_path, _channels((820398,))).kind.value == "unknown"
    later = verdict_of(tmp_path, _channels((820398, 820399)) + "Loading safetensors checkpoint shards:  50% Completed | 1/2 "
                                                           "[00:03<00:03,  3.1s/it]\n")
    assert later.kind.value != "deadlocked"


_INIT = ("(VllmWorker rank={r} pid=10{r}) INFO 10-25 02:18:30 [parallel_state.py:1165] world_size=4 rank={r} "
         "local_rank={r} distributed_init_method=tcp://127.0.0.1:4567 backend=hccl\n")
_ASSIGNED = ("(VllmWorker rank={r} pid=10{r}) INFO 10-25 02:18:40 [parallel_state.py:1208] rank {r} in world size 4 is "
             "assigned as DP rank 0, PP rank 0, TP rank {r}, EP rank {r}\n")


def test_ranks_that_were_assigned_their_groups_finished_distributed_set_up_and_ranks_still_joining_did_not(tmp_path):
    joining = "".join(_INIT.format(r=r) for r in range(4))
    assert verdict_of(tmp_path, joining).kind.value == "deadlocked"
    # ascend-a2-default-262k-max-model-len-stuck-dist-init: every group was up; what stopped next is in no line
    assigned = verdict_of(tmp_path, joining + "".join(_ASSIGNED.format(r=r) for r in range(4)))
    assert assigned.kind.value == "unknown" and "finished" in assigned.headline


_DEAD = """\
INFO 02-14 08:44:26 engine.py:275] Added request chatcmpl-4fb9.
CRITICAL 02-14 08:44:33 launcher.py:101] MQLLMEngine is already dead, terminating server process
(VllmWorkerProcess pid=614) ERROR 02-14 08:44:33 multiproc_worker_utils.py:242] Exception in worker VllmWorkerProcess while processing method start_worker_execution_loop.
(VllmWorkerProcess pid=614) ERROR 02-14 08:44:33 multiproc_worker_utils.py:242] Traceback (most recent call last):
"""


def test_an_engine_death_whose_traceback_lost_its_last_line_is_undecided_and_one_that_names_it_is_a_crash(tmp_path):
    # r1-awq-a800-gpu-util-097-oom-mqllmengine-dead: the worker's OOM line fell past the paste
    cut = verdict_of(tmp_path, _DEAD)
    assert cut.kind.value == "unknown" and "cut off" in cut.headline and "last line" in cut.undecided
    frame = ('(VllmWorkerProcess pid=614) ERROR 02-14 08:44:33 multiproc_worker_utils.py:242]   File "/v/worker.py", '
             'line 9, in execute\n')
    named = verdict_of(tmp_path, _DEAD + frame + "(VllmWorkerProcess pid=614) ERROR 02-14 08:44:33 "
                                               "multiproc_worker_utils.py:242] KeyError: 'seq_group'\n")
    assert named.kind.value == "crashed" and "KeyError" in named.headline
    # a cut traceback after a named one is only where the paste ends
    # (ampere-fp8-kv-chunked-prefill-triton-crash-rpc-unhealthy: the client's traceback after the engine's)
    later = verdict_of(tmp_path, _DEAD + frame + "(VllmWorkerProcess pid=614) ERROR 02-14 08:44:33 "
                                               "multiproc_worker_utils.py:242] KeyError: 'seq_group'\n"
                     + "ERROR 02-14 08:44:34 client.py:412] Traceback (most recent call last):\n")
    assert later.kind.value == "crashed"


_BANNER = ("INFO 11-30 09:49:17 llm_engine.py:72] Initializing an LLM engine with config: model='m', "
           "tokenizer='m', dtype=torch.float16, max_seq_len=4096, tensor_parallel_size={tp}, seed=0)\n")


def test_a_multi_gpu_launch_with_nothing_after_it_suggests_the_p2p_check_and_a_one_gpu_launch_does_not(tmp_path):
    # ray-tp2-model-load-stuck-after-engine-init-p2p: NCCL_P2P_DISABLE=1 let it load
    for tp, wanted in ((2, True), (1, False)):
        verdict = verdict_of(tmp_path, _BANNER.format(tp=tp))
        assert verdict.kind.value == "unknown"
        assert any(step.command == "export NCCL_P2P_DISABLE=1" for step in verdict.next_steps) is wanted


def test_a_worker_exception_named_in_its_own_message_or_in_markdown_bold_is_named(tmp_path):
    # vLLM issue 6276 (0.5's "Exception in worker … while processing method X: <error>, Traceback …") and
    # issue 8613 (a reporter who set the exception line in bold)
    inline = verdict_of(tmp_path, "ERROR 07-10 09:23:56 multiproc_worker_utils.py:226] Exception in worker "
                                "VllmWorkerProcess while processing method initialize_cache: [Errno 2] No such file "
                                "or directory: '/c/fused_moe_kernel.json.tmp', Traceback (most recent call last):\n")
    assert "[Errno 2] No such file or directory" in inline.headline
    bold = verdict_of(tmp_path, "ERROR 09-19 10:53:38 async_llm_engine.py:63] Traceback (most recent call last):\n"
                              'ERROR 09-19 10:53:38 async_llm_engine.py:63]   File "/v/model.py", line 3, in forward\n'
                              "ERROR 09-19 10:53:38 async_llm_engine.py:63] **RuntimeError: mat1 and mat2 shapes "
                              "cannot be multiplied (1x5120 and 4096x4096)**\n")
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x5120 and 4096x4096)" in bold.headline
    assert "**" not in bold.headline


def test_a_line_wrapped_before_a_space_or_inside_a_name_keeps_its_tail_and_a_traceback_line_stays_a_line():
    # chunked-prefill-n8-swap-preemption-storm pasted at 120 columns: the stats line cut before " Running"
    stats = pieces("INFO 06-16 21:24:15 metrics.py:341] Avg prompt throughput: 2706.1 tokens/s, Avg generation "
                   "throughput: 13395.4 tokens/s,", 1)[0]
    assert joins(stats, pieces(" Running: 34 reqs, Swapped: 100 reqs, Pending: 9832 reqs", 2)[0]) is Join.WRAP
    preempted = pieces("WARNING 06-16 21:24:15 scheduler.py:1089] Sequence group 165 is preempted by "
                       "PreemptionMode.SWAP mode because there is not enough KV cache space. Increase tensor_parallel", 3)[0]
    assert joins(preempted, pieces("_size to provide more KV cache memory. total_num_cumulative_preemption=151", 4)[0]) \
        is Join.WRAP
    assert joins(stats, pieces('  File "/v/engine.py", line 3, in step', 5)[0]) is Join.TRACEBACK


_SHM = ("[shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds. This typically "
        "happens when some processes are hanging or doing some time-consuming work (e.g. compilation).\n")


def test_torch_npus_aicore_timeout_after_a_shm_wait_is_a_device_fault_and_the_wait_alone_is_not(tmp_path):
    """torch_npu prints ACL error 507014 as "The aicore execution times out." (ascend-two-node-aicore-timeout-…):
    a kernel the AI core's watchdog stopped; the shm wait before it is that kernel running, not a benign wait."""
    for device_line in ("[Error]: The aicore execution times out.", "[Error]: The aicore execution is abnormal."):
        verdict = verdict_of(tmp_path, _SHM + device_line + "\n")
        assert verdict.kind.value == "crashed" and "aicore" in verdict.headline
    # the wait alone is no device fault: what the workers were doing decides (stop 25: never read as benign)
    for text in (_SHM, _SHM + "[Error]: The aicore execution finished.\n"):
        verdict = verdict_of(tmp_path, text)
        assert verdict.kind.value == "unknown" and "what the workers were doing then" in verdict.undecided


_RENDEZVOUS = """\
(EngineCore_0 pid=892803)   File "/py/torch/distributed/distributed_c10d.py", line 1710, in init_process_group
(EngineCore_0 pid=892803)     store, rank, world_size = next(rendezvous_iterator)
(EngineCore_0 pid=892803)                               ^^^^^^^^^^^^^^^^^^^^^^^^^
(EngineCore_0 pid=892803)   File "/py/torch/distributed/rendezvous.py", line 230, in _tcp_rendezvous_handler
(EngineCore_0 pid=892803)     store = _create_c10d_store(
(EngineCore_0 pid=892803)             ^^^^^^^^^^^^^^^^^^^
"""


def test_a_traceback_through_the_rendezvous_is_decided_by_its_error_line(tmp_path):
    """init_process_group raises inside the rendezvous both when members never join and when the store cannot
    listen on its port (skyrl-vllm-engine-restart-eaddrinuse-rendezvous, dgx-spark-2node-rank1-never-joins-…):
    the error line decides, and without it the verdict says it cannot."""
    cut = verdict_of(tmp_path, _RENDEZVOUS)
    assert cut.kind.value == "unknown" and "EADDRINUSE" in cut.undecided and "clients joined" in cut.undecided
    taken = verdict_of(tmp_path, _RENDEZVOUS + (
        "(EngineCore_0 pid=892803) torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already "
        "in use\n"))
    assert taken.kind.value == "crashed" and "port" in taken.headline
    assert any("ss -ltnp" in (step.command or "") for step in taken.next_steps)
    joined = verdict_of(tmp_path, _RENDEZVOUS + (
        "(EngineCore_0 pid=892803) torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. "
        "1/4 clients joined.\n"))
    assert joined.kind.value == "deadlocked" and "3 missing members" in joined.headline


_KV_CHECK = """\
(EngineCore pid=47)   File "/v/vllm/v1/core/kv_cache_utils.py", line 2065, in get_kv_cache_configs
(EngineCore pid=47)     _check_enough_kv_cache_memory(
(EngineCore pid=47)   File "/v/vllm/v1/core/kv_cache_utils.py", line 717, in _check_enough_kv_cache_memory
{deepest}"""


def test_the_kv_cache_check_raising_is_the_kv_cache_not_fitting_even_with_its_message_cut(tmp_path):
    """_check_enough_kv_cache_memory raises ValueError only when the KV cache does not fit
    (rtx3090-boot-oom-kv-cache-check-defaults-fixed), and its message's opening says so when a paste cut the
    rest (arc-b70-kv-cache-memory-bytes-10mib-short); a frame deeper than it is some other failure."""
    raised = verdict_of(tmp_path, _KV_CHECK.format(deepest="(EngineCore pid=47)     raise ValueError(\n"))
    assert raised.kind.value == "fragmented" and raised.sub_kind.value == "exhaustion"
    deeper = verdict_of(tmp_path, _KV_CHECK.format(
        deepest="(EngineCore pid=47)     needed_memory = get_needed_memory()\n"
                '(EngineCore pid=47)   File "/v/vllm/v1/core/kv_cache_utils.py", line 90, in max_memory_usage_bytes\n'
                "(EngineCore pid=47)     return sum(spec.max_memory_usage_bytes(vllm_config) for spec in specs)\n"))
    assert deeper.kind.value != "fragmented"
    cut = "(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach\n"
    assert verdict_of(tmp_path, cut).kind.value == "fragmented"
    older = cut.replace("model's", "models's")
    assert verdict_of(tmp_path, older).kind.value == "fragmented"
    assert verdict_of(tmp_path, "INFO 04-17 08:12:24 [config.py:689] To serve at least one request with the "
                              "defaults, set max_model_len\n").kind.value != "fragmented"


_DP_SYNC = """\
(Worker_DP0_TP0_EP0 pid=5609) ERROR 06-04 12:45:50 [multiproc_executor.py:932]   File "/w/model_runner_v1.py", line 1902, in _sync_batch_across_dp
(Worker_DP0_TP0_EP0 pid=5609) ERROR 06-04 12:45:50 [multiproc_executor.py:932]     dist.all_reduce(tensor, group=get_dp_group().{group})
(Worker_DP0_TP0_EP0 pid=5609) ERROR 06-04 12:45:50 [multiproc_executor.py:932]   File "/t/torch/distributed/c10d_logger.py", line 81, in wrapper
(Worker_DP0_TP0_EP0 pid=5609) ERROR 06-04 12:45:50 [multiproc_executor.py:932]     return func(*args, **kwargs)
{error}"""


def test_a_cut_traceback_through_a_cpu_collective_leans_deadlocked_and_its_error_line_decides(tmp_path):
    """A gloo (CPU) collective fails only on its peers (dp-two-node-extra-dp-allreduce-gloo-recv-timeout: one
    node ran one DP all_reduce more); a GPU group's collective can also surface a device fault, so its frame
    alone decides nothing, and a kept error line is read by its own rules."""
    cut = verdict_of(tmp_path, _DP_SYNC.format(group="cpu_group", error=""))
    assert cut.kind.value == "deadlocked" and cut.confidence <= 0.5 and "Timed out waiting" in cut.undecided
    assert any("TORCH_DISTRIBUTED_DEBUG" in (step.command or "") for step in cut.next_steps)
    assert verdict_of(tmp_path, _DP_SYNC.format(group="device_group", error="")).kind.value == "unknown"
    faulted = verdict_of(tmp_path, _DP_SYNC.format(group="cpu_group", error=(
        "(Worker_DP0_TP0_EP0 pid=5609) ERROR 06-04 12:45:50 [multiproc_executor.py:932] RuntimeError: CUDA error: "
        "an illegal memory access was encountered\n")))
    assert faulted.kind.value == "crashed"


_V0_WORKER = ("(VllmWorkerProcess pid=42878) ERROR 08-04 16:54:59 [multiproc_worker_utils.py:238] Exception in worker "
              "VllmWorkerProcess while processing method {method}{error}\n")


def test_a_v0_worker_failing_in_the_memory_profile_leans_out_of_memory_unless_its_error_says_otherwise(tmp_path):
    """V0's wrapper names the method a worker failed in; the profile run holds the largest batch it will ever
    see, so a failure there with its error past the paste is most often memory
    (qwen25vl-72b-gptq-10-images-video-profile-oom; the four mllama profile-run OOMs of the corpus)."""
    cut = verdict_of(tmp_path, _V0_WORKER.format(method="determine_num_available_blocks", error="."))
    assert cut.kind.value == "fragmented" and cut.confidence <= 0.5 and "OutOfMemoryError" in cut.undecided
    named = verdict_of(tmp_path, _V0_WORKER.format(method="determine_num_available_blocks",
                                                 error=": AssertionError: shapes do not match"))
    assert named.kind.value == "crashed"
    assert verdict_of(tmp_path, _V0_WORKER.format(method="load_model", error=".")).kind.value != "fragmented"


_FORWARD = (
    "(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012] EngineCore encountered a fatal error.\n"
    "(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012] Traceback (most recent call last):\n"
    '(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]   File "/usr/lib/python3/dist-packages/vllm/v1/'
    'worker/gpu_model_runner.py", line 2800, in execute_model\n'
    "(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]     model_output = self.model(\n"
    '(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]   File "/usr/lib/python3/dist-packages/torch/nn/'
    'modules/module.py", line 1779, in _wrapped_call_impl\n'
    "(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]     return self._call_impl(*args, **kwargs)\n"
    '(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]   File "/usr/lib/python3/dist-packages/vllm/'
    'model_executor/models/qwen3_next.py", line 900, in forward\n'
    "(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]     hidden_states = layer(positions, hidden_states)\n"
    '(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012]   File "/usr/lib/python3/dist-packages/vllm/'
    '{last}\n'
    "{error}"
)
_IN_ATTENTION = 'model_executor/layers/mamba/gdn_linear_attn.py", line 991, in _forward_core'


def test_a_traceback_cut_inside_a_models_forward_leans_out_of_memory(tmp_path):
    """An exception raised inside the forward computation is, among the corpus's forward tracebacks cut
    before their error, always an OOM (single-3090-gdn-multiturn-accumulated-context-oom, mllama-vision-
    encoder-oom-fixed-by-max-num-seqs-16 and three more): a lean at 0.4 that names the line that decides."""
    cut = verdict_of(tmp_path, _FORWARD.format(last=_IN_ATTENTION, error=""))
    assert cut.kind.value == "fragmented" and cut.confidence == 0.4 and "forward pass" in cut.headline
    assert "OutOfMemoryError" in cut.undecided
    assert any("--max-num-batched-tokens" in (step.command or "") for step in cut.next_steps)


def test_a_forward_traceback_whose_error_is_kept_or_that_ends_elsewhere_is_read_otherwise(tmp_path):
    """The lean is for a cut traceback only, ending in the computation itself: a kept error decides, a
    collective below the forward fails on its peers, the sampler is where asynchronous device faults surface,
    and model code that builds a layer (llm-d-dp16-dev-shm-exhausted-nccl-crashloop) is not the forward."""
    prefix = "(EngineCore pid=104) ERROR 03-02 10:11:12 [core.py:1012] "
    kept = verdict_of(tmp_path, _FORWARD.format(last=_IN_ATTENTION, error=prefix + "AssertionError: shapes differ\n"))
    assert kept.kind.value == "crashed"
    for last in ('distributed/communication_op.py", line 14, in tensor_model_parallel_all_reduce',
                 'model_executor/layers/sampler.py", line 300, in forward'):
        assert verdict_of(tmp_path, _FORWARD.format(last=last, error="")).kind.value != "fragmented", last
    # a model's layer set-up reached without any forward above it
    setup = _FORWARD.replace("in forward", "in __init__").replace("_wrapped_call_impl", "_apply").replace(
        "in execute_model", "in load_model")
    assert verdict_of(tmp_path, setup.format(last=_IN_ATTENTION.replace("_forward_core", "_make_weights"),
                                           error="")).kind.value != "fragmented"


_CUT_AT = (
    "(VllmWorker rank=1 pid=106) ERROR 04-29 01:10:12 [multiproc_executor.py:470] Traceback (most recent call last):\n"
    '(VllmWorker rank=1 pid=106) ERROR 04-29 01:10:12 [multiproc_executor.py:470]   File "/usr/lib/python3/'
    'dist-packages/vllm/model_executor/layers/fused_moe/fused_moe.py", line 1295, in fused_experts_impl\n'
    "(VllmWorker rank=1 pid=106) ERROR 04-29 01:10:12 [multiproc_executor.py:470]     {statement}\n"
    "{error}"
)


def test_a_traceback_cut_at_an_allocation_leans_out_of_memory(tmp_path):
    """A tensor factory calls no Python below it and fails on memory (qwen3-moe-fused-experts-oom: ``cache13 =
    torch.empty(`` in the fused-MoE kernel); a function named for allocating says the same of the frames past the
    cut (b12x-moe-static-workspace-oom).  Both OOMs were past the paste."""
    for statement in ("cache13 = torch.empty(M * top_k_num * max(N, K),",
                      "self._static_workspace = allocate_sm120_moe_workspace("):
        cut = verdict_of(tmp_path, _CUT_AT.format(statement=statement, error=""))
        assert cut.kind.value == "fragmented" and cut.confidence == 0.5, statement
        assert "allocation" in cut.headline and "OutOfMemoryError" in cut.undecided
        assert any("--gpu-memory-utilization" in (step.command or "") for step in cut.next_steps)


def test_a_traceback_cut_elsewhere_or_whose_error_is_kept_is_not_read_as_an_allocation(tmp_path):
    """Only the last statement counts, and only when no other error was kept: arithmetic, a free, or a
    shape error raised at the factory are not memory."""
    for statement in ("out = hidden_states + residual", "self._deallocate_buffers()", "torch.cuda.empty_cache()"):
        assert verdict_of(tmp_path, _CUT_AT.format(statement=statement, error="")).kind.value != "fragmented", statement
    prefix = "(VllmWorker rank=1 pid=106) ERROR 04-29 01:10:12 [multiproc_executor.py:470] "
    kept = verdict_of(tmp_path, _CUT_AT.format(statement="cache13 = torch.empty(M, K,",
                                            error=prefix + "RuntimeError: negative dimension -4\n"))
    assert kept.kind.value != "fragmented" and "negative dimension" in kept.headline + str(kept.evidence)


def test_a_traceback_cut_in_the_kv_cache_set_up_leans_out_of_memory(tmp_path):
    """``_initialize_kv_caches`` profiles the peak, sizes the cache and allocates it: each step fails on memory
    first (internvl3-78b-4xa100-40g-waiting-engine-then-kv-init-oom; V0's ``initialize_cache`` in
    trl-grpo-accelerate-vllm-kv-cache-init-oom).  A kept error that is not about memory decides otherwise."""
    head = ("ERROR 04-17 08:12:47 [core.py:387] EngineCore hit an exception: Traceback (most recent call last):\n"
            'ERROR 04-17 08:12:47 [core.py:387]   File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", '
            "line 71, in __init__\n"
            "ERROR 04-17 08:12:47 [core.py:387]     self._initialize_kv_caches(vllm_config)\n"
            'ERROR 04-17 08:12:47 [core.py:387]   File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", '
            "line 138, in _initialize_kv_caches\n")
    cut = verdict_of(tmp_path, head)
    assert cut.kind.value == "fragmented" and cut.confidence == 0.5 and "KV-cache set-up" in cut.headline
    other = verdict_of(tmp_path, head + "ERROR 04-17 08:12:47 [core.py:387] RuntimeError: Triton Error [CUDA]: "
                     "invalid argument\n")
    assert other.kind.value != "fragmented"


_STORE_LOST = ("[rank30]:[W111 00:54:10.905768298 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=99, "
               "addr=[::ffff:172.16.21.245]:38760, remote=[::ffff:172.16.11.34]:42643): Failed to recv, got 0 bytes. "
               "Connection was likely closed. Did the remote server shutdown or crash?\n")


def test_a_lost_tcp_store_is_a_dead_rank_zero_unless_an_operator_stopped_the_server_first(tmp_path):
    """torch's store client saying its server closed the connection: the store's host (rank 0, the DP head's
    vLLM) is gone and the ranks that poll it wait forever (dp16-headless-node-stuck-after-head-exit-tcpstore-
    recv); after an operator's stop the same line is exit-time noise."""
    lost = verdict_of(tmp_path, _STORE_LOST)
    assert lost.kind.value == "deadlocked" and lost.confidence == 0.5
    assert "172.16.11.34:42643" in lost.headline and "store host's own log" in lost.undecided
    stopped = verdict_of(tmp_path, "(APIServer pid=1) INFO 01-11 00:54:05 [launcher.py:80] received SIGTERM, "
                                 "draining requests\n" + _STORE_LOST)
    assert stopped.kind.value == "healthy"


_BANK_OOM = ("TT_FATAL: Out of Memory: Not enough space to allocate {asked} B DRAM buffer\n"
             "across 8 banks, where each bank needs to store {need} B, but bank size is\n"
             "4272341376 B (allocated: 3993427840 B, free: {free} B{largest})\n")


def test_tt_metals_bank_oom_is_fragmentation_only_when_enough_is_free_but_in_no_single_block(tmp_path):
    """tt-metal prints per-bank figures, its largest free block in newer releases: free ≥ the request but the
    largest block < it is fragmentation (tt-p150-chunked-prefill-b32-trace-warmup-dram-fragmentation-oom), free
    < the request is a full device (tt-t3k-batched-prefill-32slot-allgather-dram-oom).  The message wrapped over
    three lines is read as one."""
    split = verdict_of(tmp_path, _BANK_OOM.format(asked=1879048192, need=234881024, free=278913536,
                                               largest=", largest free block: 134217728 B"))
    assert split.kind.value == "fragmented" and split.sub_kind.value == "fragmentation"
    assert "128.00 MiB" in split.headline
    assert not any("PYTORCH_CUDA_ALLOC_CONF" in (s.command or "") for s in split.next_steps)
    full = verdict_of(tmp_path, _BANK_OOM.format(asked=1879048192, need=234881024, free=112990400,
                                              largest=", largest free block: 112990400 B"))
    assert full.kind.value == "fragmented" and full.sub_kind.value == "exhaustion"
    unknown_block = verdict_of(tmp_path, _BANK_OOM.format(asked=1879048192, need=234881024, free=278913536, largest=""))
    assert unknown_block.sub_kind.value == "exhaustion"  # no largest block printed: no claim of fragmentation


def test_tt_metals_operation_watchdog_is_a_likely_device_hang_named_with_its_knob(tmp_path):
    """With TT_METAL_OPERATION_TIMEOUT_SECONDS set, a device that stops answering its dispatch queue raises
    "potential hang detected" (tt-t3k-vlm-prefill-dispatch-queue-stall-5s-watchdog)."""
    hang = verdict_of(tmp_path, "  2026-05-09 01:09:37.968 | critical | Always | TT_THROW: TIMEOUT: device timeout "
                              "in fetch queue wait, potential hang detected (assert.hpp:104)\n")
    assert hang.kind.value == "deadlocked" and hang.confidence == 0.6
    assert any("TT_METAL_OPERATION_TIMEOUT_SECONDS" in (s.command or "") for s in hang.next_steps)
    assert "TIMEOUT" not in verdict_of(tmp_path, "  2026-05-09 01:09:37.968 | info | Metal | device timeout "
                                               "set to 5 s\n").headline


def test_a_harness_health_wait_that_expires_while_the_api_server_still_polls_the_engine_is_a_slow_start_up(tmp_path):
    """The API server logs its wait for the engine core only while that process lives; a harness's health
    wait expiring then cut a start-up short (tt-tensor-cache-generation-exceeds-1200s-health-wait).  Its
    client lines open with a full date and are lines of their own, never the tail of the server line above."""
    waiting = "[SERVER] (APIServer pid=1) DEBUG 03-18 17:57:{s} utils.py:1031] Waiting for 1 local, 0 remote core engine proc(s) to start.\n"
    text = (waiting.format(s=27) + "2026-03-18 17:57:33,057 - utils.cache_monitor - INFO - No cache directory\n"
            + waiting.format(s=37) + "2026-03-18 17:57:43,066 - utils.prompt_client - ERROR - Service did not "
            "become healthy within 1200.0s\n")
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value == "slow" and "start-up" in verdict.headline
    assert "unknown" == verdict_of(tmp_path, waiting.format(s=27) + waiting.format(s=37)).kind.value


def test_the_free_memory_check_wrapped_on_either_side_of_desired_is_the_same_start_up_shortfall(tmp_path):
    """vLLM's start-up check, wrapped after "than" (eks-lws-ep16-decode-gpu-util-098-unreachable) or after
    "desired" (lws-ep16-decode-gpu-mem-util-098-free-memory-check): the same unreachable memory target."""
    message = ("ValueError: Free memory on device cuda:7 (174.24/178.35 GiB) on startup is less than desired GPU "
               "memory utilization (0.98, 174.78 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
               "other processes.")
    for cut_after in ("less than", "desired", "desired GPU memory"):
        at = message.index(cut_after) + len(cut_after)
        verdict = verdict_of(tmp_path, message[:at] + "\n" + message[at:].lstrip() + "\n")
        assert verdict.kind.value == "fragmented" and "--gpu-memory-utilization" in verdict.headline, cut_after
        assert any((s.command or "").startswith("--gpu-memory-utilization 0.97") for s in verdict.next_steps)


_NPU_ERROR = ("[rank6]:[E422 08:49:02.598461350 compiler_depend.ts:444] operator():build/CMakeFiles/torch_npu.dir/"
              "compiler_depend.ts:162 NPU function error: call {call} failed, error code is {code}\n"
              "[ERROR] 2026-04-22-08:49:02 (PID:5566, Device:6, RankID:-1) ERR00100 PTA call acl api failed.\n")


def test_an_npu_function_error_is_a_device_fault_unless_its_detail_says_memory_ran_out(tmp_path):
    """torch_npu's "NPU function error: call … failed, error code is N" is the NPU runtime's "CUDA error"
    (ascend-a2-2node-shm-broadcast-wait-then-moe-dispatch-hccl-crash, after two minutes of shm waits); ACL's
    detail right below it saying memory ran out makes it that OOM (ascend-mc2-moe-dispatch-hccl-2gib-device-
    memory-exhausted)."""
    waits = ("(EngineCore_DP0 pid=5280) INFO 04-22 08:47:19 [shm_broadcast.py:548] No available shared memory "
             "broadcast block found in 60 seconds.\n")
    fault = verdict_of(tmp_path, waits + _NPU_ERROR.format(call="aclnnMoeDistributeDispatchV4", code=561000))
    assert fault.kind.value == "crashed"
    assert any("ASCEND_LAUNCH_BLOCKING" in (s.command or "") for s in fault.next_steps)
    assert not any("CUDA_LAUNCH_BLOCKING" in (s.command or "") for s in fault.next_steps)
    memory = verdict_of(tmp_path, _NPU_ERROR.format(call="aclnnMoeDistributeDispatchV2", code=207001)
                      + "EL0004: [PID: 316198] 2025-09-28-07:22:29.827.496 Failed to allocate memory.\n")
    assert memory.kind.value == "fragmented"


def test_a_mooncake_pull_that_timed_out_on_the_prefill_side_is_a_likely_deadlock_naming_the_knob(tmp_path):
    """The prefill side did not have the requests' KV ready within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s
    by default) — a prefill that never ran them, or ran them that slowly (mooncake-pd-decode-stuck-waiting-p-
    side-ready); the prefill instance's log decides."""
    line = ("(Worker_DP6_EP6 pid=9774) ERROR 08-01 12:42:13 [mooncake_connector.py:1899] pulling kv_caches for "
            "['973ca62f1bc3666d'] failed: Timeout waiting for P side ready.\n")
    verdict = verdict_of(tmp_path, line)
    assert verdict.kind.value == "deadlocked" and verdict.confidence == 0.5
    assert "prefill instance's log" in verdict.undecided
    assert any("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT" in s.text for s in verdict.next_steps)


def test_an_ascend_stream_task_timeout_is_a_likely_stuck_collective_not_a_device_fault(tmp_path):
    """Ascend's runtime giving up on a stream whose work never finished ("rtStreamSynchronizeWithTimeout execute
    failed, reason=[fftsplus timeout]", torch_npu's "The execution of the internal task times out") is on vLLM's
    NPU workers nearly always an HCCL collective left waiting for a peer
    (flashcomm1-shared-expert-two-stream-hccl-deadlock-profile-run); the synchronize call that reports it is no
    device fault of its own, where another failed ACL call is (the test above)."""
    timeout = verdict_of(tmp_path, (
        "RuntimeError: ... current working operator name is aclnnGroupedMatmulWeightNz.\n"
        "EE9999: rtStreamSynchronizeWithTimeout execution failed, reason=task timeout\n"
        "[Rank N] HCCL watchdog thread terminated with exception\n"))
    assert timeout.kind.value == "deadlocked" and timeout.confidence == 0.6
    assert any("HCCL_ENTRY_LOG_ENABLE" in (s.command or "") for s in timeout.next_steps)
    sync = verdict_of(tmp_path, (
        "(VllmWorker TP1 pid=961) ERROR 09-07 01:11:09 [multiproc_executor.py:596] RuntimeError: synchronize:build/"
        "CMakeFiles/torch_npu.dir/compiler_depend.ts:47 NPU function error: c10_npu::acl::"
        "AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507048\n"
        "(VllmWorker TP1 pid=961) ERROR 09-07 01:11:09 [multiproc_executor.py:596] [Error]: The execution of the "
        "internal task times out.\n"))
    assert sync.kind.value == "deadlocked"


def test_rays_memory_monitor_advice_alone_is_a_host_memory_kill_not_gpu_memory(tmp_path):
    """Ray's memory monitor kills actors for host RAM; a paste that kept only its advice still says so
    (lmmr1-ray-memory-monitor-kills-llmrayactors-host-oom), and GPU memory settings would not help."""
    verdict = verdict_of(tmp_path, (
        "95412   14.05   ray::LLMRayActor\n"
        "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/"
        "ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node.\n"))
    assert verdict.kind.value == "crashed" and "host memory" in verdict.headline
    assert not any("--gpu-memory-utilization" in (s.command or "") for s in verdict.next_steps)


_XLA = "(EngineCore pid=7) ERROR 06-03 07:41:11 [core.py:1184] jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: {what}\n"


def test_xlas_own_out_of_memory_figures_are_device_memory_exhaustion(tmp_path):
    """XLA (TPU) prints a compiled program's needs against one memory space, or a buffer the runtime could not
    place (tpu-inference-v7x-vmem-oom-precompile: 76.58M of 64.00M vmem); a gRPC message over its size limit is
    RESOURCE_EXHAUSTED too, and no memory at all."""
    compiled = verdict_of(tmp_path, _XLA.format(
        what="XLA:TPU compile permanent error. Ran out of memory in memory space vmem. Used 76.58M of 64.00M vmem. "
             "Exceeded vmem capacity by 12.58M."))
    assert compiled.kind.value == "fragmented" and compiled.sub_kind.value == "exhaustion"
    assert "76.58 MiB of vmem" in compiled.headline and "64.00 MiB" in compiled.headline
    assert not any("expandable_segments" in note for note in compiled.notes)
    runtime = verdict_of(tmp_path, _XLA.format(
        what="Error allocating device buffer: Attempting to allocate 1.20G. That was not possible. There are 1.00G free."))
    assert runtime.kind.value == "fragmented" and "1.20 GiB" in runtime.headline
    assert "CUDA" not in runtime.headline and "device memory" in runtime.headline  # a TPU names no CUDA
    grpc = verdict_of(tmp_path, _XLA.format(what="Received message larger than max (8388608 vs. 4194304)"))
    assert grpc.kind.value != "fragmented"


_INIT_CACHE = (
    "ERROR 11-13 17:03:45 worker_base.py:382] Error executing method initialize_cache. This might cause deadlock in "
    "distributed execution.\n"
    "ERROR 11-13 17:03:45 worker_base.py:382] Traceback (most recent call last):\n"
    'ERROR 11-13 17:03:45 worker_base.py:382]   File "/v/vllm/worker/worker_base.py", line 374, in execute_method\n'
    "ERROR 11-13 17:03:45 worker_base.py:382]     return executor(*args, **kwargs)\n"
    "{more}"
)


def test_v0_initialize_cache_failing_is_the_kv_cache_only_before_the_warm_up(tmp_path):
    """V0's initialize_cache sizes the KV cache, allocates it, then warms the model up: its wrapper's error with
    the traceback cut there is the cache not fitting (openrlhf-70b-ppo-initialize-cache-kv-6048-lt-8192-deadlock-
    warning), a traceback on into ``_warm_up_model`` or a kept error about something else is not
    (gaudi-hpu-graph-nonsfg-collective-warmup)."""
    prefix = "ERROR 11-13 17:03:45 worker_base.py:382] "
    assert verdict_of(tmp_path, _INIT_CACHE.format(more="")).kind.value == "fragmented"
    too_long = prefix + ("ValueError: The model's max seq len (8192) is larger than the maximum number of tokens "
                         "that can be stored in KV cache (6048).\n")
    assert verdict_of(tmp_path, _INIT_CACHE.format(more=too_long)).kind.value == "fragmented"
    warm_up = (prefix + '  File "/v/vllm/worker/habana_worker.py", line 220, in _warm_up_model\n'
               + prefix + "    self.model_runner.warmup_model(self.hpu_cache[0])\n")
    assert verdict_of(tmp_path, _INIT_CACHE.format(more=warm_up)).kind.value != "fragmented"
    other = prefix + "RuntimeError: collective nonSFG is not supported during hpu graph capturing\n"
    assert verdict_of(tmp_path, _INIT_CACHE.format(more=other)).kind.value != "fragmented"


_HCCL = "[ERROR] HCCL(2717288,python3):2025-07-23-{t} [{where}] [2717288]{what}\n"


def test_hccl_links_that_never_form_are_a_rendezvous_that_cannot_complete(tmp_path):
    """HCCL's own log forming a communicator: a rank that cannot listen on its NIC's port, and the link to a rank
    that never formed within HCCL_CONNECT_TIMEOUT (ascend-hccl-listen-fail-link-timeout): the group never forms,
    however long it waits; one listen failure alone says the same."""
    listen = _HCCL.format(t="03:47:57.070.463", where="hccl_socket.cc:100",
                          what="[HcclSocket][Listen] socket type[1], listen on ip[192.168.20.160] and specific "
                               "port[16666] fail. Please check the port status.")
    link = _HCCL.format(t="03:49:57.177.194", where="hccl_socket_manager.cc:778",
                        what="[Wait][LinkEstablish]wait socket establish timeout, role[1] rank[12] timeout[120]")
    both = verdict_of(tmp_path, listen + link)
    assert both.kind.value == "deadlocked" and "192.168.20.160:16666" in both.headline
    assert any("hccn_tool" in (step.command or "") for step in both.next_steps)
    alone = verdict_of(tmp_path, link)
    assert alone.kind.value == "deadlocked" and "rank 12" in alone.headline


def test_the_shells_killed_line_is_a_sigkill_and_a_word_inside_a_line_is_not(tmp_path):
    """bash prints "Killed" for a foreground job that died of SIGKILL (jetson-orin-nx-gguf-killed-after-kv-alloc:
    right after V0 sized its KV cache); the word inside a message is no such report."""
    start = "INFO 01-23 07:34:26 gpu_executor.py:122] # GPU blocks: 11836, # CPU blocks: 4681\n"
    for report in ("Killed\n", "bash: line 1:  1234 Killed   python3 -m vllm.entrypoints.openai.api_server --model Qwen2-7B\n"):
        killed = verdict_of(tmp_path, start + report)
        assert killed.kind.value == "crashed" and "SIGKILL" in killed.headline, report
        assert any("dmesg" in (step.command or "") for step in killed.next_steps)
    assert verdict_of(tmp_path, start + "INFO 01-23 07:34:27 engine.py:1] Killed 3 idle sequences\n").kind.value != "crashed"


_LMCACHE = ("[2025-08-14 14:57:51,765] LMCache WARNING: Failed to allocate memory object, retrying... "
            "(nixl_connector_v3.py:567:lmcache.v1.storage_backend.connector.nixl_connector_v3)\n")


def test_lmcaches_transfer_buffer_retrying_without_end_is_a_full_kv_buffer(tmp_path):
    """LMCache's NIXL save loop sleeps and retries while its buffer has no free block
    (lmcache-nixl-buffer-alloc-retry-forever): the buffer's own knob, not the engine's KV-cache knobs."""
    full = verdict_of(tmp_path, _LMCACHE * 3)
    assert full.kind.value == "fragmented" and full.sub_kind.value == "kv-pressure" and full.confidence == 0.7
    assert "3 times" in full.headline
    commands = [step.command or "" for step in full.next_steps]
    assert any("LMCACHE_NIXL_BUFFER_SIZE" in c for c in commands)
    assert not any("--gpu-memory-utilization" in c or "--max-num-seqs" in c for c in commands)
    assert verdict_of(tmp_path, _LMCACHE).confidence == 0.5  # one retry: an unlucky allocation is possible


_RELEASED = ("(EngineCore pid=9) WARNING 08-16 08:09:07 [nixl_connector.py:1048] Releasing expired KV blocks for "
             "request cmpl-1 which were retrieved by 0 decode worker(s) {how}.\n")
_READ_LATE = ("(EngineCore pid=9) ERROR 08-16 08:09:28 [nixl_connector.py:1068] Potentially invalid KV blocks for "
              "unrecognized request cmpl-1 were retrieved by a decode worker. They may have expired.\n")


def test_a_decode_read_after_the_prefill_sides_lease_is_slow_not_dead(tmp_path):
    """The prefill side frees KV blocks its decode side has not read within the lease; a decode worker that reads
    them after all was alive, only later than the lease (nixl-kv-lease-expired-decode-read-after-free).  Each
    release names its knob: 0.10's VLLM_NIXL_ABORT_REQUEST_TIMEOUT with its seconds, 0.3x's kv_lease_duration."""
    old = verdict_of(tmp_path, _RELEASED.format(how="within 120 seconds") + _READ_LATE)
    assert old.kind.value == "slow" and "120 s" in old.headline
    assert any("VLLM_NIXL_ABORT_REQUEST_TIMEOUT" in step.text for step in old.next_steps)
    new = verdict_of(tmp_path, _RELEASED.format(how="before lease expired").replace("decode worker", "remote worker")
                   + _READ_LATE)
    assert new.kind.value == "slow" and any("kv_lease_duration" in (step.command or "") for step in new.next_steps)


def test_a_release_nobody_read_late_or_a_late_read_before_any_release_is_not_that_reading(tmp_path):
    """Only a read after the release shows the decode side alive: a release alone may be a decode instance that
    died, and a late read before any release in the log has no lease to blame."""
    alone = verdict_of(tmp_path, _RELEASED.format(how="within 120 seconds"))
    assert alone.kind.value != "slow"
    before = verdict_of(tmp_path, _READ_LATE + _RELEASED.format(how="within 120 seconds").replace("08:09:07", "08:09:40"))
    assert before.kind.value != "slow"


def test_rocms_memory_access_fault_is_a_device_fault(tmp_path):
    """ROCm's runtime prints "Memory access fault by GPU node-N … Reason: …" on a GPU page fault and aborts: AMD's
    illegal memory access (minimax-m25-aiter-fmoe-memory-access-fault), never memory running out."""
    fault = verdict_of(tmp_path, "(Worker_TP3_EP3 pid=891) [aiter] import [module_moe_sorting] under /opt/aiter.so\n"
                               "Memory access fault by GPU node-3 (Agent handle: 0x13e852f0) on address 0x77d445e00000. "
                               "Reason: Unknown.\n")
    assert fault.kind.value == "crashed" and "Memory access fault" in fault.headline


_POOL_SHORT = "[kvcached][WARNING] kv_cache_manager.py:174 available_size()=71 < need_size=76\n"


def test_a_shared_kv_pool_short_of_blocks_is_kv_pressure_and_surer_when_the_engine_died_on_it(tmp_path):
    # kvcached-shared-pool-exhausted-assert: kvcached's allocator returns nothing and vLLM's block pool asserts
    died = verdict_of(tmp_path, _POOL_SHORT + "ERROR 11-02 10:00:01 [core.py:938] EngineCore encountered a fatal error.\n"
                              "AssertionError\n")
    alone = verdict_of(tmp_path, _POOL_SHORT)
    assert (died.kind.value, died.sub_kind.value) == ("fragmented", "kv-pressure") and "71 free where 76" in died.headline
    assert alone.kind.value == "fragmented" and alone.confidence < died.confidence
    # the same assert with no pool line is not read as memory
    assert verdict_of(tmp_path, "ERROR 11-02 10:00:01 [core.py:938] EngineCore encountered a fatal error.\n"
                              "AssertionError\n").kind.value != "fragmented"


_LOOP_CANCELLED = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 604, in run_engine_loop
    done, _ = await asyncio.wait(
  File "/usr/lib/python3.10/asyncio/tasks.py", line 384, in wait
    return await _wait(fs, timeout, return_when, loop)
  File "/usr/lib/python3.10/asyncio/tasks.py", line 491, in _wait
    await waiter
asyncio.exceptions.CancelledError
"""


def test_v0s_engine_loop_cancelled_with_an_exception_chained_on_is_its_iteration_timeout_and_alone_is_not(tmp_path):
    # pascal-p40-gptq-long-prompt-engine-loop-timeout: asyncio_timeout(ENGINE_ITERATION_TIMEOUT_S) cancels the
    # wait and raises while handling the CancelledError; a shutdown cancels the loop with nothing after it
    for chained in ("During handling of the above exception, another exception occurred:",
                    "The above exception was the direct cause of the following exception:"):
        fired = verdict_of(tmp_path, _LOOP_CANCELLED + f"\n{chained}\n\nTraceback (most recent call last):\n"
                                   '  File "/usr/local/lib/python3.10/dist-packages/uvicorn/protocols/http/'
                                   'httptools_impl.py", line 399, in run_asgi\n')
        assert fired.kind.value == "slow" and "VLLM_ENGINE_ITERATION_TIMEOUT_S" in fired.headline
    assert verdict_of(tmp_path, _LOOP_CANCELLED).kind.value != "slow"


def _stats(at: str, running: int, waiting: int, kv: float) -> str:
    return (f"(APIServer pid=196) INFO 08-31 08:{at} [loggers.py:271] Engine 000: Avg prompt throughput: 2305.4 "
            f"tokens/s, Avg generation throughput: 0.1 tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
            f"GPU KV cache usage: {kv}%, Prefix cache hit rate: 1.8%\n")


_DELAYED = ("(EngineCore_DP0 pid=603) INFO 08-31 08:31:17 [mooncake_connector.py:1910] Delaying free of 181 blocks "
            "for request chatcmpl-3739-a735e8bd\n")


def test_a_prefill_engine_holding_most_of_its_kv_idle_with_delayed_frees_holds_it_for_the_decode_side(tmp_path):
    # ascend-pd-prefill-node-hang-preemption-disabled-kv-full: an idle V1 engine's KV cache is free (cached
    # blocks with no request count as free), so 84.6 % in use with nothing running is held by the connector
    held = verdict_of(tmp_path, _DELAYED + _stats("31:25", 0, 0, 84.6))
    assert (held.kind.value, held.sub_kind.value) == ("fragmented", "kv-pressure") and "84.6%" in held.headline
    longer = verdict_of(tmp_path, _DELAYED + _stats("31:25", 0, 0, 84.6) + _stats("31:35", 0, 0, 84.6))
    assert longer.confidence > held.confidence
    # requests still running explain the usage; a freed cache or no connector holding anything is no hold
    for text in (_DELAYED + _stats("31:25", 3, 0, 84.6), _DELAYED + _stats("31:25", 0, 0, 0.4),
                 _stats("31:25", 0, 0, 84.6)):
        assert "held for the decode side" not in verdict_of(tmp_path, text).headline


def test_an_ascend_runtime_allocation_failure_or_metal_command_buffer_oom_is_device_memory_exhaustion(tmp_path):
    # ascend-qwen3vl32b-npu-oom-midrun, metal-command-buffer-oom-guidellm (as their threads paste them)
    npu = verdict_of(tmp_path, "(EngineCore_DP0 pid=10516) ERROR 12-03 12:16:41 [core.py:710]         Possible Cause: "
                             "Available memory is insufficient.\n(EngineCore_DP0 pid=10516) ERROR 12-03 12:16:41 "
                             "[core.py:710]         alloc device memory failed, runtime result = 207001\n")
    assert npu.kind.value == "fragmented" and npu.headline.startswith("device memory exhausted")
    metal = verdict_of(tmp_path, _stats("20:01", 1, 0, 0.2) + "libc++abi: terminating due to uncaught exception of type "
                               "std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory "
                               "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\n")
    assert metal.kind.value == "fragmented" and "[METAL]" in metal.evidence[0].text
    # the same runtime abort for another reason is no memory verdict
    other = verdict_of(tmp_path, _stats("20:01", 1, 0, 0.2) + "libc++abi: terminating due to uncaught exception of type "
                               "std::runtime_error: [METAL] Command buffer execution failed: Caused GPU Hang Error\n")
    assert other.kind.value != "fragmented"


def test_the_cpp_runtimes_abort_report_is_its_own_line_and_not_a_long_lines_wrapped_tail():
    stats = pieces(_stats("20:01", 1, 0, 0.2).rstrip("\n"), 1)[0]
    for line in ("libc++abi: terminating due to uncaught exception of type std::runtime_error: x",
                 "terminate called after throwing an instance of 'c10::Error'"):
        assert joins(stats, pieces(line, 2)[0]) is None
    assert joins(stats, pieces("rate: 0.2%, tail of the stats line", 2)[0]) is Join.WRAP


@pytest.mark.parametrize("text", [
    # vllm-metal's own sizing (metal-kv-budget-negative-parsehawk)
    ("ValueError: Paged attention: not enough Metal memory for KV cache.\n"
     "metal_limit=14.30GB, fraction=0.5, usable_metal=7.15GB,\nkv_budget=-0.38GB.\n"),
    # 0.34's max_model_len auto-fit with no room for one token (v1/core/kv_cache_planning.py)
    ("ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
     "Increase `gpu_memory_utilization`.\n"),
])
def test_a_start_up_check_finding_no_room_for_the_kv_cache_is_a_kv_cache_that_does_not_fit(tmp_path, text):
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value == "fragmented" and "KV cache does not fit" in verdict.headline


def test_hccl_link_and_task_timeouts_as_ascend_prints_them_are_waits_that_never_complete(tmp_path):
    # ascend-glm51-hccl-socket-establish-timeout ("timeout[120 s]"), ascend-glm53-hccl-fftsplus-stuck
    link = verdict_of(tmp_path, "[ERROR] HCCL(106335,):2026-05-21-21:39:58.707.629 [hccl_socket_manager.cc:796] "
                              "[128660][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] timeout[120 s]\n")
    assert link.kind.value == "deadlocked" and "HCCL" in link.headline
    task = verdict_of(tmp_path, "The error from device(chipId:0/2/4/5/6/7, dieId:0), serial number is …,\n"
                              "hccl fftsplus task timeout occurred during task execution,\n"
                              "stream_id:9, sq_id:9, task_id:51052, stuck notify num:1, timeout=1836s.\n")
    assert task.kind.value == "deadlocked"


def test_nccl_failing_to_allocate_its_buffers_is_gpu_memory_exhaustion_and_another_cuda_failure_is_not(tmp_path):
    # NCCL's checks.h / cudawrap.h / alloc.h wordings, as NCCL WARN lines and under torch's "Last error:"
    for line in ("node-0:2361:2840 [1] NCCL WARN Cuda failure 'out of memory'",
                 "node-0:2361:2840 [1] NCCL WARN Cuda failure 2 'out of memory'",
                 "node-0:2361:2840 [1] NCCL WARN Failed to CUDA calloc 4194304 bytes"):
        verdict = verdict_of(tmp_path, line + "\n")
        assert verdict.kind.value == "fragmented" and verdict.headline.startswith("GPU memory exhausted"), line
    # custom-allreduce-nccl-2181-unhandled-cuda-error: an invalid argument is no memory
    other = verdict_of(tmp_path, "node-0:2361:2840 [1] NCCL WARN Cuda failure 'invalid argument'\n")
    assert other.kind.value != "fragmented"


def test_rocm_and_intel_gpu_out_of_device_memory_results_are_memory_exhaustion(tmp_path):
    # hipGetErrorString's "out of memory" behind torch's hipified check; Unified Runtime / Level Zero results
    for line in ("RuntimeError: HIP error: out of memory",
                 "RuntimeError: hipErrorOutOfMemory",
                 "RuntimeError: UR backend failed. UR backend returns:39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
                 "RuntimeError: level_zero backend failed with error: 1879048195 (ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"):
        assert verdict_of(tmp_path, line + "\n").kind.value == "fragmented", line
    # host memory is not the device's
    assert verdict_of(tmp_path, "RuntimeError: UR backend returns:38 (UR_RESULT_ERROR_OUT_OF_HOST_MEMORY)\n"
                    ).kind.value != "fragmented"


def test_vllm_034s_own_barrier_and_ep_all2all_timeouts_are_waits_that_never_complete(tmp_path):
    # read in 0.34's distributed/utils.py (StatelessProcessGroup.barrier) and v1/worker/gpu/async_utils.py
    barrier = verdict_of(tmp_path, "RuntimeError: Barrier timed out after 300.00 seconds\n")
    assert barrier.kind.value == "deadlocked" and "missing members" in barrier.headline
    ep = verdict_of(tmp_path, "RuntimeError: Fault detected in EP all2all communication: one or more ranks timed out "
                            "during dispatch/combine. Mask: [1, 1, 0, 1]\n")
    assert ep.kind.value == "deadlocked"
    # a barrier that failed to broadcast its id is not the wait itself
    assert verdict_of(tmp_path, "RuntimeError: Failed to broadcast barrier_id\n").kind.value != "deadlocked"


def test_a_segment_dev_shm_had_no_room_for_is_a_too_small_dev_shm_not_a_device_fault(tmp_path):
    # nccl-shm-segment-docker-tp: NCCL's "unhandled system error", then its "Last error:" detail
    nccl = verdict_of(tmp_path, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                              "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                              "NCCL version 2.20.5\nncclSystemError: System call (e.g. socket, malloc) or external "
                              "library call failed or device error.\nLast error:\nError while creating shared memory "
                              "segment /dev/shm/nccl-S2vapn (size 9637888)\n")
    assert nccl.kind.value == "crashed" and "/dev/shm" in nccl.headline
    commands = [step.command for step in nccl.next_steps]
    assert "df -h /dev/shm" in commands and "export CUDA_LAUNCH_BLOCKING=1" not in commands
    vllm = verdict_of(tmp_path, "RuntimeError: Insufficient space in /dev/shm for the broadcast buffer: 512 MiB required, "
                              "64 MiB free. Increase /dev/shm (e.g. --shm-size or --ipc=host).\n")
    assert "/dev/shm" in vllm.headline
    # the same NCCL error with another detail stays a crash with the device-fault steps
    other = verdict_of(tmp_path, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                               "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details)\n")
    assert "/dev/shm" not in other.headline


def test_a_crash_by_a_python_exception_gets_no_kernel_fault_steps_and_a_device_fault_does(tmp_path):
    # gb10-triton-ptxas-sm121a-enginecore-failed: a compiler that does not know the GPU, raised in Python
    raised = verdict_of(tmp_path, "ERROR 10-30 09:12:01 [core.py:708] EngineCore failed to start.\n"
                                "subprocess.CalledProcessError: Command '['ptxas', '--gpu-name=sm_121a']' returned "
                                "non-zero exit status 255.\n")
    commands = [step.command for step in raised.next_steps]
    assert raised.kind.value == "crashed" and "export CUDA_LAUNCH_BLOCKING=1" not in commands
    assert "export VLLM_LOGGING_LEVEL=DEBUG" in commands
    faulted = verdict_of(tmp_path, "ERROR 10-30 09:12:01 [core.py:708] EngineCore encountered a fatal error.\n"
                                 "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert "export CUDA_LAUNCH_BLOCKING=1" in [step.command for step in faulted.next_steps]


def test_the_sleep_mode_allocators_oom_is_device_memory_and_says_how_to_wake_up(tmp_path):
    oom = verdict_of(tmp_path, "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:56\n"
                             "CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:57\n")
    assert oom.kind.value == "fragmented" and "out of memory" in oom.headline
    assert any("wake_up(tags=" in step.text for step in oom.next_steps)
    other = verdict_of(tmp_path, "CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:57\n")
    assert other.kind.value != "fragmented"


_STATS = ("INFO 05-12 00:40:{s} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
          "throughput: {tok} tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 10.0%, Prefix cache hit "
          "rate: 0.0%\n")
_CLIENT_TIMEOUT = "2026-05-12 00:40:35,100 ERROR client: openai.APITimeoutError: Request timed out.\n"


def test_a_clients_timeout_alone_names_the_client_and_the_server_log_that_decides(tmp_path):
    verdict = verdict_of(tmp_path, "Traceback (most recent call last):\n"
                                 "aiohttp.client_exceptions.SocketTimeoutError: Timeout on reading data from socket\n")
    assert verdict.kind.value == "unknown" and "client's request timeout" in verdict.headline
    assert "server's log" in verdict.undecided
    assert any("OpenAI(timeout=" in step.text for step in verdict.next_steps)


def test_a_clients_timeout_while_the_server_generates_is_slow(tmp_path):
    text = _STATS.format(s="10", tok="25.3") + _STATS.format(s="20", tok="24.1") + _CLIENT_TIMEOUT
    verdict = verdict_of(tmp_path, text + _STATS.format(s="40", tok="23.5"))
    assert verdict.kind.value == "slow" and "client's request timeout" in verdict.headline


def test_a_clients_timeout_on_a_server_that_stopped_generating_is_not_the_clients_fault(tmp_path):
    text = "".join(_STATS.format(s=s, tok="0.0") for s in ("10", "20", "30", "40", "50")) + _CLIENT_TIMEOUT
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value != "slow" and "client" not in verdict.headline


def test_vllm_fetching_a_model_is_not_a_client_giving_up_on_vllm(tmp_path):
    hub = verdict_of(tmp_path, "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): "
                             "Read timed out. (read timeout=10)\n")
    assert "client" not in hub.headline
    ours = verdict_of(tmp_path, "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='localhost', port=8000): "
                              "Read timed out. (read timeout=600)\n")
    assert "client's request timeout of 600 s" in ours.headline


_INFEASIBLE = ("(autoscaler +13s) Error: No available node types can fulfill resource request {request}. Add suitable "
               "node types to this cluster to resolve this issue.\n")


def test_a_ray_request_no_node_can_hold_is_a_placement_that_never_comes(tmp_path):
    pinned = verdict_of(tmp_path, _INFEASIBLE.format(request="{'node:111.6.168.225': 0.001, 'GPU': 1.0}"))
    assert pinned.kind.value == "deadlocked" and "placement group" in pinned.headline
    assert any("VLLM_HOST_IP" in step.text and "111.6.168.225" in step.text for step in pinned.next_steps)
    unpinned = verdict_of(tmp_path, _INFEASIBLE.format(request="{'GPU': 8.0}"))
    assert unpinned.kind.value == "deadlocked"
    assert not any("VLLM_HOST_IP" in step.text for step in unpinned.next_steps)


def test_a_fault_quoted_deep_in_a_long_line_keeps_the_words_before_it(tmp_path):
    controller = ('I0902 00:55:35.305769 1 inference-server.go:2282] "HTTP call done" ' + "x=1 " * 150
                  + 'responseBody={"message":"Call to wake_up method failed: CUDA Error: out of memory at <path>:163"}\n')
    verdict = verdict_of(tmp_path, controller)
    assert verdict.kind.value == "fragmented"
    text = verdict.evidence[0].text
    assert text.startswith("I0902 00:55:35") and " … " in text and "Call to wake_up method failed" in text
    assert "CUDA Error: out of memory" in verdict.headline


_NODE_DEAD = ("2023-03-03 05:15:30,774 WARNING worker.py:1866 -- The node with node id: 9426f445 and address: "
              "10.130.0.113 and node name: 10.130.0.113 has been marked dead because the detector has missed too "
              "many heartbeats from it.\n")


def test_a_ray_node_marked_dead_is_a_crash_that_names_the_node(tmp_path):
    verdict = verdict_of(tmp_path, _NODE_DEAD)
    assert verdict.kind.value == "crashed" and "node 10.130.0.113" in verdict.headline
    assert "raylet.out" in verdict.undecided
    worker = verdict_of(tmp_path, "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this "
                                "task. Check python-core-worker-*.log files for more information.\n")
    assert worker.kind.value == "crashed" and "Ray lost" not in worker.headline


_DUMP_SIGNAL = ("[rank6]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 6] "
                "Received a dump signal due to a collective timeout from  rank 7 and we will try our best to dump the "
                "debug info. Last enqueued NCCL work: 56116, last completed NCCL work: 56116.This is most likely "
                "caused by incorrect usages of collectives\n")


def test_another_ranks_collective_timeout_is_a_deadlock_that_names_that_rank(tmp_path):
    verdict = verdict_of(tmp_path, _DUMP_SIGNAL)
    assert verdict.kind.value == "deadlocked" and "an NCCL collective never completed" in verdict.headline
    assert any(note.startswith("wait: rank 7 on the other ranks") for note in verdict.notes)
    assert any("it guarded a collective" in note for note in verdict.notes)


def test_the_dump_signal_after_a_device_fault_is_its_consequence(tmp_path):
    fault = ("[rank7]:[E703 21:41:54.000000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
             "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
             "encountered\n")
    verdict = verdict_of(tmp_path, fault + _DUMP_SIGNAL)
    assert verdict.kind.value == "crashed" and "illegal memory access" in verdict.headline


def test_a_watchdog_work_rewrapped_inside_its_parentheses_is_one_record():
    head = pieces("WorkNCCL(SeqNum=115, OpType=ALLREDUCE, NumelIn=71680, NumelOut=71680,", 2)[0]
    tail = pieces("Timeout(ms)=600000) ran for 600035 milliseconds before timing out.", 3)[0]
    assert joins(head, tail) is Join.WRAP
    closed = pieces("WorkNCCL(SeqNum=115, OpType=ALLREDUCE),", 2)[0]
    assert joins(closed, tail) is None


def test_the_wrapped_watchdog_reads_as_the_stuck_collective(tmp_path):
    verdict = verdict_of(tmp_path, "[Rank 1] Watchdog caught collective operation timeout:\n"
                                 "WorkNCCL(SeqNum=115, OpType=ALLREDUCE, NumelIn=71680, NumelOut=71680,\n"
                                 "Timeout(ms)=600000) ran for 600035 milliseconds before timing out.\n"
                                 "RuntimeError: DiffusionExecutor is closed.\n")
    assert verdict.kind.value == "deadlocked" and "ALLREDUCE #115" in verdict.headline


def test_a_tqdm_bar_drawn_without_its_bar_is_still_weight_loading(tmp_path):
    glued = ("Loading safetensors checkpoint shards:  67% 2/3 [02:41<01:19, 79.54s/it](APIServer pid=7958) DEBUG "
             "08-11 12:38:36 [utils.py:750] Waiting for 1 local, 0 remote core engine proc(s) to start.")
    bar, record = pieces(glued, 1)
    assert bar.msg.endswith("79.54s/it]") and record.proc is not None and record.proc.pid == 7958
    assert len(pieces("Loading: 50% done, 2/3 left", 1)) == 1


_ALLOC_WARN = ("[rank3]:[W804 15:02:21.946490582 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on "
               "device 3 while trying to allocate 26229080064 bytes (free: 16487546880, total: 191503007744).\n")


def test_the_caching_allocators_oom_warning_is_the_oom_with_its_figures(tmp_path):
    verdict = verdict_of(tmp_path, _ALLOC_WARN)
    assert verdict.kind.value == "fragmented" and "24.43 GiB" in verdict.headline and "15.36 GiB free" in verdict.headline


def test_an_oom_the_server_got_past_did_not_kill_it(tmp_path):
    served = (_STATS.format(s="10", tok="25.3") + _STATS.format(s="20", tok="24.9"))
    caught = _ALLOC_WARN.replace("W804 15:02:21", "W512 00:40:05")  # an autotuner tried a smaller config
    assert verdict_of(tmp_path, caught + served).kind.value == "healthy"
    died = (served + _ALLOC_WARN.replace("W804 15:02:21", "W512 00:40:25")
            + "ERROR 05-12 00:40:30 [core.py:900] EngineCore encountered a fatal error.\n")
    assert verdict_of(tmp_path, died).kind.value == "fragmented"


def test_only_the_api_servers_engine_dead_error_names_no_cause(tmp_path):
    verdict = verdict_of(tmp_path, "(APIServer pid=2406) ERROR 04-14 23:32:27 [serving_chat.py:1343] "
                                 "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
                                 "trace (above) for the root cause.\n")
    assert verdict.kind.value == "unknown" and "EngineCore encountered a fatal error" in verdict.undecided
    named = verdict_of(tmp_path, "ERROR 04-14 23:32:20 [core.py:700] EngineCore encountered a fatal error.\n"
                               "ERROR 04-14 23:32:20 [core.py:700] RuntimeError: CUDA error: an illegal memory access "
                               "was encountered\n"
                               "(APIServer pid=2406) ERROR 04-14 23:32:27 [serving_chat.py:1343] EngineDeadError\n")
    assert named.kind.value == "crashed"


_V0_STATS = ("INFO 09-18 16:{t} metrics.py:351] Avg prompt throughput: {p} tokens/s, Avg generation throughput: {g} "
             "tokens/s, Running: {r} reqs, Swapped: 0 reqs, Pending: {w} reqs, GPU KV cache usage: 0.0%, CPU KV cache "
             "usage: 0.0%.\n")


def test_requests_that_wait_while_nothing_runs_are_a_scheduler_that_admits_none(tmp_path):
    stuck = (_V0_STATS.format(t="10:58", p="70.6", g="5.6", r=0, w=12)
             + _V0_STATS.format(t="11:03", p="0.0", g="0.0", r=0, w=22))
    verdict = verdict_of(tmp_path, stuck)
    assert verdict.kind.value == "deadlocked" and "22 requests wait and none is scheduled" in verdict.headline


def test_a_queue_that_drains_or_an_interval_that_produced_is_not_stuck(tmp_path):
    drained = (_V0_STATS.format(t="10:58", p="0.0", g="0.0", r=0, w=22)
               + _V0_STATS.format(t="11:03", p="0.0", g="0.0", r=0, w=3))
    assert verdict_of(tmp_path, drained).kind.value != "deadlocked"
    produced = (_V0_STATS.format(t="10:58", p="0.0", g="0.0", r=0, w=12)
                + _V0_STATS.format(t="11:03", p="90.0", g="0.0", r=0, w=22))
    assert verdict_of(tmp_path, produced).kind.value != "deadlocked"
