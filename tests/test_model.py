"""The phase-and-wait model on short fragments, as users paste them (3–20 lines)."""

from __future__ import annotations

from engdiag.analysis.analyze import analyze


def _analyze(tmp_path, text: str):
    path = tmp_path / "fragment.log"
    path.write_text(text)
    return analyze([str(path)])


def test_a_probe_that_kills_a_loading_server_is_a_slow_start_up(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker pid=80) Loading safetensors checkpoint shards:  40% Completed | 20/50 [03:10<04:40,  9.50s/it]
(Worker pid=80) Loading safetensors checkpoint shards:  42% Completed | 21/50 [03:19<04:35,  9.50s/it]
  Warning  Unhealthy  35s (x3 over 65s)  kubelet  Liveness probe failed: Get "http://10.1.2.3:8000/health": connection refused
  Normal   Killing    35s                kubelet  Container vllm failed liveness probe, will be restarted
""")
    guard = analysis.model.guard
    assert guard is not None and guard.owner.startswith("platform") and "liveness" in guard.name
    assert analysis.verdict.kind.value == "slow" and "weight loading" in analysis.verdict.headline
    assert any("startupProbe" in s.text for s in analysis.verdict.next_steps)


def test_a_watchdog_feed_timeout_with_nothing_advancing_is_a_stall(tmp_path):
    analysis = _analyze(tmp_path, """\
(APIServer pid=1) INFO 12-03 04:00:00 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(EngineCore pid=9) INFO 12-03 04:05:10 [watch_dog.py:96] [Watchdog]Dumped stack to /d/VLLM_STACK_DUMP_for_engine_0_9.log due to feed timeout
""")
    guard = analysis.model.guard
    assert guard is not None and guard.knob == "--watchdog-config" and guard.limit_s == 300
    assert analysis.verdict.kind.value == "deadlocked"
    assert "VLLM_STACK_DUMP" in (analysis.verdict.undecided or "") or "dump" in (analysis.verdict.undecided or "")


def test_the_watchdog_limit_its_start_line_printed_is_the_guards_limit(tmp_path):
    """0.33/0.34 watch_dog.py:165 logs the configured feed timeout when the watchdog starts."""
    analysis = _analyze(tmp_path, """\
(EngineCore pid=9) INFO 12-03 04:00:00 [watch_dog.py:165] [Watchdog]Start with timeout=60 check_interval=10 dump_dir=/d
(APIServer pid=1) INFO 12-03 04:00:10 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(EngineCore pid=9) INFO 12-03 04:01:20 [watch_dog.py:96] [Watchdog]Dumped stack to /d/VLLM_STACK_DUMP_for_engine_0_9.log due to feed timeout
""")
    guard = analysis.model.guard
    assert guard is not None and guard.limit_s == 60 and guard.limit_origin == "printed"
    assert not analysis.model.activities or all(a.name != "watchdog" for a in analysis.model.activities)
    assert analysis.verdict.kind.value == "deadlocked"
    assert any("60 s, printed" in e.note for e in analysis.verdict.evidence)


def test_a_sigterm_drain_and_the_deaths_after_it_are_healthy(tmp_path):
    analysis = _analyze(tmp_path, """\
(APIServer pid=1) INFO 12-03 04:00:00 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 52.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(EngineCore pid=9) INFO 12-03 04:00:03 [core.py:1698] [shutdown] EngineCore: trigger received signal=SIGTERM
(EngineCore pid=9) INFO 12-03 04:00:03 [core.py:1910] [shutdown] EngineCore: draining in-flight requests count=2 timeout=30s
(APIServer pid=1) INFO:     Application shutdown complete.
(APIServer pid=1) WARNING 12-03 04:00:09 [core_client.py:870] [shutdown] MPClient: engine core exited unexpectedly; starting cleanup
""")
    assert analysis.verdict.kind.value == "healthy"
    assert any(a.name == "shutdown" for a in analysis.model.activities)


def test_a_sigterm_after_a_fault_does_not_hide_the_fault(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker_TP0 pid=7) ERROR 12-03 04:00:00 [multiproc_executor.py:1] RuntimeError: CUDA error: an illegal memory access was encountered
(EngineCore pid=9) INFO 12-03 04:00:03 [core.py:1698] [shutdown] EngineCore: trigger received signal=SIGTERM
""")
    assert analysis.verdict.kind.value == "crashed"


