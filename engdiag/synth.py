"""Synthetic vLLM logs: complete incidents for the example, the tests and the benchmark.

Each scenario writes what a real server prints (wording and layout as read in
vLLM's source, per version; see docs/log-formats.md): a start-up, a stretch of
healthy serving, then one failure.  ``Style`` adds the wrappers real logs
arrive in (kubectl timestamps, compose prefixes, colour codes, CRLF, hard
wraps).  Deterministic for a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

TRACEBACK_FILE = "/usr/local/lib/python3.12/dist-packages/vllm"


@dataclass(frozen=True)
class Style:
    """How lines are wrapped on their way to the file."""

    version: str = "0.11.0"
    """vLLM version: decides header layout and process tags (V0 before 0.8)."""
    kubectl: bool = False
    pod: str | None = None
    """``kubectl logs --prefix``: ``[pod/NAME/vllm] `` before every line (and before kubectl's stamp)."""
    compose: str | None = None
    color: str = "none"
    """``none``, ``esc`` (real ESC bytes), ``lost`` (ESC dropped) or ``caret`` (``^[``)."""
    crlf: bool = False
    wrap: int | None = None
    """Hard-wrap every line at this width, as a terminal paste does."""
    tp: int = 2
    ray: bool = False
    """Workers run under Ray: ``(RayWorkerWrapper pid=N, ip=A)`` tags, repeats folded by Ray."""
    glue: bool = False
    """tqdm bars are not followed by a newline: the next record is glued to them."""

    @property
    def v0(self) -> bool:
        return _version_tuple(self.version) < (0, 8)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2])


_COLOR = {"esc": ("\x1b[0;36m", "\x1b[0;0m"), "lost": ("[0;36m", "[0;0m"), "caret": ("^[[0;36m", "^[[0;0m")}


