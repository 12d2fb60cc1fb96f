"""Guards outside vLLM that kill a server: Kubernetes probes, Ray Serve's health check, launchers' and
orchestrators' start-up limits (docs/verdicts.md, "Timeouts").

Domain facts encoded here:

* Such a guard sees only whether the server answers; what decides is the work in progress when it fired
  (``ray-serve-llm-health-check-10s-request-spike-v0``; Modal's runner during torch.compile,
  ``modal-runner-init-300s-timeout-during-torch-compile``).
* A start-up limit under a minute is shorter than any vLLM start-up
  (``lemonade-wrapper-zero-second-readiness-timeout-kills-vllm``).
* A start-up limit with nothing else shown leans slow: such limits are guesses shorter than a first start
  (``ci-tp2-pp2-eager-h20-server-starts-after-480s-test-deadline``,
  ``omni-nextstep-offload-init-exceeds-600s-timeout-ignored``).
"""

from __future__ import annotations

from engdiag.analysis import lmcache
from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.model import Guard
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Phase, Signal

STARTUP_PROBE = ("give start-up its own probe so liveness only starts once the server is up (in the pod spec: "
                 "startupProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 10, failureThreshold: 180})")
"""A probe that starts only after start-up: Kubernetes' answer to a liveness probe shorter than a start-up."""
OMNI_STEP = ("give vllm-omni's stages longer to start: --init-timeout (600 s by default) for all of them and "
             "--stage-init-timeout (300 s) for each")
"""vllm-omni's own start-up limits (entrypoints/cli/serve.py in 0.14–0.30), not a platform's."""
_STARTUP_OWNERS = ("platform", "vllm-omni")
"""Owners of a limit on the whole start-up, outside the engine's own: a launcher, a platform, vllm-omni's
orchestrator (and SkyServe's initial delay, not its per-probe timeout: ``_startup_limit``)."""


def _startup_limit(g: Guard | None) -> bool:
    """A limit on the whole start-up, not on one probe or request."""
    return g is not None and (g.owner in _STARTUP_OWNERS or g.name == "SkyServe initial delay")
_DEAD = (Signal.ENGINE_DEAD, Signal.ENGINE_FATAL, Signal.WORKER_DIED)
"""An engine or worker that was already dead."""
MIN_STARTUP_S = 60.0
"""No vLLM server becomes ready faster: importing torch, loading any model and warming up take this long."""


