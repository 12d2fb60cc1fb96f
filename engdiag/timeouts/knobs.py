"""vLLM's real timeout knobs, as data: what each guards, its unit and the versions that have it.

Read in vllm/envs.py, vllm/config/*.py and the executors of the sampled releases
(docs/timeouts.md).  A recommendation is only made for a knob whose range
contains the user's version; with no version, each entry says where it applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

Version = tuple[int, int, int]


class Engine(str, Enum):
    """vLLM's engine generation."""

    V0 = "V0"
    V1 = "V1"


def parse_version(text: str | None) -> Version | None:
    """``'v0.8.5.post1'`` → ``(0, 8, 5)``; None when it does not look like a version."""
    if not text:
        return None
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def format_version(version: Version) -> str:
    """``(0, 18, 0)`` → ``0.18``; ``(0, 9, 2)`` → ``0.9.2``."""
    major, minor, patch = version
    return f"{major}.{minor}" + (f".{patch}" if patch else "")


def default_engine(version: Version | None) -> Engine | None:
    """The engine a version runs by default (V1 from 0.8; V0 code gone in 0.11)."""
    if version is None:
        return None
    return Engine.V0 if version < (0, 8, 0) else Engine.V1


class Kind(str, Enum):
    """How a knob is set."""

    ENV = "env"
    FLAG = "flag"
    CLIENT = "client"
    OUTSIDE = "outside"
    """Set outside vLLM: a Ray Serve deployment option, a Kubernetes probe field."""


class Platform(str, Enum):
    """Where a guard outside vLLM lives; its knobs are recommended only when the input shows it."""

    RAY = "ray"
    K8S = "k8s"


@dataclass(frozen=True, slots=True)
class Knob:
    """One setting that bounds how long something may take."""

    name: str
    kind: Kind
    unit: str
    default: str
    guards: str
    engine: Engine | None
    since: Version | None
    until: Version | None
    """First version without it (exclusive); None = still present in the newest read (0.34)."""
    inert_from: Version | None = None
    """First version where vLLM still reads it but nothing is guarded by it."""
    platform: Platform | None = None
    """Only recommended when the input shows this executor/platform or ``--platform`` names it."""

    def versions(self) -> str:
        """The range as text, e.g. ``0.9.2+`` or ``0.6.2 – 0.22``."""
        if self.since is None and self.until is None:
            return "any version"
        since = format_version(self.since) if self.since else "any"
        if self.until is None:
            return f"{since}+"
        return f"{since} – {self.until[0]}.{self.until[1] - 1}"

    def guards_in(self, version: Version | None) -> bool | None:
        """Does setting it change anything in this version?  None: version unknown."""
        if self.inert_from is None:
            return True
        if version is None:
            return None
        return version < self.inert_from

    def exists_in(self, version: Version | None, engine: Engine | None) -> bool:
        """Does this version (and engine) have the knob?  Unknown version: assume it might."""
        if self.engine is not None and engine is not None and self.engine is not engine:
            return False
        if version is None:
            return True
        if self.since is not None and version < self.since:
            return False
        return self.until is None or version < self.until


