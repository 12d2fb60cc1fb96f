"""``snapshot`` with the real py-spy against real processes the tests start (and always clean up)."""

from __future__ import annotations

import json
import os
import signal
import stat
import time

import psutil
import pytest

from engdiag.errors import CaptureUnavailable, ExitCode
from engdiag.snapshot import nvml, tree
from engdiag.snapshot.capture import take_snapshot
from engdiag.snapshot.model import Category, Motion, SnapshotOptions

from tests.conftest import ROOT, needs_ptrace, run_engdiag

pytestmark = [pytest.mark.ptrace, needs_ptrace]
FAST = SnapshotOptions(samples=3, interval_s=0.3)


def by_role(snapshot, role):
    return [p for p in snapshot.processes if p.role.value == role]


def test_a_lock_cycle_names_its_threads_and_lines_and_a_spinning_child_is_busy(spawn):
    target = spawn("deadlock.py", "spin")
    snapshot = take_snapshot(target.pid, FAST)
    parent, child = snapshot.processes
    threads = {t.name: t for t in parent.threads}
    for name in ("take_first_then_second", "take_second_then_first"):
        assert threads[name].motion is Motion.STUCK
        assert threads[name].category is Category.LOCK_WAIT
    verdict = snapshot.verdict
    assert verdict.kind.value == "deadlocked" and "lock cycle" in verdict.headline
    assert "take_first_then_second blocks on `with second:`" in verdict.headline
    assert "take_second_then_first blocks on `with first:`" in verdict.headline
    roles = {e.text.split(":")[0]: e.role.value for e in verdict.evidence}
    assert roles["take_first_then_second"] == roles["take_second_then_first"] == "root cause"
    assert roles["MainThread"] == "consequence"  # joining the cycle's threads
    spinner, = child.threads
    assert spinner.motion is Motion.MOVING and "CPU" in (spinner.progress or "")


def test_engine_tree_with_workers_stuck_in_a_collective(spawn):
    target = spawn("engine_tree.py", "collective", "2", "non-python", "vllm", "serve")
    snapshot = take_snapshot(target.pid, FAST)
    core, = by_role(snapshot, "engine_core")
    workers = by_role(snapshot, "worker")
    assert sorted(w.ranks.tp for w in workers) == [0, 1]
    assert by_role(snapshot, "api_server")[0].info.pid == target.pid
    for worker in workers:
        main = [t for t in worker.threads if t.category is Category.COLLECTIVE]
        assert main and main[0].motion is Motion.STUCK
        assert main[0].frames[0].name.endswith("all_reduce")
    assert any(t.category is Category.SHM_WAIT for t in core.threads)
    skipped = [p for p in snapshot.processes if p.info.skip_reason]
    assert skipped and "not a Python process" in skipped[0].info.skip_reason
    verdict = snapshot.verdict
    assert verdict.kind.value == "deadlocked" and verdict.confidence >= 0.9
    assert "engine core waits" in verdict.headline
    assert not any(tree.state_of(p.info.pid) in ("T", "t") for p in snapshot.processes)


def test_idle_engine_is_healthy(spawn):
    target = spawn("engine_tree.py", "idle", "2", "vllm", "serve")
    snapshot = take_snapshot(target.pid, FAST)
    assert snapshot.verdict.kind.value == "healthy", snapshot.verdict.headline


def test_busy_loop_moves_and_reads_as_slow(spawn):
    target = spawn("busy.py")
    snapshot = take_snapshot(target.pid, SnapshotOptions(samples=4, interval_s=0.2))
    main = next(t for t in snapshot.processes[0].threads if t.category is Category.COMPUTE)
    assert main.motion is Motion.MOVING and main.active
    assert snapshot.verdict.kind.value == "slow"


def test_a_process_that_exits_during_the_capture_is_a_record_not_a_crash(spawn):
    parent = spawn("engine_tree.py", "idle", "1", "vllm", "serve")
    core = next(c for c in psutil.Process(parent.pid).children() if "EngineCore" in c.cmdline()[0])
    worker = core.children()[0]

    def kill_worker_after_first_sample(number, total):
        if number == 1:
            worker.kill()  # its parent does not reap it: it stays a zombie, as dead workers do
            deadline = time.time() + 5
            while tree.alive(worker.pid) and time.time() < deadline:
                time.sleep(0.01)

    snapshot = take_snapshot(parent.pid, FAST, progress=kill_worker_after_first_sample)
    record = next(p for p in snapshot.processes if p.info.pid == worker.pid)
    assert record.samples == 1 and record.threads  # the first sample survives
    assert snapshot.verdict.kind.value in {"healthy", "unknown"}


def test_py_spy_cut_short_never_leaves_the_target_stopped(spawn):
    target = spawn("busy.py")
    proc = psutil.Process(target.pid)
    with pytest.raises(CaptureUnavailable, match="did not finish within"):
        take_snapshot(target.pid, SnapshotOptions(samples=2, interval_s=0.0, dump_timeout_s=0.001))
    before = proc.cpu_times().user
    time.sleep(0.5)
    assert tree.state_of(target.pid) not in ("T", "t")
    assert proc.cpu_times().user > before  # it runs on


def test_a_stopped_target_is_resumed(spawn):
    target = spawn("busy.py")
    os.kill(target.pid, signal.SIGSTOP)
    deadline = time.time() + 5
    while tree.state_of(target.pid) != "T" and time.time() < deadline:
        time.sleep(0.01)
    assert tree.resume_if_stopped(target.pid)
    time.sleep(0.1)
    assert tree.state_of(target.pid) != "T"


