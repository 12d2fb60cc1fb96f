"""The only module that talks to Ray: its dashboard's HTTP API (state API + the py-spy stack endpoint).

Plain HTTP with the standard library, so ``engdiag snapshot --ray`` needs no
Ray packages on the machine it runs on.  Read against Ray 2.60.0's source
(``dashboard/modules/state/state_head.py``, ``reporter/reporter_head.py``,
``reporter/profile_manager.py``, ``_private/authentication/``):

- ``GET /api/version`` → ``{"ray_version": ...}``;
- ``GET /api/v0/nodes`` / ``/api/v0/actors?detail=true`` / ``/api/v0/jobs`` / ``/api/v0/workers`` →
  ``{"result": true, "data": {"result": {"result": [rows...]}}}``;
- ``GET /logical/actors`` → ``{"data": {"actors": {id: {"gpus": [{"index", "uuid", ...}]}}}}``;
- ``GET /worker/traceback?pid=P&node_id=N&ip=I&native=0|1`` → the text of
  ``py-spy dump -p P [--native]`` run by the node's agent.  Ray 2.60 takes
  ``node_id`` (or ``ip``); older Rays (2.40) read only ``ip``, so both are sent.
  Refusals come back as text: 403 "Profiling is disabled by default…",
  500 "Failed to execute: py-spy is not installed", 500 "Failed to execute
  `py-spy dump …`" with py-spy's stderr, 500 "Failed to get agent address…".
- Token authentication (``RAY_AUTH_MODE=token``): ``Authorization: Bearer``
  from ``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH`` or
  ``~/.ray/auth_token``, where Ray's own clients look; 401 / 403 otherwise.

Failures of one call come back as ``Refusal`` values with a kind and a fix,
never raised: one node that does not answer must not lose the others.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
LIST_LIMIT = 10_000
"""Ray's default cap on rows per state-API answer (RAY_MAX_LIMIT_FROM_API_SERVER)."""

PROFILING_FIX = "set RAY_DASHBOARD_ENABLE_PROFILING=1 in the Ray head node's environment and restart Ray there"
PYSPY_FIX = "install py-spy on that node where the Ray agent finds it on PATH (`pip install py-spy` in Ray's environment)"
PTRACE_FIX = (
    "py-spy needs ptrace on that node: run Ray as root or with passwordless sudo; in Kubernetes "
    "(KubeRay) add securityContext.capabilities.add: [SYS_PTRACE] to the Ray containers"
)
AGENT_FIX = "check that node's Ray dashboard agent is running (`ray status`; its log is dashboard_agent.log)"
AUTH_FIX = "export RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) with the cluster's token, as for `ray` CLI calls"


@dataclass(frozen=True)
class Refusal:
    """Why a call gave no answer, and what would fix it."""

    kind: str
    """``unreachable``, ``auth``, ``profiling_disabled``, ``pyspy_missing``, ``permission``,
    ``agent``, ``gone``, ``not_python``, ``timeout``, ``http`` or ``failed``."""
    message: str
    fix: str | None = None


class DashboardError(Exception):
    """A listing call failed: the cluster cannot be enumerated (carries the Refusal)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


@dataclass(frozen=True)
class RayNode:
    """A node as the state API lists it."""

    node_id: str
    ip: str
    alive: bool
    head: bool
    name: str | None


@dataclass(frozen=True)
class RayActor:
    """An actor as the state API lists it (``detail=true``)."""

    actor_id: str
    class_name: str
    name: str | None
    repr_name: str | None
    state: str
    job_id: str
    node_id: str | None
    pid: int | None
    resources: dict[str, float]


@dataclass(frozen=True)
class RayDriver:
    """A job's driver process (where vLLM's engine core runs with the Ray executor)."""

    job_id: str
    pid: int
    node_ip: str
    node_id: str | None
    entrypoint: str
    status: str | None


def normalize(address: str | None) -> str:
    """``host:port`` or a URL → ``http://host:port`` (default ``RAY_ADDRESS``, then 127.0.0.1:8265)."""
    text = (address or os.environ.get("RAY_ADDRESS") or DEFAULT_ADDRESS).strip().rstrip("/")
    if text in ("auto", "local") or text.startswith("ray://"):
        text = DEFAULT_ADDRESS
    if "://" not in text:
        text = f"http://{text}"
    return text


