"""Messages read in vllm-omni's source (0.14, 0.22, 0.30) and LMCache's (0.3.3, 0.4.4, 0.5.6), each on both sides of
its line.  The wordings are the source's (or the issue that quotes them); the readings issue #10's model."""

from __future__ import annotations

from tests.conftest import analysis_of, steps_of, verdict_of

_READY = ('(APIServer pid=4700) Traceback (most recent call last):\n'
          '(APIServer pid=4700)   File "/x/vllm_omni/engine/stage_engine_core_proc.py", line 283, in _recv\n'
          "(APIServer pid=4700) TimeoutError: Timed out waiting for READY from StageEngineCoreProc after 600s. This "
          "typically indicates model loading or initialization is taking too long. Consider increasing "
          "`stage_init_timeout` for large models.\n")


_LOADING = ("Loading safetensors checkpoint shards:  30% Completed | 3/10 [03:00<07:00, 60.00s/it]\n"
            "Loading safetensors checkpoint shards:  40% Completed | 4/10 [04:00<06:00, 60.00s/it]\n")


def test_a_vllm_omni_stage_that_was_not_ready_in_time_is_a_slow_start_up_with_its_own_knob(tmp_path):
    """stage_init_timeout guards each stage's process (vllm-omni issues 2616, 2518): vLLM's ready timeout is not it."""
    result = analysis_of(tmp_path, _LOADING + _READY)
    assert result.verdict.kind.value == "slow" and "vllm-omni stage" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.name == "vllm-omni stage start-up timeout"
    steps = steps_of(result.verdict)
    assert "--stage-init-timeout" in steps and "VLLM_ENGINE_READY_TIMEOUT_S" not in steps
    # the stage's wait alone, none of its work in sight: a slow load and a stage stuck on a broken checkpoint end
    # alike (omni-stage-ready-timeout-incomplete-weights)
    alone = verdict_of(tmp_path, _READY)
    assert alone.kind.value == "unknown" and "weight loading" in (alone.undecided or "")
    # vLLM's own engine-core wait still names vLLM's variable
    upstream = verdict_of(tmp_path, "TimeoutError: Timed out waiting for engine core processes to start. This is often "
                                    "caused by slow weight loading for large models. Waited 600s (configured by "
                                    "VLLM_ENGINE_READY_TIMEOUT_S).\n")
    assert upstream.kind.value == "slow" and "VLLM_ENGINE_READY_TIMEOUT_S" in steps_of(upstream)


def test_a_vllm_omni_stage_process_that_died_is_a_dead_worker(tmp_path):
    """"StageDiffusionProc died unexpectedly (exit code -9)" (vllm-omni issues 7496, 5827): SIGKILL, host memory."""
    line = ("(APIServer pid=4700) ERROR 07-01 20:30:02 [stage_diffusion_client.py:204] [StageDiffusionClient] stage-1 "
            "[rep-0] StageDiffusionProc died unexpectedly (exit code -9).\n")
    killed = verdict_of(tmp_path, line)
    assert killed.kind.value == "crashed" and "SIGKILL" in killed.headline
    assert verdict_of(tmp_path, line.replace(" (exit code -9)", "")).kind.value == "crashed"
    # a stage that is only slow to answer is no death
    assert verdict_of(tmp_path, line.replace("died unexpectedly (exit code -9)", "is starting")).kind.value != "crashed"


_LMCACHE = ("[2025-09-01 10:00:0{s},000] LMCache WARNING: Failed to allocate memory object, retrying... "
            "({file}:553:lmcache.v1.storage_backend.{module})\n")


def test_lmcaches_full_transfer_buffer_names_the_setting_of_its_release(tmp_path):
    """0.3's NIXL connector sizes it with nixl_buffer_size; 0.4+'s PD backend with pd_buffer_size (0.5.6 config.py)."""
    for file, variable in (("pd_backend.py", "LMCACHE_PD_BUFFER_SIZE"), ("nixl_connector_v3.py", "LMCACHE_NIXL_BUFFER_SIZE")):
        verdict = verdict_of(tmp_path, "".join(_LMCACHE.format(s=s, file=file, module=file[:-3]) for s in range(4)))
        assert verdict.kind.value == "fragmented"
        assert variable in steps_of(verdict), file


