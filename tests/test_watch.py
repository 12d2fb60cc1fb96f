"""``engdiag watch``: scripted scenarios with a fake clock against a real HTTP server and a real log file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from engdiag import synth
from engdiag.commands.watch import _snapshotter
from engdiag.errors import ExitCode
from engdiag.timeouts.model import Policy
from engdiag.watch.judge import LivenessTracker, State
from engdiag.watch.watcher import Options, Watcher

from tests.conftest import ROOT, needs_ptrace, vllm_metrics

POLICY = Policy(base_s=120, factor=1.5, hard_cap_s=1800, heartbeat_s=5)


# ---- the judge ----------------------------------------------------------------------------------


def test_judge_states_over_time():
    tracker = LivenessTracker(POLICY, tokens_per_sec=1000, prompt_len=2000)
    assert tracker.verdict(0).state is State.UNKNOWN
    tracker.load(0, 0)
    assert tracker.verdict(1).state is State.IDLE
    tracker.load(10, 3)
    tracker.progress(12)
    assert tracker.verdict(14).state is State.ALIVE
    assert tracker.verdict(20).state is State.SLOW
    assert tracker.verdict(12 + 120).state is State.SLOW
    assert tracker.verdict(12 + 121).state is State.DEAD
    tracker.progress(300)
    assert tracker.verdict(301).state is State.ALIVE


def test_work_arriving_after_idle_is_timed_from_its_arrival():
    tracker = LivenessTracker(POLICY, tokens_per_sec=1000)
    tracker.progress(0)
    tracker.load(0, 0)
    tracker.load(5000, 2)  # hours idle, then a request
    assert tracker.verdict(5002).state is State.NO_PROGRESS_YET  # nothing proves progress since it arrived
    tracker.progress(5003)
    assert tracker.verdict(5004).state is State.ALIVE
    assert tracker.verdict(5033).state is State.SLOW


def test_a_long_prompt_earns_a_longer_wait_and_a_reported_death_is_dead_at_once():
    tracker = LivenessTracker(POLICY, tokens_per_sec=500)
    tracker.load(0, 1)
    tracker.prompt(400_000)  # 800 s of prefill × 1.5 = 1200 s
    assert tracker.verdict(600).state is State.NO_PROGRESS_YET  # never ALIVE without proof
    assert tracker.verdict(1201).state is State.DEAD
    tracker.progress(1300)
    tracker.died("EngineDeadError: EngineCore encountered an issue.")
    assert tracker.verdict(1301).state is State.DEAD


def test_heartbeat_never_shorter_than_the_observed_cadence():
    tracker = LivenessTracker(POLICY, tokens_per_sec=1000)
    tracker.load(0, 4)
    for t in range(0, 100, 10):  # stats every 10 s
        tracker.progress(t)
    assert tracker.heartbeat_s >= 15
    assert tracker.verdict(90 + 12).state is State.ALIVE


# ---- metrics over HTTP, fake clock ----------------------------------------------------------------


class Scrape:
    """A vLLM-shaped /metrics that moves (healthy), freezes (stalled) or empties (idle)."""

    def __init__(self) -> None:
        self.phase = "healthy"
        self.tokens = 0.0

    def __call__(self) -> str:
        if self.phase == "healthy":
            self.tokens += 500
        running = 0 if self.phase == "idle" else 4
        return vllm_metrics({2048: 10}, prompt_tokens=self.tokens, generation_tokens=self.tokens / 2,
                            running=running, kv=0.5)


def test_metrics_scenario_reaches_each_state_at_the_right_time(metrics_server):
    scrape = Scrape()
    metrics_server.body = scrape
    watcher = Watcher(Options(metrics_url=metrics_server.url, interval_s=5, policy=POLICY, tokens_per_sec=1000))
    changes = {}
    for t in range(0, 400, 5):
        if t == 60:
            scrape.phase = "stalled"
        if t == 300:
            scrape.phase = "idle"
        for record in watcher.tick(float(t)):
            if record.kind == "state":
                changes[record.verdict.state] = t
    assert changes[State.ALIVE] < 60
    assert 60 < changes[State.SLOW] <= 75
    assert 55 + 120 < changes[State.DEAD] <= 55 + 120 + 10
    assert changes[State.IDLE] == 300
    assert len(watcher.generation) > 0 and watcher.kv[-1] == 50.0


# ---- a log that a writer appends to, rotates and truncates ---------------------------------------


def test_log_scenario_with_rotation_and_truncation(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_text("")
    writer = synth.Writer(synth.Style(), datetime(2025, 10, 22, 9, 0, 0))
    load = synth.Load()
    watcher = Watcher(Options(log=path, interval_s=5, policy=POLICY, tokens_per_sec=1000))
    states = []

    def append(lines):
        with path.open("a") as handle:
            handle.write("".join(line + "\n" for line in lines))

    def tick(t):
        for record in watcher.tick(float(t)):
            if record.kind == "state":
                states.append((t, record.verdict.state))

    for t in range(0, 100, 5):  # healthy: a stats line every 10 s
        if t % 10 == 0:
            append(synth.stats_line(writer, load))
        tick(t)
    path.rename(tmp_path / "vllm.log.1")  # rotation: a new file at the path
    path.write_text("")
    for t in range(100, 160, 5):
        if t % 10 == 0:
            append(synth.stats_line(writer, load))
        tick(t)
    path.write_text("")  # truncation
    append(synth.stats_line(writer, synth.Load(prompt_tps=0.0, gen_tps=0.0)))  # the engine stops: 0 tokens/s, running 24
    for t in range(160, 400, 5):
        tick(t)
    known = [(t, s) for t, s in states if s is not State.UNKNOWN]
    assert known[0] == (5, State.ALIVE)  # a record is complete once the log goes quiet for a round
    assert not [s for t, s in known if t < 160 and s is not State.ALIVE]
    assert any(s is State.SLOW for t, s in states if t > 160)
    dead = next(t for t, s in states if s is State.DEAD)
    assert 150 + 120 < dead <= 150 + 120 + 20
    assert watcher.follower.reopened == 2


def test_a_fatal_line_is_dead_immediately(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_text("")
    watcher = Watcher(Options(log=path, interval_s=1, policy=POLICY))
    watcher.tick(0.0)
    lines = [line for line in (ROOT / "examples" / "tp2-decode-hang.log").read_text().splitlines() if "core.py:710" in line]
    path.write_text("\n".join(lines) + "\n")
    records = watcher.tick(1.0) + watcher.tick(2.0)  # the traceback is complete once the log is quiet a round
    assert records[-1].verdict.state is State.DEAD and "reported its death" in records[-1].verdict.reason


# ---- DEAD takes a snapshot, once per incident -----------------------------------------------------


@needs_ptrace
def test_dead_snapshots_the_tree_exactly_once_and_runs_the_command(metrics_server, spawn, tmp_path):
    tree = spawn("engine_tree.py", "collective", "2", "vllm", "serve")
    scrape = Scrape()
    scrape.phase = "stalled"
    metrics_server.body = scrape
    marker = tmp_path / "on-dead.txt"
    command = f"{sys.executable} -c \"import sys; open({str(marker)!r}, 'a').write(sys.argv[1] + chr(10))\""
    options = Options(metrics_url=metrics_server.url, interval_s=5, policy=POLICY, tokens_per_sec=1000,
                      pid=tree.pid, on_dead=command, cooldown_s=600)
    watcher = Watcher(options, _snapshotter(tmp_path))
    snapshots = []
    for t in range(0, 300, 5):
        snapshots += [r for r in watcher.tick(float(t)) if r.kind == "snapshot"]
    assert len(snapshots) == 1
    bundle = Path(snapshots[0].detail["bundle"])
    assert bundle.exists() and json.loads(bundle.read_text())["verdict"]["kind"] == "deadlocked"
    assert marker.read_text().splitlines() == [str(bundle)]
    scrape.phase = "healthy"  # recovers, then stalls again within the cooldown: no second snapshot
    for t in range(300, 320, 5):
        watcher.tick(float(t))
    scrape.phase = "stalled"
    for t in range(320, 700, 5):
        snapshots += [r for r in watcher.tick(float(t)) if r.kind == "snapshot"]
    assert len(snapshots) == 1


# ---- --once and --probe through the real CLI ------------------------------------------------------


def _once(*args, env=None):
    return subprocess.run([sys.executable, "-m", "engdiag", "watch", *args], capture_output=True, cwd=ROOT,
                          timeout=60, env={**os.environ, "NO_COLOR": "1", **(env or {})})


def test_once_exit_codes_from_metrics(metrics_server, tmp_path):
    scrape = Scrape()
    metrics_server.body = scrape
    alive = _once("--once", "--metrics-url", metrics_server.url, "--once-gap", "0.2")
    assert alive.returncode == ExitCode.OK and alive.stdout.startswith(b"ALIVE")
    scrape.phase = "stalled"  # frozen counters for longer than the heartbeat, requests in flight
    slow = _once("--once", "--metrics-url", metrics_server.url, "--once-gap", "0.3", "--heartbeat", "0.2")
    assert slow.returncode == ExitCode.WATCH_SLOW and slow.stdout.startswith(b"NO PROGRESS YET")
    probe = _once("--probe", "--metrics-url", metrics_server.url, "--once-gap", "0.3", "--heartbeat", "0.2")
    assert probe.returncode == ExitCode.OK  # a slow engine is not killed by the probe
    state = tmp_path / "probe.json"
    first = _once("--probe", "--metrics-url", metrics_server.url, "--state", str(state), "--json",
                  "--once-gap", "0.3", "--heartbeat", "0.2")
    assert first.returncode == ExitCode.OK and json.loads(first.stdout)["state"] == "no_progress_yet"
    saved = json.loads(state.read_text())
    saved["first_seen"] = saved["at"] = saved["at"] - 1000  # the counters have not moved for 1000 s
    state.write_text(json.dumps(saved))
    dead = _once("--probe", "--metrics-url", metrics_server.url, "--state", str(state))
    assert dead.returncode == ExitCode.WATCH_DEAD and dead.stdout.startswith(b"DEAD")
    scrape.phase = "idle"
    idle = _once("--once", "--metrics-url", metrics_server.url, "--once-gap", "0.1")
    assert idle.returncode == ExitCode.OK and idle.stdout.startswith(b"IDLE")


def test_once_with_state_never_calls_frozen_counters_alive(metrics_server, tmp_path):
    """Issue 12: probes on a server whose counters never move flapped between SLOW and ALIVE."""
    scrape = Scrape()
    scrape.phase = "stalled"
    metrics_server.body = scrape
    state = tmp_path / "probe.json"
    seen = []
    for _ in range(4):
        result = _once("--once", "--metrics-url", metrics_server.url, "--state", str(state), "--json",
                       "--once-gap", "0.1", "--heartbeat", "0.2")
        seen.append(json.loads(result.stdout)["state"])
        assert json.loads(state.read_text())["last_progress"] is None
    assert "alive" not in seen and set(seen) <= {"no_progress_yet", "dead"}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_intervals_are_usage_errors(value):
    result = _once("--interval", value, "--metrics-url", "http://127.0.0.1:9/metrics")
    assert result.returncode == ExitCode.USAGE and b"finite" in result.stderr and b"Traceback" not in result.stderr


def test_watch_tuning_options_have_help():
    result = subprocess.run([sys.executable, "-m", "engdiag", "watch", "--help"], capture_output=True, cwd=ROOT,
                            timeout=60, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"})
    text = result.stdout.decode()
    for option, words in (("--base", "never below"), ("--factor", "Safety factor"), ("--hard-cap", "never above")):
        line = next(line for line in text.splitlines() if option in line)
        assert words in line, line


def test_once_from_a_log_that_ends_in_a_fatal_error():
    result = _once("--once", "--log", str(ROOT / "examples" / "tp2-decode-hang.log"))
    assert result.returncode == ExitCode.WATCH_DEAD and b"reported its death" in result.stdout


def test_watch_needs_a_source_and_an_unreachable_url_is_reported(tmp_path):
    assert _once("--interval", "1").returncode in (ExitCode.USAGE,)
    result = _once("--once", "--metrics-url", "http://127.0.0.1:9/metrics")
    assert result.returncode == ExitCode.NETWORK and b"Traceback" not in result.stderr


def test_sigterm_stops_a_running_watch_cleanly(metrics_server):
    metrics_server.body = Scrape()
    watch = subprocess.Popen([sys.executable, "-m", "engdiag", "watch", "--metrics-url", metrics_server.url,
                              "--interval", "0.2", "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = json.loads(watch.stdout.readline())
        assert first["schema"] == "engdiag.watch" and first["type"] == "state"
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=10) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