class Writer:
    """Renders records in one style, keeping the clock."""

    def __init__(self, style: Style, start: datetime, seed: int = 0) -> None:
        self.style = style
        self.now = start
        self.rng = random.Random(seed)
        self._tokens: _TokenPool | None = None
        v = _version_tuple(style.version)
        self.api = "APIServer pid=41" if v >= (0, 10) else None
        self.core = None if v < (0, 8) else ("EngineCore_0 pid=77" if v < (0, 10) else "EngineCore_DP0 pid=77")
        if v >= (0, 18):
            self.core = "EngineCore pid=77"
        worker = "VllmWorkerProcess" if v < (0, 8) else ("VllmWorker rank={}" if v < (0, 10) else "Worker_TP{}")
        self.workers = [f"{worker.format(i)} pid={90 + i}" for i in range(style.tp)]
        if style.ray:
            self.workers = [f"RayWorkerWrapper pid={90 + i}, ip=10.0.0.{2 + i}" for i in range(style.tp)]
        self._glued = ""

    @property
    def tokens(self) -> _TokenPool:
        """Token-id lists for request logs (built on first use)."""
        if self._tokens is None:
            self._tokens = _TokenPool(self.rng)
        return self._tokens

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def _finish(self, text: str) -> list[str]:
        style = self.style
        if self._glued:
            text, self._glued = self._glued + text, ""
        if style.compose:
            text = f"{style.compose}  | {text}"
        if style.kubectl:
            stamp = (self.now + timedelta(hours=7)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
            text = f"{stamp} {text}"
        if style.pod:
            text = f"[pod/{style.pod}/vllm] {text}"
        lines = [text]
        if style.wrap and len(text) > style.wrap:
            lines = [text[i : i + style.wrap] for i in range(0, len(text), style.wrap)]
        end = "\r" if style.crlf else ""
        return [line + end for line in lines]

    def tag(self, proc: str | None) -> str:
        if proc is None:
            return ""
        if self.style.color in _COLOR:
            start, stop = _COLOR[self.style.color]
            return f"{start}({proc}){stop} "
        return f"({proc}) "

    def log(self, proc: str | None, level: str, where: str, msg: str) -> list[str]:
        """One vLLM logger record (multi-line messages repeat the header on each line)."""
        stamp = self.now.strftime("%m-%d %H:%M:%S")
        place = f"{where}]" if self.style.v0 else f"[{where}]"
        out: list[str] = []
        for line in msg.split("\n"):
            out += self._finish(f"{self.tag(proc)}{level} {stamp} {place} {line}")
        return out

    def raw(self, proc: str | None, text: str) -> list[str]:
        """A line not from vLLM's logger (uvicorn, tqdm, prints, C++)."""
        return self._finish(f"{self.tag(proc)}{text}")

    def bar(self, proc: str | None, text: str) -> list[str]:
        """A tqdm bar: its own line, or (``glue``) waiting for the next record to be printed after it."""
        if self.style.glue:
            self._glued = f"{self.tag(proc)}{text}"
            return []
        return self.raw(proc, text)

    def repeated(self, proc: str | None, level: str, where: str, msg: str, times: int) -> list[str]:
        """A record Ray folded with ``[repeated Nx across cluster]`` (plain record without Ray)."""
        lines = self.log(proc, level, where, msg)
        if self.style.ray:
            lines = [line + f" [repeated {times}x across cluster]" for line in lines]
        return lines


def _traceback(frames: list[tuple[str, int, str, str]], error: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append(f'  File "{TRACEBACK_FILE}/{path}", line {line}, in {func}')
        lines.append(f"    {code}")
    lines.append(error)
    return "\n".join(lines)


# ---- phases ---------------------------------------------------------------------------------


def startup(w: Writer, model: str = "meta-llama/Llama-3.1-70B-Instruct") -> Iterator[str]:
    """Version banner, config, weight loading, memory profile, KV cache, graphs, ready."""
    s = w.style
    if s.v0:
        yield from w.log(None, "INFO", "api_server.py:585", f"vLLM API server version {s.version}")
        yield from w.log(
            None,
            "INFO",
            "llm_engine.py:237",
            f"Initializing an LLM engine (v{s.version}) with config: model='{model}', "
            f"tensor_parallel_size={s.tp}, pipeline_parallel_size=1, enable_chunked_prefill=False",
        )
        w.tick(95)
        for worker in [None, *w.workers[1:]]:
            yield from w.log(worker, "INFO", "model_runner.py:1025", "Loading model weights took 65.7235 GB")
        yield from w.log(None, "INFO", "distributed_gpu_executor.py:56", "# GPU blocks: 9640, # CPU blocks: 3276")
        w.tick(21)
        yield from w.log(None, "INFO", "model_runner.py:1402", "Graph capturing finished in 21 secs.")
        yield from w.raw(None, "INFO:     Application startup complete.")
        return
    yield from w.log(w.api, "INFO", "api_server.py:1896", f"vLLM API server version {s.version}")
    yield from w.log(
        w.api,
        "INFO",
        "utils.py:328",
        f"non-default args: {{'model': '{model}', 'tensor_parallel_size': {s.tp}, 'max_num_batched_tokens': 8192}}",
    )
    w.tick(6)
    yield from w.log(
        w.core,
        "INFO",
        "core.py:77",
        f"Initializing a V1 LLM engine (v{s.version}) with config: model='{model}', "
        f"tensor_parallel_size={s.tp}, pipeline_parallel_size=1, data_parallel_size=1, "
        "enable_chunked_prefill=True, max_num_batched_tokens=8192",
    )
    for done in range(0, 31, 6):
        w.tick(14)
        bar = "█" * (done // 3)
        yield from w.bar(w.workers[0], f"Loading safetensors checkpoint shards: {done * 100 // 30:3d}% Completed | {done}/30 [{done * 14 // 60:02d}:{done * 14 % 60:02d}<00:00,  2.31s/it]{bar}")
    yield from w.repeated(w.workers[0], "INFO", "gpu_model_runner.py:2602",
                          "Model loading took 65.7188 GiB and 84.211340 seconds", len(w.workers))
    w.tick(28)
    yield from w.log(w.workers[0], "INFO", "backends.py:548", "Dynamo bytecode transform time: 11.84 s")
    yield from w.log(w.workers[0], "INFO", "monitor.py:34", "torch.compile takes 27.12 s in total")
    for worker in w.workers:
        yield from w.log(worker, "INFO", "gpu_worker.py:298", "Available KV cache memory: 41.37 GiB")
    yield from w.log(w.core, "INFO", "kv_cache_utils.py:1087", "GPU KV cache size: 271,104 tokens")
    yield from w.log(w.core, "INFO", "kv_cache_utils.py:1091", "Maximum concurrency for 131,072 tokens per request: 2.07x")
    w.tick(19)
    yield from w.bar(w.workers[0], "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:12<00:00,  5.41it/s]")
    yield from w.log(w.workers[0], "INFO", "gpu_model_runner.py:3480", "Graph capturing finished in 19 secs, took 1.12 GiB")
    yield from w.log(w.core, "INFO", "core.py:210", "init engine (profile, create kv cache, warmup model) took 71.49 seconds")
    yield from w.log(w.api, "INFO", "api_server.py:1971", "Starting vLLM API server 0 on http://0.0.0.0:8000")
    yield from w.raw(w.api, "INFO:     Started server process [41]")
    yield from w.raw(w.api, "INFO:     Application startup complete.")


@dataclass
class Load:
    """The traffic during healthy serving."""

    running: int = 24
    waiting: int = 0
    prompt_tps: float = 2400.0
    gen_tps: float = 610.0
    kv: float = 46.0
    prompt_len: int = 1800
    request_logs: bool = True
    request_every: float = 2.5
    preemptions: int = 0
    """Preemptions in this stats interval (V1 prints the field only when > 0)."""


_POOL_SIZE = 1 << 16


class _TokenPool:
    """Random token ids as one long string, sliced per prompt (fast for big logs)."""

    def __init__(self, rng: random.Random) -> None:
        ids = [str(rng.randrange(100, 128000)) for _ in range(_POOL_SIZE)]
        self.text = ", ".join(ids)
        self.ends: list[int] = []
        position = 0
        for token in ids:
            position += len(token)
            self.ends.append(position)
            position += 2

    def ids(self, length: int) -> str:
        whole, rest = divmod(length, _POOL_SIZE)
        parts = [self.text] * whole + ([self.text[: self.ends[rest - 1]]] if rest else [])
        return "[" + ", ".join(parts) + "]"


def stats_line(w: Writer, load: Load) -> list[str]:
    """One periodic stats line in the layout of the writer's version."""
    if w.style.v0:
        return w.log(
            None,
            "INFO",
            "metrics.py:351",
            f"Avg prompt throughput: {load.prompt_tps:.1f} tokens/s, Avg generation throughput: "
            f"{load.gen_tps:.1f} tokens/s, Running: {load.running} reqs, Swapped: 0 reqs, "
            f"Pending: {load.waiting} reqs, GPU KV cache usage: {load.kv:.1f}%, CPU KV cache usage: 0.0%.",
        )
    return w.log(
        w.api,
        "INFO",
        "loggers.py:127",
        f"Engine 000: Avg prompt throughput: {load.prompt_tps:.1f} tokens/s, Avg generation throughput: "
        f"{load.gen_tps:.1f} tokens/s, Running: {load.running} reqs, Waiting: {load.waiting} reqs, "
        + (f"Preemptions: {load.preemptions}, " if load.preemptions else "")
        + f"GPU KV cache usage: {load.kv:.1f}%, Prefix cache hit rate: 31.4%",
    )


def request_lines(w: Writer, load: Load, length: int | None = None) -> list[str]:
    """A request arriving: the request log (with token ids), ``Added request``, the access line."""
    rng = w.rng
    rid = f"cmpl-{rng.getrandbits(64):016x}"
    size = length or max(8, int(rng.lognormvariate(0, 0.6) * load.prompt_len))
    out: list[str] = []
    if load.request_logs:
        prompt = "Summarise the quarterly report for the board, keep it short. " * 3
        proc = w.api
        out += w.log(
            proc,
            "INFO",
            "logger.py:41",
            f"Received request {rid}: prompt: '{prompt}', params: SamplingParams(n=1, temperature=0.7, "
            f"max_tokens=512), prompt_token_ids: {w.tokens.ids(size)}, prompt_embeds shape: None, "
            "lora_request: None.",
        )
    out += w.log(w.api, "INFO", "async_llm.py:270" if not w.style.v0 else "async_llm_engine.py:207", f"Added request {rid}.")
    port = rng.randrange(30000, 60000)
    out += w.raw(w.api, f'INFO:     10.0.3.{rng.randrange(2, 250)}:{port} - "POST /v1/completions HTTP/1.1" 200 OK')
    return out


def serving(w: Writer, minutes: float, load: Load) -> Iterator[str]:
    """Healthy serving: stats every 10 s (5 s in V0), requests in between."""
    interval = 5.0 if w.style.v0 else 10.0
    elapsed = 0.0
    since_request = 0.0
    while elapsed < minutes * 60:
        step = min(load.request_every, interval)
        w.tick(step)
        elapsed += step
        since_request += step
        if since_request >= load.request_every:
            since_request = 0.0
            yield from request_lines(w, load)
        if elapsed % interval < step:
            jitter = w.rng.uniform(0.85, 1.15)
            snapshot = Load(**{**load.__dict__, "gen_tps": load.gen_tps * jitter, "kv": min(load.kv * jitter, 84.0)})
            yield from stats_line(w, snapshot)


# ---- incidents --------------------------------------------------------------------------------


def _engine_dead(w: Writer) -> Iterator[str]:
    tb = _traceback(
        [("v1/engine/async_llm.py", 439, "output_handler", "outputs = await engine_core.get_output_async()"),
         ("v1/engine/core_client.py", 846, "get_output_async", "raise self._format_exception(outputs) from None")],
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    )
    yield from w.log(w.api, "ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.\n" + tb)
    for _ in range(3):
        rid = f"cmpl-{w.rng.getrandbits(64):016x}"
        yield from w.log(w.api, "INFO", "async_llm.py:384", f"Request {rid} failed (engine dead).")
    yield from w.raw(w.api, 'INFO:     10.0.3.9:41812 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error')
    w.tick(1)
    yield from w.log(w.api, "INFO", "launcher.py:101", "Shutting down FastAPI HTTP server.")
    yield from w.raw(w.api, "INFO:     Shutting down")
    yield from w.raw(w.api, "INFO:     Application shutdown complete.")


def _step_fatal(w: Writer, scheduled: str, error: str) -> Iterator[str]:
    v = w.style.version
    yield from w.log(w.core, "ERROR", "dump_input.py:69", f"Dumping input data for V1 LLM engine (v{v}) with config: model='m', tensor_parallel_size={w.style.tp}")
    yield from w.log(w.core, "ERROR", "dump_input.py:76", f"Dumping scheduler output for model execution: SchedulerOutput({scheduled})")
    yield from w.log(w.core, "ERROR", "dump_input.py:79", "Dumping scheduler stats: SchedulerStats(num_running_reqs=24, num_waiting_reqs=0)")
    tb = _traceback(
        [("v1/engine/core.py", 701, "run_engine_core", "engine_core.run_busy_loop()"),
         ("v1/engine/core.py", 728, "run_busy_loop", "self._process_engine_step()"),
         ("v1/executor/multiproc_executor.py", 243, "execute_model", "(output, ) = self.collective_rpc("),
         ("v1/executor/multiproc_executor.py", 306, "collective_rpc", "raise TimeoutError(f\"RPC call to {method} timed out.\") from e")],
        error,
    )
    yield from w.log(w.core, "ERROR", "core.py:710", "EngineCore encountered a fatal error.\n" + tb)


def deadlock_v1(w: Writer, load: Load) -> Iterator[str]:
    """A worker never answers: 0 tokens/s, shm waits every 60 s, execute_model timeout on a decode step."""
    w.tick(7)
    stuck = Load(**{**load.__dict__, "prompt_tps": 0.0, "gen_tps": 0.0})
    yield from stats_line(w, stuck)
    for _ in range(4):
        w.tick(60)
        yield from w.log(
            w.core,
            "INFO",
            "shm_broadcast.py:466",
            "No available shared memory broadcast block found in 60 seconds. This typically happens when "
            "some processes are hanging or doing some time-consuming work (e.g. compilation).",
        )
    w.tick(60)
    ids = [f"cmpl-{w.rng.getrandbits(64):016x}" for _ in range(load.running)]
    scheduled = (
        "scheduled_new_reqs=[], scheduled_cached_reqs=CachedRequestData(req_ids=" + repr(ids[:3]) + "), "
        "num_scheduled_tokens={" + ", ".join(f"{i!r}: 1" for i in ids[:3]) + "}, "
        f"total_num_scheduled_tokens={load.running}, scheduled_spec_decode_tokens={{}}"
    )
    yield from _step_fatal(w, scheduled, "TimeoutError: RPC call to execute_model timed out.")
    yield from _engine_dead(w)


def slow_prefill_v1(w: Writer, load: Load) -> Iterator[str]:
    """Chunked prefill off, one 160k-token prompt: one step outlasts the 300 s execute_model limit."""
    yield from request_lines(w, load, length=160_000)
    w.tick(10)
    yield from stats_line(w, Load(**{**load.__dict__, "prompt_tps": 0.0, "gen_tps": 0.0, "running": 1}))
    w.tick(290)
    scheduled = (
        "scheduled_new_reqs=[NewRequestData(req_id=cmpl-9a,prompt_token_ids_len=160000,mm_inputs=[],"
        "sampling_params=SamplingParams(n=1),block_ids=([1, 2, 3],),num_computed_tokens=0,lora_request=None)], "
        "scheduled_cached_reqs=CachedRequestData(req_ids=[]), num_scheduled_tokens={cmpl-9a: 160000}, "
        "total_num_scheduled_tokens=160000"
    )
    yield from _step_fatal(w, scheduled, "TimeoutError: RPC call to execute_model timed out.")
    yield from _engine_dead(w)


def oom_fragmentation_v1(w: Writer, load: Load) -> Iterator[str]:
    """A long prompt's activation cannot be placed although enough memory is cached but split."""
    yield from request_lines(w, load, length=30_000)
    w.tick(2)
    worker = w.workers[1]
    error = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 1 has a total capacity "
        "of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB "
        "memory in use. Of the allocated memory 71.52 GiB is allocated by PyTorch, with 1.12 GiB allocated in "
        "private pools (e.g., CUDA Graphs), and 4.87 GiB is reserved by PyTorch but unallocated. If reserved "
        "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    tb = _traceback([("v1/executor/multiproc_executor.py", 596, "worker_busy_loop", "output = func(*args, **kwargs)"),
                     ("v1/worker/gpu_model_runner.py", 1712, "execute_model", "model_output = self.model(")], error)
    yield from w.log(worker, "ERROR", "multiproc_executor.py:601", "WorkerProc hit an exception.\n" + tb)
    tb = _traceback([("v1/engine/core.py", 701, "run_engine_core", "engine_core.run_busy_loop()")],
                    "RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate 1.95 GiB.', please check the stack trace above for the root cause")
    yield from w.log(w.core, "ERROR", "core.py:710", "EngineCore encountered a fatal error.\n" + tb)
    yield from _engine_dead(w)


def oom_exhaustion_v0(w: Writer, load: Load) -> Iterator[str]:
    """The GPU is simply full: little reserved-but-unallocated memory."""
    w.tick(3)
    error = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 23.64 GiB of which 612.44 MiB is free. Process 4121 has 23.03 GiB memory in use. Of the allocated "
        "memory 22.41 GiB is allocated by PyTorch, and 144.20 MiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    yield from w.log(None, "ERROR", "async_llm_engine.py:63", "Engine background task failed\n"
                     + _traceback([("engine/async_llm_engine.py", 53, "_log_task_completion", "return_value = task.result()")], error))
    yield from w.log(None, "CRITICAL", "launcher.py:99", "AsyncLLMEngine has failed, terminating server process")


