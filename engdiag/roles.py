"""Which vLLM process a name belongs to: API server, engine core or worker.

Log prefixes (``(EngineCore_DP0 pid=7)``, ``(Worker_TP1 pid=9)``) and process
titles (``VLLM::EngineCore``, ``VLLM::Worker_TP0``) name the same roles, so
``analyze`` and ``snapshot`` share this one pure mapping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Role(str, Enum):
    """The part a process plays in a vLLM server."""

    API_SERVER = "api_server"
    ENGINE_CORE = "engine_core"
    WORKER = "worker"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Ranks:
    """Parallel indices read from a process name; None where the name does not say."""

    rank: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None

    def label(self) -> str:
        """Short text such as ``DP0 TP1`` (empty when nothing is known)."""
        parts = [
            f"{name}{value}"
            for name, value in (
                ("DP", self.dp),
                ("PP", self.pp),
                ("TP", self.tp),
                ("EP", self.ep),
                ("rank", self.rank),
            )
            if value is not None
        ]
        return " ".join(parts)


_INDEX = re.compile(r"(DP|PP|TP|EP|PCP|DCP)(\d+)")
_RANK = re.compile(r"rank[=_ ]?(\d+)", re.IGNORECASE)
_ENGINE_INDEX = re.compile(r"EngineCore_(?:DP)?(\d+)")


def role_of(name: str) -> Role:
    """Role from a log tag or process title (``VLLM::`` prefix allowed)."""
    bare = name.removeprefix("VLLM::").strip()
    lowered = bare.lower()
    if lowered.startswith("enginecore") or lowered.startswith("llm_engine"):
        return Role.ENGINE_CORE
    if lowered.startswith("apiserver") or lowered.startswith("api_server"):
        return Role.API_SERVER
    if "worker" in lowered or re.match(r"rank\d", lowered):
        return Role.WORKER
    return Role.OTHER


def ranks_of(name: str) -> Ranks:
    """Parallel indices from names like ``Worker_DP0_TP1_EP1`` or ``VllmWorker rank=3``."""
    found = {key: int(value) for key, value in _INDEX.findall(name)}
    rank_match = _RANK.search(name)
    dp = found.get("DP")
    engine = _ENGINE_INDEX.search(name)
    if dp is None and engine is not None:
        dp = int(engine.group(1))
    return Ranks(
        rank=int(rank_match.group(1)) if rank_match else None,
        tp=found.get("TP"),
        pp=found.get("PP"),
        dp=dp,
        ep=found.get("EP"),
    )
