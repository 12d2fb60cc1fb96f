"""The wait-for picture across ranks: who waits, in which collective, and on whom (pure).

Workers are grouped by the engine core above them (one group per DP replica
of a tree); workers with none above them (a multi-node capture, Ray actors)
form one group across nodes; the engine cores form one more group (the DP
wave sync is an all-reduce between engine cores), where a core whose workers
are stepping counts as progressing.
In each group every rank gets one state from its threads: in a collective
(which op, which group where the frames show it), progressing, blocked
elsewhere, or idle.  Then, when no rank of the group progresses:

- ``missing``: some ranks wait in one collective, the others are in none —
  the others are the culprits (a rank that never joined);
- ``diverged``: ranks wait in different collectives (all_gather vs all_reduce);
- ``orphan_recv``: a rank waits in a receive and no rank of the group sends;
- ``all_in``: every rank waits in the same collective — the missing party is
  outside this capture (another node, another DP replica).

Consistency is the share of waiting ranks whose op was the same in every
sample; the verdict's confidence rises with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engdiag.roles import Role
from engdiag.snapshot.frames import collective_op, is_receive, is_send, waits_for_work
from engdiag.snapshot.model import BLOCKING, IDLE_POLLING, Category, Motion, ProcessReport, ThreadReport


@dataclass(frozen=True)
class RankState:
    """What one rank (worker process) is doing, decided by one of its threads."""

    process: ProcessReport
    thread: ThreadReport | None
    state: str
    """``collective``, ``progressing``, ``blocked``, ``idle`` or ``unknown``."""
    op: str | None = None
    group: str | None = None
    consistent: bool = False
    """In the same op in every sample (and sampled more than once)."""

    @property
    def name(self) -> str:
        """``TP1 (pid 42)``."""
        label = self.process.ranks.label() or self.process.role.value
        node = f" on {self.process.info.node}" if self.process.info.node else ""
        return f"{label} (pid {self.process.info.pid}{node})"


@dataclass(frozen=True)
class Picture:
    """One group's wait-for picture."""

    kind: str
    """``missing``, ``diverged``, ``orphan_recv`` or ``all_in``."""
    waiting: tuple[RankState, ...]
    culprits: tuple[RankState, ...]
    ops: tuple[tuple[str, tuple[RankState, ...]], ...]
    """Each op with the ranks in it, most ranks first."""
    consistency: float


def _progressing(thread: ThreadReport) -> bool:
    if thread.category in IDLE_POLLING:
        return False
    if thread.motion is Motion.MOVING:
        return True
    return thread.motion is Motion.ONCE and thread.category in (Category.COMPUTE, Category.COMPILE, Category.WEIGHT_LOADING)


def rank_state(process: ProcessReport) -> RankState:
    """The one state that describes a rank."""
    threads = process.threads
    collective = [t for t in threads if t.category is Category.COLLECTIVE]
    progressing = [t for t in threads if _progressing(t)]
    if any(t.motion is Motion.STUCK for t in collective):
        # a helper thread moving beside a stuck collective does not make the rank progress
        progressing = [t for t in progressing if t.category is not Category.UNKNOWN]
    if progressing:
        return RankState(process, progressing[0], "progressing")
    if collective:
        thread = next((t for t in collective if t.motion is Motion.STUCK), collective[0])
        ops = [collective_op(stack) for stack in thread.stacks or (thread.frames,)]
        found = collective_op(thread.frames)
        op, group = found if found else ("collective", None)
        consistent = len(ops) > 1 and all(o is not None and o[0] == op for o in ops)
        return RankState(process, thread, "collective", op, group, consistent)
    blocked = [t for t in threads if t.motion is Motion.STUCK and t.category in BLOCKING
               and not waits_for_work(t.category, t.frames)]
    if blocked:
        return RankState(process, blocked[0], "blocked")
    main = next((t for t in threads if t.name == "MainThread"), threads[0] if threads else None)
    if main is not None and (main.category in IDLE_POLLING or main.motion is Motion.WAITING
                             or waits_for_work(main.category, main.frames)):
        return RankState(process, main, "idle")
    return RankState(process, main, "unknown")


def _core_of(process: ProcessReport, by_pid: dict[int, ProcessReport]) -> int | None:
    """The pid of the nearest engine core above a process, if any."""
    parent, seen = process.info.ppid, set()
    while parent in by_pid and parent not in seen:
        seen.add(parent)
        if by_pid[parent].role is Role.ENGINE_CORE:
            return parent
        parent = by_pid[parent].info.ppid
    return None


def _groups(processes: Sequence[ProcessReport]) -> list[list[RankState]]:
    """Ranks grouped as they meet in collectives: each core's workers; the engine cores (DP sync)."""
    by_pid = {p.info.pid: p for p in processes if p.threads}
    workers: dict[object, list[RankState]] = {}
    for process in by_pid.values():
        if process.role is Role.WORKER:
            core = _core_of(process, by_pid)
            key = ("core", core) if core is not None else "capture"  # no core above: ranks may span nodes
            workers.setdefault(key, []).append(rank_state(process))
    cores = []
    for process in by_pid.values():
        if process.role is Role.ENGINE_CORE:
            state = rank_state(process)
            if any(s.state == "progressing" for s in workers.get(("core", process.info.pid), [])):
                state = RankState(process, state.thread, "progressing")  # its workers are stepping
            cores.append(state)
    return list(workers.values()) + ([cores] if cores else [])


def _picture(states: list[RankState]) -> Picture | None:
    if any(s.state == "progressing" for s in states):
        return None
    inside = [s for s in states if s.state == "collective"]
    if not inside:
        return None
    by_op: dict[str, list[RankState]] = {}
    for state in inside:
        by_op.setdefault(state.op or "collective", []).append(state)
    ops = tuple(sorted(((op, tuple(ranks)) for op, ranks in by_op.items()), key=lambda item: -len(item[1])))
    outside = tuple(s for s in states if s.state != "collective")
    consistency = sum(s.consistent for s in inside) / len(inside)
    receives = [s for s in inside if is_receive(s.op or "")]
    sends = [s for s in inside if is_send(s.op or "")]
    collectives = {op for op in by_op if not is_receive(op) and not is_send(op)}
    if len(collectives) >= 2 or (collectives and (receives or sends)):
        return Picture("diverged", tuple(inside), (), ops, consistency)
    if receives and not sends:
        return Picture("orphan_recv", tuple(receives), outside, ops, consistency)
    if outside:
        return Picture("missing", tuple(inside), outside, ops, consistency)
    if len(inside) >= 1 and collectives:
        return Picture("all_in", tuple(inside), (), ops, consistency)
    return None


def pictures(processes: Sequence[ProcessReport]) -> list[Picture]:
    """The wait-for picture of every group of ranks that waits in a collective with no rank progressing."""
    found = [_picture(members) for members in _groups(processes)]
    return [p for p in found if p is not None]
