"""The serving layers that run vLLM — Ray Serve LLM, NVIDIA Dynamo — print their own lines beside vLLM's, and their
own guards kill or give up on an engine.  Wordings and formats read in Ray 2.44.1 and 2.60.0 (ray/serve, ray/llm)
and Dynamo 0.4.1 and 1.6.1 (dynamo/vllm, dynamo/common, dynamo/runtime/logging.py)."""

from __future__ import annotations

from engdiag.logs.lines import Shape, pieces
from tests.conftest import analysis_of, steps_of, verdict_of
from tests.test_bulk_scan import _same_everywhere

_REPLICA = "(ServeReplica:llm_app:LLMServer:qwen-32b pid=194388) "
_CONTROLLER = "(ServeController pid=1758) "
_STATS = ("INFO 06-25 04:39:{s:02d} [loggers.py:127] Engine 000: Avg prompt throughput: 27408.8 tokens/s, Avg generation "
          "throughput: 4.9 tokens/s, Running: 49 reqs, Waiting: 951 reqs, GPU KV cache usage: 16.8%, Prefix cache hit "
          "rate: 12.5%\n")
_REPLICA_ID = "Replica(id='rut1591v', deployment='LLMServer:qwen-32b', app='llm_app')"


def _serve(level: str, second: int, message: str, who: str = "controller 1758") -> str:
    """A line of Ray Serve's ServeFormatter: level, asctime, component name and id, '-- ', the message."""
    return f"{_CONTROLLER}{level} 2025-06-25 04:{39 + second // 60:02d}:{second % 60:02d},001 {who} -- {message}\n"


def test_a_ray_serve_replicas_tag_names_its_process_and_keeps_vllms_time():
    """Ray names a replica 'ServeReplica:app:deployment' (ray issue 54830's paste): the colons are part of the tag."""
    (piece,) = pieces(_REPLICA + _STATS.format(s=32).rstrip("\n"), 1)
    assert piece.shape is Shape.VLLM and piece.proc is not None
    assert (piece.proc.name, piece.proc.pid) == ("ServeReplica:llm_app:LLMServer:qwen-32b", 194388)
    assert piece.stamp is not None and piece.stamp.second == 4 * 3600 + 39 * 60 + 32


def test_ray_serves_and_dynamos_own_lines_carry_their_level_and_time():
    """ServeFormatter: 'LEVEL asctime component id -- msg'; Dynamo: Rust tracing's 'RFC 3339  LEVEL target: msg'."""
    (serve,) = pieces(_serve("WARNING", 45, "Replica … failed health check, stopping it.").rstrip("\n"), 1)
    assert serve.level == "WARNING" and serve.msg == "Replica … failed health check, stopping it."
    assert serve.stamp is not None and serve.stamp.calendar == 2025 and serve.stamp.second == 4 * 3600 + 39 * 60 + 45
    (dynamo,) = pieces("2025-09-29T03:16:01.120413Z  WARN dynamo_llm::migration: Cannot recreate stream: Migration "
                       "limit exhausted", 1)
    assert dynamo.level == "WARNING" and dynamo.msg.startswith("Cannot recreate stream")
    assert dynamo.stamp is not None and dynamo.stamp.second == 3 * 3600 + 16 * 60 + 1
    # a vLLM message that holds ' -- ' is still vLLM's line, and kubectl's stamp before one still kubectl's
    (vllm,) = pieces("(APIServer pid=1) INFO 06-25 04:39:32 [api_server.py:1] args -- see below", 1)
    assert vllm.shape is Shape.VLLM and vllm.fileinfo == "api_server.py:1"
    (kube,) = pieces("2025-06-25T04:39:32.1Z (APIServer pid=1) INFO 06-25 04:39:32 [api_server.py:1] ready", 1)
    assert kube.shape is Shape.VLLM and kube.kube_ts is not None