def test_a_wait_that_can_never_complete_names_the_missing_members(tmp_path):
    analysis = _analyze(tmp_path, """\
(EngineCore_DP0 pid=3) INFO 06-10 11:04:38 [shm_broadcast.py:705] No available shared memory broadcast block found in 60 seconds.
torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 2/8 clients joined.
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "deadlocked" and "6 missing members" in verdict.headline
    assert any("VLLM_HOST_IP" in (s.command or "") for s in verdict.next_steps)


def test_a_lone_step_timeout_is_unknown_and_says_what_decides(tmp_path):
    analysis = _analyze(tmp_path, """\
(EngineCore pid=2) ERROR 04-01 22:27:40 [core.py:1101] Traceback (most recent call last):
(EngineCore pid=2) ERROR 04-01 22:27:40 [core.py:1101]   File "/v/multiproc_executor.py", line 376, in get_response
(EngineCore pid=2) ERROR 04-01 22:27:40 [core.py:1101]     status, result = mq.dequeue(timeout=dequeue_timeout)
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "unknown" and verdict.undecided and "scheduler dump" in verdict.undecided
    assert analysis.model.guard is not None and analysis.model.guard.knob == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"


def test_a_collective_timeout_while_a_peer_still_loads_is_a_slow_start_up(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker_TP1 pid=81) Loading safetensors checkpoint shards:  60% Completed | 30/50 [11:10<07:20, 22.00s/it]
(Worker_TP1 pid=81) Loading safetensors checkpoint shards:  62% Completed | 31/50 [11:32<07:00, 22.00s/it]
[rank0]:[E1203 04:10:00.081662161 ProcessGroupNCCL.cpp:684] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "slow" and "weight loading" in verdict.headline
    assert any("--distributed-timeout-seconds" in (s.command or "") for s in verdict.next_steps)


def test_a_log_that_ends_during_start_up_is_not_called_healthy(tmp_path):
    analysis = _analyze(tmp_path, """\
INFO 04-28 10:00:00 [model_runner.py:904] Loading model weights took 3.3461 GB
INFO 04-28 10:00:05 [worker.py:267] Memory profiling takes 4.10 seconds
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "unknown" and "start-up" in verdict.headline
    assert verdict.undecided and "engdiag snapshot" in verdict.undecided


def test_a_launcher_that_gives_up_on_start_up_is_the_guard_outside_vllm(tmp_path):
    analysis = _analyze(tmp_path, """\
Loading safetensors checkpoint shards:  40% Completed | 2/5 [00:50<01:15, 25.00s/it]
2026-07-25 14:36:08.362 [Error] (WrappedServer) vllm-server failed to start within timeout
""")
    guard = analysis.model.guard
    assert guard is not None and guard.owner == "platform"
    assert analysis.verdict.kind.value == "slow"


def test_a_guided_decoding_compile_in_progress_explains_a_step_timeout(tmp_path):
    analysis = _analyze(tmp_path, """\
INFO 11-05 10:00:00 metrics.py:349] Avg prompt throughput: 120.0 tokens/s, Avg generation throughput: 3.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%, CPU KV cache usage: 0.0%.
Compiling FSM index for all state transitions:  35%|███▌      | 120/343 [00:51<01:35,  2.34it/s]
ERROR 11-05 10:01:00 [core.py:398] RPC call to execute_model timed out.
""")
    assert any(a.name == "guided-decoding compile" and a.advancing for a in analysis.model.activities)
    assert analysis.verdict.kind.value == "slow"


def test_collective_timeouts_after_a_step_guard_are_its_consequences(tmp_path):
    analysis = _analyze(tmp_path, """\
(APIServer pid=1) INFO 12-03 04:00:00 [loggers.py:257] Engine 000: Avg prompt throughput: 900.0 tokens/s, Avg generation throughput: 40.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(Worker_TP0 pid=7) WARNING 12-03 04:00:05 [jit_monitor.py:143] Triton kernel JIT compilation during inference: _fwd_kernel. This causes a latency spike; consider extending warmup to cover this shape/config.
(EngineCore pid=9) ERROR 12-03 04:05:06 [core.py:1100] TimeoutError: RPC call to execute_model timed out.
[rank1]:[E1203 04:10:06.081662161 ProcessGroupNCCL.cpp:684] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "slow" and "compiling" in verdict.headline
    assert any(e.role.value == "consequence" and "Watchdog caught" in e.text for e in verdict.evidence)


def test_a_multi_rank_start_up_that_stops_in_process_group_init(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker_TP0 pid=7) INFO 12-03 04:00:00 [parallel_state.py:1852] world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://10.0.0.5:29500 backend=nccl
(Worker_TP1 pid=8) INFO 12-03 04:00:00 [parallel_state.py:1852] world_size=2 rank=1 local_rank=1 distributed_init_method=tcp://10.0.0.5:29500 backend=nccl
""")
    init = next(a for a in analysis.model.activities if a.name == "process-group / NCCL init")
    assert not init.finished and "tcp://10.0.0.5:29500" in init.detail
    # two ranks, and the log stops where they meet: set-up takes seconds when every peer is reachable
    verdict = analysis.verdict
    assert verdict.kind.value == "deadlocked" and "process-group" in verdict.headline
    assert verdict.confidence < 0.5 and verdict.undecided


def test_a_gloo_receive_that_never_completes_is_a_deadlock(tmp_path):
    analysis = _analyze(tmp_path, """\
(EngineCore_DP1 pid=12) ERROR 11-14 16:43:23 [core.py:710] RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete
""")
    assert analysis.verdict.kind.value == "deadlocked"
    guard = analysis.model.guard
    assert guard is not None and guard.owner == "PyTorch (gloo)" and guard.limit_s == 1800


def test_an_ascend_notify_wait_timeout_names_the_silent_rank(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker_TP1 pid=9) ERROR 11-28 11:59:30 [worker.py:1] RuntimeError: EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [0].base information: [streamID:[14], taskID[4], taskType[Notify Wait], tag[HcomAllReduce_66294_0].]
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "deadlocked" and "remote rank 0" in verdict.headline
    assert analysis.model.guard is not None and analysis.model.guard.knob == "HCCL_EXEC_TIMEOUT"


def test_a_queue_that_does_not_drain_behind_a_working_engine_is_slow(tmp_path):
    lines = "".join(
        f"(APIServer pid=1) INFO 12-03 04:00:{10 * i:02d} [loggers.py:257] Engine 000: Avg prompt throughput: 800.0 tokens/s, "
        f"Avg generation throughput: 950.0 tokens/s, Running: 256 reqs, Waiting: {40 + 15 * i} reqs, GPU KV cache usage: 71.0%\n"
        for i in range(4)
    )
    verdict = _analyze(tmp_path, lines).verdict
    assert verdict.kind.value == "slow" and "queued" in verdict.headline


def test_offline_generation_still_advancing_is_not_a_hang(tmp_path):
    verdict = _analyze(tmp_path, """\
Processed prompts:  10%|█         | 100/1000 [01:40<15:00,  1.00s/it]
Processed prompts:  20%|██        | 200/1000 [03:20<13:20,  1.00s/it]
""").verdict
    assert verdict.kind.value == "slow" and "still advancing" in verdict.headline


def test_offline_generation_stuck_at_zero_on_several_gpus_is_a_deadlock(tmp_path):
    verdict = _analyze(tmp_path, """\
INFO 10-30 09:00:00 config.py:1] non-default args: {'tensor_parallel_size': 2}
Processed prompts:   0%|          | 0/16 [00:00<?, ?it/s]
""").verdict
    assert verdict.kind.value == "deadlocked"


def test_stopping_a_server_that_was_already_stalled_is_not_a_clean_shutdown(tmp_path):
    verdict = _analyze(tmp_path, """\
