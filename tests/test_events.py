"""Records (tracebacks, hard wraps) and the typed events read from them."""

from __future__ import annotations

from engdiag.logs.events import (
    CudaOom,
    Failure,
    NcclWork,
    ParallelConfig,
    PromptLength,
    ScheduledTokens,
    Signal,
    Stats,
    Timeout,
    Version,
)
from engdiag.logs.scan import LineScanner


def scan(lines: list[str], show_prompts: bool = False):
    scanner = LineScanner("t.log", 0, show_prompts=show_prompts)
    events = []
    for number, line in enumerate(lines, start=1):
        events += scanner.feed(number, line)
    events += scanner.finish()
    return events, scanner.summary


def only(events, signal):
    found = [e for e in events if e.signal is signal]
    assert len(found) == 1, [e.signal for e in events]
    return found[0]


HEADER = "(EngineCore_DP0 pid=7) ERROR 10-22 09:57:24 [core.py:710] "


def test_logger_prefixed_traceback_stays_with_its_record():
    events, _ = scan(
        [
            HEADER + "EngineCore encountered a fatal error.",
            HEADER + "Traceback (most recent call last):",
            HEADER + '  File "vllm/v1/executor/multiproc_executor.py", line 306, in collective_rpc',
            HEADER + '    raise TimeoutError(f"RPC call to {method} timed out.") from e',
            HEADER + "TimeoutError: RPC call to execute_model timed out.",
            "(APIServer pid=1) INFO 10-22 09:57:25 [launcher.py:101] Shutting down FastAPI HTTP server.",
        ]
    )
    fatal = only(events, Signal.ENGINE_FATAL)
    assert fatal.line == 1
    assert fatal.data == Failure(exception="TimeoutError: RPC call to execute_model timed out.", name="busy loop")
    rpc = only(events, Signal.RPC_TIMEOUT)
    assert rpc.line == 5 and rpc.data == Timeout(call="execute_model")
    assert only(events, Signal.SHUTDOWN).line == 6


def test_traceback_prefixed_by_process_tag_only():
    tag = "(ApiServer_5 pid=463645) "
    events, _ = scan(
        [
            tag + "Process ApiServer_5:",
            tag + "Traceback (most recent call last):",
            tag + '  File "vllm/v1/engine/utils.py", line 913, in wait_for_engine_startup',
            tag + "    raise TimeoutError(",
            tag + "TimeoutError: Timed out waiting for engine core processes to start.",
        ]
    )
    death = only(events, Signal.PROCESS_EXCEPTION)
    assert death.data == Failure(
        exception="TimeoutError: Timed out waiting for engine core processes to start.", name="ApiServer_5"
    )
    assert only(events, Signal.ENGINE_READY_TIMEOUT).line == 5


def test_bare_traceback_with_chained_exception():
    events, _ = scan(
        [
            "shm_broadcast.py:681 ... No available shared memory broadcast block found in 60 seconds.",
            'File "vllm/v1/executor/multiproc_executor.py", line 386, in get_response',
            "    status, result = mq.dequeue(timeout=dequeue_timeout)",
            "TimeoutError",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "(EngineCore_DPx) ERROR ... [core.py:1138] EngineCore encountered a fatal error.",
        ]
    )
    assert only(events, Signal.SHM_STALL).line == 1
    assert only(events, Signal.RPC_TIMEOUT).line == 3
    fatal = only(events, Signal.ENGINE_FATAL)
    assert fatal.line == 8 and fatal.proc.name == "EngineCore_DPx" and fatal.stamp is None


def test_hard_wrapped_stats_line_is_joined():
    events, _ = scan(
        [
            ("2025-10-15T00:02:38.756689123Z (APIServer pid=1) INFO 10-14 17:02:38 [loggers.py:123] Engine 000: "
            "Avg prompt throughput: 0.0 tokens/s, Avg generation throughpu"),
            "t: 843.6 tokens/s, Running: 38 reqs, Waiting: 0 reqs, GPU KV cache usage: 88.5%, Prefix cache hit rate: 42.4%",
        ]
    )
    stats = only(events, Signal.STATS)
    assert stats.data == Stats(0.0, 843.6, 38, 0, gpu_kv_pct=88.5, prefix_hit_pct=42.4, engine=0)
    assert stats.line == 1


