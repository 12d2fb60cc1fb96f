"""What vLLM, PyTorch and NCCL print, as data: one ``Rule`` per signal and wording.

Each rule names a *literal* that any line it matches must contain.  The literals
drive both the cheap relevance test (a record with none of them yields no event)
and the bulk scanner's candidate search, so a rule without a literal cannot
exist.  Strings were read in vLLM's and PyTorch's source; docs/log-formats.md
lists them per version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engdiag.logs.events import (
    CudaOom,
    Failure,
    Iteration,
    Memory,
    NcclWork,
    ParallelConfig,
    Payload,
    Peer,
    Phase,
    Preemption,
    PromptLength,
    Rendezvous,
    ScheduledTokens,
    ShmStall,
    Signal,
    Stats,
    Timeout,
    Version,
)

Builder = Callable[[re.Match[str], str], Iterable[Payload]]


@dataclass(frozen=True)
class Rule:
    """One wording of one signal."""

    signal: Signal
    literal: str
    pattern: re.Pattern[str]
    build: Builder | None = None
    every: bool = False
    """Emit an event for every match in the record, not just the first."""


def _f(value: str | None) -> float | None:
    return None if value is None else float(value.replace(",", ""))


def _i(value: str | None) -> int | None:
    return None if value is None else int(value.replace(",", ""))


_UNITS = {"B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_UNITS |= {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_SIZE = r"[\d.]+ ?(?:bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)"
_SIZE_PARTS = re.compile(r"([\d.]+) ?(\w+)")


def size_bytes(text: str | None) -> int | None:
    """``'736.86 MiB'`` → bytes."""
    if text is None:
        return None
    match = _SIZE_PARTS.fullmatch(text.strip())
    if match is None or match.group(2) not in _UNITS:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2)])


# ---- builders ---------------------------------------------------------------------------

_KV = re.compile(r"(?<!CPU )(?:GPU|\w+(?: \+ \w+)?) KV cache usage: ([\d.]+)%")
_CPU_KV = re.compile(r"CPU KV cache usage: ([\d.]+)%")
_PREFIX = re.compile(r"Prefix cache hit rate: ([\d.]+)%")
_PREEMPT = re.compile(r"Preemptions: (\d+)")
_CORRUPT = re.compile(r"Corrupted: (\d+) reqs")


def _stats(match: re.Match[str], text: str) -> Iterable[Payload]:
    rest = text[match.end() : text.find("\n", match.end()) if "\n" in text[match.end() :] else None]
    kv, cpu, prefix, preempt, corrupt = (p.search(rest) for p in (_KV, _CPU_KV, _PREFIX, _PREEMPT, _CORRUPT))
    yield Stats(
        prompt_tps=float(match["p"]),
        generation_tps=float(match["g"]),
        running=int(match["run"]),
        waiting=int(match["wait"]),
        swapped=_i(match["sw"]),
        gpu_kv_pct=_f(kv.group(1)) if kv else None,
        cpu_kv_pct=_f(cpu.group(1)) if cpu else None,
        prefix_hit_pct=_f(prefix.group(1)) if prefix else None,
        preemptions=_i(preempt.group(1)) if preempt else None,
        engine=_i(match["engine"]),
        corrupted=_i(corrupt.group(1)) if corrupt else None,
    )


def _scheduled(match: re.Match[str], text: str) -> Iterable[Payload]:
    lengths = [int(n) for n in re.findall(r"prompt_token_ids_len=(\d+)", text)]
    yield ScheduledTokens(
        total=int(match.group(1)),
        new_requests=text.count("NewRequestData("),
        largest_new_prompt=max(lengths) if lengths else None,
    )


def _oom(match: re.Match[str], text: str) -> Iterable[Payload]:
    line_end = text.find("\n", match.start())
    line = text[match.start() : line_end if line_end != -1 else None]
    new = _OOM_NEW.search(line)
    if new is not None:
        yield CudaOom(
            tried=size_bytes(new["tried"]),
            total=size_bytes(new["total"]),
            free=size_bytes(new["free"]),
            allocated=size_bytes(_group(_OOM_ALLOC, line, "alloc")),
            reserved_unallocated=size_bytes(_group(_OOM_ALLOC, line, "resv")),
            private_pools=size_bytes(_group(_OOM_ALLOC, line, "pools")),
            process_in_use=size_bytes(_group(_OOM_INUSE, line, "inuse")),
            device=int(new["dev"]),
        )
        return
    old = _OOM_OLD.search(line)
    if old is not None:
        allocated, reserved = size_bytes(old["alloc"]), size_bytes(old["resv"])
        unallocated = reserved - allocated if reserved is not None and allocated is not None else None
        yield CudaOom(
            tried=size_bytes(old["tried"]),
            total=size_bytes(old["total"]),
            free=size_bytes(old["free"]),
            allocated=allocated,
            reserved_unallocated=unallocated,
            device=int(old["dev"]),
        )
        return
    yield CudaOom()


def _group(pattern: re.Pattern[str], text: str, name: str) -> str | None:
    found = pattern.search(text)
    return found[name] if found is not None else None


_OOM_NEW = re.compile(
    rf"Tried to allocate (?P<tried>{_SIZE})\. GPU (?P<dev>\d+) has a total capacity of "
    rf"(?P<total>{_SIZE}) of which (?P<free>{_SIZE}) is free"
)
_OOM_ALLOC = re.compile(
    rf"Of the allocated memory (?P<alloc>{_SIZE}) is allocated by PyTorch, "
    rf"(?:with (?P<pools>{_SIZE}) allocated in private pools \(e\.g\., CUDA Graphs\), )?"
    rf"and (?P<resv>{_SIZE}) is reserved by PyTorch but unallocated"
)
_OOM_INUSE = re.compile(
    rf"(?:Including non-PyTorch memory, this process has|Process \d+ has) (?P<inuse>{_SIZE}) memory in use"
)
_OOM_OLD = re.compile(
    rf"Tried to allocate (?P<tried>{_SIZE}) \(GPU (?P<dev>\d+); (?P<total>{_SIZE}) total capacity; "
    rf"(?P<alloc>{_SIZE}) already allocated; (?P<free>{_SIZE}) free; "
    rf"(?P<resv>{_SIZE}) reserved in total by PyTorch\)"
)
_WORK_FIELDS = {
    "seq": re.compile(r"SeqNum=(\d+)"),
    "op": re.compile(r"OpType=(\w+)"),
    "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)"),
}


def _nccl_timeout(match: re.Match[str], text: str) -> Iterable[Payload]:
    work = match["work"]
    found = {key: p.search(work) for key, p in _WORK_FIELDS.items()}
    yield NcclWork(
        rank=_i(match["rank"]),
        seq=_i(found["seq"].group(1)) if found["seq"] else None,
        op=found["op"].group(1) if found["op"] else None,
        timeout_ms=_i(found["timeout_ms"].group(1)) if found["timeout_ms"] else None,
        ran_ms=int(match["ran"]),
    )


_EXCEPTION_LINE = re.compile(
    r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)\b(?::.*)?)$",
    re.MULTILINE,
)


def last_exception(text: str) -> str | None:
    """The exception a traceback in ``text`` ends with (its last exception line)."""
    found = None
    for found in _EXCEPTION_LINE.finditer(text):  # noqa: B007 - keep the last
        pass
    return found.group(1).strip()[:300] if found else None


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


def _in_collective(match: re.Match[str], text: str) -> Iterable[Payload]:
    """A stack frame inside a collective, from a capture (not an exception's traceback)."""
    if last_exception(text) is None:
        yield Peer(detail=match["f"])


_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier", "_gather_ipc_meta", "all_to_all")


def _collective_frame(name: str) -> Rule:
    """faulthandler's ``line N in f``, py-spy's ``    f (file:line)``, the call tracer's ``Call to f in``."""
    return Rule(
        Signal.STACK_IN_COLLECTIVE,
        name,
        re.compile(rf"(?:line \d+ in |Call to |^\s{{2,}})(?P<f>\w*{name}\w*)(?: in | \(|$)", re.MULTILINE),
        _in_collective,
    )


def _failure(name: str) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield Failure(exception=last_exception(text[match.end() :]), name=name)

    return build


def _const(payload: Payload) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield payload

    return build


def _phase(name: str, seconds: str | None = None, gib: str | None = None) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield Phase(
            name,
            seconds=_f(match[seconds]) if seconds else None,
            gib=_f(match[gib]) if gib else None,
        )

    return build


def _memory(*fields: tuple[str, str, str]) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        for name, group, unit in fields:
            value = match[group]
            if value is not None:
                yield Memory(name, float(value.replace(",", "")), unit)

    return build


def _version(engine: str | None) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield Version(version=match["v"].lstrip("v"), engine=engine)

    return build


_CONFIG_FIELDS = {
    "tp": re.compile(r"\btensor_parallel_size['\"]?[=:] ?(\d+)"),
    "pp": re.compile(r"\bpipeline_parallel_size['\"]?[=:] ?(\d+)"),
    "dp": re.compile(r"\bdata_parallel_size['\"]?[=:] ?(\d+)"),
    "model": re.compile(r"\bmodel['\"]?[=:] ?['\"]([^'\"]+)['\"]"),
    "chunked": re.compile(r"\b(?:enable_chunked_prefill|chunked_prefill_enabled)['\"]?[=:] ?(True|False)"),
    "batched": re.compile(r"\bmax_num_batched_tokens['\"]?[=:] ?(\d+)"),
}


def _config(match: re.Match[str], text: str) -> Iterable[Payload]:
    found = {key: p.search(text) for key, p in _CONFIG_FIELDS.items()}

    def value(key: str) -> str | None:
        hit = found[key]
        return hit.group(1) if hit else None

    chunked = value("chunked")
    config = ParallelConfig(
        tp=_i(value("tp")),
        pp=_i(value("pp")),
        dp=_i(value("dp")),
        model=value("model"),
        chunked_prefill=None if chunked is None else chunked == "True",
        max_num_batched_tokens=_i(value("batched")),
    )
    if config != ParallelConfig():
        yield config


def _stats_rule(literal: str) -> Rule:
    return Rule(Signal.STATS, literal, _STATS, _stats)


_STATS = re.compile(
    r"(?:Engine (?P<engine>\d+): |\d+ Engines Aggregated: )?"
    r"Avg prompt throughput: (?P<p>[\d.]+) tokens/s, ?Avg generation throughput: (?P<g>[\d.]+) tokens/s, ?"
    r"(?:(?!Running:)[^\n]){0,80}?Running: (?P<run>\d+) reqs, ?(?:Swapped: (?P<sw>\d+) reqs, ?)?(?:Pending|Waiting): (?P<wait>\d+) reqs"
)


class _Lazy:
    """A rule's regex, compiled the first time a record holding its literal needs it (start-up stays short)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __getattr__(self, name: str) -> object:
        compiled = re.compile(self.pattern)
        self.__dict__.update(search=compiled.search, finditer=compiled.finditer, match=compiled.match,
                             fullmatch=compiled.fullmatch, findall=compiled.findall, sub=compiled.sub)
        return getattr(compiled, name)


def _c(pattern: str) -> re.Pattern[str]:
    return _Lazy(pattern)  # type: ignore[return-value]


RULES: tuple[Rule, ...] = (
    # progress ------------------------------------------------------------------------
    _stats_rule("Avg prompt throughput"),
    Rule(Signal.PREFIX_CACHE, "Prefix cache hit rate: GPU", _c(r"Prefix cache hit rate: GPU: ([\d.]+)%")),
    Rule(
        Signal.ITERATION,
        "Iteration(",
        _c(
            r"Iteration\(\d+\): (?P<cr>\d+) context requests, (?P<ct>\d+) context tokens, "
            r"(?P<gr>\d+) generation requests, (?P<gt>\d+) generation tokens, "
            r"iteration elapsed time: (?P<ms>[\d.]+) ms"
        ),
        lambda m, t: [Iteration(int(m["cr"]), int(m["ct"]), int(m["gr"]), int(m["gt"]), float(m["ms"]))],
    ),
    Rule(Signal.REQUEST_RECEIVED, "Received request", _c(r"Received request \S+?:")),
    Rule(
        Signal.PROMPT_LENGTH,
        "prompt_token_ids: ",
        _c(r"prompt_token_ids: <(?P<least>≥)?(?P<n>\d+) token ids>"),
        lambda m, t: [PromptLength(int(m["n"]), bool(m["least"]), "request_log")] if m["n"] != "0" else [],
    ),
    Rule(Signal.REQUEST_ADDED, "Added request", _c(r"Added request \S+")),
    Rule(Signal.REQUEST_FINISHED, "Finished request", _c(r"Finished request \S+")),
    Rule(Signal.REQUEST_ABORTED, "Aborted request", _c(r"Aborted request(?:\(s\))? \S+")),
    Rule(Signal.REQUEST_FAILED, " failed (", _c(r"Request \S+ failed \((?:engine dead|bad request)")),
    Rule(Signal.RESPONSE_GENERATED, "Generated response", _c(r"Generated response \S+?:")),
    # prompt sizes --------------------------------------------------------------------
    Rule(
        Signal.PROMPT_LENGTH,
        "prompt_token_ids_len=",
        _c(r"prompt_token_ids_len=(\d+)"),
        lambda m, t: [PromptLength(int(m.group(1)), False, "crash_dump")],
        every=True,
    ),
    Rule(Signal.SCHEDULED_TOKENS, "total_num_scheduled_tokens=", _c(r"total_num_scheduled_tokens=(\d+)"), _scheduled),
    Rule(
        Signal.PROMPT_LENGTH,
        "maximum context length is",
        _c(
            r"maximum context length is \d+ tokens\. However, (?:you requested (?P<a>\d+) tokens"
            r"|your request has (?P<b>\d+) input tokens|your prompt contains (?P<least>at least )?(?P<c>\d+) input tokens)"
        ),
        lambda m, t: [PromptLength(int(m["a"] or m["b"] or m["c"]), bool(m["least"]), "context_error")],
    ),
    Rule(
        Signal.PROMPT_LENGTH,
        "is longer than the maximum model length",
        _c(r"prompt \(length (\d+)\) (?:plus the number of requested output tokens \(at least 1\) )?is longer than"),
        lambda m, t: [PromptLength(int(m.group(1)), False, "context_error")],
    ),
    # start-up ------------------------------------------------------------------------
    Rule(Signal.VERSION, "Initializing a V1 LLM engine", _c(r"Initializing a V1 LLM engine \((?P<v>[^)\s]+)\)"), _version("V1")),
    Rule(Signal.VERSION, "Initializing a V0 LLM engine", _c(r"Initializing a V0 LLM engine \((?P<v>[^)\s]+)\)"), _version("V0")),
    Rule(Signal.VERSION, "Initializing an LLM engine", _c(r"Initializing an LLM engine \((?P<v>[^)\s]+)\)"), _version("V0")),
    Rule(Signal.VERSION, "vLLM API server version", _c(r"vLLM API server version (?P<v>[^\s,]+)"), _version(None)),
    Rule(Signal.VERSION, "vLLM server version", _c(r"vLLM server version (?P<v>[^\s,]+)"), _version(None)),
    Rule(Signal.VERSION, "Dumping input data for V1", _c(r"Dumping input data for V1 LLM engine \((?P<v>[^)\s]+)\)"), _version("V1")),
    Rule(Signal.PARALLEL_CONFIG, "with config:", _c(r"with config:"), _config),
    Rule(Signal.PARALLEL_CONFIG, "non-default args", _c(r"non-default args: \{"), _config),
    Rule(
        Signal.PARALLEL_CONFIG,
        "Init COMPLETE",
        _c(r"\brank (?P<rank>\d+) nranks (?P<n>\d+)\b"),
        lambda m, t: [ParallelConfig(nranks=int(m["n"]))],
    ),
    Rule(Signal.STARTUP_PHASE, "Loading model weights took", _c(r"Loading model weights took (?P<g>[\d.]+) GB"), _phase("weights_loaded", gib="g")),
    Rule(
        Signal.STARTUP_PHASE,
        "Model loading took",
        _c(r"Model loading took (?P<g>[\d.]+) Gi?B(?: memory)? and (?P<s>[\d.]+) seconds"),
        _phase("weights_loaded", seconds="s", gib="g"),
    ),
    Rule(Signal.STARTUP_PHASE, "Loading weights took", _c(r"Loading weights took (?P<s>[\d.]+) seconds"), _phase("weights_read", seconds="s")),
    Rule(Signal.STARTUP_PHASE, "Memory profiling takes", _c(r"Memory profiling takes (?P<s>[\d.]+) seconds"), _phase("memory_profiled", seconds="s")),
    Rule(
        Signal.STARTUP_PHASE,
        "init engine (profile",
        _c(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s"),
        _phase("engine_initialised", seconds="s"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "Graph capturing finished",
        _c(r"Graph capturing finished in (?P<s>[\d.]+) secs?(?:, took (?P<g>[\d.]+) GiB)?"),
        _phase("cuda_graphs_captured", seconds="s", gib="g"),
    ),
    Rule(Signal.STARTUP_PHASE, "Capturing cudagraphs", _c(r"Capturing cudagraphs for decoding"), _phase("cuda_graph_capture")),
    Rule(Signal.STARTUP_PHASE, "Capturing the model for CUDA graphs", _c(r"Capturing the model for CUDA graphs"), _phase("cuda_graph_capture")),
    Rule(Signal.STARTUP_PHASE, "Waiting for READY message", _c(r"Waiting for READY message from DP Coordinator"), _phase("waiting_for_dp_coordinator")),
    Rule(
        Signal.STARTUP_PHASE,
        "remote core engine proc",
        _c(r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to (?:start|connect)"),
        _phase("waiting_for_engine_cores"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "core engine proc(s) to start",
        _c(r"Waiting for \d+ core engine proc\(s\) to start"),
        _phase("waiting_for_engine_cores"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "distributed_init_method=",
        _c(r"world_size=(?P<w>\d+) rank=(?P<r>\d+) local_rank=\d+ distributed_init_method=(?P<m>\S+)"),
        lambda m, t: [Phase(f"process_group_init {m['m']}"), ParallelConfig(nranks=int(m["w"]))],
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "Running FlashInfer autotune",
        _c(r"Running FlashInfer autotune"),
        _phase("kernel_autotune"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "Autotuning process starts",
        _c(r"\[Auto[Tt]uner\]: Autotuning process starts"),
        _phase("kernel_autotune"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "]: Loaded",
        _c(r"\[Auto[Tt]uner\]: Loaded (?P<n>\d+) configs"),
        lambda m, t: [Phase(f"autotune_cache_loaded {m['n']}")],
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "vLLM is using nccl==",
        _c(r"vLLM is using nccl==(?P<v>[\w.]+)"),
        lambda m, t: [Phase("nccl_communicator_ready")],
    ),
    Rule(Signal.SERVER_READY, "Application startup complete", _c(r"Application startup complete")),
    Rule(Signal.SERVER_READY, "Starting vLLM API server", _c(r"Starting vLLM API server")),
    Rule(Signal.COMPILE, "torch.compile take", _c(r"torch\.compile takes (?P<s>[\d.]+) s in total"), _phase("torch_compile", seconds="s")),
    Rule(
        Signal.COMPILE,
        "run together took",
        _c(r"torch\.compile and initial profiling/warmup run together took (?P<s>[\d.]+) s in total"),
        _phase("torch_compile", seconds="s"),
    ),
    Rule(Signal.COMPILE, "torch.compile took", _c(r"torch\.compile took (?P<s>[\d.]+) s in total"), _phase("torch_compile", seconds="s")),
    Rule(Signal.COMPILE, "Dynamo bytecode transform time", _c(r"Dynamo bytecode transform time: (?P<s>[\d.]+) s"), _phase("dynamo", seconds="s")),
    Rule(Signal.COMPILE, "Compiling a graph for", _c(r"Compiling a graph for .*? takes (?P<s>[\d.]+) s"), _phase("graph_compile", seconds="s")),
    Rule(Signal.COMPILE, "Loading JIT ops", _c(r"(?<!Finished )Loading JIT ops: \S+"), _phase("jit_compile")),
    Rule(Signal.COMPILE, "JIT compil", _c(r"JIT compil\w*(?![^\n]*during inference: )"), _phase("jit_compile")),
    # memory --------------------------------------------------------------------------
    Rule(
        Signal.MEMORY,
        "Available KV cache memory",
        _c(r"Available KV cache memory: (?P<v>[\d.]+) GiB"),
        _memory(("available_kv_cache", "v", "GiB")),
    ),
    Rule(
        Signal.MEMORY,
        "KV cache size:",
        _c(r"KV cache size: (?P<v>[\d,]+) tokens"),
        _memory(("kv_cache_tokens", "v", "tokens")),
    ),
    Rule(
        Signal.MEMORY,
        "Maximum concurrency for",
        _c(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x"),
        _memory(("max_model_len", "len", "tokens"), ("max_concurrency", "x", "x")),
    ),
    Rule(
        Signal.MEMORY,
        "# GPU blocks:",
        _c(r"# GPU blocks: (?P<g>\d+)(?:, # CPU blocks: (?P<c>\d+))?"),
        _memory(("gpu_blocks", "g", "blocks"), ("cpu_blocks", "c", "blocks")),
    ),
    Rule(
        Signal.MEMORY,
        "model weights take",
        _c(
            r"model weights take (?P<w>[\d.]+)GiB; non_torch_memory takes (?P<n>[\d.]+)GiB; "
            r"PyTorch activation peak memory takes (?P<a>[\d.]+)GiB; "
            r"the rest of the memory reserved for KV Cache is (?P<k>[\d.]+)GiB"
        ),
        _memory(
            ("weights", "w", "GiB"),
            ("non_torch", "n", "GiB"),
            ("activation_peak", "a", "GiB"),
            ("kv_cache_reserved", "k", "GiB"),
        ),
    ),
    Rule(
        Signal.MEMORY,
        "gpu_memory_utilization (",
        _c(r"total_gpu_memory \((?P<t>[\d.]+)GiB\) x gpu_memory_utilization \([\d.]+\) = (?P<u>[\d.]+)GiB"),
        _memory(("total_gpu_memory", "t", "GiB"), ("usable_gpu_memory", "u", "GiB")),
    ),
    Rule(
        Signal.MEMORY,
        "Sleep mode freed",
        _c(r"Sleep mode freed (?P<f>[\d.]+) GiB memory"),
        _memory(("sleep_freed", "f", "GiB")),
    ),
    Rule(Signal.CUDA_OOM, "out of memory", _c(r"(?:CUDA|HIP) out of memory|CUDA (?:driver )?error: out of memory"), _oom),
    Rule(Signal.CUDA_OOM, "CUBLAS_STATUS_ALLOC_FAILED", _c(r"CUBLAS_STATUS_ALLOC_FAILED"), _oom),
    Rule(Signal.CUDA_OOM, "OutOfMemoryError", _c(r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError"), _oom),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "No available memory for the cache blocks", _c(r"No available memory for the cache blocks")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "larger than the available KV cache memory", _c(r"larger than the available KV cache memory")),
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "stored in KV cache",
        _c(r"larger than the maximum number of tokens that can be stored in KV cache"),
    ),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "is less than desired GPU memory utilization", _c(r"is less than desired GPU memory utilization")),
    Rule(
        Signal.PREEMPTION,
        "is preempted by",
        _c(r"is preempted by (?:PreemptionMode\.)?(?P<mode>\w+) mode(?:.*?total_num_cumulative_preemption=(?P<n>\d+))?"),
        lambda m, t: [Preemption(_i(m["n"]), m["mode"])],
    ),
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
    Rule(Signal.ENGINE_READY_TIMEOUT, "Did not receive response from front-end", _c(r"Did not receive response from front-end process")),
    Rule(Signal.ENGINE_FATAL, "EngineCore encountered a fatal error", _c(r"EngineCore encountered a fatal error"), _failure("busy loop")),
    Rule(Signal.ENGINE_FATAL, "EngineCore hit an exception", _c(r"EngineCore hit an exception"), _failure("busy loop")),
    Rule(Signal.ENGINE_FATAL, "EngineCore failed to start", _c(r"EngineCore failed to start"), _failure("start-up")),
    Rule(Signal.ENGINE_FATAL, "Engine core initialization failed", _c(r"Engine core initialization failed"), _failure("start-up")),
    Rule(Signal.ENGINE_FATAL, "Engine process failed to start", _c(r"Engine process failed to start"), _failure("start-up")),
    Rule(
        Signal.ENGINE_FATAL,
        "launch_core_engines(",
        _c(r"launch_core_engines\(|wait_for_engine_startup\("),
        _failure("start-up"),
    ),
    Rule(Signal.ENGINE_FATAL, "Engine background task failed", _c(r"Engine background task failed"), _failure("background loop")),
    Rule(Signal.ENGINE_DEAD, "EngineDeadError", _c(r"(?:Async|MQ)?EngineDeadError")),
    Rule(Signal.ENGINE_DEAD, "Engine process (pid", _c(r"Engine process \(pid \d+\) died")),
    Rule(Signal.ENGINE_DEAD, ", terminating server process", _c(r"(?:has failed|is already dead), terminating server process")),
    Rule(Signal.ENGINE_DEAD, "Got fatal signal from worker", _c(r"Got fatal signal from worker processes")),
    Rule(Signal.ENGINE_DEAD, "output_handler failed", _c(r"output_handler failed")),
    Rule(Signal.ENGINE_DEAD, "output handler hit an error", _c(r"output handler hit an error")),
    Rule(Signal.ENGINE_DEAD, "Background loop ", _c(r"Background loop (?:has errored|is not running|is stopped)")),
    Rule(Signal.ENGINE_DEAD, "Engine loop is not running", _c(r"Engine loop is not running")),
    Rule(Signal.WORKER_EXCEPTION, "WorkerProc hit an exception", _c(r"WorkerProc hit an exception"), _failure("worker")),
    Rule(Signal.WORKER_EXCEPTION, "Worker failed with error", _c(r"Worker failed with error '?(?P<e>[^'\n]{0,300})"), lambda m, t: [Failure(exception=m["e"], name="worker")]),
    Rule(Signal.WORKER_EXCEPTION, "Exception in worker", _c(r"Exception in worker (?P<w>\S+) while processing method (?P<m>\w+)"), lambda m, t: [Failure(name=m["w"])]),
    Rule(
        Signal.WORKER_DIED,
        "died unexpectedly",
        _c(r"(?P<who>Worker proc|Engine core proc) (?P<name>\S+) died unexpectedly(?: \(exit code: (?P<code>-?\d+)\))?"),
        lambda m, t: [Failure(name=f"{m['who']} {m['name']}", exit_code=_i(m["code"]))],
    ),
    Rule(
        Signal.WORKER_DIED,
        "died, exit code",
        _c(r"Worker (?P<name>\S+) pid \d+ died, exit code: (?P<code>-?\d+)"),
        lambda m, t: [Failure(name=m["name"], exit_code=int(m["code"]))],
    ),
    Rule(
        Signal.WORKER_DIED,
        "Killed process",
        _c(r"Out of memory: Killed process (?P<pid>\d+) \((?P<n>[^)]+)\)"),
        lambda m, t: [Failure(name=f"{m['n']} pid {m['pid']} (host OOM killer)", exit_code=-9)],
    ),
    Rule(
        Signal.WORKER_DIED,
        "The actor died unexpectedly",
        _c(r"The actor died unexpectedly before finishing this task"),
        _const(Failure(name="Ray actor")),
    ),
    Rule(
        Signal.WORKER_DIED,
        "node running low on memory",
        _c(r"killed due to the node running low on memory"),
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
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "Watchdog caught collective operation timeout",
        _c(
            r"(?:\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\] )?Watchdog caught collective operation timeout: "
            r"WorkNCCL\((?P<work>.*?)\) ran for (?P<ran>\d+) milliseconds"
        ),
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
    Rule(Signal.NCCL_ABORT, "Some NCCL operations have failed", _c(r"Some NCCL operations have failed or timed out")),
    Rule(Signal.NCCL_ABORT, "watchdog thread terminated", _c(r"watchdog thread terminated with exception")),
    Rule(Signal.NCCL_ABORT, "ncclCommWatchdog", _c(r"Exception raised from ncclCommWatchdog")),
    Rule(Signal.CUDA_ERROR, "illegal memory access", _c(r"an illegal memory access was encountered")),
    Rule(Signal.CUDA_ERROR, "device-side assert", _c(r"device-side assert triggered")),
    Rule(Signal.CUDA_ERROR, "unspecified launch failure", _c(r"unspecified launch failure")),
    Rule(Signal.CUDA_ERROR, "CUDA error: ", _c(r"CUDA error: (?!out of memory|CUBLAS_STATUS_ALLOC_FAILED)[^\n]{0,200}")),
    Rule(
        Signal.CUDA_ERROR,
        "NCCL error",
        _c(r"NCCL error(?: in: [^\n]*?)?:? (?P<e>unhandled (?:system|cuda) error|internal error|invalid usage)"),
        lambda m, t: [Failure(name=f"NCCL {m['e']}")],
    ),
    Rule(Signal.CUDA_ERROR, "fallen off the bus", _c(r"GPU has fallen off the bus")),
    Rule(Signal.CUDA_ERROR, "uncorrectable ECC error", _c(r"uncorrectable ECC error encountered")),
    Rule(Signal.CUDA_ERROR, "NVRM: Xid", _c(r"NVRM: Xid \([^)]*\): (?P<x>\d+)"), lambda m, t: [Failure(name=f"Xid {m['x']}")]),
    Rule(Signal.FATAL_SIGNAL, "Fatal Python error", _c(r"Fatal Python error: (?P<w>[^\n]{0,200})"), lambda m, t: [Failure(exception=m["w"])]),
    Rule(Signal.FATAL_SIGNAL, "Segmentation fault", _c(r"Segmentation fault")),
    Rule(Signal.FATAL_SIGNAL, " received at time=", _c(r"\*\*\* SIG(?P<s>[A-Z]+) received at time=")),
    Rule(
        Signal.FATAL_SIGNAL,
        "terminate called after throwing",
        _c(r"terminate called after throwing an instance of '(?P<w>[^']+)'"),
        lambda m, t: [Failure(exception=m["w"])],
    ),
    Rule(
        Signal.RPC_TIMEOUT,
        "dequeue_timeout",
        _c(r"get_response\(w, dequeue_timeout\)|dequeue\(timeout=dequeue_timeout\)"),
        _step_wait("vllm-step"),
    ),
    Rule(Signal.RPC_TIMEOUT, "_wait_for_response", _c(r"in _wait_for_response\b"), _step_wait("vllm-step")),
    Rule(Signal.RPC_TIMEOUT, "worker_response_mq.dequeue(", _c(r"worker_response_mq\.dequeue\("), _step_wait("vllm-step")),
    Rule(Signal.RPC_TIMEOUT, "_dag_output_fetcher.read(", _c(r"_dag_output_fetcher\.read\("), _step_wait("ray-cgraph")),
    Rule(
        Signal.RPC_TIMEOUT,
        "RayChannelTimeoutError",
        _c(r"RayChannelTimeoutError"),
        _const(Timeout(call="execute_model", guard="ray-cgraph")),
    ),
    Rule(
        Signal.ENGINE_READY_TIMEOUT,
        "Timed out waiting for new engine",
        _c(r"Timed out waiting for new engine core processes to start(?:\. Waited (?P<s>\d+)s)?"),
        lambda m, t: [Timeout(call="scale-up handshake", limit_s=_f(m["s"]), guard="engine-ready")],
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
    # waits on other parties ----------------------------------------------------------
    Rule(
        Signal.WAITING,
        "Waiting for output from MQLLMEngine",
        _c(r"Waiting for output from MQLLMEngine"),
        _const(Peer(peer="engine", detail="API server waiting for engine output")),
    ),
    Rule(
        Signal.COLLECTIVE_MISMATCH,
        "op.preamble.length <= op.nbytes",
        _c(r"op\.preamble\.length <= op\.nbytes\.? ?(?P<a>\d+)? ?(?:vs (?P<b>\d+))?"),
        lambda m, t: [Peer(detail=f"a peer sent {m['a']} bytes where this rank expected {m['b']}" if m["a"] else None)],
    ),
    Rule(
        Signal.COLLECTIVE_MISMATCH,
        "Detected mismatch between collectives",
        _c(r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d+) is running collective: [^\n]*?, but Rank (?P<b>\d+)"),
        lambda m, t: [Peer(peer=f"rank {m['b']}", detail=f"rank {m['a']} and rank {m['b']} ran different collectives")],
    ),
    Rule(
        Signal.PEER_LOST,
        "NET/IB",
        _c(r"NET/IB ?: ?(?:Got completion from peer (?P<peer>[\w.:]+)(?:<\d+>)? with (?:error|status)[ =]?(?P<st>\w+)|(?P<other>[^\n]*?(?:error|Error|failed)))"),
        lambda m, t: [Peer(peer=m["peer"], detail=f"InfiniBand/RoCE transport error{': ' + m['st'] if m['st'] else ''}")],
    ),
    Rule(
        Signal.PEER_LOST,
        "ncclRemoteError",
        _c(r"ncclRemoteError"),
        _const(Peer(detail="NCCL: a remote process exited or the network failed")),
    ),
    Rule(
        Signal.PEER_LOST,
        "remote process exited or there was a network error",
        _c(r"remote process exited or there was a network error"),
        _const(Peer(detail="NCCL: a remote process exited or the network failed")),
    ),
    Rule(
        Signal.PEER_LOST,
        "Connection closed by peer",
        _c(r"Connection closed by peer(?: \[(?P<peer>[^\]]+)\])?"),
        lambda m, t: [Peer(peer=m["peer"], detail="gloo: the peer closed the connection (it exited)")],
    ),
    Rule(
        Signal.PEER_LOST,
        "Connection reset by peer",
        _c(r"(?:gloo|pair\.cc)[^\n]*Connection reset by peer"),
        _const(Peer(detail="gloo: the peer reset the connection (it exited)")),
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "clients joined",
        _c(r"Timed out after (?P<s>\d+) seconds waiting for clients\. (?P<j>\d+)/(?P<n>\d+) clients joined"),
        lambda m, t: [Rendezvous(joined=int(m["j"]), expected=int(m["n"]), limit_s=_f(m["s"]))],
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "while trying to connect to",
        _c(r"timed out after (?P<ms>\d+)ms while trying to connect to \((?P<addr>[^)]*)\)"),
        lambda m, t: [Rendezvous(limit_s=int(m["ms"]) / 1000, address=m["addr"].replace(" ", ""), what="store")],
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "cannot be scheduled right now",
        _c(r"(?:resource request|tasks?|actors?)[^\n]*cannot be scheduled right now"),
        _const(Rendezvous(what="placement")),
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "Cannot provide a placement group",
        _c(r"Cannot provide a placement group"),
        _const(Rendezvous(what="placement")),
    ),
    Rule(
        Signal.WAITING,
        "Waiting for creating a placement group",
        _c(r"Waiting for creating a placement group of specs for (?P<s>\d+) seconds"),
        lambda m, t: [Peer(peer="Ray placement group", detail=f"waited {m['s']} s for GPUs to be placed")],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "operation to complete",
        _c(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>recv|send) operation to complete"),
        lambda m, t: [Timeout(call=f"gloo {m['op']}", limit_s=int(m["ms"]) / 1000, guard="gloo")],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "Notify register times out",
        _c(r"Notify register times out\. Reason: The Notify register has not received the Notify record from "
           r"remote rank:? ?\[(?P<r>[^\]]*)\](?:[^\n]*?tag\[(?P<tag>[A-Za-z]+))?"),
        lambda m, t: [Timeout(call=f"HCCL {m['tag'] or 'collective'} (remote rank {m['r']} never signalled)",
                              guard="hccl")],
    ),
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "watchdog got stuck for",
        _c(r"(?:\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\] )?ProcessGroupNCCL's watchdog got stuck for (?P<s>\d+) seconds"),
        lambda m, t: [NcclWork(rank=_i(m["rank"]), op="a CUDA/NCCL call (the watchdog itself hung)",
                               ran_ms=int(m["s"]) * 1000)],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "DeepEP error: timeout",
        _c(r"DeepEP error: timeout \((?P<w>[^)]*)\)"),
        lambda m, t: [Timeout(call=f"DeepEP {m['w']}", guard="deepep")],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "DeepEP timeout check failed",
        _c(r"DeepEP timeout check failed: rank = (?P<r>\d+)"),
        lambda m, t: [Timeout(call="DeepEP dispatch/combine", guard="deepep")],
    ),
    Rule(
        Signal.BUSY_RETRY,
        "All Reduce workspace",
        _c(r"Failed to initialize FlashInfer All Reduce workspace: (?P<d>[^\n]{0,160})"),
        lambda m, t: [Phase("all-reduce workspace set-up (timed out, retried)")],
    ),
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
    Rule(
        Signal.EXTERNAL_GUARD,
        "Didn't receive health check response",
        _c(r"Didn't receive health check response for replica [^\n]*? after (?P<s>[\d.]+)s"),
        lambda m, t: [Timeout(call="replica health check", limit_s=float(m["s"]), guard="ray-serve-health")],
    ),
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
    Rule(
        Signal.OPERATOR_STOP,
        "received signal=SIG",
        _c(r"trigger received signal=(?P<s>SIG(?:TERM|INT))"),
        lambda m, t: [Failure(name=m["s"])],
    ),
    Rule(Signal.OPERATOR_STOP, "shutdown triggered", _c(r"\[shutdown\] API server: shutdown triggered"), _const(Failure(name="shutdown"))),
    Rule(Signal.FATAL_SIGNAL, "Segfault encountered", _c(r"Segfault encountered"), _const(Failure(exception="Segmentation fault"))),
    Rule(
        Signal.COMPILE,
        "during inference: ",
        _c(r"(?P<b>[\w-]+) (?P<e>kernel JIT compilation|[\w ]{0,40}?) during inference: (?P<fn>[^\s.]+)"),
        lambda m, t: [Phase(f"{m['b']} {m['e']} during inference")],
    ),
    Rule(
        Signal.STACK_DUMP,
        "[Watchdog]Dumped stack",
        _c(r"\[Watchdog\]Dumped stack to (?P<p>\S+) due to (?P<r>[^\n]+)"),
        lambda m, t: [Timeout(call=m["r"].strip(), guard="watchdog")],
    ),
    Rule(
        Signal.STACK_DUMP,
        "[Watchdog]Failed to dump stack trace",
        _c(r"\[Watchdog\]Failed to dump stack trace"),
        _const(Timeout(call="feed timeout", guard="watchdog")),
    ),
    *(_collective_frame(name) for name in _COLLECTIVES),
    Rule(Signal.SHUTDOWN, "Shutting down FastAPI HTTP server", _c(r"Shutting down FastAPI HTTP server")),
    Rule(Signal.SHUTDOWN, "Application shutdown complete", _c(r"Application shutdown complete")),
    Rule(Signal.SHUTDOWN, "Gracefully stopping http server", _c(r"Gracefully stopping http server")),
    Rule(Signal.SHUTDOWN, "[shutdown]", _c(r"\[shutdown\]")),
    Rule(Signal.SHUTDOWN, "Parent process exited, terminating worker", _c(r"Parent process exited, terminating worker")),
)

BAR_LITERALS = (
    "Processed prompts",
    "checkpoint shards",
    "Capturing CUDA graph",
    "Adding requests",
    "Compiling FSM index",
    "DeepGemm(",
    "[AutoTuner]: Tuning",
)
"""tqdm bars worth following: offline progress, weight loading, CUDA-graph capture, and outlines'
guided-decoding compile (``Compiling FSM index for all state transitions``), which runs inside a step."""
HTTP_ERROR_LITERAL = '" 50'
"""uvicorn access lines with a 5xx status (``HTTP/1.1" 503``)."""

LITERALS: tuple[str, ...] = tuple(
    dict.fromkeys([rule.literal for rule in RULES] + list(BAR_LITERALS) + [HTTP_ERROR_LITERAL])
)
"""Every string a relevant line must contain one of, in rule order, without repeats."""

LITERAL_PATTERN = re.compile("|".join(re.escape(literal) for literal in LITERALS))

RULES_BY_LITERAL: dict[str, tuple[Rule, ...]] = {
    literal: tuple(rule for rule in RULES if rule.literal == literal) for literal in LITERALS
}