def external_guard(facts: Facts) -> Verdict | None:
    """A guard outside vLLM (a Kubernetes probe, a Ray Serve health check) killed the server."""
    fired = facts.t.of(Signal.EXTERNAL_GUARD)
    if not fired:
        return None
    event = fired[0]
    if any(e.signal in _DEAD for e in facts.before(event)):
        # the engine had died before the guard fired: its health check failed because it was dead, and the death is
        # what to judge (Ray Serve LLM: "Engine health check failed … EngineCore encountered an issue", then the
        # controller's "failed health check, stopping it"; ray PR 59924)
        return None
    g = facts.model.guard
    if g is not None and g.owner == "LMCache":
        return lmcache.server_start(facts, event, g)
    if g is not None and g.owner == "vllm-omni" and (ready := _stage_ready_after(facts, event)) is not None:
        return _omni_waited_on(facts, event, ready)
    name = g.name if g is not None and g.owner != "vLLM" else "an outside health check"
    client = g is not None and g.owner == "client"
    if client:
        name = "client's request timeout" + (f" of {g.limit_s:g} s" if g.limit_s is not None else "")
    if _startup_limit(g) and g is not None and g.limit_s is not None and g.limit_s < MIN_STARTUP_S:
        draft = Draft(facts, Kind.SLOW, 0.7,
                      f"slow start-up (for its guard): the {name} allowed {g.limit_s:g} s, less than any vLLM "
                      "start-up takes — the server was killed before it could become ready")
        draft.cite(event, Role.ROOT_CAUSE, f"a start-up limit of {g.limit_s:g} s")
        draft.step(_LAUNCHER_STEP if g.owner == "platform" else _longer(g))
        return draft.cite_consequences(event).done()
    if "connection refused" in event.text.lower() and facts.served_before(event):
        # Refused at the TCP level after the server had served: nothing listens on its port any more.  A hung or
        # busy server's listening socket still accepts (the kernel queues the connection), so its process is gone.
        draft = Draft(facts, Kind.CRASHED, 0.5,
                      f"crashed (likely): the {name} was refused after the server had served — nothing listens on "
                      "its port any more, so the server process exited")
        draft.cite(event, Role.ROOT_CAUSE, "connection refused: no listener, not a slow one")
        draft.cite(facts.t.last_progress, Role.CONTEXT, "the last work before it")
        draft.undecided = ("why the process exited: its own last lines (a traceback) or the kernel's (`dmesg -T`, an "
                           "OOM kill)")
        return draft.cite_consequences(event).done()
    working = [a for a in facts.model.activities if a.advancing or (a.startup and not facts.served_before(event))]
    if working:
        activity = working[-1]
        phase = "slow start-up" if activity.startup else "slow"
        draft = Draft(facts, Kind.SLOW, 0.65,
                      f"{phase}: the {name} gave up while {activity.name} was still "
                      f"{'advancing' if activity.advancing else 'running'} ({activity.detail})")
        draft.cite(facts.event_at(activity.source, activity.line), Role.SUPPORTING, "the engine was working")
        draft.cite(event, Role.ROOT_CAUSE, "a guard outside vLLM, shorter than the work")
        draft.step(_longer(g))
        return draft.cite_consequences(event).done()
    if client:
        return _client_gave_up(facts, event, name)
    if g is not None and (g.owner.startswith("platform") or g.owner == "SkyServe") \
            and "connection refused" in event.text.lower() and not facts.served_before(event):
        # A probe refused at the TCP level found nothing listening: the server had not opened its port yet.
        # A hung server still accepts connections and answers late or with an error
        # (llmd-launcher-liveness-kill-slow-container-start: "dial tcp ...:8001: connect: connection refused").
        draft = Draft(facts, Kind.SLOW, 0.5,
                      f"slow start-up (likely): the {name} was refused — nothing listened on the port yet, so the "
                      "server was still starting when the probe gave up on it")
        draft.cite(event, Role.ROOT_CAUSE, "connection refused: the server's port was not open yet")
        draft.undecided = ("the server's own log up to the kill: start-up work = slow; a traceback = crashed before "
                           "it listened")
        draft.step(STARTUP_PROBE)
        return draft.cite_consequences(event).done()
    if "connection refused" in event.text.lower():
        # Refused with nothing in the log to date it against serving: nothing listened on the port, which a server
        # that exited and one not yet listening share (llm-d's sidecar: "failed to connect to vLLM decoder")
        draft = Draft(facts, Kind.UNKNOWN, 0.35,
                      f"unknown: the {name} was refused — nothing listened on vLLM's port: the server had exited, or "
                      "had not opened it yet (a hung server still accepts connections)")
        draft.cite(event, Role.ROOT_CAUSE, "connection refused: no listener")
        draft.undecided = ("the vLLM server's own log at that time: a traceback or an exit (crashed), or start-up "
                           "lines (still starting)")
        return draft.cite_consequences(event).done()
    if _startup_limit(g) and not facts.served_before(event):
        # A start-up limit outside vLLM, nothing else in the excerpt: such limits are set by people who
        # guess a start-up time, while a first start downloads, loads, profiles, compiles and captures —
        # the slow reading is the better supported one (lemonade-..., modal-runner-..., ci-tp2-pp2-...).
        draft = Draft(facts, Kind.SLOW, 0.4,
                      f"slow start-up (likely): the {name} gave up before the server was ready; nothing in the log "
                      "shows the engine stuck or crashed")
        draft.cite(event, Role.ROOT_CAUSE, "a start-up limit outside vLLM")
        draft.undecided = ("the engine's own lines up to the kill: loading, compiling or capturing = slow; a traceback "
                           "= crashed; nothing after NCCL or rendezvous set-up = stuck")
        draft.step(_LAUNCHER_STEP if g is not None and g.owner == "platform" else _longer(g))
        return draft.cite_consequences(event).done()
    draft = Draft(facts, Kind.UNKNOWN, 0.35,
                  f"unknown: the {name} gave up on the server, and the log does not show what the engine was doing")
    draft.cite(event, Role.ROOT_CAUSE)
    draft.undecided = ("the engine's own lines up to the kill (loading, compiling, stats with tokens = slow; a "
                       "traceback = crashed; silence with requests running = stuck)")
    return draft.cite_consequences(event).done()


_LAUNCHER_STEP = ("give the launcher a start-up timeout longer than the server's start-up (minutes for a first start "
                  "that downloads, loads and compiles)")