def test_every_backend_reads_the_serving_layers_lines_alike(tmp_path, monkeypatch):
    text = ("".join(_REPLICA + _STATS.format(s=s) for s in range(0, 40, 10))
            + _serve("WARNING", 45, f"Didn't receive health check response for replica {_REPLICA_ID} after 10.0s, "
                                    "marking it unhealthy.")
            + "2025-06-25T04:39:46.120413Z ERROR engine_monitor._check_engine_health: vLLM AsyncLLM health check "
              "failed: \n"
            + _REPLICA + "Traceback (most recent call last):\n" + _REPLICA + "TimeoutError\n"
            + 'E0625 04:39:47.120413 1 backend_model.cc:719] "ERROR: Failed to create instance: Stub process '
              "'vllm_model_0_0' is not healthy.\"\n"
            + "I 06-25 04:39:48 replica_managers.py:1321] Replica 1 is not ready and exceeding initial delay seconds. "
              "Terminating the replica...\n")
    path = tmp_path / "serving.log"
    path.write_text(text * 4)
    for window in (256, 4096, 1 << 16):
        _same_everywhere(path, monkeypatch, window_bytes=window)


def test_a_busy_replica_that_missed_ray_serves_health_check_is_slow_with_ray_serve_llms_knob(tmp_path):
    """ray issue 54070: prefill at 27k tok/s with 951 waiting, 'Didn't receive health check response … after 10.0s'
    three times, then the replica stopped (2.60 deployment_state.py:1704, :1813, :5342)."""
    text = (_REPLICA + _STATS.format(s=32) + _REPLICA + _STATS.format(s=42)
            + _serve("WARNING", 45, f"Didn't receive health check response for replica {_REPLICA_ID} after 10.0s, "
                                    "marking it unhealthy.")
            + _serve("WARNING", 65, f"Replica {_REPLICA_ID} failed health check, stopping it."))
    result = analysis_of(tmp_path, text)
    assert result.verdict.kind.value == "slow" and "Ray Serve health check" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.limit_s == 10.0
    assert "LLMConfig(deployment_config=" in steps_of(result.verdict)


def test_a_health_check_that_failed_on_a_dead_engine_is_the_death_not_a_slow_engine(tmp_path):
    """Ray Serve LLM 2.60 raises from check_health once the engine is dead (vllm_engine.py:907-914; 'Engine health
    check failed in LLMServer.check_health: EngineCore encountered an issue…', llm_server.py:600), and the
    controller then stops the replica: the guard is the death's consequence (ray PR 59924)."""
    text = (_REPLICA + _STATS.format(s=10) + _REPLICA + _STATS.format(s=20)
            + _serve("ERROR", 31, "Engine health check failed in LLMServer.check_health: EngineCore encountered an "
                                  "issue. See stack trace (above) for the root cause.",
                     who="llm_app_LLMServer:qwen-32b rut1591v")
            + _serve("WARNING", 51, f"Replica {_REPLICA_ID} failed health check, stopping it."))
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value != "slow"
    assert "health_check_timeout_s" not in steps_of(verdict)
    assert any("encountered an issue" in e.text for e in verdict.evidence)


def test_dynamos_engine_monitor_is_its_own_guard_and_a_dead_engine_is_a_death(tmp_path):
    """Dynamo 1.6 engine_monitor.py:127: 'vLLM AsyncLLM health check failed: {e}' on EngineDeadError or its own
    timeout (DYN_ENGINE_HEALTH_CHECK_TIMEOUT, 30 s; {e} empty), then it exits the worker (dynamo PR 3278)."""
    stats = ("2025-09-29T03:15:{s:02d}.004512Z  INFO loggers.log: Engine 000: Avg prompt throughput: 1843.2 tokens/s, "
             "Avg generation throughput: 412.5 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 61.2%, "
             "Prefix cache hit rate: 12.0%\n")
    failed = "2025-09-29T03:16:36.842262Z ERROR engine_monitor._check_engine_health: vLLM AsyncLLM health check failed: "
    timed_out = analysis_of(tmp_path, stats.format(s=40) + stats.format(s=50) + failed + "\n")
    assert timed_out.verdict.kind.value == "slow" and "Dynamo engine health check" in timed_out.verdict.headline
    assert timed_out.model.guard is not None and timed_out.model.guard.knob == "DYN_ENGINE_HEALTH_CHECK_TIMEOUT"
    assert "DYN_ENGINE_HEALTH_CHECK_TIMEOUT" in steps_of(timed_out.verdict)
    dead = analysis_of(tmp_path, stats.format(s=40) + failed + "EngineCore encountered an issue. See stack trace "
                                                                  "(above) for the root cause.\n")
    assert dead.verdict.kind.value != "slow"
    assert dead.model.guard is None or dead.model.guard.owner != "Dynamo"


