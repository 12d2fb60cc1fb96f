"""Stalls, timeouts and fatals inside vLLM: the shared-memory queue's stall warning, V0's iteration, RPC and
heartbeat guards, the step wait (execute_model / sample_tokens, including Ray compiled graphs), the engine
start-up guards, engine-core and worker failures and deaths, tracebacks and the exception that ends them,
the NCCL watchdog; device faults and fatal signals come from patterns/device_faults.py, spliced in
where their order among the rules of a shared literal is kept.

Each wording was read in the vLLM or PyTorch source; where a comment names a file and line, that is where.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import Failure, NcclWork, Payload, Rendezvous, ShmStall, Signal, Timeout
from engdiag.logs.patterns.base import (
    _EXCEPTION_LINE,
    Builder,
    Rule,
    _c,
    _const,
    _f,
    _failure,
    _i,
    last_exception,
)
from engdiag.logs.patterns.device_faults import DEVICE_FAULTS
from engdiag.logs.patterns.sites import traceback_site

_WORK_FIELDS = {
    "seq": re.compile(r"SeqNum=(\d+)"),
    "op": re.compile(r"OpType=(\w+)"),
    "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)"),
}


def _nccl_timeout(match: re.Match[str], text: str) -> Iterable[Payload]:
    work = match["work"]
    found = {key: p.search(work) for key, p in _WORK_FIELDS.items()}
    yield NcclWork(
        rank=_i(match.groupdict().get("rank")),
        seq=_i(found["seq"].group(1)) if found["seq"] else None,
        op=found["op"].group(1) if found["op"] else None,
        timeout_ms=_i(found["timeout_ms"].group(1)) if found["timeout_ms"] else None,
        ran_ms=int(match["ran"]),
        backend=match["backend"],
    )


def _step_wait(guard: str) -> Builder:
    """The executor's wait for the workers' answer to a step, seen in a traceback.

    A traceback through the response wait is a step timeout when it ends in
    TimeoutError, or when it is cut off before its end (pasted fragments); one that
    ends in another exception is a worker failure reported through the same wait.
    """

    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        ending = last_exception(text[match.end() :])
        if ending is None or ending.split(":")[0].split(".")[-1] in _TIMEOUT_ERRORS:
            yield Timeout(call="execute_model", guard=guard)

    return build


_TIMEOUT_ERRORS = {"TimeoutError", "RayChannelTimeoutError", "GetTimeoutError"}


def _timed_out_read(match: re.Match[str], text: str) -> Iterable[Payload]:
    """A read of the workers' answer that ended in TimeoutError (a cut-off one says nothing)."""
    ending = last_exception(text[match.end() :])
    if ending is not None and ending.split(":")[0].split(".")[-1] == "TimeoutError":
        yield Timeout(call="execute_model", guard="vllm-step")


FT_ROUND = "ft-round"
"""0.34's fault-tolerance recovery round as a rendezvous of the data-parallel engines (``Rendezvous.what``)."""
SHELL_KILLED = "the process the shell ran"
"""Who died when the shell reports its job ``Killed``: whatever it ran, not only a worker."""


