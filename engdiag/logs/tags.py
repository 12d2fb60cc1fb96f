"""Process tags in front of a log line: which process printed it.

vLLM's multiprocessing wrapper prints ``(EngineCore_DP0 pid=77)``, Ray ``(RayWorkerWrapper pid=7,
ip=10.0.0.2)`` and SkyPilot ``(task, pid=7)`` (nesting vLLM's own tag inside), Ray Data ``(MapWorker(MapBatches(...)) pid=N)``, PyTorch
``[rank0]: `` on a rank's stderr, vllm-omni ``[Stage-0] ``; pastes lose brackets.  Pure functions only.
"""

from __future__ import annotations

import re

from engdiag.logs.events import Proc

_TAG = re.compile(
    r"\s*\((?P<name>[A-Za-z_][\w .:=-]{0,120}?)"
    r"(?:,? pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]*))?)?\)[ \t]?"
)
"""vLLM's and Ray's ``(name pid=N[, ip=A])`` — Ray Serve names a replica ``ServeReplica:app:deployment``
(``(ServeReplica:llm_app:LLMServer:qwen-32b pid=194388)``); SkyPilot's ``(task-name, pid=N)`` before every line of a job it runs
(flashinfer-jit-nvcc-unknown-option: ``(vllm-test, pid=2150) (EngineCore_0 pid=3966) ERROR …``)."""
_ACTOR_TAG = re.compile(
    r"\s*\(?(?P<name>[A-Za-z_]\w*\((?:[^()]|\([^()]*\))*\)) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]*))?\)[ \t]?"
)
"""A Ray actor whose name has parentheses (Ray Data's ``MapWorker(MapBatches(...))``),
sometimes with its opening bracket lost in a paste."""
_RANK_TAG = re.compile(r"\[rank(?P<rank>\d+)\]: ")
"""PyTorch's per-rank prefix on a rank's stderr (``[rank0]: Traceback ...``)."""
_STAGE_TAG = re.compile(r"\[Stage-(?P<stage>\d+)\] ")
"""vllm-omni's prefix on a stage worker's lines (``[Stage-0] INFO 12-30 03:34:39 [omni_stage.py:412] ...``)."""
_LOST_PAREN_TAG = re.compile(r"(?P<name>[A-Za-z_]\w{0,60}) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]*))?\)[ \t]?")
"""A process tag whose opening bracket a paste lost (``RayWorkerWrapper pid=7) INFO ...``): pid= is required."""
_ROLE_NAMES = ("EngineCore", "APIServer", "ApiServer", "VllmWorker", "Worker", "RayWorker")
_BARE_ROLE = re.compile(
    r"(?P<name>(?:EngineCore|APIServer|ApiServer|VllmWorker|Worker)\w*) "
    r"(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) )"
)


def _one_tag(text: str) -> tuple[Proc | None, str]:
    match = _TAG.match(text)
    if match is not None:
        name = match["name"].strip()
        pid = match["pid"]
        if pid is not None or name.startswith(_ROLE_NAMES):
            return Proc(name, int(pid) if pid else None, match["ip"]), text[match.end() :]
    if text[:5] == "[rank" and (match := _RANK_TAG.match(text)) is not None:
        return Proc(f"rank{match['rank']}"), text[match.end() :]
    if text[:7] == "[Stage-" and (match := _STAGE_TAG.match(text)) is not None:
        return Proc(f"Stage-{match['stage']}"), text[match.end() :]
    match = _ACTOR_TAG.match(text) or _LOST_PAREN_TAG.match(text)
    if match is not None:
        return Proc(match["name"], int(match["pid"]), match["ip"]), text[match.end() :]
    match = _BARE_ROLE.match(text)
    if match is not None:
        return Proc(match["name"]), text[match.end() :]
    return None, text


def process_tag(text: str) -> tuple[Proc | None, str]:
    """The process tag; Ray nests the vLLM process's own tag inside its actor's.

    ``(RayWorkerProc pid=7, ip=10.0.0.2) (Worker_DP0_TP0 pid=7) INFO ...`` names
    the worker: the inner tag is the vLLM process, the outer one only adds the host.
    Ray Data's ``(MapWorker(MapBatches(...)) pid=N)`` wraps an engine core the same way.
    """
    proc, rest = _one_tag(text)
    while proc is not None:
        inner, after = _one_tag(rest)
        if inner is None:
            break
        proc, rest = Proc(inner.name, inner.pid, inner.host or proc.host), after
    return proc, rest
