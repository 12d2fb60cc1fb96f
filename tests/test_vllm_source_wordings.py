"""Timeout and gave-up-waiting messages read in vLLM's own source (0.9.2, 0.11, 0.14, 0.34), each on both sides of
its line.  No corpus incident carries them yet: the wordings are the source's, the readings issue #10's model."""

from __future__ import annotations

from tests.conftest import analysis_of, steps_of, verdict_of

_P = "(Worker_TP0 pid=4811) WARNING 07-01 20:30:01 [mooncake_connector.py:{n}] {msg}\n"


def test_upstream_mooncake_freeing_unsent_blocks_is_the_kv_hold_firing(tmp_path):
    short = _P.format(n=2564, msg="Request cmpl-7f-0 timed out after 30 seconds without being sent. Freeing its "
                                  "blocks on the producer side.")
    verdict = verdict_of(tmp_path, short)
    assert verdict.kind.value == "slow" and "within 30 s" in verdict.headline
    # at its 480 s default the same line cannot tell a late decode side from a gone one
    default = verdict_of(tmp_path, short.replace("after 30 seconds", "after 480 seconds"))
    assert default.kind.value == "unknown" and "decode instance" in (default.undecided or "")


def test_a_mooncake_lease_that_expired_is_slow_only_when_the_decode_side_read_late(tmp_path):
    expired = _P.format(n=2571, msg="KV lease of request cmpl-7f-0 expired before the decoder pulled it. Freeing its "
                                    "blocks on the producer side.")
    alone = verdict_of(tmp_path, expired)
    assert alone.kind.value == "unknown"
    late = verdict_of(tmp_path, expired + _P.format(n=1854, msg="Requests cmpl-7f-0 were pulled after their KV expired "
                                                                "on P side."))
    assert late.kind.value == "slow"
    assert any(s.command and '"MooncakeConnector", "kv_role": "kv_producer"' in s.command for s in late.next_steps)


def test_a_nixl_lease_released_alone_is_no_healthy_log(tmp_path):
    verdict = verdict_of(tmp_path, "(Worker_TP0 pid=4811) WARNING 07-01 20:30:01 [base_worker.py:3439] Releasing expired "
                                 "KV blocks for request cmpl-1 which were retrieved by 0 remote worker(s) before lease "
                                 "expired.\n")
    assert verdict.kind.value == "unknown" and "freed KV blocks" in verdict.headline


def test_the_barrier_timeout_raised_with_its_number_apart_is_read_with_its_limit(tmp_path):
    """0.9.2–0.11 raised ("Barrier timed out after %f seconds", timeout): the log shows the tuple."""
    tail = ('Traceback (most recent call last):\n  File "/x/vllm/distributed/utils.py", line 281, in barrier\n'
            "RuntimeError: {msg}\n")
    result = analysis_of(tmp_path, tail.format(msg="('Barrier timed out after %f seconds', 300.0)"))
    assert result.verdict.kind.value == "deadlocked"
    assert [w.seconds for w in result.model.waits] == [300.0]
    assert verdict_of(tmp_path, tail.format(msg="Barrier timed out after 300.00 seconds")).kind.value == "deadlocked"


def test_new_engines_of_an_elastic_scale_up_are_read_as_engines_starting(tmp_path):
    tail = ('Traceback (most recent call last):\n  File "/x/vllm/v1/engine/core_client.py", line 1349, in {f}\n'
            "TimeoutError: Timed out waiting for {who} to send initial message on input socket.\n")
    scale_up = verdict_of(tmp_path, tail.format(f="_scale_up_elastic_ep", who="new engines"))
    launch = verdict_of(tmp_path, tail.format(f="wait_for_engine_startup", who="engines"))
    assert scale_up.kind == launch.kind and scale_up.kind.value != "unknown"