def test_cli_writes_an_owner_only_bundle_and_prints_the_tree(spawn, tmp_path):
    target = spawn("engine_tree.py", "collective", "2", "vllm", "serve")
    bundle = tmp_path / "incident.json"
    result = run_engdiag("snapshot", str(target.pid), "--samples", "2", "--interval", "0.2", "--out", str(bundle))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert out.lstrip().startswith("DEADLOCKED")
    assert "engine_core" in out and "worker TP1" in out and "stuck" in out
    assert "Wait-for\nall in: all_reduce: TP0 (pid" in out
    assert f"bundle: {bundle}" in result.stderr.decode()
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600
    doc = json.loads(bundle.read_text())
    assert doc["schema"] == "engdiag.snapshot" and doc["verdict"]["kind"] == "deadlocked"
    procs = {p["pid"]: p for p in doc["processes"]}
    assert procs[target.pid]["threads"] and all("frames" in t for p in procs.values() for t in p["threads"])
    assert doc["nvml"]["available"] in (True, False)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_cli_json_and_a_read_only_output_folder(spawn, tmp_path):
    target = spawn("deadlock.py")
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = run_engdiag("snapshot", str(target.pid), "--json", "--samples", "2", "--interval", "0.1",
                             "--out", str(locked / "b.json"))
        if os.geteuid() == 0:  # root writes anywhere; make the folder a file path instead
            assert result.returncode == 0
        doc = json.loads(result.stdout)  # the capture is printed either way
        assert doc["verdict"]["kind"] == "deadlocked"
    finally:
        locked.chmod(0o700)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_engdiag("snapshot", str(target.pid), "--samples", "2", "--interval", "0.1", "--out", str(blocker / "b.json"))
    assert result.returncode == ExitCode.OUTPUT
    assert result.stdout.decode().lstrip().startswith("DEADLOCKED")
    assert "cannot write" in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_native_cannot_go_with_nonblocking():
    result = run_engdiag("snapshot", str(os.getpid()), "--native", "--nonblocking")
    assert result.returncode == ExitCode.USAGE and "--native cannot go with --nonblocking" in result.stderr.decode()


@pytest.mark.parametrize(
    ("pid", "code", "message"),
    [
        ("999999999", ExitCode.TARGET_GONE, "no process with pid"),
        ("abc", ExitCode.USAGE, "is not a process id"),
        ("-5", ExitCode.USAGE, "is not a process id"),
        ("1", ExitCode.TARGET_GONE, "pid 1 is the init process"),
    ],
)
def test_bad_pids_get_one_clear_line(pid, code, message):
    if pid == "1" and "python" in " ".join(_cmdline_of_init()).lower():
        pytest.skip("pid 1 is a Python process here (a container running Python as init)")
    result = run_engdiag("snapshot", "--", pid)
    assert result.returncode == code, result.stderr
    assert message in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def _cmdline_of_init() -> list[str]:
    try:
        return psutil.Process(1).cmdline()
    except psutil.Error:
        return []


def test_a_non_python_process_is_refused():
    import subprocess

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        result = run_engdiag("snapshot", str(sleeper.pid))
        assert result.returncode == ExitCode.TARGET_GONE
        assert "no Python process" in result.stderr.decode()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_kernel_thread_is_refused():
    kthread = next((p for p in psutil.process_iter(["name"]) if p.pid == 2), None)
    if kthread is None or kthread.cmdline():
        pytest.skip("no kthreadd visible in this pid namespace")
    result = run_engdiag("snapshot", "2")
    assert result.returncode == ExitCode.TARGET_GONE and "kernel thread" in result.stderr.decode()


def test_no_nvml_is_a_record_not_an_error():
    state = nvml.query(set())
    if state.available:
        pytest.skip("this machine has a working NVIDIA driver; the no-NVML path is for machines without one")
    assert state.reason and ("NVML" in state.reason or "driver" in state.reason)


def test_engdiag_never_samples_itself_or_its_py_spy():
    import subprocess
    import sys

    result = subprocess.run(
        ["bash", "-c", f'exec 3>&1; "{sys.executable}" -m engdiag snapshot $$ --samples 1 --no-bundle'],
        capture_output=True, timeout=60, cwd=ROOT,
    )
    assert result.returncode == ExitCode.TARGET_GONE
    assert b"no Python process in the tree" in result.stderr or b"engdiag itself" in result.stderr


def test_too_many_samples_are_refused_before_touching_the_target(spawn):
    target = spawn("busy.py")
    result = run_engdiag("snapshot", str(target.pid), "--samples", "1000000", "--interval", "0")
    assert result.returncode == ExitCode.USAGE
    err = result.stderr.decode()
    assert "--samples 1000000 is too many: at most 100" in err.splitlines()[0] and "Traceback" not in err


def test_a_long_capture_shows_its_progress_on_stderr(spawn):
    target = spawn("engine_tree.py", "idle", "1", "vllm", "serve")
    result = run_engdiag("snapshot", str(target.pid), "--samples", "10", "--interval", "0", "--no-bundle")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.decode().splitlines() if line.startswith("engdiag: sample ")]
    assert lines[0].startswith("engdiag: sample 1/10") and lines[-1].startswith("engdiag: sample 10/10")
    assert "longest pause per target" in result.stdout.decode()
