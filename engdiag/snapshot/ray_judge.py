"""A Ray capture's verdict: each job judged with the local judge, node / actor / rank put in the evidence.

Pure: the processes of a capture (already parsed into the local snapshot's
reports) in, per-job verdicts and the cluster's verdict out.  A job is one vLLM
deployment; the cluster's verdict is the gravest job's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from engdiag.analysis.verdict import Evidence, Kind, Verdict
from engdiag.analysis.verdict import Role as EvidenceRole
from engdiag.roles import Role
from engdiag.snapshot.judge import judge
from engdiag.snapshot.model import Category, Motion, NvmlState, ProcessReport, SnapshotOptions
from engdiag.units import plural

_GRAVITY = {Kind.DEADLOCKED: 5, Kind.FRAGMENTED: 4, Kind.CRASHED: 4, Kind.SLOW: 3, Kind.UNKNOWN: 2, Kind.HEALTHY: 1}


@dataclass(frozen=True)
class RayTarget:
    """One process of the cluster to sample, and where it runs."""

    pid: int
    node_id: str | None
    node_ip: str
    job_id: str
    kind: str
    """``actor`` or ``driver``."""
    class_name: str
    actor_id: str | None = None
    name: str | None = None
    state: str = "ALIVE"
    gpus: float = 0.0
    """GPUs the actor requires (``required_resources``)."""
    gpu_ids: tuple[str, ...] = ()
    """GPUs (``index:uuid``) the dashboard sees the actor's pid on."""


@dataclass(frozen=True)
class RayProcess:
    """A sampled process: its target, the local-style report, and the refusal's fix when it failed."""

    target: RayTarget
    report: ProcessReport
    fix: str | None = None


@dataclass(frozen=True)
class JobVerdict:
    """One job's (one vLLM deployment's) verdict."""

    job_id: str
    verdict: Verdict


def node_label(target: RayTarget) -> str:
    """``10.0.0.12 (node e9af1ebc)``: the IP people know, the id that tells nodes sharing an IP apart."""
    return f"{target.node_ip} (node {(target.node_id or '?')[:8]})"


def _where(process: RayProcess, source: str = "") -> str:
    """Node, actor, job and rank of a process, less what ``source`` already says."""
    target = process.target
    what = target.class_name if target.kind == "actor" else "driver"
    ident = f" {target.actor_id[:8]}" if target.actor_id else ""
    rank = process.report.ranks.label()
    parts = [f"on {node_label(target)}", f"{what}{ident}", f"job {target.job_id}"] + ([rank] if rank else [])
    return ", ".join(part for part in parts if part not in source)


def _with_nodes(verdict: Verdict, processes: list[RayProcess]) -> Verdict:
    """Name node, actor and rank in each piece of evidence (the judge names pid and role)."""
    by_pid: dict[int, list[RayProcess]] = {}
    for process in processes:
        by_pid.setdefault(process.target.pid, []).append(process)
    evidence = []
    for item in verdict.evidence:
        match = re.match(r"pid (\d+)", item.source)
        found = by_pid.get(int(match[1]), []) if match else []
        where = " or ".join(filter(None, (_where(p, item.source) for p in found)))
        if where:
            item = replace(item, source=f"{item.source} {where}")
        evidence.append(item)
    return replace(verdict, evidence=tuple(evidence))


def _ray_steps(verdict: Verdict, address: str) -> Verdict:
    """The judge's ``engdiag snapshot PID`` steps, as the same capture through this dashboard."""
    steps = []
    for step in verdict.next_steps:
        if step.command and step.command.startswith("engdiag snapshot"):
            flags = [word for word in step.command.split()[2:] if not word.isdigit() and word != "PID"]
            step = replace(step, command=" ".join(["engdiag snapshot --ray", address, *flags]))
        steps.append(step)
    return replace(verdict, next_steps=tuple(steps))