def test_the_engine_core_waiting_on_the_front_end_is_a_party_that_never_answered(tmp_path):
    line = ("(EngineCore_DP1 pid=4750) RuntimeError: Did not receive response from front-end process within 5 "
            "minutes\n")
    verdict = verdict_of(tmp_path, line)
    assert verdict.kind.value == "deadlocked" and "front-end" in verdict.headline
    assert "still starting" not in verdict.headline  # not the API server giving up on a slow engine
    assert any(s.command and s.command.startswith('nc -vz "${DATA_PARALLEL_ADDRESS:?') for s in verdict.next_steps)


def test_only_vllm_omnis_orchestrator_is_read_as_a_start_up_guard_outside_the_engine(tmp_path):
    """'Orchestrator did not become ready within 600s' is vllm-omni's own --init-timeout (0.30
    omni_engine_base.py:528, whose warning before it names --init-timeout and --stage-init-timeout), not a platform's."""
    omni = analysis_of(tmp_path, "(APIServer pid=70993) ERROR 05-29 08:37:38 [async_omni_engine.py:1148] TimeoutError: "
                               "Orchestrator did not become ready within 600s\n")
    assert omni.model.guard is not None and omni.model.guard.name == "vllm-omni orchestrator start-up timeout"
    assert omni.model.guard.owner == "vllm-omni" and omni.model.guard.limit_s == 600
    assert omni.verdict.kind.value == "slow" and "--init-timeout" in steps_of(omni.verdict)
    assert "platform" not in omni.verdict.headline
    # vLLM 0.34's own helpers waiting on a daemon they started: no launcher's limit (it read "allowed 30 s")
    helper = analysis_of(tmp_path, "(Worker_TP0 pid=4811) ERROR 07-01 20:30:01 [ipc_loader.py:446] "
                                 "WeightCacheUnavailableError: Weight cache daemon did not become ready within 30s\n")
    assert helper.model.guard is None and "start-up" not in helper.verdict.headline


def test_a_nixl_hold_at_its_old_default_is_no_shortened_guard(tmp_path):
    """VLLM_NIXL_ABORT_REQUEST_TIMEOUT was 120 s in 0.11 (480 s from 0.14): its seconds alone say nothing shortened."""
    verdict = verdict_of(tmp_path, "(Worker_TP0 pid=4811) WARNING 07-01 20:30:01 [nixl_connector.py:1916] Releasing "
                                 "expired KV blocks for request cmpl-1 which were retrieved by 0 decode worker(s) "
                                 "within 120 seconds.\n")
    assert verdict.kind.value == "unknown" and "within 120 s" in verdict.headline


_TEMPLATE_WARNING = ("(APIServer pid=1) WARNING 12-01 10:00:00 [hf.py:1080] Chat template render timed out — executor "
                     "pool replaced (1 worker(s)). The stuck thread may continue consuming CPU until the process "
                     "exits.\n")
_SERVING = ("(APIServer pid=1) INFO 12-01 10:00:08 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 38.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.3%, "
            "Prefix cache hit rate: 0.0%\n")