(APIServer pid=1) INFO 12-03 04:00:00 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 5 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(EngineCore pid=9) INFO 12-03 04:01:00 [shm_broadcast.py:115] No available shared memory broadcast block found in 60 seconds.
(EngineCore pid=9) INFO 12-03 04:02:00 [shm_broadcast.py:115] No available shared memory broadcast block found in 60 seconds.
(EngineCore pid=9) INFO 12-03 04:02:30 [core.py:1698] [shutdown] EngineCore: trigger received signal=SIGTERM
""").verdict
    assert verdict.kind.value == "deadlocked"


def test_a_stop_during_a_start_up_that_still_advanced_is_a_slow_start_up(tmp_path):
    verdict = _analyze(tmp_path, """\
(Worker pid=80) Loading safetensors checkpoint shards:  40% Completed | 20/50 [03:10<04:40,  9.50s/it]
(Worker pid=80) Loading safetensors checkpoint shards:  42% Completed | 21/50 [03:19<04:35,  9.50s/it]
(EngineCore pid=9) INFO 12-03 04:02:30 [core.py:1698] [shutdown] EngineCore: trigger received signal=SIGTERM
""").verdict
    assert verdict.kind.value == "slow" and "stopped before it became ready" in verdict.headline


def test_steps_already_taking_tens_of_seconds_explain_a_step_timeout(tmp_path):
    verdict = _analyze(tmp_path, """\
