"""``snapshot --ray`` failure paths and the py-spy text parser, without a Ray cluster.

A real loopback HTTP server stands in for the dashboard, answering with the
shapes a Ray 2.60 dashboard gave in tests/test_snapshot_ray.py; the refusal
texts come from Ray's own code where Ray is installed (its profiling-disabled
response, its py-spy lookup), and the stacks are real py-spy text dumps of
real processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import urllib.parse
from collections.abc import Callable, Iterator

import pytest

from engdiag.errors import ExitCode
from engdiag.snapshot.pyspy import locate, parse_dump
from engdiag.snapshot.pyspy_text import parse_text_dump
from engdiag.snapshot.ray_dashboard import classify
from tests.conftest import LoopbackServer, closed_port_url, needs_ptrace, run_engdiag

NODE = "ab" * 28
Route = Callable[[dict[str, str]], tuple[int, str]]


def _listing(rows: list[dict]) -> tuple[int, str]:
    return 200, json.dumps({"result": True, "msg": "", "data": {"result": {"total": len(rows), "result": rows}}})


class FakeDashboard(LoopbackServer):
    """A Ray dashboard's listing shapes and a chosen /worker/traceback, on a real loopback server."""

    def __init__(self, traceback: Route, pids: list[int]) -> None:
        self.seen_headers: list[dict[str, str]] = []
        self.seen_paths: list[str] = []
        self.status: int | None = None
        """Answer every request with this status and an auth refusal (None: behave)."""
        self.routes: dict[str, Route] = {
            "/api/version": lambda q: (200, json.dumps({"ray_version": "2.60.0"})),
            "/api/v0/nodes": lambda q: _listing([{"node_id": NODE, "node_ip": "10.0.0.12", "is_head_node": True,
                                                  "state": "ALIVE", "node_name": "10.0.0.12"}]),
            "/api/v0/actors": lambda q: _listing([
                {"actor_id": f"{pid:032x}", "class_name": "RayWorkerWrapper", "state": "ALIVE", "job_id": "01000000",
                 "name": None, "node_id": NODE, "pid": pid, "repr_name": "", "required_resources": {"GPU": 1.0}}
                for pid in pids]),
            "/api/v0/jobs": lambda q: _listing([]),
            "/api/v0/workers": lambda q: _listing([]),
            "/worker/traceback": traceback,
        }
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}"

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, str | None, str]:
        url = urllib.parse.urlsplit(path)
        self.seen_headers.append(headers)
        self.seen_paths.append(url.path)
        if self.status is not None:
            return self.status, None, "Unauthorized: Missing authentication token"
        status, body = self.routes.get(url.path, lambda q: (404, "Not Found"))(dict(urllib.parse.parse_qsl(url.query)))
        return status, None, body


@pytest.fixture
def dashboard() -> Iterator[Callable[..., FakeDashboard]]:
    started: list[FakeDashboard] = []

    def start(traceback: Route, pids: list[int]) -> FakeDashboard:
        started.append(FakeDashboard(traceback, pids))
        return started[-1]

    yield start
    for server in started:
        server.close()


