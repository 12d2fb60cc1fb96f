"""``snapshot`` on engine-shaped trees whose workers run real torch.distributed gloo collectives.

Each test starts ``tests/programs/gloo_tree.py`` (API server → VLLM::EngineCore → VLLM::Worker_TP{n},
plus the resource_tracker child vLLM's shared memory brings), samples it with the real py-spy and
checks the verdict names the culprit.  The fixture kills the whole session of processes afterwards.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from engdiag.snapshot.capture import take_snapshot
from engdiag.snapshot.model import Category, Motion, SnapshotOptions

from tests.conftest import needs_ptrace, run_engdiag

_MISSING = [name for name in ("torch", "setproctitle") if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.ptrace,
    needs_ptrace,
    pytest.mark.skipif(bool(_MISSING), reason=f"{' and '.join(_MISSING)} not importable: the real gloo trees need "
                                               "torch==2.13.0 and setproctitle (pip install -e '.[test]')"),
]
OPTIONS = SnapshotOptions(samples=3, interval_s=0.3)


def capture(spawn, scenario: str, workers: int, options: SnapshotOptions = OPTIONS):
    target = spawn("gloo_tree.py", scenario, str(workers), "vllm", "serve", timeout=120)
    return target, take_snapshot(target.pid, options)


def worker(snapshot, tp: int):
    return next(p for p in snapshot.processes if p.role.value == "worker" and p.ranks.tp == tp)


def sources(verdict, role: str) -> list[str]:
    return [e.source for e in verdict.evidence if e.role.value == role]


def test_the_rank_that_never_joins_is_named(spawn):
    _, snapshot = capture(spawn, "never_joins", 3)
    verdict = snapshot.verdict
    lazy = worker(snapshot, 2)
    assert verdict.kind.value == "deadlocked", verdict.headline
    assert f"TP2 (pid {lazy.info.pid}) never joined the all_reduce that TP0/TP1 wait in" in verdict.headline
    assert "sleep" in verdict.headline  # what it does instead
    assert sources(verdict, "root cause") == [f"pid {lazy.info.pid} (worker TP2)"]
    assert len(sources(verdict, "supporting")) == 2
    assert sources(verdict, "consequence")[0].endswith("(engine_core)")  # the core waits for its workers
    assert verdict.confidence >= 0.85  # the same op in every sample
    assert not any("other nodes" in step.text for step in verdict.next_steps)


def test_diverging_ranks_name_both_ops_and_their_ranks(spawn):
    _, snapshot = capture(spawn, "diverge", 3)
    verdict = snapshot.verdict
    assert verdict.kind.value == "deadlocked", verdict.headline
    assert "ranks diverged" in verdict.headline
    assert "TP0/TP1 in all_reduce" in verdict.headline and "TP2 in all_gather" in verdict.headline


def test_a_recv_nobody_sends(spawn):
    _, snapshot = capture(spawn, "orphan_recv", 2)
    verdict = snapshot.verdict
    receiver, idle = worker(snapshot, 1), worker(snapshot, 0)
    assert verdict.kind.value == "deadlocked", verdict.headline
    assert f"TP1 (pid {receiver.info.pid}) waits in recv and no rank sends" in verdict.headline
    assert "TP0: idle" in verdict.headline
    assert sources(verdict, "root cause") == [f"pid {idle.info.pid} (worker TP0)"]


def test_a_slow_loop_of_matmuls_and_all_reduce_is_slow(spawn):
    _, snapshot = capture(spawn, "slow", 2)
    verdict = snapshot.verdict
    assert verdict.kind.value == "slow", verdict.headline
    moving = [t for tp in (0, 1) for t in worker(snapshot, tp).threads if t.motion is Motion.MOVING]
    assert moving and all(t.progress for t in moving)


@pytest.mark.parametrize("scenario", ["idle_queue", "idle_loop"])
def test_idle_trees_with_a_resource_tracker_are_healthy(spawn, scenario):
    _, snapshot = capture(spawn, scenario, 3)
    assert snapshot.verdict.kind.value == "healthy", snapshot.verdict.headline
    tracker, = [p for p in snapshot.processes if "resource_tracker" in " ".join(p.info.cmdline)]
    assert all(t.category is Category.IDLE for t in tracker.threads)
    if scenario == "idle_queue":  # three consumers of one multiprocessing.Queue: idle, not a lock deadlock
        reasons = [t.reason for tp in range(3) for t in worker(snapshot, tp).threads]
        assert sum("multiprocessing queue get" in r for r in reasons) >= 2, reasons


def test_cli_json_carries_the_wait_for_picture(spawn, tmp_path):
    target = spawn("gloo_tree.py", "never_joins", "2", "vllm", "serve", timeout=120)
    result = run_engdiag("snapshot", str(target.pid), "--json", "--samples", "2", "--interval", "0.2", "--no-bundle")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    picture, = doc["wait_for"]
    assert picture["kind"] == "missing" and list(picture["ops"]) == ["all_reduce"]
    assert [c["ranks"] for c in picture["culprits"]] == ["TP1"]
    assert doc["capture"]["max_pause_ms"] > 0
    assert all(p["cpu_s"] is not None for p in doc["processes"] if p["threads"])
