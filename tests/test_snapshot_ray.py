"""``engdiag snapshot --ray`` against a real local Ray cluster (one per module, always torn down).

The cluster: a head (dashboard with RAY_DASHBOARD_ENABLE_PROFILING=1), a
second node on this machine, and a third node whose dashboard agent cannot
start (its port is taken), so its workers cannot be sampled — a real silent
agent.  Three jobs run vLLM-shaped ``RayWorkerWrapper`` actors
(tests/programs/ray_job.py): a gloo all_reduce rank 2 never joins, a model
forward that keeps moving, and an idle worker on the node without an agent.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_engdiag

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[default]'): the --ray tests need a real cluster")
pytest.importorskip("torch", reason="torch is not installed: the deadlocked job runs a real gloo all_reduce")
psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.timeout(600)
PROGRAM = ROOT / "tests" / "programs" / "ray_job.py"
START_TIMEOUT_S = 300


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - loopback
        return json.loads(answer.read())


def _wait(what: str, check, deadline: float, logs: list[Path]):
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(1)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in logs if p.exists())
    pytest.fail(f"the Ray test cluster did not come up within {START_TIMEOUT_S} s: {what}\n{tails}")


class Cluster:
    """Processes this module started, each in its own session so teardown ends exactly them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sessions: list[int] = []
        self.logs: list[Path] = []
        self.env = {**os.environ, "RAY_DASHBOARD_ENABLE_PROFILING": "1", "RAY_USAGE_STATS_ENABLED": "0",
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        for key in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
            self.env.pop(key, None)

    def start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = self.folder / f"{name}.log"
        with log.open("ab") as out:
            child = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True, cwd=self.folder)
        self.sessions.append(child.pid)
        self.logs.append(log)
        return child

    def node(self, name: str, args: Callable[[], list[str]], alive: int, url: str, deadline: float) -> None:
        """Start a node and wait until the cluster lists ``alive`` live nodes; once more if Ray gave up.

        ``ray start`` waits only 30 s for its raylet to register; a loaded machine can miss that.  The first
        try's processes are ended and the second gets fresh ports: a raylet left from the first still holds
        its ports, and Ray refuses a port another of its components uses.
        """
        for attempt in range(2):
            if attempt:
                self.end(self.sessions.pop())
            child = self.start(name, args())

            def registered():
                if child.poll() is not None:
                    return "exited"
                rows = _get(f"{url}/api/v0/nodes")["data"]["result"]["result"]
                return len([r for r in rows if r["state"] == "ALIVE"]) >= alive

            if _wait(f"node {name}", registered, deadline, self.logs) is True:
                return
        pytest.fail(f"the Ray test node {name} did not start twice:\n{self.logs[-1].read_text()[-1500:]}")

    def stop(self) -> None:
        """End every process of the sessions this module started (Ray's own processes included)."""
        self.end(*self.sessions)

    @staticmethod
    def end(*sessions: int) -> None:
        """End every process of these sessions."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            mine = [p for p in psutil.process_iter() if _session(p) in sessions]
            for proc in mine:
                try:
                    proc.send_signal(sig)
                except psutil.Error:
                    pass
            psutil.wait_procs(mine, timeout=15)


def _session(proc) -> int | None:
    try:
        return os.getsid(proc.pid)
    except OSError:
        return None


def _node_args(head: bool, gcs: int, agent_port: int) -> list[str]:
    ray_cli = str(Path(sys.executable).parent / "ray")
    args = [ray_cli, "start", "--block", "--disable-usage-stats",
            "--node-manager-port", str(_port()), "--object-manager-port", str(_port()),
            "--metrics-export-port", str(_port()), "--runtime-env-agent-port", str(_port()),
            "--dashboard-agent-grpc-port", str(_port()), "--dashboard-agent-listen-port", str(agent_port),
            "--object-store-memory", str(100 << 20)]
    if head:
        return args + ["--head", "--port", str(gcs), "--num-cpus", "1", "--include-dashboard", "true",
                       "--dashboard-host", "127.0.0.1", "--ray-client-server-port", str(_port())]
    return args + ["--address", f"127.0.0.1:{gcs}", "--num-cpus", "0"]


@pytest.fixture(scope="module")
def cluster():
    folder = Path(tempfile.mkdtemp(prefix="edray"))  # short: Ray's socket paths must fit 107 bytes
    running = Cluster(folder)
    gcs, dashboard, head_agent = _port(), _port(), _port()
    url = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        running.start("head", _node_args(True, gcs, head_agent) + ["--dashboard-port", str(dashboard),
                                                                   "--temp-dir", str(folder / "t")])
        _wait("the head's dashboard", lambda: _get(f"{url}/api/version").get("ray_version"), deadline, running.logs)
        running.node("node2", lambda: _node_args(False, gcs, _port()), 2, url, deadline)
        running.node("silent", lambda: _node_args(False, gcs, head_agent), 3, url, deadline)  # agent port taken: no agent
        rows = _get(f"{url}/api/v0/nodes")["data"]["result"]["result"]
        head = next(r["node_id"] for r in rows if r["is_head_node"])
        agents = lambda: {r["node_id"] for r in rows if not r["is_head_node"]  # noqa: E731
                          and _answers(url, r["node_id"])}
        second = _wait("the second node's agent", lambda: next(iter(agents()), None), deadline, running.logs)
        silent = next(r["node_id"] for r in rows if r["node_id"] not in (head, second))
        placement = {"deadlock": [head, second, second], "progress": [second], "idle": [silent]}
        ready = {}
        for mode, nodes in placement.items():
            ready[mode] = folder / f"{mode}.ready"
            running.start(mode, [sys.executable, str(PROGRAM), mode, f"127.0.0.1:{gcs}", str(ready[mode]), ",".join(nodes)])
        _wait("the three jobs' actors", lambda: all(p.exists() for p in ready.values()), deadline, running.logs)
        actors = {mode: [json.loads(line) for line in path.read_text().splitlines()] for mode, path in ready.items()}
        time.sleep(2)  # let the collective and the forward loop get going
        ip = next(r["node_ip"] for r in rows if r["node_id"] == second)
        yield {"url": url, "head": head, "second": second, "silent": silent, "actors": actors, "ip": ip}
    finally:
        running.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _answers(url: str, node_id: str) -> bool:
    """Does the dashboard reach this node's agent (a traceback of a pid that is surely not Python)?"""
    try:
        urllib.request.urlopen(f"{url}/worker/traceback?pid=1&node_id={node_id}", timeout=10)  # noqa: S310
    except urllib.error.HTTPError as error:
        return b"agent address" not in error.read()
    return True


