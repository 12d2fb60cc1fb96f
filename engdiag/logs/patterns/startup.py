"""Start-up phases, what each took, and what the engine announced about itself: version banners, the
parallel configuration, NCCL's communicator set-up, weight loading, memory profiling, CUDA-graph capture,
the handshakes with the engine cores and the DP coordinator, kernel autotuning and JIT, torch.compile.

A start-up phase still advancing when a guard fired is the evidence of a slow (not dead) engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import ParallelConfig, Payload, Phase, Progress, Signal, Version
from engdiag.logs.patterns.base import Builder, Rule, _c, _f, _i


def _phase(name: str, seconds: str | None = None, gib: str | None = None) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield Phase(
            name,
            seconds=_f(match[seconds]) if seconds else None,
            gib=_f(match[gib]) if gib else None,
        )

    return build


def _version(engine: str | None) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield Version(version=match["v"].lstrip("v") if match["v"] else None, engine=engine)

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


P2P_CHANNEL = "nccl_comm_setup p2p channel"
"""NCCL connecting a channel to a peer GPU over PCIe / NVLink peer-to-peer."""
RANKS_ASSIGNED = "process_group_init rank assignment"
"""A rank's groups are all set up (initialize_model_parallel's last line)."""


STARTUP: tuple[Rule, ...] = (
    # start-up ------------------------------------------------------------------------
    Rule(Signal.VERSION, "Initializing a V1 LLM engine", _c(r"Initializing a V1 LLM engine \((?P<v>[^)\s]+)\)"), _version("V1")),
    Rule(Signal.VERSION, "Initializing a V0 LLM engine", _c(r"Initializing a V0 LLM engine \((?P<v>[^)\s]+)\)"), _version("V0")),
    # 0.2–0.4.0 print no version in the banner: "Initializing an LLM engine with config: ..." (vLLM issue 2826:
    # a Ray start-up that hung right after it read as healthy when the banner went unread)
    Rule(Signal.VERSION, "Initializing an LLM engine", _c(r"Initializing an LLM engine(?: \((?P<v>[^)\s]+)\))?"), _version("V0")),
    # vllm-omni's stage worker starting its engine (omni_stage.py), the launch its stages' limits guard
    # (omni-qwen-image-stage-init-timeout-during-hf-download-issue535: the paste ends right after it)
    Rule(Signal.VERSION, "Starting stage worker with model", _c(r"Starting stage worker with model(?P<v>)"), _version(None)),
    Rule(Signal.VERSION, "vLLM API server version", _c(r"vLLM API server version (?P<v>[^\s,]+)"), _version(None)),
    Rule(Signal.VERSION, "vLLM server version", _c(r"vLLM server version (?P<v>[^\s,]+)"), _version(None)),
    Rule(Signal.VERSION, "Dumping input data for V1", _c(r"Dumping input data for V1 LLM engine \((?P<v>[^)\s]+)\)"), _version("V1")),
    Rule(Signal.PARALLEL_CONFIG, "with config:", _c(r"with config:"), _config),
    Rule(Signal.PARALLEL_CONFIG, "non-default args", _c(r"non-default args: \{"), _config),
    # NCCL's communicator lines name the ranks ("comm 0x… rank 0 nranks 2 cudaDev 0 … - Init START" / "- Init
    # COMPLETE"): read from the words before the status, so a paste that wrapped the line before "COMPLETE" still
    # shows two GPUs talking (a6000-tp2-iommu-acs-stall, wrapped at 120 columns)
    Rule(
        Signal.PARALLEL_CONFIG,
        " nranks ",
        _c(r"\brank (?P<rank>\d+) nranks (?P<n>\d+)\b"),
        lambda m, t: [ParallelConfig(nranks=int(m["n"]))],
    ),
    # NCCL's own set-up lines (NCCL_DEBUG=INFO) while ncclCommInitRank runs: channels, rings, "Init START";
    # "Init COMPLETE" ends it.  Set-up takes seconds (hami-libvgpu-tp2-nccl-init-stall-fused-line-waiting-engine:
    # the last worker output is "NCCL INFO Channel 01/0 :", then 90 s of the API server waiting).
    # a channel to a peer GPU "via P2P/CUMEM" (or P2P/IPC, P2P/direct pointer) is where blocked peer-to-peer
    # traffic first bites (tp2-nccl-allreduce-hang-p2p-cumem-sanity-check)
    Rule(Signal.STARTUP_PHASE, "Channel ", _c(r"^Channel \d+/\d+ ?:(?P<p2p>[^\n]*? via P2P\b)?"),
         lambda m, t: [Phase(P2P_CHANNEL if m["p2p"] else "nccl_comm_setup")]),
    Rule(Signal.STARTUP_PHASE, "Connected all ", _c(r"^Connected all (?:rings|trees)"), _phase("nccl_comm_setup")),
    Rule(Signal.STARTUP_PHASE, " - Init START", _c(r"\bnranks \d+\b.*? - Init START"), _phase("nccl_comm_setup")),
    Rule(Signal.STARTUP_PHASE, "Init COMPLETE", _c(r"\bnranks \d+\b.*? - Init COMPLETE"), _phase("nccl_comm_ready")),
    # RCCL's check of the kernel command line (rccl src/init.cc): without iommu=pt, GPU peer-to-peer traffic
    # on AMD GPUs can hang (rocm-multi-gpu-rccl-p2p-hang-missing-iommu-pt)
    Rule(Signal.STARTUP_PHASE, 'Missing "iommu=pt"', _c(r'Missing "iommu=pt" from kernel command line'),
         _phase("p2p_risk iommu=pt missing")),
    Rule(Signal.STARTUP_PHASE, "Loading model weights took", _c(r"Loading model weights took (?P<g>\d+(?:\.\d+)?) GB"), _phase("weights_loaded", gib="g")),
    Rule(
        Signal.STARTUP_PHASE,
        "Model loading took",
        _c(r"Model loading took (?P<g>\d+(?:\.\d+)?) Gi?B(?: memory)? and (?P<s>\d+(?:\.\d+)?) seconds"),
        _phase("weights_loaded", seconds="s", gib="g"),
    ),
    Rule(Signal.STARTUP_PHASE, "Loading weights took", _c(r"Loading weights took (?P<s>\d+(?:\.\d+)?) seconds"), _phase("weights_read", seconds="s")),
    # 0.2x+ vllm/compilation/monitor.py: "%sInitial profiling/warmup run took %.2f s" (0.34 :92)
    Rule(Signal.STARTUP_PHASE, "Initial profiling/warmup run took",
         _c(r"Initial profiling/warmup run took (?P<s>\d+(?:\.\d+)?) s"), _phase("warmup_run", seconds="s")),
    # Gaudi (HabanaAI/vllm-fork habana_model_runner.py): one line per warmed-up bucket,
    # "[Warmup][Prompt][3/56] batch_size:64 seq_len:768 free_mem:13.86 GiB"
    # (gaudi-bucket-warmup-graph-compile-30s-per-bucket: 15-38 s a bucket)
    Rule(
        Signal.PROGRESS_BAR,
        "[Warmup][",
        _c(r"\[Warmup\]\[(?P<k>\w+)\]\[(?P<d>\d+)/(?P<t>\d+)\]"),
        lambda m, t: [Progress(f"HPU graph warm-up ({m['k']})", int(m["d"]), int(m["t"]))],
    ),
    Rule(Signal.STARTUP_PHASE, "Memory profiling takes", _c(r"Memory profiling takes (?P<s>\d+(?:\.\d+)?) seconds"), _phase("memory_profiled", seconds="s")),
    Rule(
        Signal.STARTUP_PHASE,
        "init engine (profile",
        _c(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>\d+(?:\.\d+)?) s"),
        _phase("engine_initialised", seconds="s"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "Graph capturing finished",
        _c(r"Graph capturing finished in (?P<s>\d+(?:\.\d+)?) secs?(?:, took (?P<g>\d+(?:\.\d+)?) GiB)?"),
        _phase("cuda_graphs_captured", seconds="s", gib="g"),
    ),
    # the model runner's load_model, V0 and V1 alike (0.4–0.2x gpu_model_runner.py / model_runner.py "Starting to
    # load model %s..."; 0.34 v1/worker/gpu/model_runner.py "Loading model from scratch..."): weight loading begins
    # (coteval-mistral-large-load-30min: four ranks entered it, and a harness gave up 30 minutes later)
    Rule(Signal.STARTUP_PHASE, "Starting to load model", _c(r"Starting to load model \S"), _phase("weight_loading")),
    Rule(Signal.STARTUP_PHASE, "Loading model from scratch", _c(r"Loading model from scratch"), _phase("weight_loading")),
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
    # torch's ProcessGroupGloo, creating a CPU group's device on a host whose name resolves to no local
    # address (ProcessGroupGloo.cpp, createDefaultDevice): printed just before the new group connects its
    # full mesh, where every rank must meet (l40s-tp8-stuck-at-init-p2p-disable-loads: eight ranks' lines,
    # then nothing).  Harmless on one node; the group's set-up follows it.
    Rule(
        Signal.STARTUP_PHASE,
        "Using the loopback address as fallback",
        _c(r"Unable to resolve hostname to a \(local\) address\. Using the loopback address as fallback"),
        _phase("process_group_init gloo CPU group"),
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "distributed_init_method=",
        _c(r"world_size=(?P<w>\d+) rank=(?P<r>\d+) local_rank=\d+ distributed_init_method=(?P<m>\S+)"),
        lambda m, t: [Phase(f"process_group_init {m['m']}"), ParallelConfig(nranks=int(m["w"]))],
    ),
    # the end of initialize_model_parallel (parallel_state.py, 0.10+): "rank 2 in world size 4 is assigned as DP
    # rank 0, PP rank 0, TP rank 2, EP rank 2" — every group of this rank is set up
    # (ascend-a2-default-262k-max-model-len-stuck-dist-init: four ranks' lines, then nothing)
    Rule(
        Signal.STARTUP_PHASE,
        "is assigned as DP rank",
        _c(r"\brank \d+ in world size (?P<w>\d+) is assigned as DP rank"),
        lambda m, t: [Phase(RANKS_ASSIGNED), ParallelConfig(nranks=int(m["w"]))],
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
    Rule(Signal.COMPILE, "torch.compile take", _c(r"torch\.compile takes (?P<s>\d+(?:\.\d+)?) s in total"), _phase("torch_compile", seconds="s")),
    Rule(
        Signal.COMPILE,
        "run together took",
        _c(r"torch\.compile and initial profiling/warmup run together took (?P<s>\d+(?:\.\d+)?) s in total"),
        _phase("torch_compile", seconds="s"),
    ),
    Rule(Signal.COMPILE, "torch.compile took", _c(r"torch\.compile took (?P<s>\d+(?:\.\d+)?) s in total"), _phase("torch_compile", seconds="s")),
    Rule(Signal.COMPILE, "Dynamo bytecode transform time", _c(r"Dynamo bytecode transform time: (?P<s>\d+(?:\.\d+)?) s"), _phase("dynamo", seconds="s")),
    Rule(Signal.COMPILE, "Compiling a graph for", _c(r"Compiling a graph for .*? takes (?P<s>\d+(?:\.\d+)?) s"), _phase("graph_compile", seconds="s")),
    Rule(Signal.COMPILE, "Loading JIT ops", _c(r"(?<!Finished )Loading JIT ops: \S+"), _phase("jit_compile")),
    Rule(Signal.COMPILE, "JIT compil", _c(r"JIT compil\w*(?![^\n]*during inference: )"), _phase("jit_compile")),
)