def _py_spy_text(pid: int) -> str:
    return subprocess.run([locate(), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30,
                          check=True).stdout


@needs_ptrace
def test_text_dump_reads_like_the_json_dump_of_the_same_process(spawn):
    target = spawn("deadlock.py")
    text = _py_spy_text(target.pid)
    as_json = parse_dump(subprocess.run([locate(), "dump", "--pid", str(target.pid), "--json"], capture_output=True,
                                        text=True, timeout=30, check=True).stdout, target.pid)
    [dump] = parse_text_dump(text)
    assert dump.pid == target.pid and "deadlock.py" in dump.title
    by_id = {t.thread_id: t for t in as_json}
    assert {t.name for t in dump.threads} == {t.name for t in as_json}
    for thread in dump.threads:
        twin = by_id.get(thread.os_tid) or next(t for t in as_json if t.name == thread.name)
        assert [(f.name, f.line) for f in thread.frames] == [(f.name, f.line) for f in twin.frames]
        assert all(j.filename.endswith(t.filename) and not t.native for t, j in zip(thread.frames, twin.frames))


def test_text_dump_marks_native_frames_and_reads_several_processes():
    text = (
        "Process 7: ray::RayWorkerWrapper.execute_method\nPython v3.12.3 (/usr/bin/python3.12)\n\n"
        'Thread 7 (active+gil): "MainThread"\n    ncclKernel_AllReduce (libnccl.so.2)\n'
        "    c10d::ProcessGroupNCCL::WorkNCCL::wait (ProcessGroupNCCL.cpp:611)\n"
        "    all_reduce (torch/distributed/distributed_c10d.py:2501)\n"
        "        Arguments:\n            tensor: <Tensor at 0x7f>\n"
        "Thread 0x7F3A2C1FF640 (idle)\n    wait (threading.py:331)\n"
        "Process 9: python child.py\nPython v3.12.3 (/usr/bin/python3.12)\n\n"
        'Thread 9 (active): "MainThread"\n    <module> (child.py:3)\n'
    )
    first, second = parse_text_dump(text)
    main, anonymous = first.threads
    assert [f.native for f in main.frames] == [True, True, False]
    assert main.frames[0].module == "libnccl.so.2" and main.gil and main.active
    assert (anonymous.thread_id, anonymous.os_tid, anonymous.name, anonymous.active) == (0x7F3A2C1FF640, None, None, False)
    assert second.pid == 9 and second.threads[0].frames[0].name == "<module>"


def _ray_text(function: Callable[[], object]) -> str:
    """Text produced by Ray's own code (skip where Ray is not installed)."""
    pytest.importorskip("ray", reason="Ray is not installed: the refusal texts are taken from Ray's own code")
    return str(function())


def _profiling_disabled() -> str:
    from ray.dashboard.modules.reporter.reporter_head import ReportHead

    return ReportHead._profiling_disabled_response(None).text  # type: ignore[arg-type]


def _agent_dump(folder: str, pid: int, path: str | None = None) -> str:
    """What Ray's agent answers for a stack of ``pid`` (its real code, run here), with PATH as given."""
    from ray.dashboard.modules.reporter.profile_manager import CpuProfilingManager

    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = saved if path is None else path
    try:
        ok, output = asyncio.run(CpuProfilingManager(folder).trace_dump(pid))
    finally:
        os.environ["PATH"] = saved
    assert not ok
    return output


def test_profiling_disabled_is_said_once_for_the_cluster_with_the_fix(dashboard):
    refusal = _ray_text(_profiling_disabled)
    server = dashboard(lambda q: (403, refusal), [101, 102])
    done = run_engdiag("snapshot", "--ray", server.url, "--no-bundle", "--samples", "3", "--interval", "0")
    err = done.stderr.decode()
    assert done.returncode == ExitCode.PERMISSION, err
    assert "Profiling is disabled by default for security reasons" in err
    assert "RAY_DASHBOARD_ENABLE_PROFILING=1" in err and "Traceback" not in err
    assert server.seen_paths.count("/worker/traceback") == 2  # one round for the two workers, not three


def test_a_node_without_py_spy_is_a_record_and_the_others_are_captured(dashboard, spawn, tmp_path):
    refusal = _ray_text(lambda: _agent_dump(str(tmp_path / "profiles"), os.getpid(), path=""))
    assert refusal == "Failed to execute: py-spy is not installed"
    target = spawn("deadlock.py")
    try:
        text = _py_spy_text(target.pid)
    except (subprocess.CalledProcessError, OSError):
        pytest.skip("py-spy cannot read processes here (ptrace)")
    server = dashboard(lambda q: (200, text) if q["pid"] == str(target.pid) else (500, refusal), [target.pid, 4242])
    done = run_engdiag("snapshot", "--ray", server.url, "--json", "--no-bundle", "--samples", "2", "--interval", "0")
    assert done.returncode == 0, done.stderr.decode()
    document = json.loads(done.stdout)
    by_pid = {p["pid"]: p for p in document["processes"]}
    assert by_pid[4242]["error_kind"] == "pyspy_missing" and "pip install py-spy" in by_pid[4242]["ray"]["fix"]
    assert by_pid[target.pid]["samples"] == 2 and by_pid[target.pid]["ray"]["node_ip"] == "10.0.0.12"
    assert by_pid[target.pid]["ray"]["gpus_required"] == 1.0
    assert document["verdict"]["kind"] == "deadlocked"
    assert all("10.0.0.12" in e["source"] for e in document["verdict"]["evidence"])


def test_a_stack_call_that_hangs_is_cut_at_the_timeout(dashboard, spawn):
    import time

    gate = threading.Event()
    server = dashboard(lambda q: (gate.wait(20), (500, "never"))[1], [4242])
    started = time.monotonic()
    done = run_engdiag("snapshot", "--ray", server.url, "--no-bundle", "--samples", "1", "--timeout", "1")
    gate.set()
    assert done.returncode == ExitCode.CAPTURE_UNAVAILABLE, done.stderr.decode()
    assert "did not answer within 1 s" in done.stderr.decode()
    assert time.monotonic() - started < 15


def test_an_unreachable_dashboard_is_one_line():
    done = run_engdiag("snapshot", "--ray", closed_port_url().removesuffix("/metrics"), "--no-bundle")
    err = done.stderr.decode()
    assert done.returncode == ExitCode.NETWORK
    assert err.startswith("engdiag: error: cannot reach the Ray dashboard at http://127.0.0.1:") and "Traceback" not in err


def test_a_dashboard_that_wants_a_token_says_how_to_give_it(dashboard):
    server = dashboard(lambda q: (500, "unused"), [101])
    server.status = 401
    done = run_engdiag("snapshot", "--ray", server.url, "--no-bundle", env={"RAY_AUTH_TOKEN": "s3cret-token"})
    err = done.stderr.decode()
    assert done.returncode == ExitCode.PERMISSION and "RAY_AUTH_TOKEN" in err
    assert server.seen_headers[0].get("Authorization") == "Bearer s3cret-token"
    assert "s3cret-token" not in err


def test_ray_filters_need_ray_and_a_local_snapshot_needs_a_pid():
    done = run_engdiag("snapshot", "--job", "01000000")
    assert done.returncode == ExitCode.USAGE and "add --ray" in done.stderr.decode()
    done = run_engdiag("snapshot", "--samples", "2")
    assert done.returncode == ExitCode.USAGE and "give the pid" in done.stderr.decode()
    done = run_engdiag("snapshot", "--ray", "--samples", "0", closed_port_url())
    assert done.returncode == ExitCode.USAGE and "--samples must be 1 to 100" in done.stderr.decode()
    done = run_engdiag("snapshot", "--ray", "--locals", closed_port_url())
    assert done.returncode == ExitCode.USAGE and "not available through Ray's dashboard" in done.stderr.decode()


def test_a_process_gone_from_its_node_is_told_apart(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    os.environ.setdefault("PATH", "")
    answer = _ray_text(lambda: _agent_dump(str(tmp_path / "profiles"), gone.pid,
                                           path=f"{os.path.dirname(locate())}{os.pathsep}{os.environ['PATH']}"))
    assert answer.startswith("Failed to execute `")
    assert classify(500, answer).kind == "gone"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to run py-spy unprivileged")
def test_py_spy_refused_ptrace_is_a_permission_record_with_the_kuberay_fix(spawn):
    target = spawn("deadlock.py")
    command = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", locate(), "dump", "-p", str(target.pid)]
    done = subprocess.run(command, capture_output=True, timeout=30)
    assert done.returncode != 0

    def agent_answer() -> str:
        from ray.dashboard.modules.reporter.profile_manager import _format_failed_profiler_command

        return _format_failed_profiler_command(command, "py-spy", done.stdout, done.stderr)

    refusal = classify(500, _ray_text(agent_answer))
    assert refusal.kind == "permission" and "SYS_PTRACE" in (refusal.fix or "")


@pytest.mark.parametrize(("status", "body", "kind"), [
    (500, "Failed to get agent address for node at node_id 0630", "agent"),
    (500, "500 Internal Server Error\n\nServer got itself in trouble", "agent"),
    (500, "", "http"),
])
def test_ray_refusals_are_told_apart(status, body, kind):
    assert classify(status, body).kind == kind