def test_unrelated_bare_line_after_a_long_line_is_not_joined():
    events, _ = scan(
        [
            "INFO 11-01 23:16:33 distributed_gpu_executor.py:56] # GPU blocks: 185231, # CPU blocks: 18724 ok",
            "<vllm.entrypoints.llm.LLM object at 0x72c46e351a50>",
        ]
    )
    assert all("vllm.entrypoints" not in e.text for e in events)


def test_v0_stats_with_swapped_and_cpu_kv():
    events, _ = scan(
        [
            ("INFO 06-16 21:24:20 metrics.py:341] Avg prompt throughput: 3737.0 tokens/s, Avg generation throughput: "
            "8906.6 tokens/s, Running: 37 reqs, Swapped: 137 reqs, Pending: 9779 reqs, GPU KV cache usage: 76.6%, "
            "CPU KV cache usage: 77.9%.")
        ]
    )
    assert only(events, Signal.STATS).data == Stats(3737.0, 8906.6, 37, 9779, 137, 76.6, 77.9)


def test_v1_stats_with_preemptions_and_device_name():
    events, _ = scan(
        [
            ("(APIServer pid=41) INFO 01-07 02:14:55 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 212.0 tokens/s, Running: 24 reqs, Waiting: 9 reqs, Preemptions: 3, "
            "CUDA KV cache usage: 99.1%, Prefix cache hit rate: 40.2%")
        ]
    )
    data = only(events, Signal.STATS).data
    assert (data.preemptions, data.gpu_kv_pct, data.waiting) == (3, 99.1, 9)


def test_cuda_oom_numbers_in_bytes():
    events, _ = scan(
        [
            ("ERROR 04-01 23:46:56 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "546.00 MiB. GPU 0 has a total capacity of 15.77 GiB of which 514.19 MiB is free. Process 562167 has "
            "15.25 GiB memory in use. Of the allocated memory 13.73 GiB is allocated by PyTorch, with 46.00 MiB "
            "allocated in private pools (e.g., CUDA Graphs), and 736.86 MiB is reserved by PyTorch but unallocated.")
        ]
    )
    oom = only(events, Signal.CUDA_OOM).data
    assert oom == CudaOom(
        tried=546 * 2**20,
        total=int(15.77 * 2**30),
        free=int(514.19 * 2**20),
        allocated=int(13.73 * 2**30),
        reserved_unallocated=int(736.86 * 2**20),
        private_pools=46 * 2**20,
        process_in_use=int(15.25 * 2**30),
        device=0,
    )


def test_old_pytorch_oom_wording():
    events, _ = scan(
        [
            ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.59 GiB total capacity; "
            "30.00 GiB already allocated; 1.00 GiB free; 35.00 GiB reserved in total by PyTorch)")
        ]
    )
    oom = only(events, Signal.CUDA_OOM).data
    assert oom.reserved_unallocated == 5 * 2**30 and oom.tried == 2 * 2**30


def test_nccl_watchdog_fields():
    events, _ = scan(
        [
            ("[rank2]:[E822 06:33:42.472676771 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=4554, OpType=GATHER, NumelIn=16032, NumelOut=0, Timeout(ms)=600000) ran for "
            "600089 milliseconds before timing out."),
            ("[rank0]:[E822 06:33:42.48 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception "
            "(either an error or timeout) detected by watchdog at work: 4554, last enqueued NCCL work: 4555, "
            "last completed NCCL work: 4553."),
        ]
    )
    assert only(events, Signal.NCCL_WATCHDOG_TIMEOUT).data == NcclWork(
        rank=2, seq=4554, op="GATHER", timeout_ms=600000, ran_ms=600089
    )
    status = only(events, Signal.NCCL_WORK_STATUS).data
    assert (status.rank, status.last_enqueued, status.last_completed) == (0, 4555, 4553)


