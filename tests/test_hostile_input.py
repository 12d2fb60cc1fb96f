"""Bad input, faults and user data, each through the real command line (``python -m engdiag``).

Every case: one clear line on stderr, the documented exit code (docs/exit-codes.md), no traceback,
nothing half-written.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engdiag.errors import ExitCode
from engdiag.snapshot import tree

from tests.conftest import PROGRAMS, ROOT, needs_ptrace, run_engdiag

EXAMPLE = ROOT / "examples" / "tp2-decode-hang.log"
SETPRIV = shutil.which("setpriv")
IS_ROOT = os.geteuid() == 0


def _clean(result: subprocess.CompletedProcess[bytes]) -> str:
    err = result.stderr.decode()
    assert "Traceback" not in err and "Error:" not in err.replace("engdiag: error:", "")
    return err


def _inputs(tmp: Path) -> dict[str, tuple[list[str], int, str]]:
    """name → (analyze arguments, exit code, message on stderr)."""
    (tmp / "empty.log").write_bytes(b"")
    (tmp / "random.log").write_bytes(os.urandom(200_000))
    (tmp / "nul.log").write_bytes(b"\x00" * 100_000 + b"\n" + b"\x00abc\x00\n")
    (tmp / "other-program.log").write_text(
        "Dec 02 10:00:01 host sshd[123]: Accepted publickey for admin\n"
        "2026-12-02 10:00:02,123 INFO django.request GET /api/items 200\n" * 200
    )
    (tmp / "empty-dir").mkdir()
    (tmp / "docs-only").mkdir()
    (tmp / "docs-only" / "README.md").write_text("no logs here")
    packed = gzip.compress(EXAMPLE.read_bytes())
    (tmp / "truncated.log.gz").write_bytes(packed[: len(packed) // 2])
    (tmp / "not-gzip.gz").write_text("INFO 01-01 00:00:00 [x.py:1] plain text\n")
    return {
        "missing path": ([str(tmp / "nope.log")], ExitCode.INPUT, "no such file or directory"),
        "directory without logs": ([str(tmp / "docs-only")], ExitCode.INPUT, "directory holds no"),
        "empty directory": ([str(tmp / "empty-dir")], ExitCode.INPUT, "directory holds no"),
        "empty file": ([str(tmp / "empty.log")], ExitCode.INPUT, "no vLLM lines found"),
        "random bytes": ([str(tmp / "random.log")], ExitCode.INPUT, "no vLLM lines found"),
        "NUL bytes": ([str(tmp / "nul.log")], ExitCode.INPUT, "no vLLM lines found"),
        "another program's log": ([str(tmp / "other-program.log")], ExitCode.INPUT, "no vLLM lines found"),
        "truncated gzip": ([str(tmp / "truncated.log.gz")], ExitCode.INPUT, "gzip stream is truncated"),
        "named .gz, not gzip": ([str(tmp / "not-gzip.gz")], ExitCode.INPUT, "not gzip-compressed"),
    }


CASES = [
    "missing path", "directory without logs", "empty directory", "empty file", "random bytes", "NUL bytes",
    "another program's log", "truncated gzip", "named .gz, not gzip",
]


@pytest.mark.parametrize("case", CASES)
def test_analyze_bad_input(tmp_path, case):
    args, code, message = _inputs(tmp_path)[case]
    result = run_engdiag("analyze", *args)
    assert result.returncode == code
    assert message in _clean(result)
    if "no vLLM lines" in message:  # the verdict is still printed, and says so
        assert result.stdout.decode().lstrip().startswith("UNKNOWN")


def test_analyze_no_vllm_lines_json_is_still_a_document(tmp_path):
    (tmp_path / "x.log").write_text("hello\n")
    result = run_engdiag("analyze", "--json", str(tmp_path / "x.log"))
    assert result.returncode == ExitCode.INPUT
    assert json.loads(result.stdout)["verdict"]["kind"] == "unknown"


def test_analyze_a_64_mib_line_in_bounded_memory(tmp_path):
    log = tmp_path / "huge.log"
    with log.open("wb") as handle:
        handle.write(b"(APIServer pid=1) INFO 10-22 09:41:12 [logger.py:41] Received request a: prompt: '")
        handle.write(b"x" * (64 << 20))
        handle.write(b"', prompt_token_ids: [1, 2]\n")
        handle.write(EXAMPLE.read_bytes())
    result = run_engdiag("analyze", "--json", str(log), timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verdict"]["kind"] == "deadlocked"


_STATS_HEAD = ("(APIServer pid=1) INFO 10-14 17:02:38 [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, "
               "Avg generation throughput: 843.6 tokens/s, Running: 38 reqs, Waiting: 0 reqs, ")


@pytest.mark.parametrize("scanner", ["lines", "python", "native"])
def test_numbers_with_two_points_are_no_numbers_and_no_internal_error(tmp_path, scanner):
    """``2400.0.1`` where a rule reads a number (a garbled stats line, a size, a duration) once stopped analyze."""
    log = tmp_path / "garbled.log"
    log.write_text(_STATS_HEAD.format(p="2400.0.1") + "GPU KV cache usage: 88.5%\n"
                   "(EngineCore_DP0 pid=2) INFO 10-14 17:02:39 [gpu_model_runner.py:1] Model loading took 1.2.3 GiB "
                   "memory and 4.5.6 seconds\n"
                   "(EngineCore_DP0 pid=2) INFO 10-14 17:02:40 [backends.py:1] torch.compile takes 7.8.9 s in total\n")
    result = run_engdiag("analyze", "--json", str(log), env={"ENGDIAG_SCANNER": scanner})
    assert result.returncode in (0, ExitCode.INPUT), result.stderr
    assert json.loads(result.stdout)["verdict"]["kind"] == "unknown"


def test_a_stats_line_ending_in_a_megabyte_word_is_read_in_linear_time(tmp_path):
    """The KV-usage field's name is searched for in the rest of a stats line: once any run of word characters,
    so a line without the field and with a 1 MiB word searched it quadratically (minutes)."""
    kinds = []
    for length in (8, 1 << 20):
        log = tmp_path / f"word-{length}.log"
        log.write_text(EXAMPLE.read_text() + _STATS_HEAD.format(p="1.0") + "7" * length + "\n")
        result = run_engdiag("analyze", "--json", str(log), timeout=120)
        assert result.returncode == 0, result.stderr
        kinds.append(json.loads(result.stdout)["verdict"]["kind"])
    assert kinds[0] == kinds[1]


def test_analyze_latin1_bytes(tmp_path):
    text = EXAMPLE.read_text().replace("Summarise", "Résumé").encode("latin-1", "replace")
    (tmp_path / "latin1.log").write_bytes(text)
    result = run_engdiag("analyze", "--json", str(tmp_path / "latin1.log"))
    assert result.returncode == 0 and json.loads(result.stdout)["verdict"]["kind"] == "deadlocked"


@pytest.mark.skipif(not (IS_ROOT and SETPRIV) and os.geteuid() == 0, reason="needs setpriv to drop root's file access")
def test_analyze_unreadable_file(tmp_path):
    log = tmp_path / "secret.log"
    log.write_text(EXAMPLE.read_text()[:1000])
    log.chmod(0)
    prefix = [SETPRIV, "--bounding-set=-dac_override,-dac_read_search",
              "--inh-caps=-dac_override,-dac_read_search"] if IS_ROOT else []
    result = subprocess.run([*prefix, sys.executable, "-m", "engdiag", "analyze", str(log)],
                            capture_output=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, timeout=60)
    assert result.returncode == ExitCode.INPUT
    assert "permission denied" in _clean(result)


def test_analyze_with_stdin_closed():
    result = subprocess.run([sys.executable, "-m", "engdiag", "analyze", "-"], stdin=subprocess.DEVNULL,
                            capture_output=True, cwd=ROOT, timeout=60)
    assert result.returncode == ExitCode.INPUT  # nothing came in: no vLLM lines
    closed = subprocess.run(f"{sys.executable} -m engdiag analyze - <&-", shell=True,  # noqa: S602 - test only
                            capture_output=True, cwd=ROOT, timeout=60)
    assert closed.returncode == ExitCode.INPUT and b"stdin is closed" in closed.stderr


def test_analyze_stdin_that_stops_early_and_a_closed_stdout_pipe():
    half = EXAMPLE.read_bytes()[: len(EXAMPLE.read_bytes()) // 2]
    result = run_engdiag("analyze", "-", input=half)
    assert result.returncode == 0 and b"Traceback" not in result.stderr
    piped = subprocess.run(f"{sys.executable} -m engdiag analyze {EXAMPLE} | head -1", shell=True,  # noqa: S602
                           capture_output=True, cwd=ROOT, timeout=60)
    assert piped.stdout.strip().startswith(b"DEADLOCKED")
    assert piped.stderr == b""


# ---- snapshot ---------------------------------------------------------------------------------


@needs_ptrace
@pytest.mark.skipif(not (IS_ROOT and SETPRIV), reason="needs root and setpriv to drop CAP_SYS_PTRACE")
def test_snapshot_without_ptrace_permission(spawn):
    target = spawn("undumpable.py")
    result = subprocess.run(
        [SETPRIV, "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", sys.executable, "-m", "engdiag",
         "snapshot", str(target.pid), "--samples", "1", "--no-bundle"],
        capture_output=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, timeout=60,
    )
    err = _clean(result)
    assert result.returncode == ExitCode.PERMISSION
    assert "ptrace permission denied" in err and "SYS_PTRACE" in err and "ptrace_scope" in err


def test_snapshot_when_py_spy_is_missing(cli, monkeypatch, tmp_path, spawn):
    target = spawn("busy.py")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    result = cli("snapshot", str(target.pid), "--samples", "1", "--no-bundle")
    assert result.exit_code == ExitCode.CAPTURE_UNAVAILABLE
    assert "py-spy not found" in result.stderr


@needs_ptrace
def test_py_spy_killed_mid_dump_leaves_the_target_running(cli, monkeypatch, tmp_path, spawn):
    real = Path(sys.executable).parent / "py-spy"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    wrapper = fake_bin / "py-spy"
    wrapper.write_text(f"#!/bin/sh\n\"{real}\" \"$@\" &\nchild=$!\nsleep 0.004\nkill -9 $child 2>/dev/null\nexit 137\n")
    wrapper.chmod(0o755)
    target = spawn("busy.py")
    monkeypatch.setattr(sys, "executable", str(fake_bin / "python"))
    result = cli("snapshot", str(target.pid), "--samples", "3", "--interval", "0.05", "--no-bundle")
    assert result.exit_code == ExitCode.CAPTURE_UNAVAILABLE, result.stderr
    assert "could be sampled" in result.stderr
    proc = psutil.Process(target.pid)
    before = proc.cpu_times().user
    time.sleep(0.5)
    assert tree.state_of(target.pid) not in ("T", "t") and proc.cpu_times().user > before


@needs_ptrace
def test_snapshot_bundle_when_the_disk_is_full(spawn, tmp_path):
    target = spawn("deadlock.py")
    out = tmp_path / "out"
    out.mkdir()

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))  # writes past 2 KiB fail: EFBIG

    result = subprocess.run(
        [sys.executable, "-m", "engdiag", "snapshot", str(target.pid), "--samples", "2", "--interval", "0.1",
         "--out", str(out / "bundle.json")],
        capture_output=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, timeout=60, preexec_fn=small_files,
    )
    assert result.returncode == ExitCode.OUTPUT
    assert "cannot write" in _clean(result)
    assert result.stdout.decode().lstrip().startswith("DEADLOCKED")  # the capture is still printed
    assert list(out.iterdir()) == []  # nothing half-written


@needs_ptrace
def test_ctrl_c_leaves_a_whole_bundle_or_none_and_no_target_stopped(spawn, tmp_path):
    target = spawn("busy.py")
    out = tmp_path / "out"
    out.mkdir()
    capture = subprocess.Popen(
        [sys.executable, "-m", "engdiag", "snapshot", str(target.pid), "--samples", "50", "--interval", "0.2",
         "--out", str(out / "bundle.json")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    time.sleep(1.5)
    capture.send_signal(signal.SIGINT)
    _, err = capture.communicate(timeout=30)
    assert capture.returncode == ExitCode.INTERRUPTED
    assert b"Traceback" not in err
    assert list(out.iterdir()) == []
    assert tree.state_of(target.pid) not in ("T", "t")


# ---- user data --------------------------------------------------------------------------------

PLANTED = "PLANTED-SECRET-PROMPT"


def test_a_prompt_planted_in_a_log_appears_in_no_output_by_default(tmp_path):
    lines = EXAMPLE.read_text().splitlines()
    secret = (
        f"(APIServer pid=41) INFO 10-22 09:52:20 [logger.py:41] Received request cmpl-x: prompt: '{PLANTED} "
        "tell me the launch date', params: SamplingParams(n=1), prompt_token_ids: [777001, 777002, 777003], "
        "prompt_embeds shape: None, lora_request: None."
    )
    lines.insert(len(lines) - 40, secret)
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    outputs = [
        run_engdiag("analyze", str(log)).stdout,
        run_engdiag("analyze", "--json", str(log)).stdout,
        run_engdiag("recommend-timeout", "--log", str(log), "--json").stdout,
    ]
    for output in outputs:
        assert PLANTED.encode() not in output and b"777002" not in output
    shown = run_engdiag("analyze", "--json", "--show-prompts", str(log)).stdout
    assert json.loads(shown)["verdict"]["kind"] == "deadlocked"


@needs_ptrace
def test_a_prompt_in_a_live_process_locals_appears_in_no_output(spawn, tmp_path):
    target = spawn("secrets_in_locals.py", env={"PLANTED_PROMPT": f"{PLANTED}: the quarterly numbers, before they are public"})
    plain = tmp_path / "plain.json"
    masked = tmp_path / "masked.json"
    run_engdiag("snapshot", str(target.pid), "--samples", "1", "--out", str(plain))
    result = run_engdiag("snapshot", str(target.pid), "--samples", "1", "--locals", "--json", "--out", str(masked))
    assert result.returncode == 0, result.stderr
    for blob in (plain.read_bytes(), masked.read_bytes(), result.stdout):
        assert PLANTED.encode() not in blob and b"500, 501" not in blob
    frames = [f for p in json.loads(masked.read_text())["processes"] for t in p["threads"] for f in t["frames"]]
    handler = next(f for f in frames if f["name"] == "handle_request")
    assert handler["locals"]["prompt"].startswith("<masked:")
    assert "locals" not in next(
        f for p in json.loads(plain.read_text())["processes"] for t in p["threads"] for f in t["frames"]
        if f["name"] == "handle_request"
    )
    assert stat.S_IMODE(masked.stat().st_mode) == 0o600


def test_no_shell_is_ever_run_by_engdiag():
    for path in (ROOT / "engdiag").rglob("*.py"):
        text = path.read_text()
        assert "shell=True" not in text and "os.system(" not in text and "os.popen(" not in text, path


def test_test_programs_exist():
    assert (PROGRAMS / "undumpable.py").exists() and (PROGRAMS / "secrets_in_locals.py").exists()
