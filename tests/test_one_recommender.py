"""Issue 12: one source of truth for timeout advice, and every printed next step runs as printed.

Everything goes through the real command line (``python -m engdiag`` in a subprocess); the commands
``analyze`` prints are run by a real shell, with ``engdiag`` on PATH, from the same directory.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engdiag.errors import ExitCode

from tests.conftest import ROOT, run_engdiag
from tests.test_corpus import NOT_A_VLLM_LOG

EXAMPLE = "examples/tp2-decode-hang.log"
CORPUS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "corpus").iterdir()
                if p.is_dir() and p.name not in NOT_A_VLLM_LOG)  # those print no step: exit 3, "no vLLM lines"
CUTEDSL = "tests/corpus/cutedsl-jit-during-inference-sample-tokens-300s/log.txt"
SET = re.compile(r"^set (\S+) to (\d+)")


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory) -> dict[str, str]:
    """A PATH whose ``engdiag`` is this checkout's, as a user's shell would find it."""
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "engdiag"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m engdiag "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1", "COLUMNS": "120"}


@functools.cache
def _analyze_output(case: str) -> str:
    """``analyze --json`` of a case, run once per case: both per-case tests read the same document."""
    result = run_engdiag("analyze", case, "--json")
    assert result.returncode in (ExitCode.OK, ExitCode.FINDING), result.stderr.decode()
    return result.stdout.decode()


def _analyze(case: str) -> dict:
    return json.loads(_analyze_output(case))


_SHELL_WORDS = {"export", "cd", "echo", "sudo"}


def _bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def _timeout_step(steps: list[dict]) -> dict:
    """The step that says which timeout to set (a slow verdict always has one)."""
    return next(s for s in steps if SET.match(s["text"]))


_KNOB_VALUE = re.compile(r"\b(VLLM_\w+|RAY_CGRAPH_\w+|health_check_timeout_s)=(\d+)|^set (\S+) to (\d+)")


def _numbers(steps: list[dict]) -> list[tuple[str, str, bool]]:
    """Every (knob, value, is_capture) analyze prints, in a step's text or its command."""
    found = []
    for step in steps:
        for match in _KNOB_VALUE.finditer(f"{step['text']}\n{step['command'] or ''}"):
            name, value = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            found.append((name, value, "capture" in step["text"]))
    return found


@pytest.mark.parametrize("case", [EXAMPLE, *CORPUS])
def test_analyze_and_recommend_timeout_give_the_same_number_for_every_knob(case):
    """Done when: the two commands agree on every corpus case and the example — each knob analyze sets (and
    its capture value on a deadlock) is what ``recommend-timeout --log`` prints for the same log."""
    numbers = _numbers(_analyze(case)["verdict"]["next_steps"])
    if not numbers:
        return
    result = run_engdiag("recommend-timeout", "--log", case, "--json")
    assert result.returncode == 0, (case, result.stderr.decode())
    doc = json.loads(result.stdout)
    values = {r["name"]: r["value"] for r in doc["recommendations"]}
    for name, value, capture in numbers:
        wanted = str(int(doc["capture_timeout_s"] * (1000 if name == "VLLM_RPC_TIMEOUT" else 1))) if capture else values.get(name)
        assert value == wanted, (case, name, value, wanted)


