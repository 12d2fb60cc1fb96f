"""Lines exactly as vLLM prints them, per version, read from the released wheels' source
(``pip download vllm==X --no-deps``; file:line is for the version named).  Each test fails if a rule
stops recognising a wording a real vLLM release prints."""

from __future__ import annotations

from engdiag.logs.events import Signal, Timeout
from engdiag.logs.scan import LineScanner


def _events(lines: list[str]):
    scanner = LineScanner("t.log", 0)
    events = []
    for number, line in enumerate(lines, start=1):
        events += scanner.feed(number, line)
    return events + scanner.finish()


def _of(lines: list[str], signal: Signal):
    return [e for e in _events(lines) if e.signal is signal]


def test_watchdog_start_is_no_stall_and_stop_dumps_are_not_stalls():
    """0.33.0/0.34.0 vllm/utils/watch_dog.py: ``"[Watchdog]Start with timeout=%s check_interval=%s dump_dir=%s"``
    (:165), ``"[Watchdog]Dumped stack to %s due to %s"`` (:96); reasons ``feed timeout`` (check loop),
    ``SIGTERM`` (v1/engine/core.py:1703), ``shutdown`` (v1/executor/multiproc_executor.py:979).  No space after ``]``."""
    start = "(EngineCore pid=9) INFO 12-03 04:00:00 [watch_dog.py:165] [Watchdog]Start with timeout=300 check_interval=10 dump_dir=/d"
    assert not _of([start], Signal.STACK_DUMP)
    dump = "(Worker_TP1 pid=11) INFO 12-03 04:05:00 [watch_dog.py:96] [Watchdog]Dumped stack to /d/VLLM_STACK_DUMP_for_worker_1_11.log due to "
    reasons = {}
    for reason in ("feed timeout", "SIGTERM", "shutdown"):
        (event,) = _of([dump + reason], Signal.STACK_DUMP)
        assert isinstance(event.data, Timeout) and event.data.call == reason
        reasons[reason] = event.data.is_stop_dump
    assert reasons == {"feed timeout": False, "SIGTERM": True, "shutdown": True}


def test_early_v1_fatal_lines():
    """0.7.3 / 0.8.4 (gone in 0.8.5): v1/engine/core_client.py:359 (0.8.4) ``logger.fatal("Got fatal signal from
    worker processes, shutting down. See stack trace above for root cause issue.")`` and the executor's
    ``"MulitprocExecutor got fatal signal ..."`` (sic, multiproc_executor.py:50); v1/engine/core.py:387
    ``"EngineCore hit an exception: %s"``; v1/engine/async_llm.py:345 ``"EngineCore output handler hit an error: %s"``."""
    tail = " fatal signal from worker processes, shutting down. See stack trace above for root cause issue."
    assert _of(["CRITICAL 03-13 09:00:43 [core_client.py:359] Got" + tail], Signal.ENGINE_DEAD)
    assert _of(["(EngineCore_0 pid=5) CRITICAL 04-22 17:08:49 [multiproc_executor.py:50] MulitprocExecutor got" + tail],
               Signal.ENGINE_DEAD)
    fatal = _of(["ERROR 04-22 17:08:49 [core.py:387] EngineCore hit an exception: Traceback (most recent call last):"],
                Signal.ENGINE_FATAL)
    assert fatal and fatal[0].data.name == "busy loop"
    assert _of(["ERROR 04-22 17:08:50 [async_llm.py:345] EngineCore output handler hit an error: "], Signal.ENGINE_DEAD)


def test_v0_mqllmengine_heartbeat_errors_seen_through_the_client():
    """0.6.3.post1: ``TimeoutError("No heartbeat received from MQLLMEngine")`` engine/multiprocessing/client.py:142 and
    ``RuntimeError("Engine loop has died")`` engine/multiprocessing/engine.py:325 are raised, not logged; they show
    in the client's ``MQEngineDeadError("Engine loop is not running. Inspect the stacktrace to find the original
    error: {repr(error)}.")`` and in its traceback (corpus: json-schema-no-heartbeat-mqllmengine,
    72b-fp8-32k-context-engine-loop-died)."""
    dead = "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running. Inspect the stacktrace to find the original error: "
    for error in ("TimeoutError('No heartbeat received from MQLLMEngine')", "RuntimeError('Engine loop has died')"):
        assert _of([dead + error + "."], Signal.HEARTBEAT_LOST), error


