"""Guards outside vLLM and stops from outside: Kubernetes probes, a platform's or launcher's start-up limit
(and the limit it announced), Ray Serve's replica health check, Ray compiled graphs' configured timeout,
a placement group too small for the engine, an operator's SIGTERM or shutdown, and the shutdown lines
that follow one.

A guard outside vLLM kills slow engines as often as vLLM's own; an operator's stop before any fault is
healthy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import Failure, Payload, Phase, Rendezvous, Signal, Timeout
from engdiag.logs.patterns.base import Rule, _c, _const, _f
from engdiag.logs.patterns.lmcache import LMCACHE_AUTOSTART

DYNAMO_HEALTH = "dynamo-health"
"""NVIDIA Dynamo's check of vLLM's engine from its worker process (DYN_ENGINE_HEALTH_CHECK_TIMEOUT, 30 s)."""
DYNAMO_CANARY = "dynamo-canary"
"""Dynamo's runtime probing an idle endpoint with a request (DYN_HEALTH_CHECK_REQUEST_TIMEOUT, 3 s)."""
ROUTER_HEALTH = "router-health"
"""vLLM production-stack's router probing a backend (--static-backend-health-check-timeout-seconds, 10 s)."""
RAY_SERVE_REQUEST = "ray-serve-request"
"""Ray Serve's end-to-end limit on one request (http_options.request_timeout_s)."""
PREEMPTED = "spot preemption"
"""The cloud taking a spot machine back: a stop from outside, like an operator's."""
DYNAMO_LEASE = "Dynamo etcd lease lost"
"""Dynamo's runtime losing its etcd lease and cancelling itself: the worker stops from outside the engine."""
TRITON_STOP = "Triton stopping"
"""Triton's InferenceServer::Stop: a signal (or a failed start) stopping the server and its models."""
TRITON_EXIT = "triton-exit"
"""Triton's wait for in-flight inferences and model unloads at a stop (--exit-timeout-secs, 30 s)."""
TRITON_COUNTDOWN = _c(r"Timeout (?P<left>\d+): Found (?P<n>\d+) (?:(?P<inflight>model versions that have in-flight "
                      r"inferences)|live models and (?P<requests>\d+) in-flight non-inference requests)")
"""Triton's once-a-second line while it stops: inferences still running, then models still unloading."""
SKY_INITIAL = "skyserve-initial-delay"
"""SkyServe's wait for a new replica's first ready probe (service.readiness_probe.initial_delay_seconds, 1200 s)."""
SKY_PROBE = "skyserve-probe"
"""SkyServe's readiness probe (timeout_seconds 15 s; 180 s of failures kills a replica that was ready)."""
KSERVE_UPSTREAM = "kserve-upstream"
"""KServe's proxy waiting on its predictor (--predictor_request_timeout_seconds)."""
LLMD_DECODER = "llmd-decoder"
"""llm-d's routing sidecar proxying a request to the vLLM server beside it (a refused connection fails at once)."""
RAY_USER_LOOP = "ray-serve-user-loop"
"""Ray Serve 2.60's probe of a replica's own event loop (RAY_SERVE_USER_HEALTH_CHECK_PROBE_TIMEOUT_S 300 s, 3 fails)."""
OMNI_ORCHESTRATOR = "omni-orchestrator"
"""vllm-omni's orchestrator waiting for its stages to start (--init-timeout, 600 s; each stage's --stage-init-timeout)."""
OMNI_WAITS_ON = "vllm-omni stages' start-up (a warning: it waits on)"
"""The call of 0.14's start-up warning, which gives up on nothing."""