@pytest.mark.parametrize("case", [EXAMPLE, *CORPUS])
def test_every_printed_next_step_runs_as_printed_and_gives_the_same_numbers(case, shell_env):
    for step in _analyze(case)["verdict"]["next_steps"]:
        command, serve_args = step["command"], step["vllm_serve_args"]
        assert command is None or serve_args is None, step  # never both: one is run, the other added to vllm serve
        if command is None:
            if serve_args is not None:
                assert serve_args.startswith("--")  # flags for `vllm serve`, never presented as a command
            else:
                assert step["text"]  # advice to read, with nothing presented as runnable
            continue
        if command.startswith(("engdiag snapshot", "sudo ")):
            assert _bash(f"bash -n <<'EOF'\n{command}\nEOF", shell_env).returncode == 0  # needs a live target / root
            continue
        tools = {part.split()[0] for part in re.split(r"[;|&]+", command) if part.strip()}
        if any(shutil.which(tool) is None and tool not in _SHELL_WORDS for tool in tools):
            # a diagnostic tool this machine lacks (ibstat on a box without InfiniBand): it must still parse
            assert _bash(f"bash -n <<'EOF'\n{command}\nEOF", shell_env).returncode == 0, command
            continue
        result = _bash(command, shell_env)
        assert result.returncode == 0, (command, result.stderr)
        found = SET.match(step["text"])
        if found and command.startswith("engdiag recommend-timeout"):
            name, value = found.groups()
            assert f"export {name}={value}" in result.stdout, (step["text"], result.stdout)