_POOL = ("(Worker_TP0 pid=4811) ERROR 07-01 20:30:01 [mooncake_transfer_engine_connector.py:462] Pool exhausted, cannot "
         "put data size 220042915\n")
_KV_WAIT = ("(Worker_TP0 pid=4811) ERROR 07-01 20:30:31 [kv_transfer_manager.py:1565] Timeout waiting for KV cache for "
            "request chatcmpl-8a02 after 30.0s\n")


def test_a_full_vllm_omni_transfer_pool_is_the_cause_of_the_stage_wait_after_it(tmp_path):
    """The sender's put fails on a full memory_pool_size, so the payload never leaves (vllm-omni issue 3743)."""
    both = verdict_of(tmp_path, _POOL + _KV_WAIT)
    assert both.kind.value == "fragmented" and "transfer pool" in both.headline
    assert "memory_pool_size" in steps_of(both)
    # the wait alone still reads as the stage before never delivering
    assert verdict_of(tmp_path, _KV_WAIT).kind.value == "deadlocked"
    # a full pool after the wait did not cause it
    assert verdict_of(tmp_path, _KV_WAIT + _POOL.replace("20:30:01", "20:30:40")).kind.value == "deadlocked"


_NO_EVICTION = ("(Worker_TP0 pid=4811) [2026-07-01 20:30:3{s},000] LMCache WARNING: No eviction candidates found in local "
                "cpu backend. Local cpu memory is under pressure. Waiting for 0.1 seconds before retrying. "
                "(local_cpu_backend.py:860:lmcache.v1.storage_backend.local_cpu_backend)\n")
_SERVING = ("(APIServer pid=4700) INFO 07-01 20:30:{s} [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: {g} tokens/s, Running: 24 reqs, Waiting: 3 reqs, GPU KV cache usage: 61.2%, "
            "Prefix cache hit rate: 12.0%\n")


def test_lmcaches_cpu_pool_with_nothing_to_evict_holds_the_worker_unless_the_engine_serves_on(tmp_path):
    """LocalCPUBackend loops 0.1 s at a time with no limit (0.5.6 local_cpu_backend.py:860; LMCache issue 2942)."""
    waits = "".join(_NO_EVICTION.format(s=s) for s in range(5))
    stuck = verdict_of(tmp_path, _SERVING.format(s="20", g="412.0") + waits + _SERVING.format(s="50", g="0.0"))
    assert stuck.kind.value == "fragmented" and "LMCache's CPU pool" in stuck.headline
    assert "max_local_cpu_size" in steps_of(stuck)
    # tokens still flowing after the waits: pressure on the offload tier, not a worker held in it
    served = verdict_of(tmp_path, waits + _SERVING.format(s="50", g="412.0"))
    assert "LMCache's CPU pool" not in served.headline