def test_prompt_lengths_from_request_log_crash_dump_and_errors():
    events, _ = scan(
        [
            ("(APIServer pid=1) INFO 10-22 09:41:12 [logger.py:41] Received request cmpl-1: prompt: 'hi there', "
            "params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3, 4, 5], prompt_embeds shape: None, lora_request: None."),
            ("ERROR 10-22 09:57:24 [dump_input.py:76] Dumping scheduler output for model execution: SchedulerOutput("
            "scheduled_new_reqs=[NewRequestData(req_id=a,prompt_token_ids_len=9000,num_computed_tokens=0), "
            "NewRequestData(req_id=b,prompt_token_ids_len=12,num_computed_tokens=0)], total_num_scheduled_tokens=8192)"),
            ("ERROR 10-22 09:58:00 [serving_chat.py:1] This model's maximum context length is 8192 tokens. However, "
            "your prompt contains at least 9001 input tokens, which exceeds this limit even without any output tokens."),
        ]
    )
    lengths = [e.data for e in events if e.signal is Signal.PROMPT_LENGTH]
    assert lengths == [
        PromptLength(5, False, "request_log"),
        PromptLength(9000, False, "crash_dump"),
        PromptLength(12, False, "crash_dump"),
        PromptLength(9001, True, "context_error"),
    ]
    assert only(events, Signal.SCHEDULED_TOKENS).data == ScheduledTokens(8192, 2, 9000)


def test_version_banner_and_parallel_config():
    events, _ = scan(
        [
            ("(EngineCore_0 pid=2211) INFO 05-02 09:14:10 [core.py:58] Initializing a V1 LLM engine (v0.8.5.post1) "
            "with config: model='meta-llama/Llama-3.1-8B-Instruct', tensor_parallel_size=2, pipeline_parallel_size=1, "
            "enable_chunked_prefill=True, max_num_batched_tokens=8192"),
        ]
    )
    assert only(events, Signal.VERSION).data == Version("0.8.5.post1", "V1")
    assert only(events, Signal.PARALLEL_CONFIG).data == ParallelConfig(
        tp=2, pp=1, model="meta-llama/Llama-3.1-8B-Instruct", chunked_prefill=True, max_num_batched_tokens=8192
    )


def test_prompt_text_is_redacted_in_event_text_by_default():
    line = (
        "(APIServer pid=1) INFO 10-22 09:41:12 [logger.py:41] Received request cmpl-1: prompt: 'my secret plan', "
        "params: SamplingParams(n=1), prompt_token_ids: [11, 22, 33], lora_request: None."
    )
    events, _ = scan([line])
    assert all("secret" not in e.text and "22" not in e.text for e in events)
    assert any("<prompt: 14 chars>" in e.text and "<3 token ids>" in e.text for e in events)
    shown, _ = scan([line], show_prompts=True)
    assert any("my secret plan" in e.text for e in shown)


def test_untimed_lines_take_the_previous_time():
    events, _ = scan(
        [
            "INFO 09-07 03:15:54 [shm_broadcast.py:705] hello",
            "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:1735 'an illegal memory access was encountered'",
        ]
    )
    crash = only(events, Signal.CUDA_ERROR)
    assert crash.stamp.text == "09-07 03:15:54" and crash.inherited_time


def test_summary_tracks_each_process_last_line():
    _, summary = scan(
        [
            "(Worker_TP0 pid=90) INFO 10-22 09:31:00 [a.py:1] x",
            "(EngineCore_DP0 pid=77) INFO 10-22 09:32:00 [a.py:1] y",
            "(Worker_TP0 pid=90) INFO 10-22 09:33:00 [a.py:1] z",
        ]
    )
    seen = {proc.label: (s.line, s.stamp.text) for proc, s in summary.last_seen.items()}
    assert seen == {"Worker_TP0 pid=90": (3, "10-22 09:33:00"), "EngineCore_DP0 pid=77": (2, "10-22 09:32:00")}
    assert summary.lines == 3


def test_signals_inside_a_prompt_are_not_signals():
    events, _ = scan(
        [
            ("(APIServer pid=1) INFO 10-22 09:41:12 [logger.py:41] Received request cmpl-1: prompt: 'why do I see "
            "EngineCore encountered a fatal error and CUDA out of memory. Tried to allocate 2 GiB?', params: "
            "SamplingParams(n=1), prompt_token_ids: [1, 2, 3, 4], lora_request: None.")
        ]
    )
    assert [e.signal for e in events] == [Signal.REQUEST_RECEIVED, Signal.PROMPT_LENGTH]
    assert events[1].data == PromptLength(4, False, "request_log")