def test_analyze_and_recommend_agree_on_the_slow_incident():
    """A step killed at 300 s while kernels compiled: both say 450 s (300 × 1.5), never 120."""
    steps = _analyze(CUTEDSL)["verdict"]["next_steps"]
    assert _timeout_step(steps)["text"] and SET.match(_timeout_step(steps)["text"]).groups() == ("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "450")
    doc = json.loads(run_engdiag("recommend-timeout", "--log", CUTEDSL, "--json").stdout)
    step = next(r for r in doc["recommendations"] if r["name"] == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")
    assert step["value"] == "450" and doc["observed"]["killed"]["progressing"] is True


@pytest.mark.parametrize("extra", [(), ("--tokens-per-sec", "100000"), ("--tokens-per-sec", "100000", "--allow-lower")])
def test_never_below_the_limit_that_killed_progressing_work(extra):
    doc = json.loads(run_engdiag("recommend-timeout", "--log", CUTEDSL, "--json", *extra).stdout)
    assert doc["step"]["timeout_s"] >= 300 * 1.5


def test_never_below_vllms_default_unless_allowed_and_then_it_says_what_it_risks():
    args = ("recommend-timeout", "--log", EXAMPLE, "--json")
    assert json.loads(run_engdiag(*args).stdout)["step"]["timeout_s"] == 300
    lower = json.loads(run_engdiag(*args, "--allow-lower").stdout)
    assert lower["step"]["timeout_s"] == 120
    assert any("declared dead sooner" in note for note in lower["notes"])


def test_the_example_gives_one_capture_value_in_both_commands():
    analyze_steps = _analyze(EXAMPLE)["verdict"]["next_steps"]
    capture = next(s["command"] for s in analyze_steps if (s["command"] or "").startswith("export VLLM_EXECUTE"))
    table = run_engdiag("recommend-timeout", "--log", EXAMPLE).stdout.decode()
    assert capture in table


@pytest.mark.parametrize("case", [CUTEDSL, "tests/corpus/guided-json-complex-schema-iteration-timeout",
                                  "tests/corpus/163-shard-weight-load-exceeds-engine-ready-timeout"])
def test_a_log_alone_is_enough_without_prompt_lengths_or_throughput(case):
    result = run_engdiag("recommend-timeout", "--log", case, "--format", "env")
    assert result.returncode == 0, result.stderr.decode()
    assert re.search(r"^export VLLM_\w+=\d+", result.stdout.decode(), re.MULTILINE)


def test_the_scaling_table_shows_values_that_vary_or_is_not_shown():
    flat = run_engdiag("recommend-timeout", "--prompt-len", "1579", "--tokens-per-sec", "2400", "--json")
    assert json.loads(flat.stdout)["buckets"] == []
    assert "How it scales" not in run_engdiag("recommend-timeout", "--prompt-len", "1579", "--tokens-per-sec", "2400").stdout.decode()
    varied = json.loads(run_engdiag("recommend-timeout", "--prompt-len", "100000", "--tokens-per-sec", "100", "--json").stdout)
    assert len({b["timeout_s"] for b in varied["buckets"]}) > 1


def test_commands_and_paths_are_never_wrapped_at_80_columns(tmp_path):
    deep = tmp_path / ("a-rather-long-directory-name-for-an-incident" * 2)
    deep.mkdir()
    log = deep / "server.log"
    log.write_bytes((ROOT / CUTEDSL).read_bytes())
    doc = json.loads(run_engdiag("analyze", str(log), "--json").stdout)
    human = run_engdiag("analyze", str(log), env={"COLUMNS": "80"}).stdout.decode()
    lines = human.splitlines()
    wanted = [s["command"] for s in doc["verdict"]["next_steps"] if s["command"]]
    assert _printed_commands(human) == [" ".join(c.split()) for c in wanted]
    assert any(f"{log}:" in line for line in lines)  # path:line whole on one line
    assert all(f"{log}" in line for line in lines if "a-rather-long-directory" in line)  # never folded


def _printed_commands(human: str, marker: str = "$ ") -> list[str]:
    """The commands a person would paste from the human view, ``\\`` continuations joined."""
    printed, current = [], None
    for line in human.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.lstrip().startswith(marker):
            current = line.lstrip()[len(marker):]
        if current is not None and not current.endswith(" \\"):
            printed.append(" ".join(current.split()))
            current = None
        elif current is not None:
            current = current[:-2]
    return printed


@pytest.mark.parametrize("case", [EXAMPLE, *CORPUS])
def test_the_human_view_prints_the_same_runnable_commands_at_80_columns(case):
    """What a person pastes from the terminal is the command the JSON holds (and the other test runs)."""
    steps = _analyze(case)["verdict"]["next_steps"]
    human = run_engdiag("analyze", case, env={"COLUMNS": "80"}).stdout.decode()
    assert _printed_commands(human) == [" ".join(s["command"].split()) for s in steps if s["command"]]
    assert _printed_commands(human, "vllm serve … ") == [" ".join(s["vllm_serve_args"].split())
                                                         for s in steps if s["vllm_serve_args"]]


def test_version_gated_flags_are_left_out_when_the_version_is_unknown():
    yaml = pytest.importorskip("yaml")
    base = ("recommend-timeout", "--prompt-len", "32000", "--tokens-per-sec", "200")
    args = run_engdiag(*base, "--format", "args")
    assert args.returncode == 0 and args.stdout == b""
    assert b"--distributed-timeout-seconds" in args.stderr and b"version is unknown" in args.stderr
    spec = yaml.safe_load(run_engdiag(*base, "--format", "k8s").stdout)
    assert "args" not in spec and spec["env"][0]["name"] == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"


def test_k8s_output_is_valid_container_yaml_with_probe_and_cpu_group_timeout():
    yaml = pytest.importorskip("yaml")
    out = run_engdiag("recommend-timeout", "--prompt-len", "32000", "--tokens-per-sec", "20", "--vllm-version", "0.34.0",
                      "--base", "1500", "--hard-cap", "3000", "--platform", "k8s", "--format", "k8s").stdout
    spec = yaml.safe_load(out)
    assert all(isinstance(item, str) for item in spec["args"]) and len(spec["args"]) % 2 == 0
    flags = dict(zip(spec["args"][::2], spec["args"][1::2]))
    step = int(next(e["value"] for e in spec["env"] if e["name"] == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"))
    assert int(flags["--cpu-distributed-timeout-seconds"]) > step and int(flags["--distributed-timeout-seconds"]) > step
    json.loads(flags["--watchdog-config"])
    probe = spec["livenessProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] > step


def test_ray_guards_only_when_the_input_shows_ray():
    ray_log = "tests/corpus/tp8-llama70b-ray-allreduce-watchdog"
    names = {r["name"] for r in json.loads(run_engdiag("recommend-timeout", "--log", ray_log, "--vllm-version",
                                                         "0.11.0", "--json").stdout)["recommendations"]}
    assert {"RAY_CGRAPH_get_timeout", "RAY_CGRAPH_submit_timeout"} <= names
    plain = json.loads(run_engdiag("recommend-timeout", "--log", EXAMPLE, "--json").stdout)
    assert not any(r["name"].startswith("RAY_") for r in plain["recommendations"])


def test_old_v0_knobs_are_said_to_guard_nothing_from_0_11():
    doc = json.loads(run_engdiag("recommend-timeout", "--prompt-len", "1000", "--tokens-per-sec", "500",
                                 "--vllm-version", "0.20.0", "--json").stdout)
    iteration = next(r for r in doc["recommendations"] if r["name"] == "VLLM_ENGINE_ITERATION_TIMEOUT_S")
    assert iteration["applies"] is False and "guards nothing from 0.11" in iteration["why"]
    ring = next(r for r in doc["recommendations"] if r["name"] == "VLLM_RINGBUFFER_WARNING_INTERVAL")
    assert ring["value"] is None and "not a timeout" in ring["why"]


def test_a_full_or_closed_stdout_is_the_documented_output_error():
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    for extra in ((), ("--json",), ("--format", "env")):
        with open("/dev/full", "wb") as full:
            result = subprocess.run([sys.executable, "-m", "engdiag", "recommend-timeout", "--prompt-len", "10",
                                     "--tokens-per-sec", "10", *extra], stdout=full, stderr=subprocess.PIPE, cwd=ROOT,
                                    timeout=60)
        assert result.returncode == ExitCode.OUTPUT and b"internal error" not in result.stderr
    closed = subprocess.run(f'"{sys.executable}" -m engdiag analyze {EXAMPLE} >&-', shell=True, cwd=ROOT,
                            stderr=subprocess.PIPE, timeout=60)
    assert closed.returncode == ExitCode.OUTPUT and b"stdout is closed" in closed.stderr


def test_from_stdin_the_printed_step_reads_the_same_log_from_stdin(shell_env):
    data = (ROOT / CUTEDSL).read_bytes()
    doc = json.loads(run_engdiag("analyze", "-", "--json", input=data).stdout)
    step = _timeout_step(doc["verdict"]["next_steps"])
    assert "--log -" in step["command"] and "pipe the same log in" in step["command"]
    result = subprocess.run(["bash", "-c", step["command"]], input=data, capture_output=True, cwd=ROOT, env=shell_env,
                            timeout=120)
    name, value = SET.match(step["text"]).groups()
    assert result.returncode == 0 and f"export {name}={value}".encode() in result.stdout


def test_a_windowed_analysis_prints_steps_that_read_the_same_window(shell_env):
    doc = json.loads(run_engdiag("analyze", CUTEDSL, "--tail", "100", "--json").stdout)
    step = _timeout_step(doc["verdict"]["next_steps"])
    assert "--tail 100" in step["command"]
    result = _bash(step["command"], shell_env)
    name, value = SET.match(step["text"]).groups()
    assert result.returncode == 0 and f"export {name}={value}" in result.stdout


def test_a_v0_incident_gets_the_knobs_v0_has(tmp_path):
    log = tmp_path / "v0.log"
    log.write_text(
        "INFO 11-27 11:50:00 [api_server.py:1] vLLM API server version 0.6.4\n"
        "INFO 11-27 11:50:00 [metrics.py:345] Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: "
        "50.0 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 10.0%, "
        "CPU KV cache usage: 0.0%.\n"
        "ERROR 11-27 11:50:30 [client.py:1] TimeoutError: RPCServer didn't reply within 10000 ms\n"
    )
    steps = _analyze(str(log))["verdict"]["next_steps"]
    assert not any("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in (s["command"] or "") + s["text"] for s in steps)  # V1 only
    name, value = SET.match(_timeout_step(steps)["text"]).groups()
    assert name == "VLLM_RPC_TIMEOUT"  # the guard 0.6.4 V0 really has
    printed = run_engdiag("recommend-timeout", "--log", str(log), "--format", "env").stdout.decode()
    assert f"export {name}={value}" in printed