def test_a_worker_the_serving_layer_saw_die_is_a_dead_worker(tmp_path):
    """Ray Serve: 'Actor for Replica(…) crashed, marking it unhealthy immediately.' (2.60 deployment_state.py:1822),
    '… will not be considered for future requests because it has died.' (router.py:1001); Dynamo: 'Cannot
    recreate stream: Migration limit exhausted', 'Stream ended before generation completed'."""
    for line in (_serve("WARNING", 41, f"Actor for {_REPLICA_ID} crashed, marking it unhealthy immediately."),
                 _serve("WARNING", 41, f"{_REPLICA_ID} will not be considered for future requests because it has "
                                       "died.", who="llm_app_OpenAiIngress k9m8n7p6"),
                 ("2025-09-29T03:16:01.120999Z  WARN dynamo_llm::migration: Cannot recreate stream: Migration limit "
                 "exhausted\n"),
                 ("2025-09-29T03:16:01.121400Z ERROR dynamo_llm::http::service::openai: Internal server error: Backend "
                 "error: 500 \"Stream ended before generation completed\"\n")):
        assert verdict_of(tmp_path, line).kind.value == "crashed", line
    # a migration that recreated its stream is no death
    assert verdict_of(tmp_path, "2025-09-29T03:16:01.120413Z  WARN dynamo_llm::migration: Stream disconnected, "
                                "recreating stream\n").kind.value != "crashed"


def test_ray_serves_client_wait_for_a_deployment_is_a_start_up_limit_outside_vllm(tmp_path):
    """'Deployment … did not become HEALTHY after 600s.' / 'Application llm_app did not become RUNNING after 600s.'
    (2.60 client.py:252/:294): the caller's own wait, while Ray Serve LLM's engine may take up to an hour."""
    for line in (("TimeoutError: Deployment 'LLMServer:qwen-7b' in application 'llm_app' did not become HEALTHY after "
                 "600s.\n"), "TimeoutError: Application llm_app did not become RUNNING after 600s.\n"):
        result = analysis_of(tmp_path, line)
        assert result.verdict.kind.value == "slow" and result.model.guard is not None
        assert result.model.guard.owner == "platform" and result.model.guard.limit_s == 600


def test_replicas_ray_cannot_place_for_minutes_are_a_placement_that_will_not_come(tmp_path):
    """'… has 1 replicas that have taken more than 30s to be scheduled. … Resources required for each replica: …'
    every 30 s (2.60 deployment_state.py:5673; ray-llm issue 143): the wait runs from 30 s before the first."""
    warning = ("Deployment 'LLMServer:qwen-32b' in application 'llm_app' has 1 replicas that have taken more than 30s "
               "to be scheduled. This may be due to waiting for the cluster to auto-scale or for a runtime environment "
               "to be installed. Resources required for each replica: {'GPU': 4.0}, total resources available: "
               "{'GPU': 2.0}.")
    result = analysis_of(tmp_path, "".join(_serve("WARNING", s, warning) for s in (0, 30, 60)))
    assert result.verdict.kind.value == "deadlocked" and "placed" in result.verdict.headline
    assert any(w.on == "Ray placement group" and w.seconds == 90 for w in result.model.waits)
    assert verdict_of(tmp_path, _serve("WARNING", 0, warning)).kind.value != "deadlocked"  # 30 s: still placing


def test_ray_serve_llms_own_words_for_a_dead_engine_and_dynamos_canary(tmp_path):
    """Ray Serve LLM 2.60 'Suppressed 3 fatal engine error(s) in the last 60s. Engine is dead, awaiting replica
    restart.' (server_utils.py:96) and 2.44 'Background Engine loop is dead.' (vllm_engine.py:378) are the engine's
    death; Dynamo's 'Health check timeout for {endpoint}' (health_check.rs, 1.6) is its canary's 3 s limit."""
    for line in (_serve("ERROR", 41, "Suppressed 3 fatal engine error(s) in the last 60s. Engine is dead, awaiting "
                                     "replica restart.", who="llm_app_LLMServer:qwen-32b rut1591v"),
                 "RuntimeError: Background Engine loop is dead.\n"):
        assert verdict_of(tmp_path, _REPLICA + _STATS.format(s=30) + line).kind.value not in ("healthy", "slow"), line
    stats = ("2025-07-01T20:30:10.004512Z  INFO loggers.log: Engine 000: Avg prompt throughput: 1843.2 tokens/s, Avg "
             "generation throughput: 412.5 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 61.2%\n")
    canary = analysis_of(tmp_path, stats + "2025-07-01T20:30:41.120413Z  WARN dynamo_runtime::health_check: Health "
                                           "check timeout for dynamo/backend/generate\n")
    assert canary.verdict.kind.value == "slow"
    assert canary.model.guard is not None and (canary.model.guard.limit_s, canary.model.guard.limit_origin) == (3.0,
                                                                                                              "default")
    assert "DYN_HEALTH_CHECK_REQUEST_TIMEOUT (3 s by default)" in steps_of(canary.verdict)