(EngineCore pid=9) INFO 12-03 04:00:00 [core.py:1] Iteration(812): 1 context requests, 120000 context tokens, 3 generation requests, 3 generation tokens, iteration elapsed time: 41000.00 ms
(EngineCore pid=9) ERROR 12-03 04:05:30 [core.py:1100] TimeoutError: RPC call to execute_model timed out.
""").verdict
    assert verdict.kind.value == "slow" and "41 s" in verdict.headline


def test_a_capture_that_stopped_moving_while_the_engine_core_waits_is_a_deadlock(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker_TP0 pid=7) INFO 12-03 04:00:00 [gpu_model_runner.py:1] Graph capture starts
(Worker_TP0 pid=7) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  45%|████▍     | 30/67 [00:09<00:11,  3.20it/s]
(EngineCore_DP0 pid=5) INFO 12-03 04:01:05 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds.
(EngineCore_DP0 pid=5) INFO 12-03 04:02:05 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds.
(EngineCore_DP0 pid=5) INFO 12-03 04:03:05 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds.
(EngineCore_DP0 pid=5) INFO 12-03 04:04:05 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds.
""")
    capture = next(a for a in analysis.model.activities if a.name == "CUDA-graph capture")
    assert not capture.advancing and not capture.finished
    assert analysis.verdict.kind.value == "deadlocked"


def test_deepgemm_warm_up_is_start_up_work_a_ready_timeout_waited_on(tmp_path):
    analysis = _analyze(tmp_path, """\
(EngineCore_DP0 pid=5) INFO 12-03 04:00:00 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config: model='deepseek-ai/DeepSeek-V3'
(Worker_DP0_EP0 pid=7) DeepGemm(m_grouped_fp8_gemm_nt_contiguous) warmup (W=torch.Size([32, 4096, 7168])):  61%|██████    | 1270/2080 [09:41<06:10,  2.19it/s]
(APIServer pid=1) ERROR 12-03 04:10:05 [core_client.py:1] TimeoutError: Timed out waiting for engine core processes to start. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S).
""")
    warm = next(a for a in analysis.model.activities if a.name == "kernel warm-up (DeepGEMM)")
    assert warm.detail.startswith("1270/2080")
    assert analysis.verdict.kind.value == "slow"
    assert any("DeepGemm" in e.text for e in analysis.verdict.evidence)


def test_a_ray_serve_health_check_on_a_busy_engine_is_slow(tmp_path):
    analysis = _analyze(tmp_path, """\
Didn't receive health check response for replica Replica(id='a1', deployment='vLLM:m', app='app') after 10.0s, marking it unhealthy.
(_EngineBackgroundProcess pid=19) INFO 06-25 04:39:52 [metrics.py:486] Avg prompt throughput: 20000.0 tokens/s, Avg generation throughput: 5.0 tokens/s, Running: 49 reqs, Swapped: 0 reqs, Pending: 900 reqs, GPU KV cache usage: 16.8%, CPU KV cache usage: 0.0%.
""")
    guard = analysis.model.guard
    assert guard is not None and guard.owner == "Ray Serve" and guard.limit_s == 10
    assert analysis.verdict.kind.value == "slow"


def test_a_placement_group_short_of_gpus_can_never_be_satisfied(tmp_path):
    verdict = _analyze(tmp_path, """\
WARNING 04-01 02:45:50 ray_utils.py:320] The number of required GPUs exceeds the total number of available GPUs in the placement group.
INFO 04-01 02:46:00 ray_utils.py:214] Waiting for creating a placement group of specs for 10 seconds.
""").verdict
    assert verdict.kind.value == "deadlocked" and "placement" in verdict.headline