def kv_pressure_v1(w: Writer, load: Load) -> Iterator[str]:
    """Long prompts fill the KV cache; the scheduler preempts request after request."""
    kv = load.kv
    for step in range(12):
        w.tick(10)
        kv = min(99.6, kv + 5.5)
        gen = max(load.gen_tps * (1 - step / 12), 12.0)
        preempted = step * 3 if step >= 5 else 0
        line = Load(**{**load.__dict__, "kv": kv, "gen_tps": gen, "waiting": 3 + step * 4, "preemptions": preempted})
        yield from stats_line(w, line)


def crash_ima_v1(w: Writer, load: Load) -> Iterator[str]:
    """A kernel faults: illegal memory access in a worker, the executor goes down."""
    w.tick(4)
    worker = w.workers[0]
    error = "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
    tb = _traceback([("v1/worker/gpu_model_runner.py", 1712, "execute_model", "model_output = self.model(")], error)
    yield from w.log(worker, "ERROR", "multiproc_executor.py:601", "WorkerProc hit an exception.\n" + tb)
    yield from w.raw(None, "terminate called after throwing an instance of 'c10::Error'")
    yield from w.raw(None, "  what():  CUDA error: an illegal memory access was encountered")
    yield from w.log(w.core, "ERROR", "multiproc_executor.py:150", "Worker proc VllmWorker-0 died unexpectedly, shutting down executor.")
    yield from _engine_dead(w)