def test_every_torch_compile_total_wording():
    """``"torch.compile takes %.2f s in total"`` compilation/monitor.py (0.8.5–0.17.1); ``"torch.compile took ..."``
    (0.18.1 monitor.py:20); 0.32–0.34 ``"%storch.compile took %.2f s in total"`` with an optional ``"[tag] "``
    (monitor.py:20) and ``"%storch.compile and initial profiling/warmup run together took %.2f s in total"``
    (compilation/decorators.py:716 in 0.34)."""
    head = "(EngineCore pid=9) INFO 12-03 04:00:02 [monitor.py:20] "
    for text, seconds in (("torch.compile takes 12.50 s in total", 12.5),
                          ("torch.compile took 41.07 s in total", 41.07),
                          ("[backbone] torch.compile took 41.07 s in total", 41.07),
                          ("torch.compile and initial profiling/warmup run together took 55.20 s in total", 55.2)):
        (event,) = _of([head + text], Signal.COMPILE)
        assert event.data.seconds == seconds, text


def test_jit_monitor_triton_wording_and_its_error_mode():
    """0.32–0.34 vllm/utils/jit_monitor.py:129 ``"%s %s during inference: %s%s. This causes a latency spike; consider
    extending warmup to cover this shape/config."`` with (``Triton``, ``kernel JIT compilation``) or
    (``CuTeDSL``/``TileLang``/``FlyDSL``, ``JIT compilation``); ``--jit-monitor-mode=error`` raises
    ``RuntimeError`` with the same text."""
    text = ("Triton kernel JIT compilation during inference: _chunk_scan_fwd (BLOCK=64). This causes a latency spike; "
            "consider extending warmup to cover this shape/config.")
    (warning,) = _of(["(Worker_TP0 pid=5) WARNING 12-03 04:00:01 [jit_monitor.py:143] " + text], Signal.COMPILE)
    assert warning.data.name == "Triton kernel JIT compilation during inference"
    (raised,) = _of(["RuntimeError: " + text], Signal.COMPILE)
    assert raised.data.name.startswith("Triton")


def test_start_up_failures_of_0_32_and_later():
    """0.34 v1/engine/utils.py:1473/1478: ``"Frontend process failed during engine core initialization. See root cause
    above. Failed frontend proc(s): {...}"`` and ``"... Failed core proc(s): {}, failed frontend proc(s): {...}"``;
    v1/utils.py:587/593 ``"Process {name} (PID: {pid}) died with exit code {code}"``, ``"Engine core process {name}
    died unexpectedly."``; ray_executor_v2.py:523 ``"RayWorkerProc rank=%s died unexpectedly, shutting down executor."``."""
    for line in ("RuntimeError: Frontend process failed during engine core initialization. See root cause above. "
                 "Failed frontend proc(s): {'ApiServer_0': 1}",
                 "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}, "
                 "failed frontend proc(s): {'ApiServer_1': -9}"):
        (event,) = _of([line], Signal.ENGINE_FATAL)
        assert event.data.name == "start-up"
    died = _of(["RuntimeError: Process ApiServer_0 (PID: 77) died with exit code -9",
                "",
                "RuntimeError: Engine core process EngineCore_DP1 died unexpectedly.",
                "",
                "(EngineCore pid=9) ERROR 12-03 04:00:03 [ray_executor_v2.py:523] RayWorkerProc rank=3 died unexpectedly, "
                "shutting down executor."], Signal.WORKER_DIED)
    assert [(e.data.name, e.data.exit_code) for e in died] == [
        ("ApiServer_0", -9), ("Engine core process EngineCore_DP1", None), ("RayWorkerProc rank=3", None)]