def test_the_production_stack_routers_probe_is_its_own_guard(tmp_path):
    """'{model} at {url} not healthy!' (production-stack service_discovery.py:265): a one-token request with
    --static-backend-health-check-timeout-seconds (10 s); the router's format is '[asctime] LEVEL: msg (file:N:name)'
    (src/vllm_router/log.py build_format)."""
    text = ("(APIServer pid=1) INFO 07-01 20:30:30 [loggers.py:127] Engine 000: Avg prompt throughput: 1843.2 tokens/s, "
            "Avg generation throughput: 412.5 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 61.2%\n"
            "[2025-07-01 20:30:41,120] WARNING: meta-llama/Llama-3.1-8B at http://10.0.0.5:8000 not healthy! "
            "(service_discovery.py:265:vllm_router.service_discovery)\n")
    result = analysis_of(tmp_path, text)
    assert result.verdict.kind.value == "slow" and "production-stack router" in result.verdict.headline
    assert result.model.guard is not None and result.model.guard.limit_s == 10.0
    assert "--static-backend-health-check-timeout-seconds" in steps_of(result.verdict)


def test_tritons_and_skypilots_own_lines_carry_their_level_and_time():
    """Triton prints glog's layout without its bracket (``E0701 20:30:41.120413 1 backend_model.cc:719] "…"``,
    triton common src/logging.cc); SkyPilot vLLM's old layout with the level's first letter (sky_logging.py)."""
    (triton,) = pieces('E0701 20:30:41.120413 1 backend_model.cc:719] "ERROR: Failed to create instance: Stub '
                       "process 'vllm_model_0_0' is not healthy.\"", 1)
    assert triton.shape is Shape.GLOG and triton.level == "ERROR" and triton.fileinfo == "backend_model.cc:719"
    assert triton.stamp is not None and triton.stamp.second == 20 * 3600 + 30 * 60 + 41
    (sky,) = pieces("I 07-01 20:30:41 replica_managers.py:1321] Replica 1 is not ready and exceeding initial delay "
                    "seconds. Terminating the replica...", 1)
    assert sky.shape is Shape.VLLM and sky.level == "INFO" and sky.fileinfo == "replica_managers.py:1321"


def test_a_triton_stub_that_died_while_vllm_loaded_is_a_dead_worker(tmp_path):
    """'Stub process … is not healthy.' only once the stub died or froze (python_backend stub_launcher.cc:861-907),
    inside Triton's 'Failed to create instance' / 'failed to load … version 1: Internal: …' (triton server issues
    7547, 8578): the process running vLLM died during its start-up."""
    text = ("INFO 07-01 20:29:58 [default_loader.py:262] Loading weights took 17.21 seconds\n"
            'E0701 20:30:41.120413 1 backend_model.cc:719] "ERROR: Failed to create instance: Stub process '
            "'vllm_model_0_0' is not healthy.\"\n"
            "E0701 20:30:41.120500 1 model_lifecycle.cc:654] \"failed to load 'vllm_model' version 1: Internal: Stub "
            "process 'vllm_model_0_0' is not healthy.\"\n"
            "error: creating server: Internal - failed to load all models\n")
    verdict = verdict_of(tmp_path, text)
    assert verdict.kind.value == "crashed" and "Stub process" in verdict.evidence[0].text
    # the vLLM backend's own health check on a dead engine (model.py:610)
    dead = verdict_of(tmp_path, "E0701 20:30:41.120413 1 model.py:610] \"[vllm] Engine is not healthy and model will "
                                "be unloaded: EngineDeadError\"\n")
    assert any(e.signal == "engine_dead" for e in dead.evidence)


