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
    Progress,
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
        rank=_i(match.groupdict().get("rank")),
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


_COMPILERS = ("triton/backends/", "triton/compiler/", "torch/_inductor/", "flashinfer/jit/", "deep_gemm/")
"""Source folders whose frames are compilation (the snapshot's frame rules name the same ones)."""


def _compile_frame(folder: str) -> Rule:
    """py-spy's ``    f (…/folder/file.py:N)`` or a traceback's ``File "…/folder/…", line N, in f`` in a capture."""
    where = re.escape(folder)
    return Rule(
        Signal.STACK_IN_COMPILE,
        folder,
        re.compile(rf"^\s+(?P<f>\w+) \([^()\n]*{where}[^()\n]*\)|File \"[^\"\n]*{where}[^\"\n]*\", line \d+, in (?P<g>\w+)",
                   re.MULTILINE),
        lambda m, t: [] if last_exception(t) else [Peer(detail=f"{m['f'] or m['g']} ({folder.rstrip('/')})")],
    )


_LAUNCH = re.compile(r"^\s+c(?:u|uda)LaunchKernel(?:Ex)? \(", re.MULTILINE)
_NAMED_NATIVE = re.compile(r"^\s+(?!0x)(?P<f>[^\s(][^(\n]*?) \(", re.MULTILINE)


def _in_launch(match: re.Match[str], text: str) -> Iterable[Payload]:
    """The first named frame above the launch: the kernel (or the op) that could not be queued."""
    if last_exception(text) is not None:
        return
    kernel = next((m["f"] for m in _NAMED_NATIVE.finditer(text, match.end())
                   if "LaunchKernel" not in m["f"] and not m["f"].startswith("0x")), "a kernel")
    yield Peer(detail=kernel.strip()[:160])


_ALLOCATING_FRAMES = (
    (re.compile(r"(?:\bin |\.)(?:determine_num_available_blocks|determine_available_memory|profile_run)\b"),
     "the memory-profiling run, which holds the largest batch it will ever see"),
    (re.compile(r"(?:\bin |\.)wake_up\b"), "sleep mode's wake-up, which re-allocates the weights and KV cache"),
    # allocating the KV-cache tensors right after the KV cache was sized (V1 and vllm-ascend model runners;
    # ascend-qwen3next-kv-init-oom-gpu-util-0.85: NPU OOM at gpu_memory_utilization 0.85, the error line cut)
    (re.compile(r"(?:\bin |\.)(?:initialize_kv_cache|initialize_from_config)\b"),
     "the KV-cache allocation, which takes what the memory profile left"),
    (re.compile(r"(?:\bin |\.)capture_model\b"),
     "CUDA-graph capture, which allocates the graphs' memory pools after the KV cache took its share"),
)
ALLOCATING = "allocating: "
"""Prefix of a traceback site where vLLM allocates most of the GPU at once."""


