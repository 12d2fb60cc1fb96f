"""Typed events read from vLLM logs: the vocabulary of ``analyze``.

An ``Event`` is one signal found in one log record, remembering the file and
line it came from, its time (vLLM prints no year, so a ``Stamp`` carries a
year *offset* from the first year seen, never an invented year), the process
that logged it, and a payload with the numbers the classifier needs.
Event text is already redacted: prompts never reach this layer.  ``Signal`` (what an event says) lives in
``engdiag.logs.signals`` and is imported from here as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engdiag.logs.signals import Signal
from engdiag.roles import Ranks, Role, ranks_of, role_of

_DAYS_BEFORE_MONTH = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)
"""Days before each month in a leap year, so that Feb 29 is a valid date."""

SECONDS_PER_DAY = 86_400
SECONDS_PER_YEAR = 366 * SECONDS_PER_DAY


@dataclass(frozen=True, slots=True)
class Stamp:
    """A log time: month, day and second of day, plus a year offset (0 = first year seen)."""

    month: int
    day: int
    second: int
    year: int = 0
    calendar: int | None = field(default=None, compare=False)
    """The calendar year, when the input printed one next to the time (kubectl's RFC 3339 stamp, a
    ``[YYYY-MM-DD ...]`` wrapper); not part of the time's identity, so it never splits a record."""

    @property
    def key(self) -> int:
        """Seconds on one axis that orders stamps across a Dec→Jan rollover."""
        return (
            self.year * SECONDS_PER_YEAR
            + (_DAYS_BEFORE_MONTH[self.month - 1] + self.day - 1) * SECONDS_PER_DAY
            + self.second
        )

    @property
    def text(self) -> str:
        """The time as vLLM prints it: ``MM-DD HH:MM:SS``."""
        hours, rest = divmod(self.second, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"{self.month:02d}-{self.day:02d} {hours:02d}:{minutes:02d}:{seconds:02d}"

    def shifted(self, seconds: int) -> Stamp:
        """The same clock ``seconds`` later (earlier when negative), within its year offset."""
        key = ((_DAYS_BEFORE_MONTH[self.month - 1] + self.day - 1) * SECONDS_PER_DAY + self.second + seconds) % SECONDS_PER_YEAR
        day, second = divmod(key, SECONDS_PER_DAY)
        month = max(i for i, before in enumerate(_DAYS_BEFORE_MONTH) if before <= day)
        return Stamp(month + 1, day - _DAYS_BEFORE_MONTH[month] + 1, second, self.year, self.calendar)

    @property
    def dated(self) -> str:
        """``YYYY-MM-DD HH:MM:SS`` when the input gave the year, else the time as printed."""
        return f"{self.calendar}-{self.text}" if self.calendar is not None else self.text


@dataclass(frozen=True, slots=True)
class Proc:
    """The process that wrote a line, from its log tag (``(EngineCore_DP0 pid=7)``)."""

    name: str
    pid: int | None = None
    host: str | None = None

    @property
    def role(self) -> Role:
        """api_server, engine_core, worker or other."""
        return role_of(self.name)

    @property
    def ranks(self) -> Ranks:
        """Parallel indices the name carries."""
        return ranks_of(self.name)

    @property
    def label(self) -> str:
        """``name pid=N`` as printed in the log."""
        return self.name if self.pid is None else f"{self.name} pid={self.pid}"


# ---- payloads --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stats:
    """One periodic stats line (V0 ``metrics.py`` or V1 ``loggers.py``)."""

    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int
    swapped: int | None = None
    gpu_kv_pct: float | None = None
    cpu_kv_pct: float | None = None
    prefix_hit_pct: float | None = None
    preemptions: int | None = None
    engine: int | None = None
    corrupted: int | None = None
    """``Corrupted: N reqs`` (requests with NaN logits; printed by newer V1 stats lines)."""


@dataclass(frozen=True, slots=True)
class Iteration:
    """A per-step line from ``--enable-logging-iteration-details``."""

    context_requests: int
    context_tokens: int
    generation_requests: int
    generation_tokens: int
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class PromptLength:
    """A prompt size in tokens; ``lower_bound`` when the log truncated the ids."""

    tokens: int
    lower_bound: bool
    origin: str


@dataclass(frozen=True, slots=True)
class ScheduledTokens:
    """The last scheduled batch from vLLM's crash dump."""

    total: int
    new_requests: int
    largest_new_prompt: int | None


@dataclass(frozen=True, slots=True)
class Version:
    """The version banner: vLLM version and engine generation."""

    version: str | None
    engine: str | None


@dataclass(frozen=True, slots=True)
class ParallelConfig:
    """Parallel sizes from the config dump or NCCL's communicator line."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    nranks: int | None = None
    model: str | None = None
    chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Phase:
    """A start-up step, with the time and memory it took where the line says."""

    name: str
    seconds: float | None = None
    gib: float | None = None

    @property
    def is_work(self) -> bool:
        """False for the API server waiting on the engine and for a guard's setting logged at start-up."""
        return not self.name.startswith(("waiting", "ray_cgraph_configured", "watchdog_configured",
                                         "platform_limit_configured", "p2p_risk"))


@dataclass(frozen=True, slots=True)
class Memory:
    """A start-up memory figure (``Available KV cache memory: 20.1 GiB``...)."""

    name: str
    value: float
    unit: str


@dataclass(frozen=True, slots=True)
class CudaOom:
    """PyTorch's CUDA OOM numbers, in bytes; None where the message omits one."""

    tried: int | None = None
    total: int | None = None
    free: int | None = None
    allocated: int | None = None
    reserved_unallocated: int | None = None
    private_pools: int | None = None
    process_in_use: int | None = None
    device: int | None = None
    largest_free: int | None = None
    """The largest contiguous free block, where the allocator says (tt-metal's bank manager)."""


@dataclass(frozen=True, slots=True)
class Preemption:
    """A V0 preemption warning (printed on the 1st, 51st, 101st... preemption)."""

    cumulative: int | None
    mode: str | None


@dataclass(frozen=True, slots=True)
class ShmStall:
    """A shared-memory broadcast wait of one more warning interval."""

    interval_s: int


@dataclass(frozen=True, slots=True)
class Timeout:
    """A timeout or RPC failure: which call, and its limit where printed."""

    call: str | None = None
    limit_s: float | None = None
    guard: str | None = None
    """Which guard fired when the line says (``ray-cgraph``, ``deepep``, ``watchdog``...)."""

    @property
    def is_stop_dump(self) -> bool:
        """A 0.33+ watchdog dump taken because the process was being stopped, not because it stalled.

        The reason after ``due to`` is ``feed timeout`` for a stall, the signal's name (``SIGTERM``,
        vllm/v1/engine/core.py:1703 in 0.34) when the engine core is stopped, and ``shutdown`` when a
        worker's parent went away (vllm/v1/executor/multiproc_executor.py:979).
        """
        return self.guard == "watchdog" and (self.call or "").startswith(("SIG", "shutdown"))


@dataclass(frozen=True, slots=True)
class Rendezvous:
    """A rendezvous or placement that can never complete, with who is missing."""

    joined: int | None = None
    expected: int | None = None
    limit_s: float | None = None
    address: str | None = None
    what: str = "rendezvous"
    """rendezvous (members short), store (unreachable), mesh (gloo ranks), hccl (Ascend's links), placement (Ray),
    front-end (the engine core's handshake with the API server or the data-parallel head),
    or traceback (only a
    frame through the rendezvous: its ``error`` says which, when the paste kept it)."""
    error: str | None = None

    @property
    def from_frame(self) -> bool:
        """Read from a traceback's frame through the rendezvous only (its ``error``, when kept, says which)."""
        return self.what == "traceback"


@dataclass(frozen=True, slots=True)
class Peer:
    """A failed link or a diverged collective, naming the other party where the line does."""

    peer: str | None = None
    detail: str | None = None
    cut: bool = False
    """Read from a traceback's frames only: the error that would say how the collective failed is cut off."""


@dataclass(frozen=True, slots=True)
class NcclWork:
    """A ProcessGroupNCCL watchdog report for one rank (or torch_npu's ProcessGroupHCCL's: ``backend``)."""

    rank: int | None
    seq: int | None = None
    op: str | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    backend: str = "NCCL"


@dataclass(frozen=True, slots=True)
class Progress:
    """A tqdm bar: ``Loading safetensors checkpoint shards: 65% | 106/163``."""

    bar: str
    done: int
    total: int | None
    elapsed_s: float | None = None
    """Time the bar had run (``[42:52<05:11, ...]``)."""
    seconds_per_item: float | None = None
    """The bar's rate as seconds per item (``13.56s/it``, or 1 / ``it/s``)."""


@dataclass(frozen=True, slots=True)
class HttpStatus:
    """A uvicorn access line with a server error status."""

    method: str
    path: str
    status: int


@dataclass(frozen=True, slots=True)
class Failure:
    """A fatal record, with the exception its traceback ends in."""

    exception: str | None = None
    name: str | None = None
    exit_code: int | None = None


Payload = (
    Stats
    | Iteration
    | PromptLength
    | ScheduledTokens
    | Version
    | ParallelConfig
    | Phase
    | Memory
    | CudaOom
    | Preemption
    | ShmStall
    | Timeout
    | Rendezvous
    | Peer
    | NcclWork
    | Progress
    | HttpStatus
    | Failure
)


@dataclass(frozen=True, slots=True)
class Event:
    """One signal from one log record."""

    signal: Signal
    source: str
    line: int
    stamp: Stamp | None
    proc: Proc | None
    level: str | None
    text: str
    data: Payload | None = None
    inherited_time: bool = False
    """True when the record had no time of its own and took the previous line's."""