def test_skyserves_kills_are_its_own_limits(tmp_path):
    """SkyServe's controller (replica_managers.py 0.10.5 :1321 / :1304): the initial delay (1200 s, the limit it
    counts against printed on the way) kills a replica never ready; 180 s of failed probes one that was."""
    within = "I 07-01 20:20:41 replica_managers.py:1329] Replica 1 is not ready but within initial delay seconds " \
             "(640s / 900s). Skipping.\n"
    loading = "Loading safetensors checkpoint shards:  40% Completed | 4/10 [04:00<06:00, 60.00s/it]\n"
    killed = "I 07-01 20:30:41 replica_managers.py:1321] Replica 1 is not ready and exceeding initial delay seconds. " \
             "Terminating the replica...\n"
    result = analysis_of(tmp_path, within + loading + killed)
    assert result.verdict.kind.value == "slow" and "SkyServe initial delay" in result.verdict.headline
    assert result.model.guard is not None and (result.model.guard.limit_s, result.model.guard.limit_origin) == (
        900.0, "printed")
    assert "initial_delay_seconds" in steps_of(result.verdict) and "VLLM_ENGINE_READY_TIMEOUT_S" not in steps_of(
        result.verdict)
    # a probe's own 15 s is no start-up limit, and a replica killed after it served is no slow start-up
    probe = analysis_of(tmp_path, "E 07-01 20:30:41 replica_managers.py:597] Error when probing replica 1 with url "
                                  "http://34.1.2.3:8000: requests.exceptions.ReadTimeout: HTTPConnectionPool(host="
                                  "'34.1.2.3', port=8000): Read timed out. (read timeout=15).\n")
    assert probe.model.guard is not None and probe.model.guard.owner == "SkyServe"
    assert "start-up" not in probe.verdict.headline
    failing = verdict_of(tmp_path, "I 07-01 20:30:41 replica_managers.py:1304] Replica 1 is not ready for too long "
                                   "and exceeding consecutive failure threshold. Terminating the replica...\n")
    assert "start-up" not in failing.headline


def test_runpod_kserve_and_nim_guards_and_deaths(tmp_path):
    """RunPod worker-vllm main.py:71/:82, KServe openai_proxy_model.py:68, NemoClaw issue 3886 ('NIM did not become
    healthy within 300s.')."""
    assert verdict_of(tmp_path, "RuntimeError: vLLM serve exited during startup with code 1\n").kind.value == "crashed"
    nim = analysis_of(tmp_path, "NIM did not become healthy within 300s.\n")
    assert nim.model.guard is not None and nim.model.guard.owner == "platform" and nim.model.guard.limit_s == 300
    kserve = analysis_of(tmp_path, '{"error":{"message":"Timed out when communicating with upstream: ReadTimeout(\'\')",'
                                   '"type":"GatewayTimeout","param":null,"code":504}}\n')
    assert kserve.model.guard is not None and kserve.model.guard.knob == "--predictor_request_timeout_seconds"


def test_a_spot_replica_skyserve_saw_preempted_is_a_stop_from_outside_not_an_engine_fault(tmp_path):
    """'Replica 2 is preempted (status: READY).' (sky/serve/replica_managers.py 0.10.5 :1025): the cloud took the
    machine back; like an operator's stop, unless the engine was already in trouble."""
    stats = ("(APIServer pid=1) INFO 07-01 20:30:30 [loggers.py:127] Engine 000: Avg prompt throughput: 1843.2 tokens/s, "
             "Avg generation throughput: 412.5 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 61.2%\n")
    verdict = verdict_of(tmp_path, stats + "I 07-01 20:30:41 replica_managers.py:1024] Replica 2 is preempted (status: "
                                           "READY).\n")
    assert verdict.kind.value == "healthy" and "spot machine" in verdict.headline
    assert "sky serve status" in (verdict.undecided or "")


def test_a_named_process_that_died_is_named_in_the_headline(tmp_path):
    """A Ray Serve replica, Triton's stub or RunPod's vllm serve: the crash names what died."""
    verdict = verdict_of(tmp_path, "RuntimeError: vLLM serve exited during startup with code 1\n")
    assert verdict.kind.value == "crashed" and "vllm serve (RunPod's worker-vllm) died" in verdict.headline


