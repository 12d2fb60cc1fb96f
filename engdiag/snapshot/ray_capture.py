"""``engdiag snapshot --ray``: a Ray cluster's vLLM processes, sampled through its dashboard, judged per job.

The cluster is listed once (nodes, actors, job drivers); the vLLM-shaped
processes are chosen (worker actors, engine-core actors, Serve replicas and
Ray Data workers hosting vLLM, and the drivers of their jobs); each is dumped
``samples`` times through the node's Ray agent, all in parallel, with a
timeout per call.  The dumps become the same thread reports as a local
snapshot and each job (one vLLM deployment) is judged with the local judge;
the cluster's verdict is the gravest job verdict, its evidence names node and
actor.  A refusal (profiling off, no py-spy, no ptrace, a silent agent) is
recorded per process with its fix; the capture fails only when nothing at all
could be read.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from engdiag.analysis.verdict import Verdict
from engdiag.errors import CaptureUnavailable, NetworkError, PermissionDenied, TargetGone, UsageError
from engdiag.redact import redact
from engdiag.roles import Ranks, Role, ranks_of, role_of
from engdiag.snapshot.frames import role_from_stacks
from engdiag.snapshot.model import (
    Category,
    Motion,
    ProcessInfo,
    ProcessReport,
    SnapshotOptions,
    ThreadReport,
    ThreadSample,
)
from engdiag.snapshot.motion import threads_across
from engdiag.snapshot.pyspy_text import parse_text_dump
from engdiag.snapshot.ray_dashboard import Dashboard, DashboardError, RayActor, RayDriver, RayNode, Refusal
from engdiag.snapshot.ray_judge import JobVerdict, RayProcess, RayTarget, judge_jobs, node_label

MAX_PARALLEL = 32
MAX_SAMPLES = 100
"""Each sample pauses every worker of the cluster while py-spy reads it."""
VLLM_SHAPED = re.compile(
    r"RayWorkerWrapper|RayWorkerProc|EngineCore|vllm|LLMServer|LLMDeployment|ServeReplica:.*LLM", re.IGNORECASE
)
"""Actor classes (or names / reprs) that host vLLM: vLLM's own Ray actors, Ray Serve LLM replicas,
Ray Data's ``MapWorker(MapBatches(vLLMEngineStageUDF))``."""
_STOP_KINDS = frozenset({"gone", "not_python", "pyspy_missing", "permission", "profiling_disabled", "auth", "agent"})
"""Refusals that another sample would only repeat."""

_RAY_WAITS = (
    ("ray/_private/worker.py", re.compile(r"(^|\.)(main_loop|listen_error_messages|print_logs)$")),
)
"""Ray's own loops: an actor's main loop waiting for its next call, the driver's pub/sub listeners."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Selection:
    """Which of the cluster's processes to capture (empty means the default set)."""

    jobs: tuple[str, ...] = ()
    actor_classes: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RaySnapshot:
    """One capture of a Ray cluster."""

    address: str
    ray_version: str | None
    options: SnapshotOptions
    selection: Selection
    started_at: datetime
    seconds: float
    nodes: tuple[RayNode, ...]
    processes: tuple[RayProcess, ...]
    jobs: tuple[JobVerdict, ...]
    verdict: Verdict
    cluster_errors: tuple[Refusal, ...] = ()
    """Refusals that hold for the whole cluster (profiling disabled, authentication)."""
    skipped: tuple[str, ...] = ()
    """Matching actors that were not sampled, and why (not alive, no pid yet)."""
    sample_seconds: tuple[float, ...] = field(default=())


def _matches(actor: RayActor, selection: Selection) -> bool:
    text = " ".join(filter(None, (actor.class_name, actor.name, actor.repr_name)))
    if selection.actor_classes:
        return any(wanted in text for wanted in selection.actor_classes)
    return bool(VLLM_SHAPED.search(text))


def _node_wanted(node: RayNode | None, ip: str, selection: Selection) -> bool:
    if not selection.nodes:
        return True
    keys = {ip} | ({node.node_id, node.node_id[:8], node.name or ""} if node else set())
    return any(wanted in keys or (node is not None and node.node_id.startswith(wanted)) for wanted in selection.nodes)


