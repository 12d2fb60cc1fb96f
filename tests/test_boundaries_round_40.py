"""Readings added after blind round 40 (tests/corpus/HELDOUT.md), each on both sides of its line."""

from __future__ import annotations

from tests.conftest import verdict_of

_COMPILED = "INFO 04-30 10:20:35 [monitor.py:33] torch.compile takes 13.93 s in total\n"
_CUT = """\
ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.
ERROR 04-30 10:20:36 [core.py:396] Traceback (most recent call last):
ERROR 04-30 10:20:36 [core.py:396]   File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 387, in run_engine_core
ERROR 04-30 10:20:36 [core.py:396]     engine_core = EngineCoreProc(*args, **kwargs)
ERROR 04-30 10:20:36 [core.py:396]   File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 329, in __init__
ERROR 04-30 10:20:36 [core.py:396]     super().__init__(vllm_config, executor_class, log_stats,
"""


def test_a_cut_traceback_right_after_compile_finished_is_likely_memory(tmp_path):
    """V1 compiles on the profiling run's first forward; before the KV cache is sized only the rest of that run and
    the check that memory is left for the cache remain (a800-v1-no-cache-blocks)."""
    verdict = verdict_of(tmp_path, _COMPILED + _CUT)
    assert verdict.kind.value == "fragmented" and verdict.sub_kind.value == "exhaustion"
    assert 0 < verdict.confidence < 0.5 and "No available memory for the cache blocks" in verdict.undecided
    assert "--gpu-memory-utilization 0.9" in [step.command for step in verdict.next_steps]


def test_the_same_cut_says_nothing_of_memory_without_a_finished_compile(tmp_path):
    # a compile still running (a kill mid-compile: k8s-vllm-exit-during-torch-compile) or none at all (an illegal
    # memory access in the profiling forward: llama4-maverick-ima-cutlass-moe)
    running = "INFO 04-30 10:20:20 [backends.py:430] Dynamo bytecode transform time: 12.01 s\n"
    for before in ("", running):
        assert verdict_of(tmp_path, before + _CUT).kind.value == "unknown", before


def test_the_cut_after_compile_yields_to_a_named_exception_or_a_later_step(tmp_path):
    named = _COMPILED + _CUT + "ERROR 04-30 10:20:36 [core.py:396] RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert verdict_of(tmp_path, named).kind.value == "crashed"
    # the KV cache already sized: the later rule (allocation and graph capture) speaks, not this one
    sized = _COMPILED + "INFO 04-30 10:20:36 [kv_cache_utils.py:634] GPU KV cache size: 75,536 tokens\n" + _CUT
    verdict = verdict_of(tmp_path, sized)
    assert verdict.kind.value == "fragmented" and "after the KV cache was sized" in verdict.headline
    # serving had begun: a cut traceback then is no start-up step
    serving = _COMPILED + "INFO 04-30 10:20:35 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000\n" + _CUT
    assert verdict_of(tmp_path, serving).kind.value != "fragmented"


def test_kvcached_short_pool_is_read_with_an_integer_or_a_float_free_size(tmp_path):
    """kvcached logs ``available_size()=%d`` today; a release logged the size as a float (kvcached issue 191)."""
    for free in ("9", "9.0"):
        log = (f"(EngineCore_DP0 pid=10311) [kvcached][WARNING][2025-10-25 11:17:27][kv_cache_manager.py:164] "
               f"available_size()={free} < need_size=30\n"
               "(EngineCore_DP0 pid=10311) ERROR 10-25 11:17:27 [core.py:720] EngineCore encountered a fatal error.\n")
        verdict = verdict_of(tmp_path, log)
        assert verdict.kind.value == "fragmented" and f"({free} free where 30 were needed)" in verdict.headline
    # a figure that is not a size is no reading of the pool
    assert verdict_of(tmp_path, "available_size()=x < need_size=30\n").kind.value != "fragmented"


_REPORT = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"


def test_the_api_servers_start_up_report_alone_cannot_tell_a_timeout_from_a_crash(tmp_path):
    """Round 41's cold-flashinfer-jit-engine-ready-timeout-gb10: a 600 s cold JIT that outlasted the ready wait, and
    this one line pasted.  The report points at the engine core's own error above it, which decides."""
    verdict = verdict_of(tmp_path, _REPORT)
    assert verdict.kind.value == "unknown" and 0 < verdict.confidence <= 0.35
    assert "engine core's own lines" in verdict.undecided and "outlasted its timeout" in verdict.headline
    assert any("without an exit code" in note for note in verdict.notes)


def test_the_start_up_report_beside_the_engine_cores_own_error_is_that_error(tmp_path):
    # the engine core's error pasted beside the report (nemo-retriever-deepgemm-unavailable-engine-init-failed)
    own = ("(EngineCore_DP0 pid=211) RuntimeError: DeepGEMM backend is not available or outdated.\n"
           "(APIServer pid=99) " + _REPORT)
    assert verdict_of(tmp_path, own).kind.value == "crashed"
    # the engine core's fatal path in the log: its own crash, not the report, is the root cause
    fatal = "(EngineCore_DP0 pid=211) ERROR 07-16 08:23:49 [core.py:866] EngineCore failed to start.\n" + _REPORT
    assert verdict_of(tmp_path, fatal).kind.value == "crashed"


_DUMP = ("(EngineCore_DP0 pid=635544) ERROR 10-06 13:28:27 [logging_utils/dump_input.py:69] Dumping input data for V1 LLM "
         "engine (v0.11.1) with config: model='meta-llama/Llama-3.1-8B-Instruct', enforce_eager=False\n")


def test_the_engines_input_dump_is_a_step_that_raised_and_alone_names_the_exception_after_it(tmp_path):
    """V1 dumps a step's input only when that step raised (core.py execute_model_with_error_logging): the engine was
    serving, not starting (pp-multinode-slingshot-ray-hang read 'the log ends during start-up' before)."""
    start = "(EngineCore_DP0 pid=635544) 2025-10-06 13:20:06,152\tINFO torch_tensor_accelerator_channel.py:833 -- Communicator group initialized.\n"
    verdict = verdict_of(tmp_path, start + _DUMP)
    assert verdict.kind.value == "unknown" and "a model step raised" in verdict.headline
    assert "exception after the dump" in verdict.undecided
    # the step's exception beside the dump names the fault
    ima = "(EngineCore_DP0 pid=635544) ERROR 10-06 13:28:27 [core.py:710] RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert verdict_of(tmp_path, start + _DUMP + ima).kind.value == "crashed"
