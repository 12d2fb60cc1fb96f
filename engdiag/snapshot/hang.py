"""Deadlock verdicts that name who is at fault: the wait-for picture of ranks, and lock cycles (pure).

A rank missing from a collective, ranks in different collectives, a receive
nobody sends: the verdict names the culprit ranks (pid, role, rank) as the root
cause with their frames, the ranks waiting on them as supporting evidence, and
an engine core waiting for its workers as a consequence.  Threads of one
process stuck on ``with a:`` / ``b.acquire()`` lines are a lock cycle: they are
the root cause, and a thread joining them is a consequence.
"""

from __future__ import annotations

from engdiag.analysis.verdict import Evidence, Kind, Verdict
from engdiag.analysis.verdict import Role as EvidenceRole
from engdiag.roles import Role
from engdiag.snapshot.advice import busy_gpus, evidence, steps
from engdiag.snapshot.frames import is_join, lock_wanted, waits_on_workers
from engdiag.snapshot.model import Category, Motion, NvmlState, ProcessReport, SnapshotOptions, ThreadReport
from engdiag.snapshot.waitfor import Picture, RankState, pictures
from engdiag.units import plural


def core_waits(captured: list[ProcessReport]) -> list[tuple[ProcessReport, ThreadReport]]:
    """Engine-core threads waiting for the workers' answer to a step."""
    return [
        (p, t) for p in captured if p.role is Role.ENGINE_CORE for t in p.threads
        if waits_on_workers(t.frames) and t.motion in (Motion.STUCK, Motion.WAITING, Motion.ONCE)
    ]


def _names(states: tuple[RankState, ...]) -> str:
    return ", ".join(s.name for s in states)


def _labels(states: tuple[RankState, ...]) -> str:
    return "/".join(s.process.ranks.label() or f"pid {s.process.info.pid}" for s in states)


def _doing(state: RankState) -> str:
    if state.thread is None:
        return "no Python thread"
    return f"{state.state} ({state.thread.reason})"


def _op_text(op: str, states: tuple[RankState, ...]) -> str:
    groups = {s.group for s in states if s.group}
    return f"{op} ({', '.join(sorted(groups))} group)" if groups else op


def _headline(picture: Picture, core_waiting: bool) -> str:
    ops = picture.ops
    if picture.kind == "missing":
        op, ranks = ops[0]
        verb = "waits" if len(ranks) == 1 else "wait"
        return (f"deadlocked: {_names(picture.culprits)} never joined the {_op_text(op, ranks)} that "
                f"{_labels(ranks)} {verb} in — it is {_doing(picture.culprits[0])}")
    if picture.kind == "diverged":
        parts = "; ".join(f"{_labels(ranks)} in {_op_text(op, ranks)}" for op, ranks in ops)
        return f"deadlocked: ranks diverged — {parts}"
    if picture.kind == "orphan_recv":
        receivers = picture.waiting
        others = f" ({_labels(picture.culprits)}: {_doing(picture.culprits[0])})" if picture.culprits else ""
        return f"deadlocked: {_names(receivers)} waits in {receivers[0].op} and no rank sends{others}"
    op, ranks = ops[0]
    return (f"deadlocked: all {plural(len(ranks), 'rank')} of this tree wait in {_op_text(op, ranks)}"
            + (" while the engine core waits on them" if core_waiting else "")
            + " — the missing party is outside this capture")


def _picture_evidence(picture: Picture) -> list[Evidence]:
    found = []
    for state in picture.culprits:
        if state.thread is not None:
            note = "never joined" if picture.kind == "missing" else "no matching send"
            found.append(evidence(state.process, state.thread, EvidenceRole.ROOT_CAUSE, f"{note}: {state.state}"))
    role = EvidenceRole.ROOT_CAUSE if picture.kind in ("diverged", "all_in") else EvidenceRole.SUPPORTING
    for state in picture.waiting:
        if state.thread is not None:
            same = "same op in every sample" if state.consistent else "seen once or changing"
            found.append(evidence(state.process, state.thread, role, f"waits in {state.op} ({same})"))
    return found


def wait_for(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    """Ranks waiting in collectives with no rank progressing → who is missing, who diverged."""
    found = pictures(captured)
    if not found:
        return None
    order = {"missing": 0, "diverged": 1, "orphan_recv": 2, "all_in": 3}
    picture = min(found, key=lambda p: order[p.kind])
    waits = core_waits(captured)
    named = picture.kind != "all_in"
    confidence = 0.7 + 0.15 * picture.consistency + (0.05 if waits else 0.0)
    evidence_list = _picture_evidence(picture)
    evidence_list += [evidence(p, t, EvidenceRole.CONSEQUENCE, "the engine core waits for the workers' answer")
                      for p, t in waits[:1]]
    notes = [f"{plural(len(found), 'group')} of ranks wait in collectives"] if len(found) > 1 else []
    gpus = busy_gpus(nvml)
    if gpus:
        notes.append(f"GPU(s) {gpus} at ≥ 90% utilisation with no progress: NCCL kernels spinning on a peer that never arrives")
    if picture.consistency < 1 and options.samples > 1:
        notes.append("not every waiting rank was in the same op in every sample: take more samples to confirm")
    return Verdict(Kind.DEADLOCKED, round(min(confidence, 0.95), 2), _headline(picture, bool(waits)),
                   evidence=tuple(evidence_list[:10]), notes=tuple(notes),
                   next_steps=steps(Kind.DEADLOCKED, captured, options, named=named))


def lock_cycle(captured: list[ProcessReport], nvml: NvmlState, options: SnapshotOptions) -> Verdict | None:
    """Two or more threads of one process stuck on lock lines: a lock cycle; joins on them are consequences."""
    for process in captured:
        stuck = [t for t in process.threads if t.motion is Motion.STUCK and t.category is Category.LOCK_WAIT]
        holders = [(t, lock_wanted(t.reason, t.frames)) for t in stuck]
        cycle = [(t, lock) for t, lock in holders if lock is not None]
        if len(cycle) < 2:
            continue
        if len({lock for _, lock in cycle}) < 2:
            continue  # all want one lock: contention with a holder elsewhere, not a cycle
        parts = "; ".join(
            f"{t.name or t.thread_id} blocks on `{t.frames[0].code}` ({t.frames[0].filename.rsplit('/', 1)[-1]}:"
            f"{t.frames[0].line})" for t, _ in cycle[:4]
        )
        headline = f"deadlocked: lock cycle in pid {process.info.pid} — {parts}"
        found = [evidence(process, t, EvidenceRole.ROOT_CAUSE, f"blocked acquiring {lock}") for t, lock in cycle[:6]]
        found += [evidence(process, t, EvidenceRole.CONSEQUENCE, "waits for the threads in the cycle to finish")
                  for t in stuck if is_join(t.reason)][:3]
        return Verdict(Kind.DEADLOCKED, 0.85, headline, evidence=tuple(found),
                       next_steps=steps(Kind.DEADLOCKED, captured, options, named=True))
    return None