def select(
    nodes: list[RayNode], actors: list[RayActor], drivers: list[RayDriver], selection: Selection,
    gpus: dict[str, tuple[str, ...]] | None = None,
) -> tuple[list[RayTarget], list[str]]:
    """The processes to sample (vLLM-shaped actors and their jobs' drivers), and the skipped ones."""
    by_id = {node.node_id: node for node in nodes}
    targets: list[RayTarget] = []
    skipped: list[str] = []
    jobs_hosting: set[str] = set()
    for actor in actors:
        if not _matches(actor, selection) or (selection.jobs and actor.job_id not in selection.jobs):
            continue
        node = by_id.get(actor.node_id or "")
        ip = node.ip if node else "?"
        if not _node_wanted(node, ip, selection):
            continue
        if actor.state != "ALIVE" or not actor.pid:
            if actor.state != "DEAD":
                skipped.append(f"{actor.class_name} {actor.actor_id[:8]} ({actor.name or 'unnamed'}) is {actor.state}, not sampled")
            continue
        jobs_hosting.add(actor.job_id)
        targets.append(RayTarget(actor.pid, actor.node_id, ip, actor.job_id, "actor", actor.class_name,
                                 actor.actor_id, actor.name or actor.repr_name, actor.state, actor.resources.get("GPU", 0.0),
                                 (gpus or {}).get(actor.actor_id, ())))
    for driver in drivers:
        if driver.job_id not in jobs_hosting:
            continue
        same_ip = [n for n in nodes if n.ip == driver.node_ip and n.alive]
        node_id = driver.node_id or (same_ip[0].node_id if len(same_ip) == 1 else None)
        if _node_wanted(by_id.get(node_id or ""), driver.node_ip, selection):
            targets.append(RayTarget(driver.pid, node_id, driver.node_ip, driver.job_id, "driver", "driver",
                                     name=redact(driver.entrypoint)[:120] or None, state=driver.status or "RUNNING"))
    return targets, skipped


def _ray_wait(thread: ThreadReport) -> ThreadReport:
    """A thread parked in Ray's own loop waits for work: idle, not stuck (a rule only Ray dumps need)."""
    top = thread.frames[0] if thread.frames else None
    if top is None or thread.category is not Category.UNKNOWN:
        return thread
    if not any(file in top.filename and func.search(top.name) for file, func in _RAY_WAITS):
        return thread
    motion = Motion.WAITING if thread.motion is Motion.STUCK else thread.motion
    return replace(thread, category=Category.IDLE, motion=motion, reason=f"Ray's own wait loop: {top.where}")


def _role(target: RayTarget, title: str, threads: list[tuple[ThreadSample, ...]]) -> Role:
    if title.startswith("VLLM::"):
        return role_of(title)
    if target.kind == "actor":
        role = role_of(target.class_name)
        if role is not Role.OTHER:
            return role
    return role_from_stacks([t.frames for sample in threads for t in sample]) or Role.OTHER


def _ranks(target: RayTarget, title: str) -> Ranks:
    for text in (target.name or "", title):
        ranks = ranks_of(text)
        if ranks.label():
            return ranks
    return Ranks()


def _report(target: RayTarget, answers: list[str | Refusal]) -> RayProcess:
    """A target's answers → the report the local judge reads."""
    samples: list[tuple[ThreadSample, ...]] = []
    title = ""
    refusal: Refusal | None = None
    for answer in answers:
        if isinstance(answer, Refusal):
            refusal = answer
            continue
        dumps = [d for d in parse_text_dump(answer) if d.pid == target.pid] or parse_text_dump(answer)[:1]
        if not dumps:
            refusal = Refusal("failed", "the dashboard's answer is not a py-spy dump")
            continue
        title = title or dumps[0].title
        samples.append(dumps[0].threads)
    info = ProcessInfo(
        pid=target.pid, ppid=None, name=target.class_name, cmdline=(title,) if title else (target.class_name,),
        state=target.state, started=None, python=True if samples else None, node=node_label(target),
    )
    role = _role(target, title, samples)
    failed = refusal is not None and not samples
    report = ProcessReport(
        info=info, role=role, ranks=_ranks(target, title), threads=tuple(_ray_wait(t) for t in threads_across(samples)),
        error=refusal.message if failed and refusal else None, error_kind=refusal.kind if failed and refusal else None,
        samples=len(samples),
    )
    return RayProcess(target, report, refusal.fix if failed and refusal else None)


