"""Issue 12 follow-ups through the real command line: the year kubectl's stamps give, evidence that marks a
borrowed time, a hanging indent for long evidence lines, Kubernetes detected from what the log proves, and the
knob version ranges read in vLLM's released source."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engdiag.errors import ExitCode

from tests.conftest import ROOT, run_engdiag

EXAMPLE = ROOT / "examples" / "tp2-decode-hang.log"
STATS = ("Engine 000: Avg prompt throughput: 9000.0 tokens/s, Avg generation throughput: 50.0 tokens/s, "
         "Running: 3 reqs, Waiting: 2 reqs, GPU KV cache usage: {kv}%, Prefix cache hit rate: 0.0%")
PROBE = ('Warning  Unhealthy  pod/vllm-0  Liveness probe failed: Get "http://10.0.0.5:8000/health": '
         "context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
SCANNERS = ["lines", "python"]


def _k8s_log(tmp_path: Path, probe: bool = True, year: str = "2024") -> Path:
    """A TP=2 server, serving, whose kubelet gives up on its liveness probe; every line as `kubectl logs --timestamps`."""
    lines = [
        f"{year}-05-01T14:30:00.101Z INFO 05-01 14:30:00 [api_server.py:1] vLLM API server version 0.11.0",
        f"{year}-05-01T14:30:00.102Z INFO 05-01 14:30:00 [config.py:1] tensor_parallel_size=2",
        f"{year}-05-01T14:36:00.000Z INFO 05-01 14:36:00 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000",
        *(f"{year}-05-01T14:36:{s}.000Z INFO 05-01 14:36:{s} [loggers.py:123] " + STATS.format(kv=kv)
          for s, kv in (("10", 40), ("20", 60), ("30", 70))),
        *([f"{year}-05-01T14:37:05.000Z {PROBE}"] if probe else []),
        f"{year}-05-01T14:37:05.500Z INFO 05-01 14:37:05 [launcher.py:1] Shutting down FastAPI HTTP server.",
    ]
    log = tmp_path / "pod.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def _json(*args: str, env: dict[str, str] | None = None) -> dict:
    result = run_engdiag(*args, "--json", env=env)
    assert result.returncode in (ExitCode.OK, ExitCode.FINDING), result.stderr.decode()
    return json.loads(result.stdout)


# ---- the year ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scanner", SCANNERS)
def test_kubectl_stamps_give_the_year_in_json_and_human_output(tmp_path, scanner):
    log = _k8s_log(tmp_path)
    env = {"ENGDIAG_SCANNER": scanner, "COLUMNS": "250"}
    doc = _json("analyze", str(log), env=env)
    timeline = doc["timeline"]
    assert timeline["first_time"] == "05-01 14:30:00" and timeline["first_year"] == 2024  # time as printed, year beside
    assert timeline["last_year"] == 2024 and timeline["last_progress"]["year"] == 2024
    assert all(item["year"] == 2024 for item in doc["verdict"]["evidence"])
    assert doc["model"]["guard"]["year"] == 2024 and {a["start_year"] for a in doc["model"]["activities"]} == {2024}
    out = run_engdiag("analyze", str(log), env=env).stdout.decode()
    assert re.search(r"^fired +≈ 2024-05-01 14:36:30 \(no time of its own\)", out, re.MULTILINE)  # the probe's line
    assert re.search(r"^ serving +2024-05-01 14:36:10", out, re.MULTILINE)  # a phase's start
    assert "2024-05-01 14:30:00 → 2024-05-01 14:37:05" in out  # log span
    assert re.search(r"^last progress +2024-05-01 14:36:30", out, re.MULTILINE)
    assert f"{log}:6  2024-05-01 14:36:30" in out  # an evidence header


def test_a_kubectl_stamp_across_new_year_gives_the_local_year(tmp_path):
    """kubectl prints UTC: 2025-01-01T00:30Z can be a local 12-31 of 2024."""
    log = tmp_path / "newyear.log"
    log.write_text("2025-01-01T00:30:00.000Z ERROR 12-31 19:30:00 [core.py:710] EngineCore encountered a fatal error.\n")
    doc = _json("analyze", str(log))
    assert doc["timeline"]["fatal"]["time"] == "12-31 19:30:00" and doc["timeline"]["fatal"]["year"] == 2024


def test_without_a_stamp_that_gives_it_there_is_no_year():
    doc = _json("analyze", str(EXAMPLE))
    assert doc["timeline"]["first_year"] is None and all(item["year"] is None for item in doc["verdict"]["evidence"])
    assert not re.search(r"\b20\d\d-10-22\b", run_engdiag("analyze", str(EXAMPLE)).stdout.decode())


# ---- a borrowed time is marked in the evidence too --------------------------------------------


def test_evidence_marks_a_time_borrowed_from_the_previous_line(tmp_path):
    log = tmp_path / "impossible.log"
    log.write_text(
        "INFO 10-22 09:30:00 [loggers.py:123] " + STATS.format(kv=10) + "\n"
        "ERROR 02-30 25:61:61 [core.py:710] EngineCore encountered a fatal error.\n"
    )
    env = {"ENGDIAG_SCANNER": "lines", "COLUMNS": "250"}
    fatal = next(e for e in _json("analyze", str(log), env=env)["verdict"]["evidence"] if e["line"] == 2)
    assert fatal["inherited_time"] is True and fatal["time"] == "10-22 09:30:00"
    out = run_engdiag("analyze", str(log), env=env).stdout.decode()
    assert f"{log}:2  ≈ 10-22 09:30:00 (no time of its own)" in out


def test_a_line_with_no_time_of_its_own_is_marked_in_the_evidence(tmp_path):
    """The kubelet's line carries only kubectl's stamp: its evidence time is the previous line's, and says so."""
    log = _k8s_log(tmp_path)
    probe = next(e for e in _json("analyze", str(log))["verdict"]["evidence"] if "Liveness probe" in e["text"])
    assert probe["inherited_time"] is True
    out = run_engdiag("analyze", str(log), env={"COLUMNS": "250"}).stdout.decode()
    assert f"{log}:7  ≈ 2024-05-01 14:36:30 (no time of its own)" in out