def _snapshot(cluster, tmp_path: Path, *args: str):
    bundle = tmp_path / "ray.json"
    done = run_engdiag("snapshot", "--ray", cluster["url"], "--json", "--samples", "3", "--interval", "1",
                       "--out", str(bundle), *args, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout), bundle, done


def _by_name(document: dict) -> dict[str, dict]:
    return {p["ray"]["name"]: p for p in document["processes"] if p["ray"]["kind"] == "actor"}


def test_the_cluster_verdict_names_the_ranks_stuck_in_the_collective(cluster, tmp_path):
    started = time.monotonic()
    document, bundle, _ = _snapshot(cluster, tmp_path)
    took = time.monotonic() - started
    print(f"capture through the dashboard: {document['capture']['seconds']:.2f} s ({took:.2f} s with the CLI)")
    stuck = {a["rank"]: a for a in cluster["actors"]["deadlock"]}
    verdict = document["verdict"]
    assert verdict["kind"] == "deadlocked"
    sources = " ".join(e["source"] for e in verdict["evidence"])
    for rank in (0, 1):
        assert f"pid {stuck[rank]['pid']} " in sources
        assert stuck[rank]["node_id"][:8] in sources
    culprit = next(e for e in verdict["evidence"] if f"pid {stuck[2]['pid']} " in e["source"])
    assert stuck[2]["node_id"][:8] in culprit["source"] and "never joined" in culprit["note"]
    headline = verdict["headline"]
    assert "rank2" in headline and f"pid {stuck[2]['pid']} on {cluster['ip']}" in headline and "never joined" in headline
    processes = _by_name(document)
    for rank in (0, 1):
        mine = processes[f"deadlock-rank{rank}"]
        assert mine["pid"] == stuck[rank]["pid"] and mine["ray"]["node_id"] == stuck[rank]["node_id"]
        assert mine["role"] == "worker" and mine["ranks"] == {"rank": rank}
        main = next(t for t in mine["threads"] if t["name"] == "MainThread")
        assert (main["category"], main["motion"]) == ("collective", "stuck")
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600
    assert json.loads(bundle.read_bytes()) == document