_SERVER = r"(?:vLLM|vllm|VLLM|NIM|[Ss]erver|[Ss]ervice|[Ee]ndpoint|[Mm]odel|[Ii]nstance|[Rr]eplica|[Cc]ontainer|[Pp]od|[Dd]eployment|[Ww]orker)"
"""What a launcher says did not start: vLLM, a NIM (NemoClaw issue 3886: "NIM did not become healthy within 300s."),
the server, a replica, a container, a pod."""
_LIMIT = r"(?:(?P<n>\d+(?:\.\d+)?) ?(?P<u>ms|s|secs?|seconds?|m|mins?|minutes?)\b|(?:the )?timeout|expected time)"
_LAUNCHER_DEADLINE = _c(
    _SERVER + r"\b[^\n]{0,30}?(?:failed to|did not|didn't|could not|couldn't|not) (?:start|become ready|become healthy"
    r"|be ready|come up)(?: up)? within " + _LIMIT
)
_LAUNCHER_WAIT = _c(
    r"[Tt]imed out waiting for (?:the )?(?:vLLM|vllm|VLLM|(?:(?:inference|model|LLM|API|OpenAI|openai) )?"
    r"(?:[Ss]erver|[Ss]ervice|[Ee]ndpoint))\b(?P<rest>[^\n]{0,80})"
)
_AFTER = re.compile(r"after (?P<n>\d+(?:\.\d+)?) ?(?P<u>ms|s|secs?|seconds?|m|mins?|minutes?)\b")
_UNIT_S = {"ms": 0.001, "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0}


def _limit(found: re.Match[str] | None) -> float | None:
    if found is None or not found["n"]:
        return None
    return float(found["n"]) * _UNIT_S.get(found["u"], 1.0)


def _deadline_within(match: re.Match[str], text: str) -> Iterable[Payload]:
    if "LMCache MP server" in text:
        # LMCache's own wait for the MP server vLLM started for it (0.5.6 mp_server_launcher.py:473, "LMCache MP
        # server did not become healthy within %ss. server_url=…"): its limit, not a platform's
        yield Timeout(call="LMCache MP server start-up", limit_s=_limit(match), guard=LMCACHE_AUTOSTART)
        return
    yield Timeout(call="server start-up", limit_s=_limit(match), guard="platform")


def _deadline_waited(match: re.Match[str], text: str) -> Iterable[Payload]:
    yield Timeout(call="server start-up", limit_s=_limit(_AFTER.search(match["rest"])), guard="platform")


_CLIENT_TIMEOUT = _c(
    r"(?:openai\.)?APITimeoutError|httpx\.(?:ReadTimeout|TimeoutException)|SocketTimeoutError: Timeout on reading"
    r"|requests\.exceptions\.ReadTimeout|litellm\.(?:exceptions\.)?Timeout\b"
)
_READ_LIMIT = re.compile(r"\(read timeout=(?P<s>\d+(?:\.\d+)?)\)")
_SOMEONE_ELSES = re.compile(r"huggingface|hf\.co\b|hf-mirror|modelscope|vllm/multimodal|fetch_image|image_url")
"""vLLM as the client: downloading a model, fetching a request's image."""


def _client_timeout(match: re.Match[str], text: str) -> Iterable[Payload]:
    if _SOMEONE_ELSES.search(text):
        return
    limit = _READ_LIMIT.search(text)
    if "Error when probing replica" in text:  # SkyServe's readiness probe (replica_managers.py:597), not a client
        yield Timeout(call="readiness probe", limit_s=float(limit["s"]) if limit else None, guard=SKY_PROBE)
        return
    yield Timeout(call="request", limit_s=float(limit["s"]) if limit else None, guard="client")


GUARDS: tuple[Rule, ...] = (
    # guards outside vLLM ---------------------------------------------------------------
    Rule(
        Signal.EXTERNAL_GUARD,
        "probe failed",
        _c(r"(?P<k>Liveness|Startup) probe failed"),
        lambda m, t: [Timeout(call=f"{m['k'].lower()} probe", guard="k8s-probe")],
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "probe, will be restarted",
        _c(r"failed (?P<k>liveness|startup) probe, will be restarted"),
        lambda m, t: [Timeout(call=f"{m['k']} probe", guard="k8s-probe")],
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "within timeout",
        _c(r"(?:failed to (?:start|become ready)|(?:was )?not (?:ready|healthy)) within (?:the )?timeout"),
        _const(Timeout(call="server start-up", guard="platform")),
    ),
    # Any launcher polling the server until its own deadline, in the words launchers use (shell and Python
    # wrappers on GitHub: "vLLM server failed to start within 600s", "Server did not start within 5 minutes",
    # "Timed out waiting for vLLM server to become ready", "Timed out waiting for vLLM after 600s: ...").
    # The deadline is theirs, not vLLM's: what the engine was doing decides (analysis/external_guards.py).
    Rule(Signal.EXTERNAL_GUARD, " start within ", _LAUNCHER_DEADLINE, _deadline_within),
    Rule(Signal.EXTERNAL_GUARD, " ready within ", _LAUNCHER_DEADLINE, _deadline_within),
    # an eval harness's health wait (tt-tensor-cache-generation-exceeds-1200s-health-wait: "Service did not
    # become healthy within 1200.0s" while the engine core was still building its tensor cache)
    Rule(Signal.EXTERNAL_GUARD, " healthy within ", _LAUNCHER_DEADLINE, _deadline_within),
    Rule(Signal.EXTERNAL_GUARD, "imed out waiting for ", _LAUNCHER_WAIT, _deadline_waited),
    # vLLM's own test harness (tests/utils.py RemoteOpenAIServer._wait_for_server): "Server failed to start in
    # time." after its max_wait_seconds (ci-tp2-pp2-eager-h20-server-starts-after-480s-test-deadline)
    Rule(
        Signal.EXTERNAL_GUARD,
        "failed to start in time",
        _c(r"failed to start in time"),
        _const(Timeout(call="server start-up", guard="platform")),
    ),
    # vllm-omni's orchestrator around its stages' start-up (engine/async_omni_engine.py): "TimeoutError:
    # Orchestrator did not become ready within 600s" (omni-nextstep-offload-init-exceeds-600s-timeout-ignored,
    # omni-hf-read-timeouts-orchestrator-600s-ci), the bare TimeoutError of
    # ``startup_future.result(timeout=startup_timeout)`` (omni-qwen3-omni-perf-ci-orchestrator-startup-timeout),
    # and the older "[Orchestrator] Initialization timeout: 0/1 stages ready" (omni.py;
    # omni-diffusion-stage-init-timeout-during-hf-download).  Each stage was still starting.
    # (vLLM 0.34's own "Weight cache daemon …" and "Mooncake sender listener did not become ready within …" are its
    # helpers', not a platform's start-up guard)
    Rule(
        Signal.EXTERNAL_GUARD,
        "Orchestrator did not become ready within",
        _c(r"Orchestrator did not become ready within (?P<s>\d+(?:\.\d+)?) ?s"),
        lambda m, t: [Timeout(call="server start-up", limit_s=_f(m["s"]), guard=OMNI_ORCHESTRATOR)],
    ),
    # 0.30's warning just before that raise names the knobs (omni_engine_base.py:520): "[OmniEngine] Orchestrator
    # startup timed out after %ss. … may need larger --init-timeout and --stage-init-timeout values."
    Rule(
        Signal.EXTERNAL_GUARD,
        "Orchestrator startup timed out after",
        _c(r"Orchestrator startup timed out after (?P<s>\d+(?:\.\d+)?) ?s"),
        lambda m, t: [Timeout(call="server start-up", limit_s=_f(m["s"]), guard=OMNI_ORCHESTRATOR)],
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "timeout=startup_timeout",
        _c(r"\(timeout=startup_timeout\)"),
        lambda m, t: [Timeout(call="server start-up", guard=OMNI_ORCHESTRATOR)] if "TimeoutError" in t else [],
    ),
    # 0.14's is only a warning: Omni._wait_for_stages_ready logs it and returns ("Ignore this warning if the model
    # weight download / load from disk time is longer than {timeout}s", entrypoints/omni.py:363); the stage may still
    # report ready (vllm-omni issue 915)
    Rule(
        Signal.EXTERNAL_GUARD,
        "Initialization timeout: ",
        _c(r"Initialization timeout: \d+/\d+ stages ready"),
        _const(Timeout(call=OMNI_WAITS_ON, guard=OMNI_ORCHESTRATOR)),
    ),
    Rule(Signal.STARTUP_PHASE, "reported ready", _c(r"\[Orchestrator\] Stage-\d+ reported ready"),
         _const(Phase("omni_stage_ready"))),
    # Modal's runner: "Runner has been initializing for too long: 300 seconds"
    # (modal-runner-init-300s-timeout-during-torch-compile, the container was still compiling).
    Rule(
        Signal.EXTERNAL_GUARD,
        "initializing for too long",
        _c(r"initializing for too long(?:: (?P<s>\d+(?:\.\d+)?) ?s(?:econds)?)?"),
        lambda m, t: [Timeout(call="server start-up", limit_s=_f(m["s"]), guard="platform")],
    ),
    # A launcher announcing its start-up limit: "Waiting for vllm-server to be ready (timeout: 0s)..."
    # (lemonade-wrapper-zero-second-readiness-timeout-kills-vllm: a limit of 0 s).
    Rule(
        Signal.STARTUP_PHASE,
        "to be ready (timeout: ",
        _c(r"to be ready \(timeout: (?P<s>\d+(?:\.\d+)?) ?s\)"),
        lambda m, t: [Phase(f"platform_limit_configured {m['s']}")],
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "Didn't receive health check response",
        _c(r"Didn't receive health check response for replica [^\n]*? after (?P<s>\d+(?:\.\d+)?)s"),
        lambda m, t: [Timeout(call="replica health check", limit_s=float(m["s"]), guard="ray-serve-health")],
    ),
    # The client's own timeout, in a client's or harness's log: openai-python's APITimeoutError ("Request timed
    # out.") and its DEBUG "Encountered httpx.TimeoutException", httpx's ReadTimeout, aiohttp's
    # SocketTimeoutError ("Timeout on reading data from socket"), requests' ReadTimeout ("Read timed out.
    # (read timeout=600)"), litellm's Timeout (tt-terminal-bench-litellm-read-timeout).  vLLM fetching a model
    # or an image is a client too, of someone else: those are not this guard.
    *(Rule(Signal.EXTERNAL_GUARD, literal, _CLIENT_TIMEOUT, _client_timeout) for literal in (
        "APITimeoutError", "httpx.ReadTimeout", "httpx.TimeoutException", "SocketTimeoutError",
        "exceptions.ReadTimeout", "litellm.Timeout", "litellm.exceptions.Timeout")),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "exceeds the total number of available GPUs",
        _c(r"number of required GPUs exceeds the total number of available GPUs in the placement group"),
        _const(Rendezvous(what="placement")),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "RAY_CGRAPH_get_timeout is set to",
        _c(r"RAY_CGRAPH_get_timeout is set to (?P<s>\d+)"),
        lambda m, t: [Phase(f"ray_cgraph_configured {m['s']}")],
    ),
    # NVIDIA Dynamo's monitor of vLLM's AsyncLLM (1.6 dynamo/vllm/engine_monitor.py:127): on EngineDeadError or its
    # own timeout (DYN_ENGINE_HEALTH_CHECK_TIMEOUT, 30 s, every 2 s: common/engine_monitor.py:17-21) it logs "vLLM
    # AsyncLLM health check failed: {e}", "Initiating Dynamo Runtime shutdown." and exits the process.  A timeout
    # leaves {e} empty; a dead engine's message is read as the death it is (patterns/fatals.py)
    Rule(
        Signal.EXTERNAL_GUARD,
        "vLLM AsyncLLM health check failed",
        _c(r"vLLM AsyncLLM health check failed:(?P<e>[^\n]*)"),
        lambda m, t: [] if "EngineCore encountered an issue" in m["e"] else [
            Timeout(call="engine health check", guard=DYNAMO_HEALTH)],
    ),
    # Dynamo's canary health check (lib/runtime/src/health_check.rs, 1.6): a request sent to an endpoint idle for
    # DYN_CANARY_WAIT_TIME (10 s) that got no answer within DYN_HEALTH_CHECK_REQUEST_TIMEOUT (3 s): "Health check
    # timeout for {endpoint}" — the endpoint is marked not ready; a busy worker queues the canary behind real work
    Rule(
        Signal.EXTERNAL_GUARD,
        "Health check timeout for",
        _c(r"Health check timeout for \S+"),
        _const(Timeout(call="canary health check", guard=DYNAMO_CANARY)),
    ),
    # llm-d's routing sidecar, in front of the vLLM server in its pod, when a proxied request's connection is refused
    # (pkg/sidecar/proxy/proxy_helpers.go:144 HEAD, :111 v0.5.0; zap JSON: "msg": "failed to connect to vLLM
    # decoder", "error": "dial tcp [::1]:8200: connect: connection refused"): nothing listens on vLLM's port — the
    # server exited, or has not opened it yet; the client gets a 503
    Rule(
        Signal.EXTERNAL_GUARD,
        "failed to connect to vLLM decoder",
        _c(r"failed to connect to vLLM decoder"),
        _const(Timeout(call="request proxied to vLLM (connection refused)", guard=LLMD_DECODER)),
    ),
    # vLLM production-stack's router probing each static backend with a one-token request (src/vllm_router/
    # service_discovery.py:265, utils.py is_model_healthy; --static-backend-health-check-timeout-seconds, 10 s):
    # "{model} at {url} not healthy!" — the backend leaves the routing table, slow or down
    Rule(
        Signal.EXTERNAL_GUARD,
        " not healthy!",
        _c(r"\S+ at https?://\S+ not healthy!"),
        _const(Timeout(call="router health check", guard=ROUTER_HEALTH)),
    ),
    # SkyServe's controller on its readiness probe (sky/serve/replica_managers.py, 0.6.1 :1087/:1105, 0.10.5
    # :1304/:1321): a replica never ready past readiness_probe.initial_delay_seconds (1200 s) — "Replica N is not
    # ready and exceeding initial delay seconds. Terminating the replica..." — or once ready, then failing for 180 s
    # — "… is not ready for too long and exceeding consecutive failure threshold. Terminating the replica..."; the
    # limit it counts against is printed on the way: "… but within initial delay seconds (640s / 1200s). Skipping."
    Rule(
        Signal.EXTERNAL_GUARD,
        "exceeding initial delay seconds",
        _c(r"Replica \S+ is not ready and exceeding initial delay seconds"),
        _const(Timeout(call="replica start-up (readiness probe)", guard=SKY_INITIAL)),
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "exceeding consecutive failure threshold",
        _c(r"Replica \S+ is not ready for too long and exceeding consecutive failure threshold"),
        _const(Timeout(call="readiness probe", limit_s=180.0, guard=SKY_PROBE)),
    ),
    # the probe itself refused (replica_managers.py:597 "Error when probing replica N with url …: … Connection
    # refused"): nothing listens — a server still starting, or one that has exited
    Rule(
        Signal.EXTERNAL_GUARD,
        "Error when probing replica",
        _c(r"Error when probing replica \S+ with url [^\n]*?(?:Connection refused|Failed to establish a new connection)"),
        _const(Timeout(call="readiness probe (refused)", guard=SKY_PROBE)),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "within initial delay seconds (",
        _c(r"within initial delay seconds \((?P<n>\d+)s / (?P<s>\d+)s\)"),
        lambda m, t: [Phase(f"skyserve_initial_delay_configured {m['s']}")],
    ),
    # KServe's OpenAI proxy to its predictor (v0.13 openai_proxy_model.py:69, v0.19 :68): "Timed out when
    # communicating with upstream: …", a 504 after --predictor_request_timeout_seconds (600 s in v0.13's model.py)
    Rule(
        Signal.EXTERNAL_GUARD,
        "Timed out when communicating with upstream",
        _c(r"Timed out when communicating with upstream"),
        _const(Timeout(call="request to the predictor", guard=KSERVE_UPSTREAM)),
    ),
    # Ray Serve's end-to-end request limit (http_options.request_timeout_s, none by default): its proxy's "Request
    # timed out after 300.0s." (2.44 proxy.py:717/:1028) and "Request {id} timed out after {t}s." (2.44 :1034, 2.60
    # replica.py:3365), answered 408
    *(Rule(Signal.EXTERNAL_GUARD, literal, _c(r"Request (?:\S+ )?timed out after (?P<s>\d+(?:\.\d+)?) ?s\."),
           lambda m, t: [Timeout(call="request (Ray Serve)", limit_s=_f(m["s"]), guard=RAY_SERVE_REQUEST)])
      for literal in ("Request timed out after", " timed out after ")),
    # Ray Serve's client waiting for a deployment or an application it started (2.44 client.py:207/:245, 2.60
    # :252/:294): "Deployment 'LLMServer:qwen-7b' in application 'llm_app' did not become HEALTHY after 600s.",
    # "Application llm_app did not become RUNNING after 600s." — the caller's own start-up wait
    *(Rule(Signal.EXTERNAL_GUARD, literal, _c(r"did not become (?:HEALTHY|RUNNING) after (?P<s>\d+(?:\.\d+)?) ?s"),
           lambda m, t: [Timeout(call="server start-up", limit_s=_f(m["s"]), guard="platform")])
      for literal in ("did not become HEALTHY after", "did not become RUNNING after")),
    # Ray Serve's controller on replicas still in their constructor (2.44 deployment_state.py:2180, 2.60 :5698:
    # "… has N replicas that have taken more than 30s to initialize. This may be caused by a slow __init__ or
    # reconfigure method."): Ray Serve LLM's engine is loading; its own limit is far longer
    Rule(Signal.STARTUP_PHASE, "s to initialize", _c(r"replicas? that ha(?:ve|s) taken more than \d+s to initialize"),
         _const(Phase("ray_serve_replica_initializing"))),
    # Ray Serve's controller once a replica failed REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD (3) checks in a row
    # (deployment_state.py:865 in 2.44.1, :1813 in 2.60.0): "Replica Replica(id=…) failed the health check 3 times in a
    # row, marking it unhealthy." (a proxy's own checks read "Proxy … failed the health check …": not the engine)
    Rule(
        Signal.EXTERNAL_GUARD,
        "times in a row, marking it unhealthy",
        _c(r"Replica\b[^\n]*? failed the health check \d+ times in a row, marking it unhealthy"),
        _const(Timeout(call="replica health check", guard="ray-serve-health")),
    ),
    # Ray Serve LLM's check_health on vLLM's engine (vllm_engine.py:554 in 2.44.1, asyncio.wait_for with 15 s; :913
    # in 2.60.0, no limit: the engine's check_health raised): "Healthcheck failed. The replica will be restarted"
    Rule(
        Signal.EXTERNAL_GUARD,
        "Healthcheck failed. The replica will be restarted",
        _c(r"Healthcheck failed\. The replica will be restarted"),
        _const(Timeout(call="Ray Serve LLM's engine health check", guard="ray-serve-health")),
    ),
    # Ray Serve 2.60's probe of the replica's user event loop, where Ray Serve LLM runs vLLM's AsyncLLM (replica.py
    # :4140): "User event loop unresponsive: probe failed 3 consecutive times (limit 3)." — the loop did not run a
    # probe within RAY_SERVE_USER_HEALTH_CHECK_PROBE_TIMEOUT_S (300 s) three times; the health check then fails
    Rule(
        Signal.EXTERNAL_GUARD,
        "User event loop unresponsive",
        _c(r"User event loop unresponsive: probe failed \d+ consecutive times"),
        _const(Timeout(call="the replica's event loop", guard=RAY_USER_LOOP)),
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "failed health check, stopping it",
        _c(r"failed health check, stopping it"),
        _const(Timeout(call="replica health check", guard="ray-serve-health")),
    ),
    Rule(
        Signal.OPERATOR_STOP,
        "received SIGTERM",
        _c(r"received SIGTERM"),
        _const(Failure(name="SIGTERM")),
    ),
    Rule(Signal.OPERATOR_STOP, "Received SIGTERM", _c(r"Received SIGTERM"), _const(Failure(name="SIGTERM"))),
    # SkyServe on a spot replica the cloud took back (sky/serve/replica_managers.py, 0.6.1 :810, 0.10.5 :1025):
    # "Replica 2 is preempted (status: INIT)." — a stop from outside, not the engine's fault
    *(Rule(Signal.OPERATOR_STOP, literal, _c(r"Replica \S+ is preempted(?: \(status: \w+\))?\."),
           _const(Failure(name=PREEMPTED))) for literal in ("is preempted.", "is preempted (status")),
    # Dynamo's runtime when the keep-alive of its etcd lease fails (lib/runtime/src/transports/etcd/lease.rs,
    # create_lease: tracing::error!("Unable to maintain lease. Check etcd server status"), then token.cancel() on the
    # runtime's token, which shuts the worker down; 0.4.1's keep-alive says why first, "keep alive failed: keep alive
    # response received: lease expired or revoked"; 1.6.1 prints "Unable to maintain lease - expired or revoked. …"):
    # etcd was unreachable, or the process sent no keep-alive within the lease's TTL — a stop from the control plane
    *(Rule(Signal.OPERATOR_STOP, literal, _c(r"Unable to maintain lease|keep alive failed: [^\n]*lease expired or revoked"),
           _const(Failure(name=DYNAMO_LEASE))) for literal in ("Unable to maintain lease", "lease expired or revoked")),
    # Triton stopping (core src/server.cc InferenceServer::Stop, r24.06 :312 / HEAD :319): "Waiting for in-flight
    # requests to complete.", then once a second "Timeout N: Found K model versions that have in-flight inferences"
    # (then "... K live models and M in-flight non-inference requests" while models unload) and, when
    # --exit-timeout-secs (30) runs out first, "Exit timeout expired. Exiting immediately." (:370 / :377).  vLLM's own
    # "Waiting for in-flight requests to complete before sleeping..." (sleep mode, core.py) is not a stop.
    Rule(Signal.OPERATOR_STOP, "Waiting for in-flight requests to complete",
         _c(r"Waiting for in-flight requests to complete\.(?!\s*before)"), _const(Failure(name=TRITON_STOP))),
    Rule(
        Signal.OPERATOR_STOP,
        "received signal=SIG",
        _c(r"trigger received signal=(?P<s>SIG(?:TERM|INT))"),
        lambda m, t: [Failure(name=m["s"])],
    ),
    Rule(Signal.OPERATOR_STOP, "shutdown triggered", _c(r"\[shutdown\] API server: shutdown triggered"), _const(Failure(name="shutdown"))),
)

SHUTDOWN: tuple[Rule, ...] = (
    *(Rule(Signal.SHUTDOWN, literal, TRITON_COUNTDOWN)
      for literal in ("model versions that have in-flight inferences", "in-flight non-inference requests")),
    Rule(Signal.SHUTDOWN, "Exit timeout expired", _c(r"Exit timeout expired\. Exiting immediately"),
         _const(Timeout(call="Triton's stop", guard=TRITON_EXIT))),
    Rule(Signal.SHUTDOWN, "Shutting down FastAPI HTTP server", _c(r"Shutting down FastAPI HTTP server")),
    Rule(Signal.SHUTDOWN, "Application shutdown complete", _c(r"Application shutdown complete")),
    Rule(Signal.SHUTDOWN, "Gracefully stopping http server", _c(r"Gracefully stopping http server")),
    Rule(Signal.SHUTDOWN, "[shutdown]", _c(r"\[shutdown\]")),
    Rule(Signal.SHUTDOWN, "Parent process exited, terminating worker", _c(r"Parent process exited, terminating worker")),
)