def test_a_token_list_cut_short_is_a_lower_bound():
    events, _ = scan(["INFO 10-22 09:41:12 [logger.py:41] Received request a: prompt_token_ids: [1, 2, 3"])
    assert only(events, Signal.PROMPT_LENGTH).data == PromptLength(3, True, "request_log")


# ---- wordings read in vLLM 0.32–0.34 and in the libraries around it ------------------------------


def _events(lines: list[str]):
    return scan(lines)[0]


def _of(events, signal):
    return [e for e in events if e.signal is signal]


def test_watchdog_dump_carries_its_reason_and_sigterm_is_not_a_stall():
    events = _events([
        "(EngineCore pid=9) INFO 12-03 04:00:01 [watch_dog.py:96] [Watchdog]Dumped stack to /tmp/d/VLLM_STACK_DUMP_for_engine_0_9.log due to feed timeout",
        "(EngineCore pid=9) WARNING 12-03 04:00:02 [watch_dog.py:100] [Watchdog]Failed to dump stack trace to /ro/x.log: [Errno 30] Read-only file system",
    ])
    dumps = _of(events, Signal.STACK_DUMP)
    assert [d.data.call for d in dumps] == ["feed timeout", "feed timeout"]
    assert all(d.data.guard == "watchdog" for d in dumps)


def test_fault_tolerance_engine_ready_and_dp_coordinator_timeouts():
    events = _events([
        "(EngineCore pid=9) ERROR 12-03 04:00:01 [engine_core_sentinel.py:531] [FT] No recovery within 120s timeout.",
        "TimeoutError: Timed out waiting for new engine core processes to start. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S).",
        "",
        "RuntimeError: DP Coordinator process failed to report ZMQ addresses within timeout=120 seconds during startup.",
    ])
    assert _of(events, Signal.RECOVERY_TIMEOUT)[0].data.limit_s == 120
    ready = _of(events, Signal.ENGINE_READY_TIMEOUT)
    assert {e.data.guard for e in ready} == {"engine-ready", "dp-coordinator"}
    assert {e.data.limit_s for e in ready} == {600, 120}


def test_failed_core_procs_even_empty_is_a_start_up_failure():
    for procs in ("{'EngineCore_DP0': 1}", "{}"):
        events = _events([f"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {procs}"])
        assert _of(events, Signal.ENGINE_FATAL)[0].data.name == "start-up"


def test_jit_monitor_warning_is_compilation_during_inference():
    events = _events([
        ("(Worker_TP0 pid=5) WARNING 12-03 04:00:01 [jit_monitor.py:143] CuTeDSL JIT compilation during inference: "
         "sample_kernel (shape=(8, 4096)). This causes a latency spike; consider extending warmup to cover this shape/config."),
    ])
    compile_ = _of(events, Signal.COMPILE)[0]
    assert "inference" in compile_.text and compile_.data.name.startswith("CuTeDSL")


def test_corrupted_requests_and_took_wording():
    events = _events([
        ("(APIServer pid=1) INFO 12-03 04:00:01 [loggers.py:326] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
         "Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, Corrupted: 2 reqs"),
        "(EngineCore pid=9) INFO 12-03 04:00:02 [monitor.py:20] torch.compile took 41.07 s in total",
        "(APIServer pid=1) INFO 12-03 04:00:03 [startup.py:18] vLLM server version 0.34.0, serving model m",
    ])
    assert _of(events, Signal.STATS)[0].data.corrupted == 2
    assert _of(events, Signal.COMPILE)[0].data.seconds == 41.07
    assert _of(events, Signal.VERSION)[0].data.version == "0.34.0"