def test_a_guard_that_fires_seconds_after_set_up_had_a_short_limit_whatever_was_configured(tmp_path):
    analysis = _analyze(tmp_path, """\
INFO 06-12 10:46:22 [ray_distributed_executor.py:579] RAY_CGRAPH_get_timeout is set to 300
ERROR 06-12 10:46:34 [core.py:517] EngineCore encountered a fatal error.
ERROR 06-12 10:46:34 [core.py:517] Traceback (most recent call last):
ERROR 06-12 10:46:34 [core.py:517]   File "/x/ray/dag/compiled_dag_node.py", line 2515, in _execute_until
ERROR 06-12 10:46:34 [core.py:517]     result = self._dag_output_fetcher.read(timeout)
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "slow"
    assert any("did not reach the guard" in note for note in verdict.notes)


def test_old_v0_stats_with_iteration_time_fields():
    from engdiag.logs.scan import LineScanner

    scanner = LineScanner("t", 0)
    line = ("INFO 02-01 06:36:05 llm_engine.py:921] Avg prompt throughput: 382.6 tokens/s, Avg generation throughput: "
            "118.5 tokens/s, Max iteration time: 386.7 ms, Avg time/tok:149.4 ms, Running: 35 reqs, Swapped: 0 reqs, "
            "Pending: 115 reqs, GPU KV cache usage: 99.0%, CPU KV cache usage: 0.0%")
    stats = [e for e in scanner.feed(1, line) + scanner.finish() if e.signal.value == "stats"]
    assert stats and stats[0].data.running == 35 and stats[0].data.waiting == 115


def test_a_captured_stack_inside_a_collective_with_nothing_after_is_a_deadlock(tmp_path):
    analysis = _analyze(tmp_path, """\
INFO 02-01 06:36:05 llm_engine.py:921] Avg prompt throughput: 382.6 tokens/s, Avg generation throughput: 118.5 tokens/s, Running: 35 reqs, Swapped: 0 reqs, Pending: 115 reqs, GPU KV cache usage: 99.0%, CPU KV cache usage: 0.0%
Thread 0x00007f1c2d7fe640 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 2050 in all_reduce
  File "/workspace/vllm/model_executor/parallel_utils/communication_op.py", line 24 in tensor_model_parallel_all_reduce
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "deadlocked" and "all_reduce" in verdict.headline


def test_an_exception_raised_through_a_collective_is_not_a_capture(tmp_path):
    verdict = _analyze(tmp_path, """\
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 2050, in all_reduce
    work = group.allreduce([tensor], opts)
RuntimeError: CUDA error: an illegal memory access was encountered
""").verdict
    assert verdict.kind.value == "crashed"


def test_tracer_lines_with_ranks_inside_a_collective(tmp_path):
    verdict = _analyze(tmp_path, """\
==> vllm_trace_frame_for_process_1_thread_1.log <==
2024-04-15 13:59:04.732274 Return from init_device in /workspace/vllm/worker/worker.py:104

==> vllm_trace_frame_for_process_1113_thread_2.log <==
2024-04-15 13:59:04.981153 Call to _gather_ipc_meta in /workspace/vllm/model_executor/parallel_utils/custom_all_reduce.py:222
""").verdict
    assert verdict.kind.value == "deadlocked" and "_gather_ipc_meta" in verdict.headline


def test_a_multi_rank_start_up_that_stops_in_kernel_autotuning(tmp_path):
    analysis = _analyze(tmp_path, """\
(Worker_TP7_EP7 pid=648) 2026-09-17 18:12:38,553 - INFO - autotuner.py:2789 - flashinfer.jit: [Autotuner]: Loaded 44 configs from /tmp/cache/autotune.json
(Worker_TP0_EP0 pid=641) INFO 09-17 18:12:38 [kernel_warmup.py:356] Running FlashInfer autotune with 16384 tokens and token buckets (1, 2, 4).
(Worker_TP6_EP6 pid=647) INFO 09-17 18:12:38 [kernel_warmup.py:356] Running FlashInfer autotune with 16384 tokens and token buckets (1, 2, 4).
(Worker_TP5_EP5 pid=646) [AutoTuner]: Tuning trtllm::fused_moe::gemm1:   0%|          | 0/22 [00:00<?, ?profiles/s]
""")
    autotune = next(a for a in analysis.model.activities if a.name == "kernel autotune")
    assert "0/22" in autotune.detail and "cached" in autotune.detail and not autotune.advancing
    verdict = analysis.verdict
    assert verdict.kind.value == "deadlocked" and "kernel autotune" in verdict.headline
    assert any("cached tuning configs" in note for note in verdict.notes)