def nccl_watchdog_v0(w: Writer, load: Load) -> Iterator[str]:
    """V0 TP all-reduce never completes: 0 tokens/s with a running request, then the NCCL watchdog."""
    stuck = Load(**{**load.__dict__, "prompt_tps": 0.0, "gen_tps": 0.0, "running": 2})
    for _ in range(6):
        w.tick(5)
        yield from stats_line(w, stuck)
    w.tick(570)
    stamp = w.now.strftime("%m%d %H:%M:%S")
    for rank in range(w.style.tp):
        yield from w.raw(
            None,
            f"[rank{rank}]:[E{stamp}.081662161 ProcessGroupNCCL.cpp:684] [Rank {rank}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=20585, OpType=ALLREDUCE, NumelIn=1259621, NumelOut=1259621, "
            "Timeout(ms)=600000) ran for 600000 milliseconds before timing out.",
        )
    yield from w.raw(None, f"[rank0]:[E{stamp}.082008373 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 20585, last enqueued NCCL work: 20586, last completed NCCL work: 20584.")
    yield from w.raw(None, f"[rank0]:[E{stamp}.082154012 ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.")
    yield from w.raw(None, "terminate called after throwing an instance of 'c10::DistBackendError'")


def iteration_timeout_v0(w: Writer, load: Load) -> Iterator[str]:
    """One V0 step (a 30k-token prompt on one GPU) outlasts VLLM_ENGINE_ITERATION_TIMEOUT_S."""
    yield from request_lines(w, load, length=30_000)
    w.tick(5)
    yield from stats_line(w, Load(**{**load.__dict__, "prompt_tps": 0.0, "gen_tps": 0.0, "running": 1}))
    w.tick(55)
    yield from w.log(None, "ERROR", "async_llm_engine.py:886", "Engine iteration timed out. This should never happen!")
    tb = _traceback([("engine/async_llm_engine.py", 872, "run_engine_loop", "done, _ = await asyncio.wait(")],
                    "asyncio.exceptions.CancelledError")
    yield from w.log(None, "ERROR", "async_llm_engine.py:63", "Engine background task failed\n" + tb)
    yield from w.log(None, "CRITICAL", "launcher.py:99", "AsyncLLMEngine is already dead, terminating server process")