# ---- layout at 80 columns ----------------------------------------------------------------------


def test_long_evidence_lines_keep_a_hanging_indent_and_paths_stay_whole(tmp_path):
    deep = tmp_path / ("an-incident-directory-with-a-long-name-" * 3)
    deep.mkdir()
    log = deep / "server.log"
    log.write_bytes(EXAMPLE.read_bytes())
    out = run_engdiag("analyze", str(log), env={"COLUMNS": "80"}).stdout.decode()
    lines = out.splitlines()
    headline = lines[: lines.index("Evidence") - 1]
    assert len(headline) > 1 and all(line.startswith("  ") for line in headline[1:])  # the headline wraps indented
    evidence = lines[lines.index("Evidence") + 1 : lines.index("Timeline") - 1]
    assert any("SchedulerOutput(" in line for line in evidence)  # the long scheduler dump is there, wrapped
    assert all(line.startswith(("● ", "  ", "… ")) for line in evidence), evidence  # every continuation indented
    # a path:line is never folded: each line that shows part of the path shows all of it, with its line number
    for line in lines:
        if "an-incident-directory" in line:
            assert re.search(re.escape(str(log)) + r"(:\d+)?\b", line), line


# ---- Kubernetes, detected from the log --------------------------------------------------------


def test_a_kubelet_probe_failure_is_detected_and_sizes_the_probe(tmp_path):
    log = _k8s_log(tmp_path)
    rec = _json("recommend-timeout", "--log", str(log))
    assert rec["observed"]["platforms"] == ["k8s"]
    assert any("liveness probe failed" in proof and f"{log}:7" in proof for proof in rec["observed"]["platform_evidence"])
    probe = next(r for r in rec["recommendations"] if r["name"] == "livenessProbe")
    step = next(r for r in rec["recommendations"] if r["name"] == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")
    periods = dict(re.findall(r"(periodSeconds|failureThreshold) (\d+)", probe["value"]))
    assert int(periods["periodSeconds"]) * int(periods["failureThreshold"]) > int(step["value"])


def test_analyze_names_the_probe_that_killed_the_engine_and_its_step_runs_as_printed(tmp_path):
    yaml = pytest.importorskip("yaml")
    log = _k8s_log(tmp_path)
    steps = _json("analyze", str(log))["verdict"]["next_steps"]
    probe = next(s for s in steps if "liveness probe" in s["text"])
    assert "detected from the log" in probe["text"] and f"{log}:7" in probe["text"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "engdiag").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m engdiag "$@"\n')
    (bin_dir / "engdiag").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", probe["command"]], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(result.stdout)
    assert spec["livenessProbe"]["failureThreshold"] * spec["livenessProbe"]["periodSeconds"] > 300


def test_kubectl_stamps_alone_do_not_make_a_pod(tmp_path):
    rec = _json("recommend-timeout", "--log", str(_k8s_log(tmp_path, probe=False)))
    assert rec["observed"]["platforms"] == [] and not any(r["name"] == "livenessProbe" for r in rec["recommendations"])


def test_kubectl_logs_prefix_names_a_pod():
    case = "tests/corpus/wide-ep-deepep-dispatch-timeout-startup-hang"
    rec = _json("recommend-timeout", "--log", case)
    assert "k8s" in rec["observed"]["platforms"]
    assert any("pod wide-ep-llm-d-prefill-0" in proof for proof in rec["observed"]["platform_evidence"])


# ---- knob version ranges, read in the released wheels (docs/timeouts.md) ---------------------


@pytest.mark.parametrize(("name", "absent", "present"), [
    ("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "0.9.1", "0.9.2"),  # envs.py gains it in 0.9.2 (0.9.1: hard-coded 300 s)
    ("VLLM_ENGINE_READY_TIMEOUT_S", "0.13.0", "0.14.0"),  # core_client.py reads it from 0.14.0 (0.13: fixed 600 s)
    ("--distributed-timeout-seconds", "0.17.1", "0.18.0"),  # arg_utils.py
    ("--cpu-distributed-timeout-seconds", "0.21.0", "0.22.0"),
    ("--watchdog-config", "0.32.0", "0.33.0"),
])
def test_a_knob_is_set_only_from_the_first_version_that_has_it(name, absent, present):
    base = ("recommend-timeout", "--prompt-len", "32000", "--tokens-per-sec", "20", "--base", "1500", "--hard-cap", "3000")

    def entry(version: str) -> dict:
        doc = _json(*base, "--vllm-version", version)
        return next(r for r in doc["recommendations"] if r["name"] == name)

    before, after = entry(absent), entry(present)
    assert before["applies"] is False and before["value"] is None and after["applies"] is True
    assert after["value"] is not None or name == "VLLM_ENGINE_READY_TIMEOUT_S"  # sized only from a start-up seen
    args = run_engdiag(*base, "--vllm-version", absent, "--format", "args").stdout.decode()
    assert name not in args
    if name.startswith("--"):
        assert name in run_engdiag(*base, "--vllm-version", present, "--format", "args").stdout.decode()


def test_vllm_rpc_timeout_last_exists_in_0_22():
    """envs.py defines VLLM_RPC_TIMEOUT up to 0.22.1 and not in 0.23.0; nothing waits on it after 0.10."""
    def rpc(version: str) -> dict:
        doc = _json("recommend-timeout", "--prompt-len", "1000", "--tokens-per-sec", "500", "--vllm-version", version)
        return next(r for r in doc["recommendations"] if r["name"] == "VLLM_RPC_TIMEOUT")

    assert "still read" in rpc("0.22.1")["why"] and "not in vLLM 0.23" in rpc("0.23.0")["why"]
    assert rpc("0.23.0")["versions"] == "0.6.2 – 0.22"


def test_the_json_formatters_asctime_gives_the_year(tmp_path):
    """vLLM 0.32+'s JSON formatter prints ``asctime`` as ``YYYY-MM-DD HH:MM:SS,mmm`` (formatter.py:7)."""
    log = tmp_path / "json.log"
    log.write_text(
        '{"asctime": "2026-05-01 14:30:00,120", "levelname": "ERROR", "name": "vllm.v1.engine.core", '
        '"processName": "EngineCore", "process": 9, "message": "EngineCore encountered a fatal error."}\n')
    doc = _json("analyze", str(log))
    assert doc["timeline"]["fatal"]["time"] == "05-01 14:30:00" and doc["timeline"]["fatal"]["year"] == 2026


# ---- journald / syslog ------------------------------------------------------------------------


_JOURNAL = "Apr  3 17:38:{s} langmodel52 langmodel[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m {msg}"


@pytest.mark.parametrize("scanner", SCANNERS)
def test_a_log_read_through_journald_or_syslog_keeps_its_records_and_times(tmp_path, scanner):
    # vLLM issue 16030: `journalctl -u` output, rsyslog's #033 for ESC, a worker's traceback
    lines = [_JOURNAL.format(s="56", msg="INFO 04-03 17:38:56 [gpu_model_runner.py:1] Model loading took 9.1 GiB"),
             _JOURNAL.format(s="57", msg="Traceback (most recent call last):"),
             _JOURNAL.format(s="57", msg='  File "/opt/vllm/v1/structured_output/backend_xgrammar.py", line 40, in f'),
             _JOURNAL.format(s="57", msg="    import xgrammar"),
             _JOURNAL.format(s="57", msg="OSError: xgrammar.so: cannot open shared object file: No such file or "
                                         "directory")]
    log = tmp_path / "journal.log"
    log.write_text("\n".join(lines) + "\n")
    verdict = _json("analyze", str(log), env={"ENGDIAG_SCANNER": scanner})["verdict"]
    assert "OSError: xgrammar.so: cannot open shared object file" in verdict["headline"]
    root = verdict["evidence"][0]
    assert root["time"] == "04-03 17:38:57" and "#033" not in root["text"] and "langmodel52" not in root["text"]