STALLS_TIMEOUTS_FATALS: tuple[Rule, ...] = (
    # stalls, timeouts and fatals -----------------------------------------------------
    Rule(
        Signal.SHM_STALL,
        "No available shared memory broadcast block",
        _c(r"No available shared memory broadcast block found ?in (?P<s>\d+) second"),
        lambda m, t: [ShmStall(int(m["s"]))],
    ),
    Rule(
        Signal.SHM_STALL,
        "No available block found in",
        _c(r"No available block found in (?P<s>\d+) second"),
        lambda m, t: [ShmStall(int(m["s"]))],
    ),
    Rule(Signal.ITERATION_TIMEOUT, "Engine iteration timed out", _c(r"Engine iteration timed out")),
    # V0's run_engine_loop waits for a step inside `async with asyncio_timeout(ENGINE_ITERATION_TIMEOUT_S)`
    # only (0.5.x-0.10 async_llm_engine.py); when it fires, the wait is cancelled and the timeout raises
    # while handling that CancelledError, so the traceback chains on (py3.10: "During handling…", 3.11+:
    # "…direct cause…").  A shutdown cancels the loop with nothing chained after it
    # (pascal-p40-gptq-long-prompt-engine-loop-timeout: the "timed out" line is past the paste).
    Rule(
        Signal.ITERATION_TIMEOUT,
        "in run_engine_loop",
        _c(r"in run_engine_loop\n[^\n]*await asyncio\.wait\((?:\n[^\n]*){0,12}?\n[^\n]*CancelledError\n\s*"
           r"(?:During handling of the above exception|The above exception was the direct cause)"),
    ),
    # V0 MQLLMEngine (0.6.x): raised, not logged, and shown inside the client's error/traceback text —
    # TimeoutError("No heartbeat received from MQLLMEngine") engine/multiprocessing/client.py:142 and
    # RuntimeError("Engine loop has died") engine/multiprocessing/engine.py:325 in 0.6.3.post1; gone by 0.8.5.
    Rule(Signal.HEARTBEAT_LOST, "No heartbeat received", _c(r"No heartbeat received from MQLLMEngine")),
    Rule(Signal.HEARTBEAT_LOST, "Engine loop has died", _c(r"Engine loop has died")),
    Rule(
        Signal.RPC_TIMEOUT,
        "RPC call to",
        _c(r"RPC call to (?P<call>\w+) timed out"),
        lambda m, t: [Timeout(call=m["call"])],
    ),
    Rule(
        Signal.RPC_TIMEOUT,
        "didn't reply within",
        _c(r"(?P<who>RPCServer|MQLLMEngine|Server) didn't reply within (?P<ms>\d+) ?ms"),
        lambda m, t: [Timeout(call=m["who"], limit_s=int(m["ms"]) / 1000)],
    ),
    Rule(
        Signal.RPC_TIMEOUT,
        "dequeue(timeout=",
        re.compile(r"dequeue\(timeout=[^\n]*(?:\n[^\n]*)*?\n[ \t]*TimeoutError[ \t]*$", re.MULTILINE),
        _const(Timeout(call="execute_model")),
    ),
    Rule(Signal.ENGINE_READY_TIMEOUT, "Timed out waiting for engine", _c(r"Timed out waiting for engine(?:s to send| core processes to start)")),
    # the engine core's own handshake (v1/engine/core.py, every V1 release): "Did not receive response from front-end
    # process within 5 minutes" — the engine core waited on the API server or the data-parallel head, which never
    # answered: gone, or not at the address it was given (a headless node's --data-parallel-address); no start-up
    # work of the engine's own was cut off
    Rule(Signal.RENDEZVOUS_FAILED, "Did not receive response from front-end",
         _c(r"Did not receive response from front-end process(?: within (?P<m>\d+) minutes)?"),
         lambda m, t: [Rendezvous(limit_s=60 * int(m["m"] or 5), what="front-end")]),
    Rule(Signal.ENGINE_FATAL, "EngineCore encountered a fatal error", _c(r"EngineCore encountered a fatal error"), _failure("busy loop")),
    # early V1 (0.7.x–0.8.4): "EngineCore hit an exception: %s" v1/engine/core.py:291 (0.7.3), :387 (0.8.4)
    Rule(Signal.ENGINE_FATAL, "EngineCore hit an exception", _c(r"EngineCore hit an exception"), _failure("busy loop")),
    Rule(Signal.ENGINE_FATAL, "EngineCore failed to start", _c(r"EngineCore failed to start"), _failure("start-up")),
    # V1's engine core dumps its config and the step's scheduler output only when a model step raised
    # (core.py execute_model_with_error_logging → dump_engine_exception, 0.9+): the step failed, so serving had begun
    # (pp-multinode-slingshot-ray-hang: the dump 8 minutes after the Ray compiled graph's first step began)
    Rule(Signal.ENGINE_FATAL, "Dumping input data for V1", _c(r"Dumping input data for V1 LLM engine"), _failure("model step")),
    # "Engine core initialization failed. See root cause above. Failed core proc(s): {...}" v1/engine/utils.py
    # (0.10.1+; 0.34:1478, the dict may be empty `{}`); 0.32+ also "Frontend process failed during engine core
    # initialization. ..." (0.34:1473).
    Rule(Signal.ENGINE_FATAL, "Engine core initialization failed", _c(r"Engine core initialization failed"), _failure("start-up")),
    Rule(Signal.ENGINE_FATAL, "Frontend process failed during engine", _c(r"Frontend process failed during engine core initialization"), _failure("start-up")),
    Rule(Signal.ENGINE_FATAL, "Engine process failed to start", _c(r"Engine process failed to start"), _failure("start-up")),
    Rule(
        Signal.ENGINE_FATAL,
        "launch_core_engines(",
        _c(r"run_multi_api_server\(|launch_core_engines\(|wait_for_engine_startup\("),
        _failure("start-up"),
    ),
    Rule(Signal.ENGINE_FATAL, "Engine background task failed", _c(r"Engine background task failed"), _failure("background loop")),
    Rule(Signal.ENGINE_DEAD, "EngineDeadError", _c(r"(?:Async|MQ)?EngineDeadError")),
    # the message of V1's EngineDeadError (v1/engine/exceptions.py), which the layers around vLLM quote in their own
    # lines without the class: Ray Serve LLM's "Engine health check failed in LLMServer.check_health: EngineCore
    # encountered an issue. …" (2.60 llm_server.py:600), Dynamo's "vLLM AsyncLLM health check failed: …"
    # (engine_monitor.py:127)
    Rule(Signal.ENGINE_DEAD, "EngineCore encountered an issue", _c(r"EngineCore encountered an issue\. See stack trace")),
    # Ray Serve LLM's own words for it: 2.60's rate-limited "Suppressed %d fatal engine error(s) in the last %.0fs.
    # Engine is dead, awaiting replica restart." (utils/server_utils.py:96) and 2.44's "Background Engine loop is
    # dead." (deployments/llm/vllm/vllm_engine.py:372/:378)
    Rule(Signal.ENGINE_DEAD, "Engine is dead, awaiting replica restart", _c(r"Engine is dead, awaiting replica restart")),
    Rule(Signal.ENGINE_DEAD, "Background Engine loop is dead", _c(r"Background Engine loop is dead")),
    # Triton's vLLM backend, its optional engine health check (model.py:610, HEAD): "[vllm] Engine is not healthy and
    # model will be unloaded: …", and what a request then gets: "Model is unavailable due to unhealthy vLLM engine"
    Rule(Signal.ENGINE_DEAD, "Engine is not healthy and model will be unloaded",
         _c(r"Engine is not healthy and model will be unloaded")),
    Rule(Signal.ENGINE_DEAD, "unavailable due to unhealthy vLLM engine",
         _c(r"Model is unavailable due to unhealthy vLLM engine")),
    Rule(Signal.ENGINE_DEAD, "Engine process (pid", _c(r"Engine process \(pid \d+\) died")),
    Rule(Signal.ENGINE_DEAD, ", terminating server process", _c(r"(?:has failed|is already dead), terminating server process")),
    # early V1 (0.7.x–0.8.4): CRITICAL "Got fatal signal from worker processes, shutting down. ..."
    # v1/engine/core_client.py:191 (0.7.3), :359 (0.8.4), echoed by the executor as "MulitprocExecutor got
    # fatal signal ..." (sic) v1/executor/multiproc_executor.py:49/:50; gone by 0.8.5.
    Rule(Signal.ENGINE_DEAD, "ot fatal signal from worker", _c(r"[Gg]ot fatal signal from worker processes")),
    # "AsyncLLM output_handler failed." v1/engine/async_llm.py (0.8.5+); before it (0.7.3:289, 0.8.4:345)
    # "EngineCore output handler hit an error: %s".
    Rule(Signal.ENGINE_DEAD, "output_handler failed", _c(r"output_handler failed")),
    Rule(Signal.ENGINE_DEAD, "output handler hit an error", _c(r"output handler hit an error")),
    Rule(Signal.ENGINE_DEAD, "Background loop ", _c(r"Background loop (?:has errored|is not running|is stopped)")),
    Rule(Signal.ENGINE_DEAD, "Engine loop is not running", _c(r"Engine loop is not running")),
    Rule(Signal.WORKER_EXCEPTION, "WorkerProc hit an exception", _c(r"WorkerProc hit an exception"), _failure("worker")),
    Rule(Signal.WORKER_EXCEPTION, "Worker failed with error", _c(r"Worker failed with error '?(?P<e>[^'\n]{0,300})"), lambda m, t: [Failure(exception=m["e"], name="worker")]),
    # 0.5–0.6 print the error in the message itself: "... while processing method initialize_cache: [Errno 2] No
    # such file or directory: '…', Traceback (most recent call last):" (vLLM issue 6276)
    Rule(Signal.WORKER_EXCEPTION, "Exception in worker",
         _c(r"Exception in worker (?P<w>\S+) while processing method (?P<m>\w+)(?:: (?P<e>.+?)(?:, Traceback \(|$))?"),
         lambda m, t: [Failure(exception=last_exception(t) or (m["e"] or "").strip()[:300] or None,
                               name=traceback_site(t) or m["w"])]),
    Rule(
        Signal.WORKER_DIED,
        "died unexpectedly",
        # "Worker proc %s died unexpectedly[ (exit code: %s)], ..." multiproc_executor.py (0.8.5+; code 0.32+ :405),
        # "RayWorkerProc rank=%s died unexpectedly, ..." ray_executor_v2.py:523 and "Engine core process %s died
        # unexpectedly." v1/utils.py:593 (0.32–0.34), "Engine core proc %s died unexpectedly" core_client.py (≤0.18)
        _c(r"(?P<who>Worker proc|RayWorkerProc|Engine core proc(?:ess)?) (?P<name>[^\s.]+(?:\.[^\s.]+)*?)\.? "
           r"died unexpectedly(?: \(exit code: (?P<code>-?\d+)\))?"),
        lambda m, t: [Failure(name=f"{m['who']} {m['name']}", exit_code=_i(m["code"]))],
    ),
    # vllm-omni's stage processes: "[StageDiffusionClient] stage-1 [rep-0] StageDiffusionProc died unexpectedly (exit
    # code -9)." (stage_diffusion_client.py:204) and its executor's "Diffusion worker(s) died unexpectedly: …"
    # (vllm-omni issues 7496, 5827: -9, the kernel's OOM killer)
    *(Rule(Signal.WORKER_DIED, literal,
           _c(r"(?P<who>Stage\w*Proc|Diffusion worker\(s\)) died unexpectedly(?: \(exit code:? (?P<code>-?\d+)\))?"),
           lambda m, t: [Failure(name=m["who"], exit_code=_i(m["code"]))])
      for literal in ("Proc died unexpectedly", "worker(s) died unexpectedly")),
    # its orchestrator evicting a replica whose process died (0.30 engine/orchestrator.py:1291, "[Orchestrator]
    # Stage-%s replica-%s is dead; evicting it and failing its in-flight requests: %s"), or dispatching to one (:1456,
    # "… dispatch for req=%s hit dead stage-%s replica-%s: %s"); the replica's heartbeat expiry logs nothing itself
    Rule(Signal.WORKER_DIED, "is dead; evicting it", _c(r"Stage-(?P<s>\d+) replica-(?P<r>\d+) is dead; evicting it"),
         lambda m, t: [Failure(name=f"vllm-omni stage-{m['s']} replica-{m['r']}")]),
    Rule(Signal.WORKER_DIED, "hit dead stage-", _c(r"dispatch for req=\S+ hit dead stage-(?P<s>\d+) replica-(?P<r>\d+)"),
         lambda m, t: [Failure(name=f"vllm-omni stage-{m['s']} replica-{m['r']}")]),
    # Ray Serve on a replica whose process died (2.44 deployment_state.py:874, 2.60 :1822: "Actor for {replica}
    # crashed, marking it unhealthy immediately."; router.py :1001 "{replica} will not be considered for future
    # requests because it has died.")
    Rule(Signal.WORKER_DIED, "crashed, marking it unhealthy", _c(r"Actor for (?P<r>Replica\([^)]*\)|\S+) crashed, marking"),
         lambda m, t: [Failure(name=f"Ray Serve {m['r']}")]),
    Rule(Signal.WORKER_DIED, "requests because it has died",
         _c(r"(?P<r>Replica\([^)]*\)|\S+) will not be considered for future\s+requests because it has died"),
         lambda m, t: [Failure(name=f"Ray Serve {m['r']}")]),
    # NVIDIA Dynamo's frontend on a request whose worker went away (lib/llm/src/migration.rs and the runtime's
    # push router, 0.4–1.6): "Cannot recreate stream: Migration limit exhausted" (--migration-limit, 0 by default),
    # "Stream ended before generation completed", "Worker disconnected before request stream was established"
    Rule(Signal.WORKER_DIED, "Migration limit exhausted", _c(r"Migration limit exhausted"),
         _const(Failure(name="a Dynamo worker (its request stream ended)"))),
    Rule(Signal.WORKER_DIED, "Stream ended before generation completed", _c(r"Stream ended before generation completed"),
         _const(Failure(name="a Dynamo worker (its request stream ended)"))),
    Rule(Signal.WORKER_DIED, "Worker disconnected before request stream",
         _c(r"Worker disconnected before request stream was established"),
         _const(Failure(name="a Dynamo worker (its request stream ended)"))),
    # Triton's Python backend, whose stub process runs the vLLM backend's model.py: "Stub process '<instance>' is not
    # healthy." (python_backend stub_launcher.cc:906) only once the stub has died or frozen — it waits on a live one
    # — inside "Failed to create instance: …" (core backend_model.cc:719) or "failed to load '<model>' version N:
    # Internal: …" (model_lifecycle.cc:654), and at request time (python_be.cc:1399) (triton server issues 7547,
    # 8578, 3678)
    Rule(Signal.WORKER_DIED, "is not healthy.", _c(r"Stub process '(?P<i>[^']+)' is not healthy"),
         lambda m, t: [Failure(name=f"Triton's Python backend stub {m['i']} (the process running vLLM)")]),
    # RunPod's worker-vllm around `vllm serve` (v2.25 src/main.py:71): "vLLM serve exited during startup with code N"
    Rule(Signal.WORKER_DIED, "exited during startup with code",
         _c(r"vLLM serve exited during startup with code (?P<code>-?\d+)"),
         lambda m, t: [Failure(name="vllm serve (RunPod's worker-vllm)", exit_code=int(m["code"]))]),
    # its diffusion executor at start-up, when a rank's pipe ends (EOFError): "Rank %d scheduler is dead. Please check
    # if there are relevant logs." then, a record of its own, "Exit code: %s" (0.14 multiproc_executor.py:112, 0.22
    # :183, 0.30 :420; vllm-omni issues 7496 and 5827: -9)
    Rule(Signal.WORKER_DIED, "scheduler is dead", _c(r"Rank (?P<rank>\d+) scheduler is dead"),
         lambda m, t: [Failure(name=f"vllm-omni diffusion rank {m['rank']}")]),
    Rule(
        Signal.WORKER_DIED,
        "died with exit code",
        # the 0.32+ API-server process manager: f"Process {name} (PID: {pid}) died with exit code {code}" v1/utils.py:587
        _c(r"Process (?P<name>\S+) \(PID: \d+\) died with exit code (?P<code>-?\d+)"),
        lambda m, t: [Failure(name=m["name"], exit_code=int(m["code"]))],
    ),
    Rule(
        Signal.WORKER_DIED,
        "died, exit code",
        _c(r"Worker (?P<name>\S+) pid \d+ died, exit code: (?P<code>-?\d+)"),
        lambda m, t: [Failure(name=m["name"], exit_code=int(m["code"]))],
    ),
    # the shell's own report of its foreground job dying of SIGKILL: "Killed" on a line of its own, or bash's
    # "line 1:  1234 Killed   python -m vllm…" — the kernel's OOM killer or an operator's kill -9
    # (jetson-orin-nx-gguf-killed-after-kv-alloc: right after V0 sized the KV cache and its CPU swap space)
    Rule(
        Signal.WORKER_DIED,
        "Killed",
        _c(r"(?m)^[ \t]*(?:(?:\S+: )?line \d+: +\d+ +Killed\b[^\n]*|Killed)[ \t]*$"),
        _const(Failure(name=SHELL_KILLED, exit_code=-9)),
    ),
    Rule(
        Signal.WORKER_DIED,
        "The actor died unexpectedly",
        _c(r"The actor died unexpectedly before finishing this task"),
        _const(Failure(name="Ray actor")),
    ),
    # Ray's own reports of a process or a whole node gone (ray/exceptions.py WorkerCrashedError; the GCS node
    # manager's "The node with node id: X and address: IP and node name: N has been marked dead because the
    # detector has missed too many heartbeats from it", a raylet that crashed, was OOM-killed or was preempted):
    # every worker on it is gone, and the ranks elsewhere wait on them
    Rule(
        Signal.WORKER_DIED,
        "The worker died unexpectedly while executing",
        _c(r"The worker died unexpectedly while executing this task"),
        _const(Failure(name="Ray worker")),
    ),
    Rule(
        Signal.WORKER_DIED,
        "has been marked dead because the detector",
        _c(r"The node with node id:? \w+(?: and address: (?P<ip>\S+))?[^\n]*? has been marked dead because the detector"),
        lambda m, t: [Failure(name=f"Ray node {m['ip']}" if m["ip"] else "Ray node")],
    ),
    Rule(
        Signal.WORKER_DIED,
        "node running low on memory",
        _c(r"killed due to the node running low on memory"),
        _const(Failure(name="Ray worker (host out of memory)", exception="host memory exhausted (Ray's OOM killer)")),
    ),
    # the same kill's report when the paste kept only its advice: the memory monitor's top processes and "Refer to
    # the documentation on how to address the out of memory issue: …/ray-oom-prevention.html"
    # (lmmr1-ray-memory-monitor-kills-llmrayactors-host-oom: eight vLLM actors at 13–14 GB of host RAM each)
    Rule(
        Signal.WORKER_DIED,
        "ray-oom-prevention",
        _c(r"address the out of memory issue: \S*ray-oom-prevention"),
        _const(Failure(name="Ray worker (host out of memory)", exception="host memory exhausted (Ray's OOM killer)")),
    ),
    Rule(
        Signal.WORKER_DIED,
        "engine core exited unexpectedly",
        _c(r"engine core exited unexpectedly"),
        _const(Failure(name="engine core")),
    ),
    Rule(
        Signal.PROCESS_EXCEPTION,
        "Traceback (most recent call last)",
        _c(r"\AProcess (?P<name>[\w-]+):\n"),
        lambda m, t: [Failure(exception=last_exception(t), name=m["name"])],
    ),
    # The end of any traceback: which exception a process raised.  Read as a root cause only where a
    # guard fired after it (tt-prefill-over-32k-assert-then-no-heartbeat: V0's MQLLMEngine logs its loop's
    # exception, engine.py `logger.exception(repr(e))`, and the client's heartbeat times out minutes later).
    Rule(Signal.EXCEPTION, "Error: ", _EXCEPTION_LINE, lambda m, t: [Failure(exception=last_exception(t))]),
    Rule(Signal.EXCEPTION, "Exception: ", _EXCEPTION_LINE, lambda m, t: [Failure(exception=last_exception(t))]),
    # a traceback whose exception line a paste cut off is still a process that raised
    # (omni-3gpu-replica2-serial-stage-init-exceeds-startup-timeout)
    Rule(Signal.EXCEPTION, "Traceback (most recent call last)", _c(r"Traceback \(most recent call last\)"),
         lambda m, t: [Failure(exception=last_exception(t), name=traceback_site(t))]),
    # a traceback pasted without its header or its last line: its frames alone
    # (sm120-cuda128-toolkit-flashinfer-jit-fp8kv-prefill-build-kills-engine-init)
    Rule(Signal.EXCEPTION, '", line ', _c(r'File "[^"\n]+", line \d+, in \S+'),
         lambda m, t: [Failure(exception=last_exception(t), name=traceback_site(t))]),
    # V0's dump_input_when_exception (worker/model_runner_base.py, 0.6.x): "Writing input of failed execution to
    # %s..." as the model's execution raised, before the exception is re-raised and printed
    # (v063-priority-preemption-first-preempt-crashes-model-runner: the first preemption crashed the runner)
    Rule(Signal.EXCEPTION, "Writing input of failed execution to", _c(r"Writing input of failed execution to"),
         _const(Failure(name="the model's execution (V0 dumped its input)"))),
    # Python's threading excepthook: a thread of the process died (open-instruct-grpo-enginecore-output-thread-
    # encode-crash-insecure-serialization: the engine core's output thread, so no output ever left it again)
    Rule(Signal.PROCESS_EXCEPTION, "Exception in thread ", _c(r"Exception in thread (?P<name>[^\n:]{1,80}):"),
         lambda m, t: [Failure(exception=last_exception(t), name=f"thread {m['name']}")]),
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "Watchdog caught collective operation timeout",
        _c(
            # a paste may wrap the work's fields onto the next lines (dgx-spark-2node-tp2-allgather-hang-pip-nccl)
            r"(?:\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\] )?Watchdog caught collective operation timeout:\s*"
            r"Work(?P<backend>[NH]CCL)\((?P<work>(?:[^()]|\([^()\n]*\))*?)\)\s*ran for (?P<ran>\d+) milliseconds"
        ),
        _nccl_timeout,
    ),
    # torch_npu's ProcessGroupHCCL has the same watchdog and wording, "WorkHCCL(SeqNum=196, OpType=ALLREDUCE,
    # Timeout(ms)=3600000) ran for 3600185 milliseconds before timing out." (vllm-ascend issue 382): the same event
    # on Ascend NPUs.
    # The work description alone is the watchdog's signature: "WorkNCCL(SeqNum=…) ran for N milliseconds
    # before timing out" is printed for nothing else, so it counts where a paste broke it off its first line
    # (dgx-spark-2node-tp2-allgather-hang-pip-nccl: "timeout:" ends one line, the work fills the next two).
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "milliseconds before timing out",
        _c(r"Work(?P<backend>[NH]CCL)\((?P<work>(?:[^()]|\([^()\n]*\))*?)\)\s*ran for (?P<ran>\d+) milliseconds before "
           r"timing out"),
        _nccl_timeout,
    ),
    Rule(
        Signal.NCCL_WORK_STATUS,
        "last enqueued NCCL work",
        _c(
            r"(?:\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\] )?.*?detected by watchdog at work: (?P<at>\d+), "
            r"last enqueued NCCL work: (?P<enq>\d+), last completed NCCL work: (?P<done>-?\d+)"
        ),
        lambda m, t: [NcclWork(_i(m["rank"]), seq=int(m["at"]), last_enqueued=int(m["enq"]), last_completed=int(m["done"]))],
    ),
    # ProcessGroupNCCL's heartbeat monitor on each rank once a collective timed out somewhere in the group
    # (getNCCLWatchdogTimeoutErrorMsg, torch 2.4+): "[PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump signal
    # due to a collective timeout from  rank 7 and we will try our best to dump the debug info. Last enqueued NCCL
    # work: 56116, last completed NCCL work: 56116." — on a rank that did not time out itself it is the only trace
    # of the group's stuck collective
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "Received a dump signal due to a collective timeout",
        _c(r"(?:\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\] )?Received a dump signal due to a collective timeout from\s+"
           r"(?:this local rank|rank (?P<from>\d+))[^\n]*?Last enqueued NCCL work: (?P<enq>\d+), last completed NCCL "
           r"work: (?P<done>-?\d+)"),
        lambda m, t: [NcclWork(_i(m["from"]) if m["from"] else _i(m["rank"]), last_enqueued=int(m["enq"]),
                               last_completed=int(m["done"]))],
    ),
    Rule(Signal.NCCL_ABORT, "Some NCCL operations have failed", _c(r"Some NCCL operations have failed or timed out")),
    Rule(Signal.NCCL_ABORT, "watchdog thread terminated", _c(r"watchdog thread terminated with exception")),
    Rule(Signal.NCCL_ABORT, "ncclCommWatchdog", _c(r"Exception raised from ncclCommWatchdog")),
    *DEVICE_FAULTS,
    Rule(
        Signal.RPC_TIMEOUT,
        "dequeue_timeout",
        _c(r"get_response\(w, dequeue_timeout\)|dequeue\(timeout=dequeue_timeout\)"),
        _step_wait("vllm-step"),
    ),
    Rule(Signal.RPC_TIMEOUT, "_wait_for_response", _c(r"in _wait_for_response\b"), _step_wait("vllm-step")),
    Rule(Signal.RPC_TIMEOUT, "worker_response_mq.dequeue(", _c(r"worker_response_mq\.dequeue\("), _step_wait("vllm-step")),
    # the same wait one level down, when a paste starts below the executor's frame: shm_broadcast's
    # MessageQueue.acquire_read raises a bare TimeoutError only for a reader given a limit — the executor
    # reading the workers' answer to a step; workers read their queue with no limit
    # (ascend-dsv32-a2-dual-node-rpc-timeout-acl-graph)
    Rule(Signal.RPC_TIMEOUT, "in acquire_read", _c(r"shm_broadcast\.py\", line \d+, in acquire_read\b"), _timed_out_read),
    Rule(Signal.RPC_TIMEOUT, "_dag_output_fetcher.read(", _c(r"_dag_output_fetcher\.read\("), _step_wait("ray-cgraph")),
    # the same read seen lower in the traceback, when a paste starts below the executor's frame
    # (v0102-ray-tp8-pp4-batch-queue-regression-raychannel-read-timeout)
    Rule(Signal.RPC_TIMEOUT, "ray/experimental/channel/",
         _c(r"ray/experimental/channel/[\w/]+\.py\", line \d+, in (?:read|_read_list)\b"), _step_wait("ray-cgraph")),
    Rule(
        Signal.RPC_TIMEOUT,
        "RayChannelTimeoutError",
        _c(r"RayChannelTimeoutError"),
        _const(Timeout(call="execute_model", guard="ray-cgraph")),
    ),
    # elastic expert parallelism scaling up; 0.11–0.14 core_client.py _scale_up_elastic_ep worded it "Timed out
    # waiting for new engines to send initial message on input socket."
    Rule(
        Signal.ENGINE_READY_TIMEOUT,
        "Timed out waiting for new engine",
        _c(r"Timed out waiting for new engine(?: core processes to start(?:\. Waited (?P<s>\d+)s)?|s to send)"),
        lambda m, t: [Timeout(call="scale-up handshake", limit_s=_f(m["s"]), guard="engine-ready")],
    ),
    # vllm-omni's wait for each stage's process (stage_init_timeout, 300 s; stage_engine_core_client.py / 0.30's
    # stage_diffusion_client.py): "TimeoutError: Timed out waiting for READY from StageEngineCoreProc after 600s.
    # This typically indicates model loading or initialization is taking too long." (vllm-omni issues 2616, 2518)
    Rule(
        Signal.ENGINE_READY_TIMEOUT,
        "Timed out waiting for READY from",
        _c(r"Timed out waiting for READY from (?P<who>\w+) after (?P<s>\d+(?:\.\d+)?) ?s"),
        lambda m, t: [Timeout(call=f"vllm-omni stage start-up ({m['who']})", limit_s=_f(m["s"]), guard="omni-stage")],
    ),
    # vllm-omni 0.30's phase locks fail closed (engine/stage_phase_lock.py:158, 900 s): "DeviceLockTimeoutError:
    # Timed out after 900s acquiring EX lock on device 0" — another stage held the device that long
    Rule(
        Signal.ENGINE_READY_TIMEOUT,
        " lock on device ",
        _c(r"Timed out after (?P<s>\d+(?:\.\d+)?)s acquiring (?:EX|SH) lock on device"),
        lambda m, t: [Timeout(call="vllm-omni stage start-up (a device lock another stage held)", limit_s=_f(m["s"]),
                              guard="omni-stage")],
    ),
    Rule(
        Signal.ENGINE_READY_TIMEOUT,
        "DP Coordinator process failed to report",
        _c(r"DP Coordinator process failed to report ZMQ addresses within timeout=(?P<s>\d+)"),
        lambda m, t: [Timeout(call="DP coordinator start-up", limit_s=_f(m["s"]), guard="dp-coordinator")],
    ),
    Rule(
        Signal.RECOVERY_TIMEOUT,
        "[FT] No recovery within",
        _c(r"\[FT\] No recovery within (?P<s>\d+)s timeout"),
        lambda m, t: [Timeout(call="fault-tolerance recovery", limit_s=_f(m["s"]), guard="ft")],
    ),
    # 0.34's fault tolerance: each engine checks in to a recovery round on the DP store and waits for the others
    # (v1/fault_tolerance/engine_core_sentinel.py:372, _ROUND_CHECKIN_TIMEOUT_SEC = 10): "[FT] Not all engines joined
    # recovery round '%s' within 10s; the same request_id must be sent to every engine." — a rendezvous short of
    # members: an engine that is gone, or a recovery request sent to some engines only
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "Not all engines joined recovery round",
        _c(r"\[FT\] Not all engines joined recovery round '?[^'\s]*'? within (?P<s>\d+)s"),
        lambda m, t: [Rendezvous(limit_s=_f(m["s"]), what=FT_ROUND)],
    ),
)