def test_ray_serves_request_timeout_is_its_own_limit(tmp_path):
    """'Request timed out after 300.0s.' (2.44 proxy.py:1028) / 'Request {id} timed out after {t}s.' (2.60
    replica.py:3365): Ray Serve's http_options.request_timeout_s, not a client's nor vLLM's; Mooncake's 'Request %s
    timed out after %d seconds without being sent' is not it."""
    for line in (("(ProxyActor pid=4230) WARNING 2025-06-25 04:39:45,001 proxy 10.0.0.12 -- Request timed out after "
                 "300.0s.\n"), _serve("WARNING", 45, "Request 7f3a2c9e timed out after 300.0s.",
                                     who="llm_app_LLMServer:qwen-32b rut1591v")):
        result = analysis_of(tmp_path, _REPLICA + _STATS.format(s=30) + line)
        assert result.verdict.kind.value == "slow" and "Ray Serve request timeout" in result.verdict.headline
        assert result.model.guard is not None and result.model.guard.limit_s == 300.0
        assert "request_timeout_s" in steps_of(result.verdict)
    mooncake = analysis_of(tmp_path, "(EngineCore_DP0 pid=2) WARNING 07-01 20:30:01 [mooncake_connector.py:754] "
                                     "Request cmpl-1 timed out after 480 seconds without being sent. Freeing its "
                                     "blocks on the producer side.\n")
    assert mooncake.model.guard is None or mooncake.model.guard.owner != "Ray Serve"


def test_a_probe_refused_after_the_server_served_is_a_server_that_exited(tmp_path):
    """A hung or busy server's socket still accepts; a refused probe after serving finds no listener at all
    (SkyServe's 'Error when probing replica … Connection refused', replica_managers.py:597). Before the server
    served, the same refusal is a server still starting."""
    probe = ("E 07-01 20:30:41 replica_managers.py:597] Error when probing replica 1 with url http://34.1.2.3:8000: "
             "requests.exceptions.ConnectionError: HTTPConnectionPool(host='34.1.2.3', port=8000): Max retries "
             "exceeded with url: /v1/models (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object>: "
             "Failed to establish a new connection: [Errno 111] Connection refused'))\n")
    stats = ("(APIServer pid=1) INFO 07-01 20:30:30 [loggers.py:127] Engine 000: Avg prompt throughput: 1843.2 tokens/s, "
             "Avg generation throughput: 412.5 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 61.2%\n")
    assert verdict_of(tmp_path, stats + probe).kind.value == "crashed"
    assert verdict_of(tmp_path, probe).kind.value == "slow"


def test_a_launchers_wait_in_lower_case_is_still_read(tmp_path):
    """' timed out waiting for ' once hid the launcher-wait rule's 'imed out waiting for ' (the literal search
    finds the leftmost literal): a launcher's 'timed out waiting for the vLLM server after 600s' is its limit."""
    result = analysis_of(tmp_path, "ERROR: timed out waiting for the vLLM server after 600s\n")
    assert result.model.guard is not None and result.model.guard.owner == "platform" and result.model.guard.limit_s == 600


# llm-d's Go components (routing sidecar, endpoint picker) log with zap's production JSON encoder
# (pkg/common/observability/logging/logger.go): level, ts (epoch seconds), caller, msg, the call's fields
_ZAP_REFUSED = ('{"level": "error", "ts": 1751401841.120413, "caller": "proxy/proxy_helpers.go:144", "msg": "failed to '
                'connect to vLLM decoder", "decoderURL": "http://localhost:8200", "error": "dial tcp [::1]:8200: connect: '
                'connection refused"}')


def test_a_zap_json_line_carries_its_level_time_caller_and_fields():
    (piece,) = pieces(_ZAP_REFUSED, 1)
    assert piece.shape is Shape.VLLM and piece.level == "ERROR" and piece.fileinfo == "proxy/proxy_helpers.go:144"
    assert piece.stamp is not None and piece.stamp.calendar == 2025 and piece.stamp.second == 20 * 3600 + 30 * 60 + 41
    assert piece.msg.startswith("failed to connect to vLLM decoder {") and "connection refused" in piece.msg
    # zap's RFC 3339 time encoding (--zap-time-encoding=rfc3339), and a stack trace as lines of the same record
    (iso, *trace) = pieces('{"level":"info","ts":"2025-07-01T20:30:41.120Z","msg":"ready","stacktrace":"main.run\\n\\t'
                          'cmd/epp/main.go:42"}', 1)
    assert iso.stamp is not None and iso.stamp.second == 20 * 3600 + 30 * 60 + 41 and iso.level == "INFO"
    assert iso.msg == "ready" and [t.msg.strip() for t in trace] == ["main.run", "cmd/epp/main.go:42"]