def _traceback_site(text: str) -> str | None:
    """Where in vLLM a traceback passes that says what the process was doing when it raised."""
    return next((ALLOCATING + what for frames, what in _ALLOCATING_FRAMES if frames.search(text)), None)


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
    # NCCL's own set-up lines (NCCL_DEBUG=INFO) while ncclCommInitRank runs: channels, rings, "Init START";
    # "Init COMPLETE" ends it.  Set-up takes seconds (hami-libvgpu-tp2-nccl-init-stall-fused-line-waiting-engine:
    # the last worker output is "NCCL INFO Channel 01/0 :", then 90 s of the API server waiting).
    Rule(Signal.STARTUP_PHASE, "Channel ", _c(r"^Channel \d+/\d+ ?:"), _phase("nccl_comm_setup")),
    Rule(Signal.STARTUP_PHASE, "Connected all ", _c(r"^Connected all (?:rings|trees)"), _phase("nccl_comm_setup")),
    Rule(Signal.STARTUP_PHASE, " - Init START", _c(r"\bnranks \d+\b.*? - Init START"), _phase("nccl_comm_setup")),
    Rule(Signal.STARTUP_PHASE, "Init COMPLETE", _c(r"\bnranks \d+\b.*? - Init COMPLETE"), _phase("nccl_comm_ready")),
    Rule(Signal.STARTUP_PHASE, "Loading model weights took", _c(r"Loading model weights took (?P<g>[\d.]+) GB"), _phase("weights_loaded", gib="g")),
    Rule(
        Signal.STARTUP_PHASE,
        "Model loading took",
        _c(r"Model loading took (?P<g>[\d.]+) Gi?B(?: memory)? and (?P<s>[\d.]+) seconds"),
        _phase("weights_loaded", seconds="s", gib="g"),
    ),
    Rule(Signal.STARTUP_PHASE, "Loading weights took", _c(r"Loading weights took (?P<s>[\d.]+) seconds"), _phase("weights_read", seconds="s")),
    # 0.2x+ vllm/compilation/monitor.py: "%sInitial profiling/warmup run took %.2f s" (0.34 :92)
    Rule(Signal.STARTUP_PHASE, "Initial profiling/warmup run took",
         _c(r"Initial profiling/warmup run took (?P<s>[\d.]+) s"), _phase("warmup_run", seconds="s")),
    # Gaudi (HabanaAI/vllm-fork habana_model_runner.py): one line per warmed-up bucket,
    # "[Warmup][Prompt][3/56] batch_size:64 seq_len:768 free_mem:13.86 GiB"
    # (gaudi-bucket-warmup-graph-compile-30s-per-bucket: 15-38 s a bucket)
    Rule(
        Signal.PROGRESS_BAR,
        "[Warmup][",
        _c(r"\[Warmup\]\[(?P<k>\w+)\]\[(?P<d>\d+)/(?P<t>\d+)\]"),
        lambda m, t: [Progress(f"HPU graph warm-up ({m['k']})", int(m["d"]), int(m["t"]))],
    ),
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
        # pynccl.py logs this as it *starts* a communicator: the unique-id broadcast, ncclCommInitRank and a
        # warm-up all_reduce follow (PyNcclCommunicator.__init__, 0.6.4 pynccl.py:69)
        lambda m, t: [Phase("nccl_communicator_init")],
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
        _c(r"Available KV cache memory: (?P<v>-?[\d.]+) GiB"),
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
        "# CPU blocks:",
        _c(r"# (?!CPU)\w+ blocks: (?P<g>\d+), # CPU blocks: (?P<c>\d+)"),
        _memory(("gpu_blocks", "g", "blocks"), ("cpu_blocks", "c", "blocks")),
    ),
    Rule(
        Signal.MEMORY,
        "model weights take",
        _c(
            r"model weights take (?P<w>[\d.]+)GiB; non_torch_memory takes (?P<n>[\d.]+)GiB; "
            r"PyTorch activation peak memory takes (?P<a>[\d.]+)GiB; "
            r"the rest of the memory reserved for KV Cache is (?P<k>-?[\d.]+)GiB"
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
    # Other accelerators' allocation failures: torch_npu "NPU out of memory", Ascend's runtime
    # "Memory_Allocation_Failure(EL0004)" (omni-qwen-image-npu-second-inference-stuck-memory-allocation-failure),
    # Intel "XPU out of memory", Rebellions "SYS_EBUSY: Lack of device memory"
    # (rbln-minimax-kv-blocks-device-memory-api-server-waits-probe-kill).
    Rule(Signal.CUDA_OOM, "out of memory", _c(r"\b(?:NPU|XPU|HPU|MPS) out of memory"), _oom),
    Rule(Signal.CUDA_OOM, "Memory_Allocation_Failure", _c(r"Memory_Allocation_Failure"), _oom),
    # Ascend's runtime: "EL0004: ... Failed to allocate memory." and "Failed to allocate
    # resource[DeviceMemory] ... Reason: Memory resources are exhausted."
    # (ascend-mc2-moe-dispatch-hccl-2gib-device-memory-exhausted)
    Rule(Signal.CUDA_OOM, "Memory resources are exhausted", _c(r"Memory resources are exhausted"), _oom),
    Rule(Signal.CUDA_OOM, "EL0004", _c(r"EL0004:[^\n]*Failed to allocate memory"), _oom),
    Rule(Signal.CUDA_OOM, "Lack of device memory", _c(r"Lack of device memory"), _oom),
    # Gaudi's PyTorch bridge: "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::134217728 (128)MB"
    # (gaudi-inc-fp8-70b-1card-premove-bf16-weights-devmem-alloc-failed)
    Rule(Signal.CUDA_OOM, "PT_DEVMEM Allocation failed", _c(r"PT_DEVMEM Allocation failed"), _oom),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "blocks of KV cache", _c(r"Not enough memory for \d+ blocks of KV cache")),
    # V0's worker wrapper logs "Error executing method initialize_cache. This might cause deadlock in distributed
    # execution." (worker_base.py, 0.4–0.10) for any exception there; in initialize_cache that is the KV cache not
    # fitting (raise_if_cache_size_invalid), the "deadlock" being a generic warning
    # (openrlhf-70b-ppo-initialize-cache-kv-6048-lt-8192-deadlock-warning).
    Rule(Signal.KV_CACHE_INSUFFICIENT, "Error executing method initialize_cache",
         _c(r"Error executing method initialize_cache")),
    Rule(Signal.CUDA_OOM, "CUBLAS_STATUS_ALLOC_FAILED", _c(r"CUBLAS_STATUS_ALLOC_FAILED"), _oom),
    Rule(Signal.CUDA_OOM, "OutOfMemoryError", _c(r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError"), _oom),
    # torch's caching allocator's own sentence, "Tried to allocate 136.00 MiB. GPU 0 has a total capacity of
    # ...", when a paste kept it without the "CUDA out of memory." before it
    # (cudagraph-capture-oom-at-0.98-gpu-util-5090-laptop: three wrapped lines of the message, nothing else).
    Rule(Signal.CUDA_OOM, "Tried to allocate ", _c(rf"Tried to allocate {_SIZE}(?:\. GPU \d+ has a total| \(GPU \d+;)"), _oom),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "No available memory for the cache blocks", _c(r"No available memory for the cache blocks")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "larger than the available KV cache memory", _c(r"larger than the available KV cache memory")),
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "stored in KV cache",
        _c(r"larger than the maximum number of tokens that can be stored in KV cache"),
    ),
    # The profiler's own figures saying nothing is left for the KV cache: V0's worker.py
    # ("... reserved for KV Cache is -1.05GiB"), executor_base.py ("# cuda blocks: 0, # CPU blocks: N",
    # the device key is "GPU" in older releases) and the concurrency both engines print
    # (rtx4060-8gb-qwen7b-kv-cache-negative-zero-blocks: the ValueError itself fell past the excerpt).
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "the rest of the memory reserved for KV Cache is -",
        _c(r"the rest of the memory reserved for KV Cache is -[\d.]+GiB"),
    ),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "Available KV cache memory", _c(r"Available KV cache memory: -[\d.]+ GiB")),
    Rule(Signal.KV_CACHE_INSUFFICIENT, "# CPU blocks:", _c(r"# (?!CPU)\w+ blocks: 0, # CPU blocks:")),
    Rule(
        Signal.KV_CACHE_INSUFFICIENT,
        "Maximum concurrency for",
        _c(r"Maximum concurrency for [\d,]+ tokens per request: 0\.00x"),
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
    Rule(Signal.ENGINE_READY_TIMEOUT, "Did not receive response from front-end", _c(r"Did not receive response from front-end process")),
    Rule(Signal.ENGINE_FATAL, "EngineCore encountered a fatal error", _c(r"EngineCore encountered a fatal error"), _failure("busy loop")),
    # early V1 (0.7.x–0.8.4): "EngineCore hit an exception: %s" v1/engine/core.py:291 (0.7.3), :387 (0.8.4)
    Rule(Signal.ENGINE_FATAL, "EngineCore hit an exception", _c(r"EngineCore hit an exception"), _failure("busy loop")),
    Rule(Signal.ENGINE_FATAL, "EngineCore failed to start", _c(r"EngineCore failed to start"), _failure("start-up")),
    # "Engine core initialization failed. See root cause above. Failed core proc(s): {...}" v1/engine/utils.py
    # (0.10.1+; 0.34:1478, the dict may be empty `{}`); 0.32+ also "Frontend process failed during engine core
    # initialization. ..." (0.34:1473).
    Rule(Signal.ENGINE_FATAL, "Engine core initialization failed", _c(r"Engine core initialization failed"), _failure("start-up")),
    Rule(Signal.ENGINE_FATAL, "Frontend process failed during engine", _c(r"Frontend process failed during engine core initialization"), _failure("start-up")),
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
    Rule(Signal.WORKER_EXCEPTION, "Exception in worker", _c(r"Exception in worker (?P<w>\S+) while processing method (?P<m>\w+)"), lambda m, t: [Failure(name=m["w"])]),
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
    # The end of any traceback: which exception a process raised.  Read as a root cause only where a
    # guard fired after it (tt-prefill-over-32k-assert-then-no-heartbeat: V0's MQLLMEngine logs its loop's
    # exception, engine.py `logger.exception(repr(e))`, and the client's heartbeat times out minutes later).
    Rule(Signal.EXCEPTION, "Error: ", _EXCEPTION_LINE, lambda m, t: [Failure(exception=last_exception(t))]),
    Rule(Signal.EXCEPTION, "Exception: ", _EXCEPTION_LINE, lambda m, t: [Failure(exception=last_exception(t))]),
    # a traceback whose exception line a paste cut off is still a process that raised
    # (omni-3gpu-replica2-serial-stage-init-exceeds-startup-timeout)
    Rule(Signal.EXCEPTION, "Traceback (most recent call last)", _c(r"Traceback \(most recent call last\)"),
         lambda m, t: [Failure(exception=last_exception(t), name=_traceback_site(t))]),
    # a traceback pasted without its header or its last line: its frames alone
    # (sm120-cuda128-toolkit-flashinfer-jit-fp8kv-prefill-build-kills-engine-init)
    Rule(Signal.EXCEPTION, '", line ', _c(r'File "[^"\n]+", line \d+, in \S+'),
         lambda m, t: [Failure(exception=last_exception(t), name=_traceback_site(t))]),
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
            r"WorkNCCL\((?P<work>(?:[^()]|\([^()\n]*\))*?)\)\s*ran for (?P<ran>\d+) milliseconds"
        ),
        _nccl_timeout,
    ),
    # The work description alone is the watchdog's signature: "WorkNCCL(SeqNum=…) ran for N milliseconds
    # before timing out" is printed for nothing else, so it counts where a paste broke it off its first line
    # (dgx-spark-2node-tp2-allgather-hang-pip-nccl: "timeout:" ends one line, the work fills the next two).
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "milliseconds before timing out",
        _c(r"WorkNCCL\((?P<work>(?:[^()]|\([^()\n]*\))*?)\)\s*ran for (?P<ran>\d+) milliseconds before timing out"),
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
    # Ascend's device faults: a kernel that failed or timed out on the AI core (driver/firmware side)
    # (ascend-dsv32-driver-24-1-moe-dispatch-aicore-timeout)
    Rule(Signal.CUDA_ERROR, "Aicore kernel execute failed", _c(r"Aicore kernel execute failed")),
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
    # A traceback through the rendezvous itself: torch's init_process_group raised inside
    # ``store, rank, world_size = next(rendezvous_iterator)`` (distributed_c10d.py), i.e. the store never
    # gathered its members or could not be reached; the error line may be cut off
    # (dgx-spark-2node-rank1-never-joins-hardwrapped: 1/2 clients joined, the line fell past the paste).
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "next(rendezvous_iterator)",
        _c(r"next\(rendezvous_iterator\)"),
        _const(Rendezvous()),
    ),
    # torch's ProcessGroupGloo: "Gloo connectFullMesh failed with [...pair.cc:N] timed out connecting:
    # SO_ERROR: Connection refused, remote=[127.0.0.1]:<port> (rank=8, size=16, local=[127.0.0.1])" — the CPU
    # group's ranks could not connect to each other, so the group never forms
    # (eks-lws-gloo-world-group-loopback-bind-ray-handle-red-herring: every rank advertised loopback).
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "Gloo connectFullMesh failed",
        _c(r"Gloo connectFullMesh failed(?:[^\n]*\n?[^\n]*?remote=\[(?P<addr>[^\]]+)\](?::(?P<port>[\w<>]+))?)?"),
        lambda m, t: [Rendezvous(address=m["addr"], what="mesh")],
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
    # HCCL's socket wait (EI0006): "Getting socket times out. Reason: Remote Rank did not send the data in
    # time. Please check the reason for the rank being stuck" (ascend-grpo-colocated-vllm-hccl-allreduce-
    # remote-rank-stuck, inside an all_reduce)
    Rule(
        Signal.COMM_TIMEOUT,
        "Remote Rank did not send the data in time",
        _c(r"Remote Rank did not send the data in time"),
        _const(Timeout(call="HCCL collective (a remote rank never sent its data)", guard="hccl")),
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
    # huggingface_hub's HTTP back-off, while vLLM fetches the model's files or metadata: "'(ReadTimeoutError(...))'
    # thrown while requesting HEAD https://huggingface.co/...", "HTTP Error 504 thrown while requesting HEAD ..."
    # then "Retrying in 8s [Retry 4/5]." — start-up waits on the network
    # (ci-hf-hub-504-outage-stall-until-harness-timeout, omni-hf-read-timeouts-orchestrator-600s-ci).
    Rule(
        Signal.BUSY_RETRY,
        " thrown while requesting ",
        _c(r" thrown while requesting (?:HEAD|GET) https?://"),
        lambda m, t: [Phase("model download from the Hugging Face Hub (requests failing, retried)")],
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
    Rule(
        Signal.EXTERNAL_GUARD,
        "did not become ready within",
        _c(r"did not become ready within (?P<s>[\d.]+) ?s"),
        lambda m, t: [Timeout(call="server start-up", limit_s=_f(m["s"]), guard="platform")],
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "timeout=startup_timeout",
        _c(r"\(timeout=startup_timeout\)"),
        lambda m, t: [Timeout(call="server start-up", guard="platform")] if "TimeoutError" in t else [],
    ),
    Rule(
        Signal.EXTERNAL_GUARD,
        "Initialization timeout: ",
        _c(r"Initialization timeout: \d+/\d+ stages ready"),
        _const(Timeout(call="server start-up", guard="platform")),
    ),
    # Modal's runner: "Runner has been initializing for too long: 300 seconds"
    # (modal-runner-init-300s-timeout-during-torch-compile, the container was still compiling).
    Rule(
        Signal.EXTERNAL_GUARD,
        "initializing for too long",
        _c(r"initializing for too long(?:: (?P<s>[\d.]+) ?s(?:econds)?)?"),
        lambda m, t: [Timeout(call="server start-up", limit_s=_f(m["s"]), guard="platform")],
    ),
    # A launcher announcing its start-up limit: "Waiting for vllm-server to be ready (timeout: 0s)..."
    # (lemonade-wrapper-zero-second-readiness-timeout-kills-vllm: a limit of 0 s).
    Rule(
        Signal.STARTUP_PHASE,
        "to be ready (timeout: ",
        _c(r"to be ready \(timeout: (?P<s>[\d.]+) ?s\)"),
        lambda m, t: [Phase(f"platform_limit_configured {m['s']}")],
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
        Signal.STARTUP_PHASE,
        "[Watchdog]Start with timeout=",
        # 0.33/0.34 vllm/utils/watch_dog.py:165 "[Watchdog]Start with timeout=%s check_interval=%s dump_dir=%s":
        # the feed timeout a later "due to feed timeout" dump waited (--watchdog-config, 300 s default)
        _c(r"\[Watchdog\]Start with timeout=(?P<s>\d+)"),
        lambda m, t: [Phase(f"watchdog_configured {m['s']}")],
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
    *(_compile_frame(folder) for folder in _COMPILERS),
    # a thread inside cu/cudaLaunchKernel in a capture (gb10-flashinfer-radix-topk-multicta-wedge-pyspy-quoted:
    # under CUDA_LAUNCH_BLOCKING=1 the launch returns only when the kernel does)
    Rule(Signal.STACK_IN_LAUNCH, "LaunchKernel", _LAUNCH, _in_launch),
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
    "DeepGEMM warmup",
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