def slow_startup_v1(w: Writer) -> Iterator[str]:
    """A 163-shard checkpoint is still loading when the engine-ready timeout (600 s) fires."""
    s = w.style
    yield from w.log(w.api, "INFO", "api_server.py:1896", f"vLLM API server version {s.version}")
    yield from w.log(w.core, "INFO", "core.py:77", f"Initializing a V1 LLM engine (v{s.version}) with config: model='deepseek-ai/DeepSeek-R1', tensor_parallel_size={s.tp}")
    for done in range(0, 110, 5):
        w.tick(27)
        yield from w.raw(w.workers[0], f"Loading safetensors checkpoint shards: {done * 100 // 163:3d}% Completed | {done}/163 [{done * 27 // 60:02d}:{done * 27 % 60:02d}<05:20,  5.63s/it]")
    tb = _traceback([("v1/engine/utils.py", 913, "wait_for_engine_startup", "raise TimeoutError(")],
                    "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight loading for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>")
    yield from w.raw(w.api, "Traceback (most recent call last):")
    for line in tb.split("\n")[1:]:
        yield from w.raw(w.api, line)


def other_program(w: Writer) -> Iterator[str]:
    """Not vLLM at all: a web application's log (the verdict must be unknown)."""
    for number in range(400):
        w.tick(3)
        yield f"{w.now:%Y-%m-%d %H:%M:%S},{number % 1000:03d} INFO django.request GET /api/items/{number} 200"