_RAY_SERVE_STEP = ("give the replica longer to answer its health check (in the deployment's code: "
                   "@serve.deployment(health_check_timeout_s=600, health_check_period_s=30); Ray Serve LLM builds the "
                   "deployment itself with 10 s: LLMConfig(deployment_config={'health_check_timeout_s': 600}) or "
                   "RAY_SERVE_LLM_DEFAULT_HEALTH_CHECK_TIMEOUT_S in its environment)")
_OWNER_STEPS = {
    "vllm-omni": OMNI_STEP,
    "production-stack router": ("give the router's probe longer: --static-backend-health-check-timeout-seconds (10 s "
                                "by default) on the router, above a step under load — its one-token request queues "
                                "behind them"),
    "KServe": ("give KServe's proxy longer: --predictor_request_timeout_seconds on its model server (600 s in v0.13), "
               "above the longest request"),
}
"""How to give a slow engine more time, per owner of the guard that gave up on it."""


def _longer(g: Guard | None) -> str:
    """The step that gives the engine more time against this guard."""
    if g is None:
        return _RAY_SERVE_STEP
    if g.owner == "client":
        return CLIENT_STEP
    if g.owner in ("Dynamo", "SkyServe"):
        by = "here" if g.limit_origin == "printed" else "by default"
        limit = f" ({g.limit_s:g} s {by})" if g.limit_s else ""
        where = "in the worker's environment" if g.owner == "Dynamo" else "in the service's YAML"
        return f"give the engine longer against {g.owner}'s {g.name.split(' ', 1)[1]}: {g.knob}{limit} {where}, " \
               "above the work it cut off"
    if g.name == "Ray Serve request timeout":
        return ("give requests longer: http_options.request_timeout_s in the Serve config (no limit by default), above "
                "the longest request at this load")
    if g.owner in _OWNER_STEPS:
        return _OWNER_STEPS[g.owner]
    return STARTUP_PROBE if g.owner.startswith("platform") else _RAY_SERVE_STEP


CLIENT_STEP = ("give the client a timeout longer than the longest request takes (openai-python: "
               "OpenAI(timeout=1800); requests: timeout=(10, 1800); litellm: timeout=1800)")


def _client_gave_up(facts: Facts, event: Event, name: str) -> Verdict | None:
    """The client's own timeout fired and no engine work is shown advancing: a client's log cannot tell slow
    from hung (tt-terminal-bench-litellm-read-timeout: one aiohttp read timeout; the maintainers matched it to
    periods of low throughput in the server's log).  With server lines that show something else, the rules
    after this one read them: a client giving up is a consequence of a stall, not its cause."""
    if facts.stats or facts.model.activities or facts.model.waits:
        return None
    draft = Draft(facts, Kind.UNKNOWN, 0.3,
                  f"unknown: the {name} fired — the server did not answer in time; a client's log cannot tell a "
                  "slow server from a hung one")
    draft.cite(event, Role.ROOT_CAUSE, "a guard in the client, not in vLLM")
    when = f" around {event.stamp.text}" if event.stamp else ""
    draft.undecided = (f"the server's log{when}: stats lines still generating tokens = slow (raise the client's "
                       "timeout); requests running with no tokens, or a traceback = stuck or crashed")
    draft.step(CLIENT_STEP)
    return draft.done()


def _stage_ready_after(facts: Facts, event: Event) -> Event | None:
    return next((e for e in facts.after(event) if isinstance(e.data, Phase) and e.data.name == "omni_stage_ready"), None)


def _omni_waited_on(facts: Facts, event: Event, ready: Event) -> Verdict:
    """vllm-omni 0.14's start-up wait only warns and returns: a stage that reports ready after it was slow, and
    started (vllm-omni issue 915: the run went on after the warning)."""
    took = facts.seconds(event, ready)
    after = f", {took:.0f} s after the warning" if took else ""
    draft = Draft(facts, Kind.SLOW, 0.6,
                  f"slow start-up: a vllm-omni stage took longer than its orchestrator's start-up wait, which only "
                  f"warns, and then reported ready{after}")
    draft.cite(event, Role.ROOT_CAUSE, "vllm-omni's start-up wait ran out (a warning: nothing was stopped)")
    draft.cite(ready, Role.SUPPORTING, "the stage became ready after all")
    draft.step(OMNI_STEP)
    return draft.done()