def test_llm_ds_sidecar_refused_by_vllm_is_an_exit_after_serving_and_undecided_alone(tmp_path):
    alone = verdict_of(tmp_path, _ZAP_REFUSED + "\n")
    assert alone.kind.value == "unknown" and "nothing listened on vLLM's port" in alone.headline
    assert "start-up lines" in (alone.undecided or "")
    stats = "".join("(APIServer pid=1) " + _STATS.format(s=s).replace("06-25 04:39", "07-01 20:30") for s in (10, 20))
    served = verdict_of(tmp_path, stats + _ZAP_REFUSED + "\n")
    assert served.kind.value == "crashed" and "llm-d routing sidecar was refused after the server had served" in \
        served.headline


def test_every_backend_reads_zap_lines_alike(tmp_path, monkeypatch):
    stats = "".join("(APIServer pid=1) " + _STATS.format(s=s).replace("06-25 04:39", "07-01 20:30") for s in (10, 20))
    path = tmp_path / "llmd.log"
    path.write_text((stats + _ZAP_REFUSED + "\n" + "2025-07-01T20:30:42.1Z " + _ZAP_REFUSED + "\n") * 4)
    _same_everywhere(path, monkeypatch, window_bytes=700)


_LEASE_LOST = ("2025-06-25T04:39:41.120413Z ERROR dynamo_runtime::transports::etcd::lease: Unable to maintain lease. "
               "Check etcd server status error=keep alive response received: lease expired or revoked\n")


def test_a_dynamo_worker_that_lost_its_etcd_lease_was_stopped_from_outside(tmp_path):
    """Dynamo cancels its runtime when the lease's keep-alive fails (lease.rs create_lease): the worker stops."""
    stats = "".join(_REPLICA + _STATS.format(s=s) for s in (10, 20, 30))
    verdict = verdict_of(tmp_path, stats + _LEASE_LOST + _REPLICA + "INFO 06-25 04:39:42 [launcher.py:80] Shutting "
                                   "down FastAPI HTTP server.\n")
    assert verdict.kind.value == "healthy" and "lost its etcd lease and shut the worker down" in verdict.headline
    assert "etcdctl endpoint health" in steps_of(verdict)
    # Dynamo 0.4.1 words the keep-alive's failure first: the same stop
    old = verdict_of(tmp_path, stats + "2025-06-25T04:39:41.120413Z ERROR dynamo_runtime::transports::etcd::lease: "
                                       "keep alive failed: keep alive response received: lease expired or revoked\n")
    assert "lost its etcd lease" in old.headline


def test_a_lease_lost_after_the_engine_failed_is_not_the_story(tmp_path):
    stats = "".join(_REPLICA + _STATS.format(s=s) for s in (10, 20))
    fault = (_REPLICA + "ERROR 06-25 04:39:35 [core.py:1101] EngineCore encountered a fatal error.\n" + _REPLICA
             + "ERROR 06-25 04:39:35 [core.py:1101] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
               "2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.12 GiB is free.\n")
    verdict = verdict_of(tmp_path, stats + fault + _LEASE_LOST)
    assert verdict.kind.value != "healthy", verdict.headline


def _triton(second: int, message: str, level: str = "I") -> str:
    """Triton's glog line without its bracket (core src/server.cc), message quoted."""
    return f'{level}0625 04:{39 + second // 60:02d}:{second % 60:02d}.120413 1 server.cc:328] "{message}"\n'


def test_tritons_stop_cut_off_by_its_exit_timeout_says_what_it_cut(tmp_path):
    """InferenceServer::Stop counts down --exit-timeout-secs once a second; at 0, 'Exit timeout expired'."""
    stats = "".join(_STATS.format(s=s) for s in (10, 20))
    stop = (_triton(30, "Waiting for in-flight requests to complete.")
            + "".join(_triton(31 + i, f"Timeout {30 - i}: Found 1 model versions that have in-flight inferences")
                      for i in range(3))
            + "error: exiting: Internal - Exit timeout expired. Exiting immediately.\n")
    verdict = verdict_of(tmp_path, stats + stop)
    assert verdict.kind.value == "healthy" and "Triton was stopped" in verdict.headline
    assert "1 model version(s) still running inferences — those requests were cut off" in verdict.headline
    assert "--exit-timeout-secs" in steps_of(verdict)
    unloading = stop.replace("Found 1 model versions that have in-flight inferences",
                             "Found 1 live models and 0 in-flight non-inference requests")
    assert "1 model(s) still unloading" in verdict_of(tmp_path, stats + unloading).headline
    # the expiry alone still names the stop and its guard; a stop that finished in time names no timeout
    alone = verdict_of(tmp_path, stats + "error: exiting: Internal - Exit timeout expired. Exiting immediately.\n")
    assert "exit timeout (--exit-timeout-secs) ran out" in alone.headline
    clean = verdict_of(tmp_path, stats + _triton(30, "Waiting for in-flight requests to complete."))
    assert clean.kind.value == "healthy" and "exit timeout" not in clean.headline