def test_a_stage_input_that_never_came_is_a_wait_on_the_stage_before_with_its_own_knob(tmp_path):
    """vllm-omni's scheduler gives up on a request's input after VLLM_OMNI_INPUT_WAIT_TIMEOUT_S (0.30
    omni_scheduler_mixin.py:452, 600 s; 0.22 :105, 300 s), 10–20× the KV wait: the stage before never sent it."""
    head = "(StageEngineCoreProc pid=4750) WARNING 07-01 20:30:01 "
    for line in (("[omni_scheduler_mixin.py:452] Marking 1 request(s) as FINISHED_ERROR after waiting > 600s for "
                  "connector input: ['chatcmpl-8a02']"),
                 ("[omni_scheduler_mixin.py:552] Marking 2 request(s) as FINISHED_ERROR after stalling > 600s waiting "
                  "for a chunk: ['a', 'b']"),
                 ("[omni_scheduling_coordinator.py:275] [Coordinator stage-1] Request chatcmpl-8a02 timed out waiting "
                  "for input (waited > 600s)"),
                 ("[omni_scheduling_coordinator.py:305] [Coordinator stage-1] Request r timed out waiting for "
                  "chunk/input (waited > 300s)")):
        result = analysis_of(tmp_path, head + line + "\n")
        assert result.verdict.kind.value == "deadlocked" and "input from the stage before" in result.verdict.headline
        assert any(w.on == "the stage before it" and w.satisfiable is False for w in result.model.waits), line
        assert result.model.guard is not None and result.model.guard.knob == "VLLM_OMNI_INPUT_WAIT_TIMEOUT_S"
        assert "VLLM_OMNI_INPUT_WAIT_TIMEOUT_S" in steps_of(result.verdict)
    # another program's request that timed out waiting for something else is not it
    other = verdict_of(tmp_path, head + "[x.py:1] Request r timed out waiting for the lock (waited > 60s)\n")
    assert other.kind.value != "deadlocked"


def test_vllm_omni_0_14s_start_up_warning_gives_up_on_nothing(tmp_path):
    """'[Orchestrator] Initialization timeout: 0/1 stages ready' is logged and the wait returns ('Ignore this warning
    if the model weight download / load from disk time is longer than {timeout}s', 0.14 omni.py:363; vllm-omni
    issue 915): a stage that reports ready after it was slow and started."""
    text = ("INFO 01-23 01:59:33 [omni.py:338] [Orchestrator] Waiting for 1 stages to initialize (timeout: 600s)\n"
            "WARNING 01-23 02:09:33 [omni.py:362] [Orchestrator] Initialization timeout: 0/1 stages ready. Missing "
            "stages: [0]\n")
    ready = "INFO 01-23 02:14:10 [omni.py:331] [Orchestrator] Stage-0 reported ready\n"
    started = analysis_of(tmp_path, text + ready)
    assert started.verdict.kind.value == "slow" and "then reported ready, 277 s after" in started.verdict.headline
    assert "gave up" not in started.verdict.headline
    assert started.model.guard is not None and started.model.guard.owner == "vllm-omni"
    assert "--stage-init-timeout" in steps_of(started.verdict)
    alone = verdict_of(tmp_path, text)
    assert alone.kind.value == "slow" and "vllm-omni orchestrator" in alone.headline


def test_a_stage_fetching_its_model_through_network_timeouts_is_a_slow_start_up(tmp_path):
    """Hugging Face read timeouts retried, then the stage's READY wait ran out (vllm-omni issue 2616)."""
    hub = ("(Worker pid=8142) WARNING 07-01 20:20:01 [hub.py:10] '(ReadTimeoutError(\"HTTPSConnectionPool(host="
           "'huggingface.co', port=443): Read timed out. (read timeout=10)\"), '(Request ID: x)')' thrown while "
           "requesting HEAD https://huggingface.co/Qwen/Qwen3-Omni/resolve/main/config.json\n")
    verdict = verdict_of(tmp_path, hub + _READY)
    assert verdict.kind.value == "slow" and "vllm-omni stage" in verdict.headline
    assert any(e.role.value == "supporting" and "huggingface.co" in e.text for e in verdict.evidence)


def test_a_diffusion_rank_whose_scheduler_is_dead_is_a_dead_worker(tmp_path):
    """'Rank 2 scheduler is dead. Please check if there are relevant logs.' (0.14–0.30 multiproc_executor.py, on
    EOFError from the rank's pipe; vllm-omni issues 7496 and 5827) read 'no crash signal' before."""
    text = ("(APIServer pid=150) ERROR 09-13 18:40:28 [multiproc_executor.py:420] Rank 2 scheduler is dead. Please "
            "check if there are relevant logs.\n"
            "(APIServer pid=150) ERROR 09-13 18:40:28 [multiproc_executor.py:422] Exit code: -9\n")
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value == "crashed"
    assert verdict.evidence[0].line == 1


