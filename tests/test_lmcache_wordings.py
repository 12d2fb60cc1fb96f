"""LMCache's own logger lines and its fallbacks, read in LMCache 0.3.3, 0.4.4 and 0.5.6 (``pip download lmcache==X
--no-deps``): the line format of lmcache/logging.py, and each give-up message on both sides of its line."""

from __future__ import annotations

import json

from engdiag.logs.lines import Shape, pieces
from tests.conftest import analysis_of, run_engdiag, steps_of, verdict_of
from tests.test_bulk_scan import _same_everywhere

_ESC = ("\x1b[33;20m[2026-07-01 20:30:0{s},000] LMCache WARNING:\x1b[0m {msg} "
        "\x1b[3m({file}:{line}:lmcache.v1.{module})\x1b[0m")
"""build_format(color) of lmcache/logging.py, the same in all three releases: colour codes even off a terminal."""


def _lines(msg: str, file: str, line: int, n: int = 4, tag: str = "(Worker_TP0 pid=4811) ") -> str:
    return "".join(tag + _ESC.format(s=s, msg=msg, file=file, line=line, module=file[:-3]) + "\n" for s in range(n))


def test_an_lmcache_logger_line_is_a_record_with_its_time_level_and_place():
    """Behind vLLM's process tag, without one, and pasted without the ESC bytes: the same record."""
    text = _ESC.format(s=1, msg="Pin timeout detected for MemoryObj 9.", file="pin_monitor.py", line=180,
                       module="pin_monitor")
    for line in ("(Worker_TP0 pid=4811) " + text, text, text.replace("\x1b", ""), "(Worker_TP0 pid=4811) " +
                 text.replace("\x1b", "")):
        (piece,) = pieces(line, 7)
        assert piece.shape is Shape.VLLM and piece.level == "WARNING", line
        assert piece.msg.startswith("Pin timeout detected for MemoryObj 9. (pin_monitor.py:180:"), line
        assert piece.fileinfo == "pin_monitor.py:180", line
        assert piece.stamp is not None and (piece.stamp.calendar, piece.stamp.month, piece.stamp.second) == (
            2026, 7, 20 * 3600 + 30 * 60 + 1), line
    # LMCache named inside another message is no LMCache record
    (other,) = pieces("(APIServer pid=1) some print: LMCache WARNING: not its logger", 1)
    assert other.shape is Shape.TAGGED


def test_an_excerpt_of_lmcache_lines_alone_is_read(tmp_path):
    """148 of 179 LMCache messages, pasted alone in its format, read 'no vLLM lines found' before."""
    verdict = verdict_of(tmp_path, _lines("LMCache initialized for layer 3.", "cache_engine.py", 99))
    assert verdict.kind.value == "unknown" and "no vLLM lines found" not in verdict.headline


def test_every_backend_reads_lmcache_lines_alike(tmp_path, monkeypatch):
    """The line scanner and the bulk scanners agree on LMCache's shape: coloured, tagged, bare, with a traceback."""
    traceback = ("(Worker_TP0 pid=4811) \x1b[31;20m[2026-07-01 20:31:00,000] LMCache ERROR:\x1b[0m store failed "
                 "\x1b[3m(cache_engine.py:300:lmcache.v1.cache_engine)\x1b[0m\n"
                 "(Worker_TP0 pid=4811) Traceback (most recent call last):\n"
                 '(Worker_TP0 pid=4811)   File "/x/remote_backend.py", line 462, in get\n'
                 "(Worker_TP0 pid=4811) TimeoutError\n")
    text = (_lines("get blocking timeout, trigger cancel the future task", "remote_backend.py", 462, 6)
            + _lines("Local cpu memory under pressure so choosing to not store the KV cache.", "cache_engine.py", 717,
                     5, tag="")
            + traceback
            + "(APIServer pid=4700) INFO 07-01 20:31:10 [loggers.py:127] Engine 000: Avg prompt throughput: 10.0 "
              "tokens/s, Avg generation throughput: 40.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache "
              "usage: 3.0%, Prefix cache hit rate: 0.0%\n")
    path = tmp_path / "lmcache.log"
    path.write_text(text * 3)
    for window in (300, 4096, 1 << 16):
        _same_everywhere(path, monkeypatch, window_bytes=window)