def _no_capture(address: str, processes: list[RayProcess], cluster_errors: list[Refusal], selection: Selection) -> None:
    """Raise the error that explains why nothing could be read."""
    if cluster_errors:
        first = cluster_errors[0]
        error = PermissionDenied if first.kind in ("profiling_disabled", "auth") else CaptureUnavailable
        raise error(f"{first.message} ({address})", hint=first.fix)
    if not processes:
        wanted = f" matching {', '.join(selection.actor_classes)}" if selection.actor_classes else " (RayWorkerWrapper, EngineCore, vLLM…)"
        raise TargetGone(f"no live vLLM-shaped actor{wanted} on the Ray cluster at {address}",
                          hint="check `ray list actors`; --actor-class NAME picks other actor classes")
    kinds = {p.report.error_kind for p in processes}
    first = processes[0]
    error = PermissionDenied if kinds == {"permission"} else CaptureUnavailable
    raise error(f"no process of the Ray cluster could be sampled: {first.report.error}", hint=first.fix)


def take_ray_snapshot(
    address: str | None,
    options: SnapshotOptions = SnapshotOptions(),
    selection: Selection = Selection(),
    *,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RaySnapshot:
    """List the cluster, sample its vLLM processes ``options.samples`` times through the dashboard, judge."""
    if options.nonblocking or options.locals:
        raise UsageError("--nonblocking and --locals are not available through Ray's dashboard",
                         hint="Ray's stack endpoint runs `py-spy dump` itself; only --native is passed on")
    if not 1 <= options.samples <= MAX_SAMPLES or options.interval_s < 0 or options.dump_timeout_s <= 0:
        raise UsageError(f"--samples must be 1 to {MAX_SAMPLES}, --interval not negative, --timeout positive")
    started_at = datetime.now(timezone.utc)
    started = time.monotonic()
    dashboard = Dashboard(address, timeout_s=options.dump_timeout_s)
    try:
        nodes, actors, drivers = dashboard.nodes(), dashboard.actors(), dashboard.drivers()
    except DashboardError as error:
        refusal = error.refusal
        kind = {"auth": PermissionDenied, "unreachable": NetworkError, "timeout": NetworkError}.get(refusal.kind, CaptureUnavailable)
        raise kind(refusal.message, hint=refusal.fix) from None
    targets, skipped = select(nodes, actors, drivers, selection, dashboard.actor_gpus())
    answers: dict[int, list[str | Refusal]] = {index: [] for index in range(len(targets))}
    cluster_errors: list[Refusal] = []
    sample_seconds: list[float] = []
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(targets)))) as pool:
        for number in range(options.samples):
            began = time.monotonic()
            live = [i for i in answers if not answers[i] or not _stops(answers[i][-1])]
            if not live:
                break
            calls = pool.map(lambda i: dashboard.traceback(targets[i].pid, targets[i].node_id, targets[i].node_ip,
                                                            native=options.native), live)
            for index, answer in zip(live, calls, strict=True):
                answers[index].append(answer)
            sample_seconds.append(time.monotonic() - began)
            cluster_errors = _cluster_wide([answers[i][-1] for i in live])
            if progress is not None:
                progress(number + 1, options.samples)
            if cluster_errors:
                break
            if number + 1 < options.samples:
                sleep(max(0.0, options.interval_s - (time.monotonic() - began)))
    processes = [_report(target, answers[i]) for i, target in enumerate(targets)]
    if not any(p.report.threads for p in processes):
        _no_capture(dashboard.url, processes, cluster_errors, selection)
    jobs, verdict = judge_jobs(processes, options, dashboard.url)
    return RaySnapshot(
        address=dashboard.url, ray_version=dashboard.version(), options=options, selection=selection,
        started_at=started_at, seconds=time.monotonic() - started, nodes=tuple(nodes), processes=tuple(processes),
        jobs=tuple(jobs), verdict=verdict, cluster_errors=tuple(cluster_errors), skipped=tuple(skipped),
        sample_seconds=tuple(sample_seconds),
    )


def _stops(answer: str | Refusal) -> bool:
    return isinstance(answer, Refusal) and answer.kind in _STOP_KINDS


def _cluster_wide(answers: list[str | Refusal]) -> list[Refusal]:
    """Profiling disabled or a refused token holds for every call: one record for the cluster."""
    kinds = {a.kind for a in answers if isinstance(a, Refusal)}
    return [next(a for a in answers if isinstance(a, Refusal) and a.kind == k)
            for k in ("profiling_disabled", "auth") if k in kinds]