def test_fault_tolerance_waits_after_the_step_guard_which_is_the_guard_that_fired(tmp_path):
    """0.32–0.34 fault tolerance: "[FT] Busy loop raised %s. Waiting for recovery." then, after
    engine_recovery_timeout_sec, "[FT] No recovery within %ds timeout." (engine_core_sentinel.py:531 in 0.34)
    and the original exception re-raised.  The log begins while serving: no start-up is in it."""
    head = "(EngineCore pid=9) ERROR 12-03 04:02:00 [core.py:1759] "
    analysis = _analyze(tmp_path, f"""\
(APIServer pid=1) INFO 12-03 03:59:00 [loggers.py:326] Engine 000: Avg prompt throughput: 100.0 tokens/s, Avg generation throughput: 300.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(EngineCore pid=9) WARNING 12-03 04:00:00 [engine_core_sentinel.py:480] [FT] Busy loop raised TimeoutError. Waiting for recovery.
(EngineCore pid=9) ERROR 12-03 04:02:00 [engine_core_sentinel.py:531] [FT] No recovery within 120s timeout.
{head}EngineCore encountered a fatal error.
{head}Traceback (most recent call last):
{head}  File "/v/vllm/v1/executor/multiproc_executor.py", line 533, in get_response
{head}    raise TimeoutError(f"RPC call to {{method}} timed out.") from e
{head}TimeoutError: RPC call to execute_model timed out.
""")
    guard = analysis.model.guard
    assert guard is not None and guard.knob == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"
    assert "recovery" not in analysis.verdict.headline
    assert analysis.model.startup_seconds is None


def test_workers_compiling_kernels_while_the_engine_core_waits_during_serving_is_slow(tmp_path):
    """0.32+ jit_monitor.py:129 wording; the 60 s wait is shm_broadcast.py's LONG_WAIT_TIME_LOG_MSG (0.34:115)."""
    wait = ("No available shared memory broadcast block found in 60 seconds. This typically happens when some processes "
            "are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).")
    analysis = _analyze(tmp_path, f"""\
(APIServer pid=1) INFO 12-03 04:00:00 [loggers.py:326] Engine 000: Avg prompt throughput: 800.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%
(Worker_TP0 pid=11) WARNING 12-03 04:00:05 [jit_monitor.py:143] Triton kernel JIT compilation during inference: _chunk_scan_fwd (BLOCK=64). This causes a latency spike; consider extending warmup to cover this shape/config.
(EngineCore pid=9) INFO 12-03 04:01:05 [shm_broadcast.py:681] {wait}
(EngineCore pid=9) INFO 12-03 04:02:05 [shm_broadcast.py:681] {wait}
""")
    assert analysis.verdict.kind.value == "slow" and "start-up" not in analysis.verdict.headline
    assert "start-up" not in (analysis.verdict.undecided or "")


def test_the_dp_coordinators_fixed_start_up_limit_is_not_the_engines(tmp_path):
    """0.32–0.34 v1/engine/coordinator.py:64 f"DP Coordinator process failed to report ZMQ addresses within
    timeout={timeout} seconds during startup." with timeout = 120."""
    analysis = _analyze(tmp_path, """\
Traceback (most recent call last):
  File "/v/vllm/v1/engine/coordinator.py", line 64, in _wait_for_zmq_addrs
RuntimeError: DP Coordinator process failed to report ZMQ addresses within timeout=120 seconds during startup.
""")
    verdict = analysis.verdict
    assert verdict.kind.value == "slow" and "DP coordinator" in verdict.headline and verdict.confidence < 0.5
    assert analysis.model.guard is not None and analysis.model.guard.limit_s == 120
    assert verdict.undecided and "coordinator" in verdict.undecided