EXECUTE_MODEL = Knob(
    "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", Kind.ENV, "s", "300",
    "one model step on the V1 multiprocessing executor (TP or PP > 1): a worker's answer to "
    "execute_model / sample_tokens", Engine.V1, (0, 9, 2), None,
)
ENGINE_READY = Knob(
    "VLLM_ENGINE_READY_TIMEOUT_S", Kind.ENV, "s", "600",
    "V1 start-up as API servers run apart from the engines wait on it (--api-server-count > 1, external DP): weight "
    "loading, profiling, compilation and CUDA-graph capture; one API server waits on start-up with no limit",
    Engine.V1, (0, 14, 0), None,
)
ITERATION = Knob(
    "VLLM_ENGINE_ITERATION_TIMEOUT_S", Kind.ENV, "s", "60",
    "one V0 engine step in AsyncLLMEngine (0.4–0.5 servers; later with --disable-frontend-multiprocessing or PP > 1)",
    Engine.V0, (0, 4, 0), (0, 32, 0), inert_from=(0, 11, 0),
)
RPC = Knob(
    "VLLM_RPC_TIMEOUT", Kind.ENV, "ms", "10000",
    "V0 frontend RPCs; in 0.6.2–0.6.3 the engine is declared dead when one step exceeds 3× this",
    Engine.V0, (0, 6, 2), (0, 23, 0), inert_from=(0, 11, 0),
)
DISTRIBUTED = Knob(
    "--distributed-timeout-seconds", Kind.FLAG, "s", "PyTorch's (600 for NCCL)",
    "torch.distributed collectives (the NCCL watchdog); must outlast the step timeout",
    None, (0, 18, 0), None,
)
CPU_DISTRIBUTED = Knob(
    "--cpu-distributed-timeout-seconds", Kind.FLAG, "s", "PyTorch's (1800 for gloo)",
    "vLLM's CPU (gloo) process groups: barriers, the DP all-reduce, object broadcasts; must outlast the step timeout",
    None, (0, 22, 0), None,
)
RINGBUFFER = Knob(
    "VLLM_RINGBUFFER_WARNING_INTERVAL", Kind.ENV, "s", "60",
    "nothing: it is the period of the shared-memory queue's 'No available shared memory broadcast block found in "
    "60 seconds' line, which a reader prints every interval while it waits (an idle server prints it too)",
    None, None, None,
)
WATCHDOG = Knob(
    "--watchdog-config", Kind.FLAG, "json", '{"timeout": 300}',
    "vLLM's stack-dump watchdog in the engine core and workers: logs and dumps stacks, never kills",
    Engine.V1, (0, 33, 0), None,
)
CLIENT = Knob(
    "client request timeout", Kind.CLIENT, "s", "your client's",
    "one whole request (queue, prefill of the whole prompt and decode), set in the client or gateway",
    None, None, None,
)

RAY_CGRAPH_GET = Knob(
    "RAY_CGRAPH_get_timeout", Kind.ENV, "s", "300 (vLLM's setdefault; Ray's own is 10)",
    "the Ray executor's compiled graph: waiting for one step's result from the workers (it kills a slow step "
    "like the step timeout does); set it in the environment of the process that starts vLLM.  Gone in 0.33 with "
    "the compiled-graph executor: RayExecutorV2 is bounded by VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",
    None, None, (0, 33, 0), platform=Platform.RAY,
)
RAY_CGRAPH_SUBMIT = Knob(
    "RAY_CGRAPH_submit_timeout", Kind.ENV, "s", "10 (Ray's)",
    "the Ray executor's compiled graph: handing the next step to the workers while the previous one still runs",
    None, None, (0, 33, 0), platform=Platform.RAY,
)
RAY_SERVE_HEALTH = Knob(
    "health_check_timeout_s", Kind.OUTSIDE, "s",
    "30 (Ray Serve's); 10 in Ray Serve LLM's deployments (RAY_SERVE_LLM_DEFAULT_HEALTH_CHECK_TIMEOUT_S, 2.44–2.60); "
    "period 10 s, restart after 3 failures in a row",
    "Ray Serve LLM: a replica whose check_health does not answer in time is restarted; the engine answers "
    "from its own loop, so a long step can delay it",
    None, None, None, platform=Platform.RAY,
)
K8S_PROBE = Knob(
    "livenessProbe", Kind.OUTSIDE, "fields", "timeoutSeconds 1, periodSeconds 10, failureThreshold 3",
    "Kubernetes restarts the container after failureThreshold × periodSeconds of failed probes; a probe on "
    "/health during a long step or start-up kills a slow engine",
    None, None, None, platform=Platform.K8S,
)

KNOBS: tuple[Knob, ...] = (
    EXECUTE_MODEL, ENGINE_READY, ITERATION, RPC, DISTRIBUTED, CPU_DISTRIBUTED, WATCHDOG, RINGBUFFER, CLIENT,
    RAY_CGRAPH_GET, RAY_CGRAPH_SUBMIT, RAY_SERVE_HEALTH, K8S_PROBE,
)