def healthy_tail(w: Writer, load: Load) -> Iterator[str]:
    """The server is shut down on purpose after serving."""
    w.tick(3)
    yield from w.raw(w.api, "INFO:     Shutting down")
    yield from w.log(w.api, "INFO", "launcher.py:101", "Shutting down FastAPI HTTP server.")
    yield from w.raw(w.api, "INFO:     Application shutdown complete.")


def operator_shutdown_v1(w: Writer, load: Load) -> Iterator[str]:
    """An operator stops the server mid-traffic (SIGTERM, a rolling update): it drains and exits cleanly.

    The lines after the stop read like a crash — the engine core "exited unexpectedly",
    requests fail as "engine dead" — but they are the shutdown the operator asked for.
    """
    w.tick(2)
    yield from w.log(w.api, "INFO", "launcher.py:256", "[shutdown] API server: shutdown triggered")
    yield from w.log(w.core, "INFO", "core.py:1698", "[shutdown] EngineCore: trigger received signal=SIGTERM")
    yield from w.log(w.core, "INFO", "core.py:1910", "[shutdown] EngineCore: draining in-flight requests count=3 timeout=30s")
    w.tick(4)
    for _ in range(3):
        yield from w.log(w.api, "INFO", "loggers.py:236", f"Finished request cmpl-{w.rng.getrandbits(64):016x}.")
    yield from w.log(w.core, "INFO", "core.py:1746", "[shutdown] EngineCore: exiting busy loop")
    yield from w.raw(w.api, "INFO:     Shutting down")
    yield from w.raw(w.api, "INFO:     Waiting for application shutdown.")
    yield from w.raw(w.api, "INFO:     Application shutdown complete.")
    w.tick(1)
    yield from w.log(w.api, "ERROR", "core_client.py:564", "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.")
    yield from w.log(w.api, "ERROR", "async_llm.py:480", "engine core exited unexpectedly")