def test_a_store_skipped_for_a_full_cpu_pool_is_a_healthy_engine(tmp_path):
    """The store path allocates without waiting and skips what does not fit (0.4.4 cache_engine.py:671, 0.5.6
    :717; LMCache issue 3187: 17k 'no memory is available' lines from a server that kept serving)."""
    for msg, file, line in (("Local cpu memory under pressure so choosing to not store the KV cache.",
                             "cache_engine.py", 717),
                            ("Local cpu memory under pressure so choosing to store only  3 total chunks of KV cache.",
                             "cache_engine.py", 521),
                            ("Failed to allocate memory block of size 15728640 because no memory is available",
                             "memory_management.py", 1454)):
        verdict = verdict_of(tmp_path, _lines(msg, file, line))
        assert verdict.kind.value == "healthy" and "LMCache's CPU pool was full 4 times" in verdict.headline, msg
        assert "max_local_cpu_size" in steps_of(verdict)
        assert verdict.sub_kind is None  # host memory of the offload tier, never the GPU's
    # the busy loop that waits for a chunk to evict is another matter: the worker is held there
    held = verdict_of(tmp_path, _lines("No eviction candidates found in local cpu backend. Local cpu memory is under "
                                       "pressure. Waiting for 0.1 seconds before retrying.", "local_cpu_backend.py", 860))
    assert held.kind.value == "fragmented"


def test_the_pin_monitors_forced_unpin_is_its_safety_net(tmp_path):
    """'Pin timeout detected … Forcing unpin to 0.' (0.5.6 pin_monitor.py:180): a leak cleaned up, no fault."""
    verdict = verdict_of(tmp_path, _lines("Pin timeout detected for MemoryObj 9069133824. Pin count: 2, Elapsed time: "
                                          "317.22s. Forcing unpin to 0.", "pin_monitor.py", 180))
    assert verdict.kind.value == "healthy" and "pin monitor" in verdict.headline
    # a near miss of the wording is not it
    assert verdict_of(tmp_path, _lines("Pin detected for MemoryObj 9.", "pin_monitor.py", 180)).kind.value == "unknown"


def test_a_remote_store_that_does_not_answer_makes_the_engine_slow(tmp_path):
    """future.result(blocking_timeout_secs) then a miss (0.5.6 remote_backend.py:462): each read holds the step."""
    for msg in ("get blocking timeout, trigger cancel the future task",
                "batched get blocking timeout, trigger cancel the future task",
                "batched_async_contains timed out", "batched_get_non_blocking timed out"):
        verdict = verdict_of(tmp_path, _lines(msg, "remote_backend.py", 462))
        assert verdict.kind.value == "slow" and "remote store" in verdict.headline, msg
        assert "blocking_timeout_secs" in verdict.headline + steps_of(verdict)
    # the same lines in a log whose engine died are not what killed it
    fatal = ("(EngineCore_DP0 pid=4750) ERROR 07-01 20:31:00 [core.py:700] EngineCore encountered a fatal error.\n"
             "(EngineCore_DP0 pid=4750) RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert verdict_of(tmp_path, _lines("get blocking timeout, trigger cancel the future task", "remote_backend.py",
                                       462) + fatal).kind.value == "crashed"


def test_a_lookup_past_its_limit_is_slow_with_the_limit_it_printed(tmp_path):
    """'Request %s is still waiting for async lookup after %d seconds, returning 0 lmcache cached tokens so vllm
    can recompute' (0.4.4 and 0.5.6 lmcache_async_lookup_client.py:179; the seconds are lookup_timeout_ms // 1000)."""
    msg = ("Request cmpl-7f3a-0 is still waiting for async lookup after 3 seconds, returning 0 lmcache cached tokens "
           "so vllm can recompute")
    verdict = verdict_of(tmp_path, _lines(msg, "lmcache_async_lookup_client.py", 179, tag="(EngineCore_DP0 pid=4750) "))
    assert verdict.kind.value == "slow" and "longer than 3 s" in verdict.headline
    assert "lookup_timeout_ms" in steps_of(verdict)


def test_an_mp_server_that_stops_answering_is_named_with_its_limit(tmp_path):
    """0.5.6 'LOOKUP to %s timed out after %ss. Marking server as unhealthy.' (:1307), 0.4.4 'LOOKUP request timed
    out after %ss. …' (:380), then 'LMCache server is unhealthy — entering degraded mode' (:614 / :177)."""
    for msg in ("LOOKUP to tcp://localhost:5555 timed out after 300.0s. Marking server as unhealthy.",
                "LOOKUP request timed out after 300.0s. Marking server as unhealthy."):
        verdict = verdict_of(tmp_path, _lines(msg, "vllm_multi_process_adapter.py", 1307))
        assert verdict.kind.value == "slow" and "MP server did not answer within 300 s" in verdict.headline, msg
    degraded = verdict_of(tmp_path, _lines("LMCache server is unhealthy — entering degraded mode",
                                           "vllm_multi_process_adapter.py", 614))
    assert degraded.kind.value == "slow" and "lmcache.mp.mq_timeout" in degraded.headline