def test_waits_that_can_never_complete_name_the_party():
    events = _events([
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
        "  what():  [enforce fail at gloo/transport/tcp/pair.cc:454] op.preamble.length <= op.nbytes. 8 vs 4",
        "",
        "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 2/8 clients joined.",
        "[2026-04-06 23:02:12] gx10:158:188 [0] transport/net_ib/p2p.cc:651 NCCL WARN NET/IB: Got completion from peer 10.20.21.20<43007> with status=IBV_WC_REM_INV_REQ_ERR(9) opcode=IBV_WC_SEND(0)",
        "",
        "[pod/x/vllm] (Worker_DP7_EP7 pid=4757) RuntimeError: DeepEP error: timeout (dispatch CPU)",
    ])
    assert "8 bytes" in _of(events, Signal.COLLECTIVE_MISMATCH)[0].data.detail
    meet = _of(events, Signal.RENDEZVOUS_FAILED)[0].data
    assert (meet.joined, meet.expected, meet.limit_s) == (2, 8, 601)
    assert _of(events, Signal.PEER_LOST)[0].data.peer == "10.20.21.20"
    assert _of(events, Signal.COMM_TIMEOUT)[0].data.guard == "deepep"


def test_segfault_dump_with_unknown_frames_is_a_fatal_signal():
    events = _events([
        "(EngineCore_DP0 pid=7) !!!!!!! Segfault encountered !!!!!!!",
        '(EngineCore_DP0 pid=7)   File "<unknown>", line 0, in c10::cuda::CUDACachingAllocator::free()',
        '(EngineCore_DP0 pid=7)   File "<unknown>", line 0, in PyObject_Call',
        "Fatal Python error: Segmentation fault",
        "Current thread 0x00007f3a2c5fe640 (most recent call first):",
    ])
    fatal = _of(events, Signal.FATAL_SIGNAL)
    assert fatal and fatal[0].data.exception == "Segmentation fault"


def test_a_cut_off_step_wait_is_a_step_timeout_but_a_worker_error_through_it_is_not():
    head = "(EngineCore pid=2) ERROR 04-01 22:27:40 [core.py:1101] "
    cut = [head + "Traceback (most recent call last):",
           head + '  File "/v/multiproc_executor.py", line 376, in get_response',
           head + "    status, result = mq.dequeue(timeout=dequeue_timeout)"]
    assert _of(_events(cut), Signal.RPC_TIMEOUT)[0].data.call == "execute_model"
    failed = cut + [head + "RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered'"]
    assert not _of(_events(failed), Signal.RPC_TIMEOUT)


def test_operator_stop_wordings():
    events = _events([
        "(APIServer pid=1) INFO 12-03 04:00:01 [launcher.py:256] [shutdown] API server: shutdown triggered",
        "(EngineCore pid=9) INFO 12-03 04:00:01 [core.py:1698] [shutdown] EngineCore: trigger received signal=SIGTERM",
    ])
    assert [e.data.name for e in _of(events, Signal.OPERATOR_STOP)] == ["shutdown", "SIGTERM"]


def test_every_spelling_of_a_cuda_oom():
    for line in ("RuntimeError: CUDA error: out of memory",
                 "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory."):
        assert _of(_events([line]), Signal.CUDA_OOM), line


def test_allocation_failures_outside_pytorch_are_out_of_memory():
    for line in ("RuntimeError: CUDA driver error: out of memory",
                 "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"):
        events = _events([line])
        assert _of(events, Signal.CUDA_OOM) and not _of(events, Signal.CUDA_ERROR), line


def test_nccl_errors_local_and_remote():
    assert _of(_events(["RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"]),
               Signal.CUDA_ERROR)
    remote = _events(["RuntimeError: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5"])
    assert _of(remote, Signal.PEER_LOST) and not _of(remote, Signal.CUDA_ERROR)


def test_no_rule_literal_starts_another():
    """The literal search is one alternation: a literal that begins another would hide it at that
    position, and the longer literal's rules would never run (``Available KV cache memory: -`` once did)."""
    from engdiag.logs.patterns import LITERALS

    assert [(a, b) for a in LITERALS for b in LITERALS if a != b and b.startswith(a)] == []


def test_no_rule_literal_hides_another_from_a_character_or_two_before_it():
    """The alternation finds the leftmost literal: one that is another's start behind a character or two (`` is
    preempted`` before ``is preempted by``, `` timed out waiting for `` before ``imed out waiting for ``) matches first
    wherever the other would, and consumes it."""
    from engdiag.logs.patterns import LITERALS

    hidden = [(a, b) for a in LITERALS for b in LITERALS if a != b
              for cut in (1, 2) if len(a) > cut and b.startswith(a[cut:])]
    assert hidden == []