def test_each_job_gets_its_own_verdict(cluster, tmp_path):
    document, _, _ = _snapshot(cluster, tmp_path)
    jobs = {job["job_id"]: job["verdict"] for job in document["jobs"]}
    job_of = {mode: actors[0]["job_id"] for mode, actors in cluster["actors"].items()}
    assert jobs[job_of["deadlock"]]["kind"] == "deadlocked"
    progress = jobs[job_of["progress"]]
    mover = _by_name(document)["progress-rank0"]
    assert progress["kind"] == "slow", [(t["name"], t["category"], t["motion"], t["frames"][:2]) for t in mover["threads"]]
    assert any(t["motion"] == "moving" and t["category"] == "compute" for t in mover["threads"]), [(t["name"], t["category"], t["motion"], t["frames"][:3]) for t in mover["threads"]]
    assert cluster["second"][:8] in " ".join(e["source"] for e in progress["evidence"])


def test_a_node_without_an_agent_is_a_record_with_its_fix(cluster, tmp_path):
    document, _, _ = _snapshot(cluster, tmp_path)
    idle = _by_name(document)["idle-rank0"]
    assert idle["ray"]["node_id"] == cluster["silent"]
    assert idle["error_kind"] == "agent" and idle["threads"] == []
    assert "agent" in idle["error"] and "dashboard agent" in idle["ray"]["fix"]
    job = next(j["verdict"] for j in document["jobs"] if j["job_id"] == cluster["actors"]["idle"][0]["job_id"])
    assert job["kind"] != "healthy"  # its only worker was not read: never called healthy


def test_filters_narrow_the_capture(cluster, tmp_path):
    job = cluster["actors"]["progress"][0]["job_id"]
    document, _, _ = _snapshot(cluster, tmp_path, "--job", job)
    assert {p["ray"]["job_id"] for p in document["processes"]} == {job}
    assert document["verdict"]["kind"] == "slow"
    document, _, _ = _snapshot(cluster, tmp_path, "--node", cluster["head"][:12])
    assert {p["ray"]["node_id"] for p in document["processes"]} == {cluster["head"]}
    document, _, _ = _snapshot(cluster, tmp_path, "--actor-class", "deadlock-rank2")
    assert [p["ray"]["name"] for p in document["processes"] if p["ray"]["kind"] == "actor"] == ["deadlock-rank2"]


def test_human_output_groups_by_node_and_names_the_culprit(cluster, tmp_path):
    done = run_engdiag("snapshot", "--ray", cluster["url"], "--samples", "2", "--interval", "0.5", "--no-bundle",
                       timeout=180)
    text = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert text.startswith(" DEADLOCKED ")
    assert f"node {cluster['ip']}  {cluster['second'][:12]}" in text, text
    assert "RayWorkerWrapper" in text and "deadlock-rank1" in text
    assert f"engdiag snapshot --ray {cluster['url']} --native" in text


def test_watch_snapshots_the_ray_cluster_on_dead(cluster, metrics_server, tmp_path):
    from engdiag.commands.watch import RAY_PID, _ray_snapshotter
    from engdiag.watch.watcher import Options, Watcher

    from tests.test_watch import POLICY, Scrape

    scrape = Scrape()
    scrape.phase = "stalled"
    metrics_server.body = scrape
    options = Options(metrics_url=metrics_server.url, interval_s=5, policy=POLICY, tokens_per_sec=1000,
                      pid=RAY_PID, cooldown_s=600)
    watcher = Watcher(options, _ray_snapshotter(cluster["url"], tmp_path))
    snapshots = [r for t in range(0, 300, 5) for r in watcher.tick(float(t)) if r.kind == "snapshot"]
    assert len(snapshots) == 1, snapshots
    bundle = Path(snapshots[0].detail["bundle"])
    document = json.loads(bundle.read_text())
    assert document["schema"] == "engdiag.ray-snapshot" and document["verdict"]["kind"] == "deadlocked"
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600


def test_watch_cli_refuses_ray_with_pid():
    done = run_engdiag("watch", "--metrics-url", "http://127.0.0.1:1/metrics", "--ray", "auto", "--pid", "1")
    assert done.returncode == 2 and "give one" in done.stderr.decode()


def test_native_frames_come_through_the_dashboard(cluster, tmp_path):
    document, _, _ = _snapshot(cluster, tmp_path, "--native", "--samples", "1", "--actor-class", "deadlock-rank1")
    [worker] = [p for p in document["processes"] if p["ray"]["kind"] == "actor"]
    main = next(t for t in worker["threads"] if t["name"] == "MainThread")
    assert any(f["native"] for f in main["frames"]), main["frames"]
    assert any(f["name"] == "all_reduce" and not f["native"] for f in main["frames"])
    assert document["capture"]["native"] is True