def test_vllm_omni_0_30s_start_up_warning_names_its_own_limits(tmp_path):
    """'[OmniEngine] Orchestrator startup timed out after 600s. … may need larger --init-timeout and
    --stage-init-timeout values.' (0.30 omni_engine_base.py:520), while a stage still loads."""
    text = _LOADING.replace("Loading", "(StageEngineCoreProc pid=4750) Loading") + (
        "(APIServer pid=4700) WARNING 07-01 20:40:01 [omni_engine_base.py:520] [OmniEngine] Orchestrator startup "
        "timed out after 600s. Multi-stage deployments that initialize stages sequentially on one device or load "
        "checkpoints from slow storage may need larger --init-timeout and --stage-init-timeout values.\n")
    result = analysis_of(tmp_path, text)
    assert result.verdict.kind.value == "slow" and "weight loading" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.limit_s == 600
    assert "--init-timeout" in steps_of(result.verdict)


def test_a_dlo_wave_one_rank_never_joined_is_a_deadlock_with_its_knob(tmp_path):
    """'DLO DP collective wave timed out after 600.0s; shutting down the worker group: …' (0.30
    multiproc_executor.py:505): 'once one rank is stuck in a DLO AllGather, that process group cannot be reused'."""
    result = analysis_of(tmp_path, "(APIServer pid=1) ERROR 07-01 20:30:01 [multiproc_executor.py:505] DLO DP collective "
                                   "wave timed out after 600.0s; shutting down the worker group: TimeoutError()\n")
    assert result.verdict.kind.value == "deadlocked" and "DLO collective wave" in result.verdict.headline
    assert any(w.on == "the other DP ranks" and w.satisfiable is False for w in result.model.waits)
    assert result.model.guard is not None and result.model.guard.knob == "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT"
    assert result.model.guard.limit_s == 600.0


def test_a_replica_the_orchestrator_evicts_as_dead_is_a_dead_worker(tmp_path):
    """'[Orchestrator] Stage-1 replica-0 is dead; evicting it and failing its in-flight requests: …' (0.30
    orchestrator.py:1291) and '… dispatch for req=r hit dead stage-1 replica-0: …' (:1456) read 'no crash' before."""
    head = "(APIServer pid=1) ERROR 07-01 20:30:01 [orchestrator.py:1291] [Orchestrator] "
    for line in ("Stage-1 replica-0 is dead; evicting it and failing its in-flight requests: heartbeat lost",
                 "async dispatch for req=chatcmpl-1 hit dead stage-1 replica-0: gone"):
        verdict = verdict_of(tmp_path, head + line + "\n")
        assert verdict.kind.value == "crashed", line
        assert "stage-1 replica-0" in verdict.evidence[0].text.lower()


def test_a_stage_that_waited_out_a_sibling_stages_device_lock_was_starting_not_stuck(tmp_path):
    """'Timeout waiting for device 0 initialization lock, proceeding anyway' (0.30 stage_init_utils.py:1862): the
    stage holding it was still starting; 0.30's phase lock fails closed instead ('DeviceLockTimeoutError: Timed out
    after 900s acquiring EX lock on device 0', stage_phase_lock.py:158), a stage's start-up limit."""
    result = analysis_of(tmp_path, "(StageEngineCoreProc pid=2) WARNING 07-01 20:30:01 [stage_init_utils.py:1862] "
                                   "Timeout waiting for device 0 initialization lock, proceeding anyway\n")
    assert any("co-located vllm-omni stage" in a.name and a.advancing for a in result.model.activities)
    assert result.verdict.kind.value not in ("deadlocked", "crashed")
    locked = analysis_of(tmp_path, "(APIServer pid=1) ERROR 07-01 20:30:01 [stage_phase_lock.py:158] "
                                   "DeviceLockTimeoutError: Timed out after 900s acquiring EX lock on device 0\n")
    assert locked.model.guard is not None and locked.model.guard.name == "vllm-omni stage start-up timeout"
    assert locked.model.guard.limit_s == 900