def test_an_mp_server_missing_at_start_up_is_a_wait_that_can_never_complete(tmp_path):
    """'ConnectionError: LMCache server did not respond to register_kv_caches within 300.0s. Is the server
    running?' (0.5.6 vllm_multi_process_adapter.py:1676; LMCache issue 3618: a server on another node)."""
    text = ("(EngineCore_DP0 pid=4750) ERROR 07-01 20:30:01 [core.py:1000] EngineCore failed to start.\n"
            "(EngineCore_DP0 pid=4750) Traceback (most recent call last):\n"
            '(EngineCore_DP0 pid=4750)   File "/x/lmcache/integration/vllm/vllm_multi_process_adapter.py", line 1676, '
            "in register_kv_caches\n"
            "(EngineCore_DP0 pid=4750) ConnectionError: LMCache server did not respond to register_kv_caches within "
            "300.0s. Is the server running?\n")
    result = analysis_of(tmp_path, text)
    assert result.verdict.kind.value == "deadlocked" and "LMCache's MP server" in result.verdict.headline
    assert any(w.on == "LMCache's MP server" and w.satisfiable is False for w in result.model.waits)
    assert "lmcache.mp.port" in steps_of(result.verdict)
    # 0.4.4's wording at init
    older = verdict_of(tmp_path, text.replace("respond to register_kv_caches within", "respond within"))
    assert older.kind.value == "deadlocked"


def test_the_mp_server_start_up_wait_is_lmcaches_limit_not_a_platforms(tmp_path):
    """'LMCache MP server did not become healthy within 90.0s. server_url=…' (0.5.6 mp_server_launcher.py:473):
    lmcache.mp.autostart.wait_timeout, 90 s; a launcher's own 'Server did not become healthy within' stays the
    platform's."""
    line = ("(EngineCore_DP0 pid=4750) ConnectionError: LMCache MP server did not become healthy within 90.0s. "
            "server_url=tcp://127.0.0.1:5555, command=lmcache server\n")
    result = analysis_of(tmp_path, line)
    assert result.verdict.kind.value == "slow" and "lmcache.mp.autostart.wait_timeout" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.owner == "LMCache"
    assert result.model.guard.limit_s == 90.0
    assert "lmcache.mp.autostart.wait_timeout" in steps_of(result.verdict)
    platform = analysis_of(tmp_path, "Server did not become healthy within 600s\n")
    assert platform.model.guard is not None and platform.model.guard.owner == "platform"


def test_lmcache_lines_ahead_of_a_real_stall_do_not_hide_it(tmp_path):
    """A skipped store is background: an engine core waiting on its workers minute after minute is the finding."""
    stall = "".join(f"(EngineCore_DP0 pid=4750) WARNING 07-01 20:3{m}:00 [shm_broadcast.py:466] No available shared "
                    "memory broadcast block found in 60 second.\n" for m in range(1, 6))
    verdict = verdict_of(tmp_path, _lines("Local cpu memory under pressure so choosing to not store the KV cache.",
                                          "cache_engine.py", 717) + stall)
    assert verdict.kind.value != "healthy"


def test_the_cli_cites_lmcaches_line_with_its_place_in_the_file(tmp_path):
    """What a user runs: `analyze --json` on an LMCache excerpt cites the line that decided, file:line."""
    path = tmp_path / "lmcache.log"
    path.write_text("(APIServer pid=4700) INFO 07-01 20:29:59 [api_server.py:1] vLLM API server version 0.11.0\n"
                    + _lines("batched_async_contains timed out", "remote_backend.py", 537))
    result = run_engdiag("analyze", "--json", str(path))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"]["kind"] == "slow"
    cited = [e for e in report["verdict"]["evidence"] if e["role"] == "root cause"]
    assert cited and cited[0]["line"] == 2 and "batched_async_contains" in cited[0]["text"]


def test_a_backend_failing_lmcaches_health_checks_leaves_the_engine_serving_without_it(tmp_path):
    """'HealthMonitor: System unhealthy, entering degraded mode' (0.5.6 health_monitor/base.py:282), then 'LMCache
    is unhealthy, skipping store operation' (cache_engine.py:417) for every cache operation."""
    text = (_lines("HealthMonitor: System unhealthy, entering degraded mode", "base.py", 282, 1)
            + _lines("LMCache is unhealthy, skipping store operation", "cache_engine.py", 417, 3))
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value == "healthy" and "health monitor" in verdict.headline
    assert "max_local_cpu_size" not in steps_of(verdict) and "ping timeout" in steps_of(verdict)


def test_puts_the_mooncake_store_did_not_take_in_time_are_a_slow_tier(tmp_path):
    """'Timeout during batch_put_from; some decoders may redo prefill.' and 'Timeout when putting key … using
    put_from. Decode instance may redo prefill.' (0.5.6 mooncakestore_connector.py:743/:776; transfer_timeout 1 s)."""
    for msg in ("Timeout during batch_put_from; some decoders may redo prefill.",
                "Timeout when putting key chunk_0a1b using put_from. Decode instance may redo prefill."):
        verdict = verdict_of(tmp_path, _lines(msg, "mooncakestore_connector.py", 743))
        assert verdict.kind.value == "slow" and "Mooncake store" in verdict.headline, msg
        assert "transfer_timeout" in verdict.headline + steps_of(verdict)