INCIDENTS: dict[str, tuple[str, Callable[[Writer, Load], Iterator[str]]]] = {
    "deadlock": ("deadlocked", deadlock_v1),
    "slow-prefill": ("slow", slow_prefill_v1),
    "oom-fragmentation": ("fragmented", oom_fragmentation_v1),
    "kv-pressure": ("fragmented", kv_pressure_v1),
    "crash-ima": ("crashed", crash_ima_v1),
    "healthy": ("healthy", healthy_tail),
    "operator-shutdown": ("healthy", operator_shutdown_v1),
}
"""V1 incidents: name → (expected verdict, tail writer)."""

V0_INCIDENTS: dict[str, tuple[str, Callable[[Writer, Load], Iterator[str]]]] = {
    "nccl-watchdog": ("deadlocked", nccl_watchdog_v0),
    "iteration-timeout": ("slow", iteration_timeout_v0),
    "oom-exhaustion": ("fragmented", oom_exhaustion_v0),
    "healthy": ("healthy", healthy_tail),
}


def incident(
    name: str,
    style: Style | None = None,
    minutes: float = 60.0,
    seed: int = 7,
    start: datetime = datetime(2025, 10, 22, 9, 30, 0),
    load: Load | None = None,
) -> Iterator[str]:
    """Lines of a whole log: start-up, ``minutes`` of healthy serving, then the named incident."""
    style = style or Style()
    table = V0_INCIDENTS if style.v0 else INCIDENTS
    w = Writer(style, start, seed)
    if name == "slow-startup":
        yield from slow_startup_v1(w)
        return
    if name == "not-vllm":
        yield from other_program(w)
        return
    load = load or Load()
    yield from startup(w)
    yield from serving(w, minutes, load)
    yield from table[name][1](w, load)


def expected_kind(name: str, style: Style | None = None) -> str:
    """The verdict a scenario must get."""
    if name == "slow-startup":
        return "slow"
    if name == "not-vllm":
        return "unknown"
    table = V0_INCIDENTS if (style or Style()).v0 else INCIDENTS
    return table[name][0]
