"""Issue 12: human output is inert, and prose wraps with a hanging indent, through the real command line.

A hostile log line (an OSC title sequence, DCS/APC strings, a C1 CSI, BEL, NUL and a bidi override)
is rendered by every command that shows input text; no raw control or bidi code point may reach
stdout, and the escapes must be visible.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, needs_ptrace, run_engdiag

EXAMPLE = ROOT / "examples" / "tp2-decode-hang.log"
PAYLOAD = "\x1b]0;pwned\x07 \x1bP+q544e\x1b\\ \x1b_apc\x1b\\ \x9b31m \x00 \u202eevil\u202c \u2066x\u2069"
FORBIDDEN = ["\x1b", "\x07", "\x00", "\x9b", "\u202e", "\u202c", "\u2066", "\u2069"]


def _hostile_log(tmp_path: Path) -> Path:
    """The example incident with the payload in the root-cause line (the one every view shows)."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if "TimeoutError: RPC call to execute_model timed out." in line)
    lines[index] += " " + PAYLOAD
    log = tmp_path / "hostile.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log


def _assert_inert(out: str) -> None:
    for char in FORBIDDEN:
        assert char not in out, f"raw {char!r} reached stdout"


def test_analyze_escapes_every_control_and_bidi_code_point(tmp_path):
    log = _hostile_log(tmp_path)
    result = run_engdiag("analyze", str(log), env={"COLUMNS": "80"})
    out = result.stdout.decode("utf-8")
    _assert_inert(out)
    assert "\\x1b]0;pwned\\x07" in out and "\\u202eevil" in out  # visible, so the reader sees the attempt
    assert "Next steps" in out  # the rest of the report was not swallowed


def test_analyze_json_keeps_the_text_but_escaped(tmp_path):
    log = _hostile_log(tmp_path)
    raw = run_engdiag("analyze", str(log), "--json").stdout
    _assert_inert(raw.decode("utf-8"))
    doc = json.loads(raw)
    texts = [item["text"] for item in doc["verdict"]["evidence"]]
    assert any("\x1b]0;pwned\x07" in text and "\u202eevil" in text for text in texts)


def test_a_hostile_file_name_is_inert_in_recommend_timeout(tmp_path):
    log = tmp_path / "evil\u202e\x1b]0;t\x07.log"
    log.write_bytes(_hostile_log(tmp_path).read_bytes())
    out = run_engdiag("recommend-timeout", "--log", str(log)).stdout.decode("utf-8")
    _assert_inert(out)
    assert "STEP TIMEOUT" in out


def test_wrapped_prose_has_a_hanging_indent_at_80_columns():
    out = run_engdiag("analyze", str(EXAMPLE), env={"COLUMNS": "80"}).stdout.decode("utf-8")
    lines = out.splitlines()
    start = lines.index("Next steps")
    step = next(i for i in range(start, len(lines)) if lines[i].startswith("1. "))
    assert lines[step + 1].startswith("   ") and not lines[step + 1].startswith("   $")  # continues under the text
    assert all(len(line.rstrip()) <= 80 for line in lines[start:] if not line.lstrip().startswith("$"))


@needs_ptrace
def test_a_python_c_command_line_with_newlines_stays_on_one_tree_line(tmp_path):
    program = "import time\nimport sys\nprint('ready', flush=True)\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(0.2)
        result = run_engdiag("snapshot", str(proc.pid), "--samples", "1", "--no-bundle", timeout=120)
        if result.returncode != 0:
            pytest.skip(f"snapshot unavailable here: {result.stderr.decode()[:200]}")
        out = result.stdout.decode("utf-8")
        assert "-c import time\\nimport sys" in out
        assert not any(line.strip().startswith("import sys") for line in out.splitlines())
    finally:
        proc.kill()
        proc.wait(timeout=10)