def token_from_env() -> str | None:
    """The cluster token where Ray's clients look for it; never logged or stored."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    if token:
        return token.strip()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def _reason(error: BaseException) -> str:
    inner = getattr(error, "reason", error)
    return str(getattr(inner, "strerror", None) or inner)


class Dashboard:
    """One Ray dashboard; every call has its own timeout and is safe to make from many threads."""

    def __init__(self, address: str | None = None, *, timeout_s: float = 10.0, token: str | None = None) -> None:
        self.url = normalize(address)
        self.timeout_s = timeout_s
        self._token = token if token is not None else token_from_env()

    def _get(self, path: str, params: dict[str, Any] | None = None, timeout_s: float | None = None) -> tuple[int, str]:
        """(status, body); a connection that fails or times out raises DashboardError."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        request = urllib.request.Request(f"{self.url}{path}{query}", headers={"Accept": "*/*"})
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as answer:  # noqa: S310
                return answer.status, answer.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")
        except (TimeoutError, socket.timeout):
            raise DashboardError(Refusal("timeout", f"{self.url}{path} did not answer within {timeout_s or self.timeout_s:g} s")) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise DashboardError(Refusal(
                "unreachable", f"cannot reach the Ray dashboard at {self.url}: {_reason(error)}",
                "pass the dashboard's address (`--ray http://HEAD:8265`, or RAY_ADDRESS); the head must run "
                "with --dashboard-host reachable from here (or use `kubectl port-forward svc/RAYCLUSTER-head-svc 8265`)",
            )) from None

    def _auth_refusal(self, status: int, body: str) -> Refusal | None:
        if status == 401 or (status == 403 and "authentication token" in body.lower()):
            return Refusal("auth", f"the Ray dashboard at {self.url} refused the request ({body.strip()[:200]})", AUTH_FIX)
        return None

    def _rows(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        status, body = self._get(path, {"limit": LIST_LIMIT, "timeout": int(max(1, self.timeout_s)), **params})
        refusal = self._auth_refusal(status, body)
        if refusal is not None:
            raise DashboardError(refusal)
        try:
            document = json.loads(body)
            if status != 200 or not document.get("result"):
                raise ValueError(document.get("msg") or f"HTTP {status}")
            return list(document["data"]["result"]["result"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise DashboardError(Refusal(
                "http", f"{self.url}{path} gave no listing ({str(error)[:200] or body[:200]})",
                "is this a Ray dashboard (Ray 2.x with the state API)?",
            )) from None

    def version(self) -> str | None:
        """Ray's version (``2.60.0``), or None when the dashboard does not say."""
        try:
            status, body = self._get("/api/version")
            return str(json.loads(body).get("ray_version")) if status == 200 else None
        except (DashboardError, ValueError, AttributeError):
            return None

    def nodes(self) -> list[RayNode]:
        """Every node the cluster knows, alive or dead."""
        return [
            RayNode(str(r.get("node_id")), str(r.get("node_ip")), r.get("state") == "ALIVE",
                    bool(r.get("is_head_node")), r.get("node_name"))
            for r in self._rows("/api/v0/nodes", {})
        ]

    def actors(self) -> list[RayActor]:
        """Every actor, with its required resources (``detail=true``)."""
        actors = []
        for r in self._rows("/api/v0/actors", {"detail": "true"}):
            resources = r.get("required_resources") or {}
            actors.append(RayActor(
                actor_id=str(r.get("actor_id")),
                class_name=str(r.get("class_name") or "?"),
                name=r.get("name") or None,
                repr_name=r.get("repr_name") or None,
                state=str(r.get("state") or "?"),
                job_id=str(r.get("job_id") or "?"),
                node_id=r.get("node_id") or None,
                pid=int(r["pid"]) if r.get("pid") else None,
                resources={str(k): float(v) for k, v in resources.items() if isinstance(v, int | float)},
            ))
        return actors

    def actor_gpus(self) -> dict[str, tuple[str, ...]]:
        """Actor id → the GPUs (``index:uuid``) whose process list holds the actor's pid (``/logical/actors``).

        Best effort, as the dashboard's own actor page shows them: {} when it cannot be read.
        """
        try:
            status, body = self._get("/logical/actors")
            actors = json.loads(body)["data"]["actors"] if status == 200 else {}
            return {
                str(actor_id): tuple(f"{g.get('index')}:{g.get('uuid')}" for g in (actor or {}).get("gpus") or [])
                for actor_id, actor in actors.items()
            }
        except (DashboardError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def drivers(self) -> list[RayDriver]:
        """The live jobs' driver processes (``/api/v0/jobs``'s ``driver_info``)."""
        drivers = []
        try:
            nodes = self.driver_nodes()
        except DashboardError:
            nodes = {}
        for r in self._rows("/api/v0/jobs", {}):
            info = r.get("driver_info") or {}
            pid = info.get("pid")
            if not pid or r.get("is_dead") or (r.get("status") not in (None, "RUNNING")):
                continue
            drivers.append(RayDriver(
                job_id=str(r.get("job_id") or info.get("id") or "?"),
                pid=int(pid),
                node_ip=str(info.get("node_ip_address") or ""),
                node_id=info.get("node_id") or nodes.get((int(pid), str(info.get("node_ip_address")))),
                entrypoint=str(r.get("entrypoint") or ""),
                status=r.get("status"),
            ))
        return drivers

    def driver_nodes(self) -> dict[tuple[int, str], str]:
        """(pid, ip) → node id of the live drivers (``/api/v0/workers``; the jobs listing names only the IP)."""
        rows = self._rows("/api/v0/workers", {"exclude_driver": "false", "filter_keys": "worker_type",
                                              "filter_predicates": "=", "filter_values": "DRIVER"})
        return {(int(r["pid"]), str(r.get("ip"))): str(r["node_id"]) for r in rows
                if r.get("pid") and r.get("node_id") and r.get("is_alive", True)}

    def traceback(self, pid: int, node_id: str | None, ip: str | None, *, native: bool = False) -> str | Refusal:
        """One py-spy dump of ``pid`` on that node, as text; or why not."""
        params: dict[str, Any] = {"pid": pid, "native": "1" if native else "0"}
        if node_id:
            params["node_id"] = node_id
        if ip:
            params["ip"] = ip
        try:
            status, body = self._get("/worker/traceback", params)
        except DashboardError as error:
            return error.refusal
        if status == 200 and body.lstrip().startswith("Process"):
            return body
        return self._auth_refusal(status, body) or classify(status, body)


def classify(status: int, body: str) -> Refusal:
    """Ray's refusal text → a kind and the fix (the texts are Ray 2.60's)."""
    text = body.strip()
    lowered = text.lower()
    if "profiling is disabled" in lowered:
        return Refusal("profiling_disabled", text.split(" See ")[0], PROFILING_FIX)
    if "py-spy is not installed" in lowered:
        return Refusal("pyspy_missing", "py-spy is not installed on that node (the Ray agent did not find it)", PYSPY_FIX)
    if "failed to get agent address" in lowered or "unavailable" in lowered or "failed to connect" in lowered:
        return Refusal("agent", f"that node's Ray agent does not answer ({text.splitlines()[0][:200] if text else status})", AGENT_FIX)
    if status == 500 and "server got itself in trouble" in lowered:
        # aiohttp's body for an exception in the handler: the head's RPC to the node's agent raised
        return Refusal("agent", "the dashboard's call to that node's Ray agent failed (HTTP 500)", AGENT_FIX)
    stderr = text.split("=== stderr ===", 1)[-1].split("=== stdout ===", 1)[0].strip()
    detail = lowered.split("=== stderr ===", 1)[-1]
    if "permission denied" in detail or "operation not permitted" in detail or "sudo chown root" in lowered:
        return Refusal("permission", "py-spy on that node was refused ptrace permission", PTRACE_FIX)
    if "no such process" in detail or "no such file" in detail or "failed to find process" in detail:
        return Refusal("gone", "the process exited (py-spy did not find it)")
    if "failed to find python version" in detail or "python interpreter" in detail:
        return Refusal("not_python", f"not a Python process py-spy can read ({stderr.splitlines()[-1][:200] if stderr else ''})")
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "") or text[:200]
    return Refusal("failed" if text else "http", f"HTTP {status}: {last[:300] or 'empty answer'}")
