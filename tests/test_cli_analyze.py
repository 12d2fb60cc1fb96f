"""``engdiag analyze`` as a user runs it: outputs, inputs, exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

from engdiag import synth
from engdiag.errors import ExitCode

from tests.conftest import CORPUS, ROOT, run_engdiag, write_log

EXAMPLE = ROOT / "examples" / "tp2-decode-hang.log"


def test_readme_example_is_a_deadlock_with_its_evidence():
    result = run_engdiag("analyze", str(EXAMPLE.relative_to(ROOT)))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert out.splitlines()[0].lstrip().startswith("DEADLOCKED")
    assert "examples/tp2-decode-hang.log:" in out
    for section in ("Evidence", "Timeline", "Memory", "Prompt lengths", "Next steps"):
        assert section in out
    assert "engdiag snapshot 77" in out
    assert "\x1b[" not in out  # NO_COLOR and a pipe: plain text


def test_json_document_has_the_documented_fields(cli):
    result = cli("analyze", "--json", str(EXAMPLE))
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["schema"] == "engdiag.analysis" and doc["schema_version"] == "1.1"
    verdict = doc["verdict"]
    assert verdict["kind"] == "deadlocked" and 0 <= verdict["confidence"] <= 1
    assert {"source", "line", "text"} <= set(verdict["evidence"][0])
    assert doc["timeline"]["fatal"]["signal"] == "engine_fatal"
    assert doc["timeline"]["last_progress"]["signal"] == "stats"
    prompts = doc["prompt_lengths"]
    assert prompts["count"] > 0 and prompts["p50"] <= prompts["p95"] <= prompts["p99"] <= prompts["max"]
    assert doc["engine"]["vllm_version"] == "0.11.0" and doc["engine"]["tensor_parallel"] == 2


def test_stdin_and_gzip_give_the_same_verdict(tmp_path):
    packed = tmp_path / "server.log.gz"
    packed.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    from_stdin = run_engdiag("analyze", "--json", "-", input=EXAMPLE.read_bytes())
    from_gz = run_engdiag("analyze", "--json", str(packed))
    gz_on_stdin = run_engdiag("analyze", "--json", "-", input=packed.read_bytes())
    kinds = {json.loads(r.stdout)["verdict"]["kind"] for r in (from_stdin, from_gz, gz_on_stdin)}
    assert kinds == {"deadlocked"}


def test_directories_are_searched_for_log_files(tmp_path):
    (tmp_path / "nested").mkdir()
    write_log(tmp_path / "nested" / "rank0.out", synth.incident("crash-ima", minutes=2))
    write_log(tmp_path / "notes.md", ["Avg prompt throughput: 1.0 tokens/s"])
    result = run_engdiag("analyze", "--json", str(tmp_path))
    doc = json.loads(result.stdout)
    assert [i["path"].rsplit("/", 1)[-1] for i in doc["inputs"]] == ["rank0.out"]
    assert doc["verdict"]["kind"] == "crashed"


def test_several_ranks_logs_are_read_together():
    cases = [CORPUS / c / "log.txt" for c in ("dp-mtp-moe-drafter-near-max-len-shm-hang", "idle-worker-shm-broadcast-info-benign")]
    result = run_engdiag("analyze", "--json", *map(str, cases))
    doc = json.loads(result.stdout)
    assert len(doc["inputs"]) == 2 and doc["verdict"]["kind"] == "deadlocked"


def test_fail_on_exits_10_on_a_matching_verdict(cli):
    assert cli("analyze", "--fail-on", "deadlocked", str(EXAMPLE)).exit_code == ExitCode.FINDING
    assert cli("analyze", "--fail-on", "any", str(EXAMPLE)).exit_code == ExitCode.FINDING
    assert cli("analyze", "--fail-on", "slow", str(EXAMPLE)).exit_code == ExitCode.OK


def test_fail_on_rejects_an_unknown_kind(cli):
    result = cli("analyze", "--fail-on", "sloww", str(EXAMPLE))
    assert result.exit_code == ExitCode.USAGE
    assert "--fail-on takes" in result.stderr


def test_no_color_is_respected_even_when_colour_is_forced(cli):
    forced = cli("analyze", str(EXAMPLE), env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    plain = cli("analyze", str(EXAMPLE), env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[" in forced.stdout
    assert "\x1b[" not in plain.stdout


def test_narrow_terminal_keeps_the_verdict_first(cli):
    result = cli("analyze", str(EXAMPLE), env={"COLUMNS": "40"})
    assert result.exit_code == 0
    assert result.stdout.lstrip().startswith("DEADLOCKED")
    # only a command word longer than the terminal may exceed it: commands are never broken mid-word (issue 12)
    too_long = [line for line in result.stdout.splitlines() if len(line) > 40]
    assert all(len(line.replace(" \\", "").split()) == 1 for line in too_long), too_long


def test_python_dash_m_and_the_console_script_agree():
    assert run_engdiag("--version").stdout.decode().startswith("engdiag ")


def test_the_reading_bar_follows_rich_and_a_json_run_to_a_pipe_never_imports_rich_or_pydantic():
    """A bar is drawn where rich sees a terminal (FORCE_COLOR / TTY_COMPATIBLE=1 make a pipe one); a plain
    ``--json`` run to a pipe skips rich altogether (start-up), and its stderr stays empty.  Nor does it import
    pydantic (~80 ms: typer 0.29 builds a pydantic adapter for every parameter; pyproject keeps typer < 0.29)."""
    for forced in ({"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1"}):
        drawn = run_engdiag("analyze", "--json", str(EXAMPLE), env=forced)
        assert drawn.returncode == 0 and b"reading" in drawn.stderr, drawn.stderr
    probe = ("import sys, runpy; sys.argv = ['engdiag', 'analyze', '--json', sys.argv[1]]\n"
             "import engdiag.cli; engdiag.cli.exit_now = lambda code: None  # end the usual way, then look\n"
             "try: runpy.run_module('engdiag', run_name='__main__')\n"
             "except SystemExit: pass\n"
             "print(sorted(m for m in ('rich', 'pydantic') if m in sys.modules), file=sys.stderr)")
    quiet = subprocess.run([sys.executable, "-c", probe, str(EXAMPLE)], capture_output=True, cwd=ROOT,
                           env={k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")})
    assert quiet.returncode == 0 and json.loads(quiet.stdout)["verdict"]["kind"] == "deadlocked"
    assert quiet.stderr.decode().strip() == "[]"