def _absent(verdict: Verdict, members: list[RayProcess]) -> Verdict:
    """Name the job's workers that are not in the collective its other workers are stuck in.

    One rank missing from a collective hangs all the others; the judge names the
    waiting ranks, this names the one they wait for (unless the judge already did).
    """
    if verdict.kind is not Kind.DEADLOCKED:
        return verdict
    workers = [m for m in members if m.report.role is Role.WORKER and m.report.threads]
    inside = [m for m in workers if any(t.category is Category.COLLECTIVE and t.motion is Motion.STUCK
                                        for t in m.report.threads)]
    told = " ".join(e.source for e in verdict.evidence)
    absent = [m for m in workers if m not in inside and f"pid {m.report.info.pid} " not in told]
    if not inside or not absent:
        return verdict
    found = []
    for member in absent:
        main = next((t for t in member.report.threads if t.name == "MainThread"), member.report.threads[0])
        top = " ← ".join(f.where for f in main.frames[:2]) or "no Python frames"
        ranks = member.report.ranks.label()
        head = f"pid {member.report.info.pid} ({member.report.role.value}{' ' + ranks if ranks else ''})"
        found.append(Evidence(
            source=f"{head} {_where(member, head)}",
            line=None, time=None, signal=f"{main.category.value}/{main.motion.value}",
            text=f"{main.name or main.thread_id}: {top}", role=EvidenceRole.ROOT_CAUSE,
            note=f"not in the collective the job's other {plural(len(inside), 'worker')} {'is' if len(inside) == 1 else 'are'} stuck in"))
    names = ", ".join(f"{m.report.ranks.label() or f'pid {m.report.info.pid}'} on {node_label(m.target)}"
                      for m in absent[:3])
    return replace(verdict, headline=f"{verdict.headline}; {names} has not entered it",
                   evidence=tuple(found) + verdict.evidence)


def _partial(verdict: Verdict, members: list[RayProcess]) -> Verdict:
    """Say which processes of the job could not be read; never call a half-read job healthy."""
    missing = [m for m in members if not m.report.threads]
    if not missing:
        return verdict
    note = f"{len(missing)} of {plural(len(members), 'process', 'processes')} of this job not sampled: " + "; ".join(
        f"pid {m.report.info.pid} {_where(m)}: {m.report.error}" for m in missing[:4])
    if verdict.kind is Kind.HEALTHY:
        return replace(verdict, kind=Kind.UNKNOWN, confidence=0.3,
                       headline=f"unknown: the processes read are idle, but {len(missing)} could not be sampled",
                       undecided="the processes that could not be sampled (see their fix)", notes=verdict.notes + (note,))
    return replace(verdict, notes=verdict.notes + (note,))


def judge_jobs(
    processes: list[RayProcess], options: SnapshotOptions, address: str
) -> tuple[list[JobVerdict], Verdict]:
    """Each job's verdict (node, actor and rank in its evidence) and the cluster's: the gravest job's."""
    no_gpu = NvmlState(available=False, reason="GPU state of Ray nodes is not read through the dashboard")
    jobs: dict[str, list[RayProcess]] = {}
    for process in processes:
        jobs.setdefault(process.target.job_id, []).append(process)
    verdicts = []
    for job_id, members in sorted(jobs.items()):
        if not any(m.report.threads for m in members):
            continue
        verdict = _partial(_absent(judge([m.report for m in members], no_gpu, options), members), members)
        verdicts.append(JobVerdict(job_id, _ray_steps(_with_nodes(verdict, members), address)))
    if not verdicts:
        return [], judge([], no_gpu, options)
    gravest = max(verdicts, key=lambda j: (_GRAVITY.get(j.verdict.kind, 0), j.verdict.confidence))
    verdict = gravest.verdict
    if len(verdicts) > 1:
        others = [f"job {j.job_id}: {j.verdict.kind.value}" for j in verdicts if j is not gravest]
        verdict = replace(verdict, headline=f"job {gravest.job_id}: {verdict.headline}",
                          notes=verdict.notes + (f"the other jobs: {'; '.join(others)}",))
    return verdicts, verdict