def test_a_chat_template_that_timed_out_rendering_refused_one_request_and_not_the_engine(tmp_path):
    """0.34's renderers/hf.py: VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT (30 s) guards one request in the API server."""
    warned = verdict_of(tmp_path, _TEMPLATE_WARNING + _SERVING)
    assert warned.kind.value == "healthy" and "chat template" in warned.headline
    assert "VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT" in warned.headline
    raised = verdict_of(tmp_path, "TimeoutError: Chat template rendering timed out after 45.0s. This may indicate a "
                                  "malicious or excessively complex template. Adjust VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT "
                                  "to override.\n")
    assert raised.kind.value == "healthy" and "after 45 s" in raised.headline  # without it: an unexplained raise
    # the engine failing too is that failure's verdict, not a refused request's
    dead = verdict_of(tmp_path, _TEMPLATE_WARNING + "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:09 [core.py:710] "
                                "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert dead.kind.value == "crashed"


def test_an_elastic_ep_scale_that_could_not_drain_is_refused_not_an_engine_fault(tmp_path):
    """'TimeoutError: Timeout reached after 120 seconds waiting for requests to drain.' (0.34 async_llm.py:1295;
    drain_timeout, 120 s from api_router.py) and the 408 the router answers with."""
    for line in (("(APIServer pid=1) ERROR 12-01 10:00:00 [async_llm.py:1295] TimeoutError: Timeout reached after 120 "
                 "seconds waiting for requests to drain.\n"),
                 ("(APIServer pid=1) INFO 12-01 10:00:00 [api_server.py:1] Scale failed due to request drain timeout "
                 "after 120 seconds\n")):
        verdict = verdict_of(tmp_path, _SERVING + line)
        assert verdict.kind.value == "healthy" and "elastic-EP scale was refused after 120 s" in verdict.headline
        assert "drain_timeout" in steps_of(verdict)
    # with the engine dead as well, the refusal is not the story
    fatal = "(EngineCore_DP0 pid=2) ERROR 12-01 10:00:01 [core.py:1] EngineCore encountered a fatal error.\n"
    assert verdict_of(tmp_path, _SERVING + line + fatal).kind.value != "healthy"


def test_a_recovery_round_short_of_engines_is_a_rendezvous_that_cannot_complete(tmp_path):
    """0.34 fault tolerance: "[FT] Not all engines joined recovery round '7' within 10s; the same request_id must be
    sent to every engine." (engine_core_sentinel.py:372)."""
    result = analysis_of(tmp_path, "(EngineCore_DP1 pid=3) RuntimeError: [FT] Not all engines joined recovery round "
                                   "'7' within 10s; the same request_id must be sent to every engine.\n")
    assert result.verdict.kind.value == "deadlocked" and "data-parallel engines" in result.verdict.headline
    assert any(w.on == "the other data-parallel engines" and w.satisfiable is False for w in result.model.waits)
    assert "same request_id" in steps_of(result.verdict)


def test_a_moriio_rdma_read_whose_completion_never_came_is_a_wait_on_the_prefill_side(tmp_path):
    """0.34 moriio_connector.py:3026: 'RDMA read TIMED OUT for req %s after %.1fs
    (kv_connector_extra_config.recv_abort_timeout=%.0f)', aborted lest the decode worker hang on it for ever."""
    result = analysis_of(tmp_path, "(Worker_TP0 pid=4811) ERROR 07-01 20:30:01 [moriio_connector.py:3025] RDMA read "
                                   "TIMED OUT for req cmpl-1 after 120.4s (kv_connector_extra_config.recv_abort_timeout"
                                   "=120)\n")
    assert result.verdict.kind.value == "deadlocked" and "MoRIIO" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.limit_s == 120
    assert result.model.guard.knob == "kv_connector_extra_config.recv_abort_timeout"
    assert "recv_abort_timeout" in steps_of(result.verdict)


def test_a_lost_kv_transfer_peer_is_the_other_instance_not_a_rank_of_a_collective(tmp_path):
    """NIXL's remote disconnect and UCX's endpoint timeout are the prefill/decode link
    (nixl-pd-stale-endpoint-after-decode-restart-kv-stall): the wait is on the other instance, and what never
    completes is the transfer and its request, not a collective; NCCL's lost peer stays a rank's."""
    result = analysis_of(tmp_path, "(Worker_TP0 pid=1) ERROR 05-01 15:00:24 [nixl_connector.py:1] "
                                   "nixl._bindings.nixlRemoteDisconnectError: NIXL_ERR_REMOTE_DISCONNECT\n")
    assert result.verdict.kind.value == "deadlocked"
    assert "the other instance" in result.verdict.headline and "collective" not in result.verdict.headline
    assert any(w.on == "the other instance" and w.via == "KV transfer" for w in result.model.waits)
    nccl = analysis_of(tmp_path, "(Worker_TP1 pid=2) ERROR 05-01 15:00:24 [x.py:1] RuntimeError: NCCL error: remote "
                                 "process exited or there was a network error, NCCL version 2.21.5 ncclRemoteError\n")
    assert all(w.via != "KV transfer" for w in nccl.model.waits)