def test_vllms_own_wait_before_sleeping_is_no_stop(tmp_path):
    """vLLM 0.34's sleep mode logs 'Waiting for in-flight requests to complete before sleeping...' (core.py:1139)."""
    sleep = "(EngineCore_DP0 pid=7) INFO 06-25 04:39:30 [core.py:1139] Waiting for in-flight requests to complete " \
            "before sleeping...\n"
    assert "stopped" not in verdict_of(tmp_path, _STATS.format(s=10) + sleep).headline


def test_ray_serves_replica_checks_that_failed_are_its_guards_and_a_proxys_is_not(tmp_path):
    stats = "".join(_REPLICA + _STATS.format(s=s) for s in (10, 20, 30))
    lines = {
        _serve("WARNING", 41, f"Replica {_REPLICA_ID} failed the health check 3 times in a row, marking it unhealthy."):
            "Ray Serve health check",
        _REPLICA.rstrip() + " ERROR 2025-06-25 04:39:41,120 llm_app_LLMServer:qwen-32b rut1591v -- Healthcheck failed. "
        "The replica will be restarted\n": "Ray Serve health check",
        _REPLICA + "Traceback (most recent call last):\n" + _REPLICA + "RuntimeError: User event loop unresponsive: "
        "probe failed 3 consecutive times (limit 3).\n": "Ray Serve user event-loop probe",
    }
    for line, guard in lines.items():
        analysis = analysis_of(tmp_path, stats + line)
        assert analysis.model.guard is not None and analysis.model.guard.name == guard, line
        assert analysis.verdict.kind.value == "slow", analysis.verdict.headline  # serving advanced up to it
    proxy = _serve("WARNING", 41, "Proxy SERVE_PROXY_ACTOR-2f3e failed the health check 3 times in a row, marking it "
                                  "unhealthy.")
    assert analysis_of(tmp_path, stats + proxy).model.guard is None


def test_a_zap_lines_request_fields_are_user_data_never_signals(tmp_path):
    """A debug-level line with the client's request in it: its words are not the engine's."""
    line = ('{"level": "debug", "ts": 1751401841.1, "caller": "handlers/request.go:90", "msg": "incoming request", '
            '"requestBody": "CUDA out of memory. Tried to allocate 2.00 GiB", "prompt": "NCCL watchdog thread '
            'terminated", "body": {"stop": ["RuntimeError: CUDA error"]}, "model": "qwen"}')
    (piece,) = pieces(line, 1)
    assert piece.msg == 'incoming request {"model": "qwen"}'
    assert verdict_of(tmp_path, line + "\n").kind.value == "unknown"


def test_a_ray_serve_llm_dp_replica_that_never_got_its_gangs_master_address(tmp_path):
    """Ray 2.60 dp_server.py:93: a replica polls for its gang's rank-0 master address and gives up after 600 s."""
    text = (_REPLICA + "Traceback (most recent call last):\n" + _REPLICA + "  File \"/usr/local/lib/python3.11/site-"
            "packages/ray/llm/_internal/serve/serving_patterns/data_parallel/dp_server.py\", line 93, in get\n"
            + _REPLICA + "    raise TimeoutError(\n" + _REPLICA + "TimeoutError: Timed out waiting for DP master info for "
            "gang 3 after 600s.\n")
    analysis = analysis_of(tmp_path, text)
    verdict = analysis.verdict
    assert verdict.kind.value == "deadlocked" and verdict.confidence < 0.85, verdict.headline
    assert "gang's rank-0 replica" in verdict.headline and "still loading (slow)" in (verdict.undecided or "")
    wait = analysis.model.waits[0]
    assert (wait.on, wait.seconds) == ("the rank-0 replica of its gang 3", 600.0)
    assert "serve status" in steps_of(verdict) and "MASTER_ADDR" not in steps_of(verdict)
