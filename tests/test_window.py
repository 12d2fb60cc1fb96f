"""--tail, --since and --until: only part of a big log is read, with exact line numbers."""

from __future__ import annotations

import gzip
import json

import pytest

from engdiag.analysis.analyze import analyze
from engdiag.errors import ExitCode
from engdiag.logs.window import Window, parse_tail, parse_time, since_start, tail_start

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "tp2-decode-hang.log"
LINES = EXAMPLE.read_text().splitlines()


def test_tail_lines_starts_at_the_right_line():
    offset = tail_start(EXAMPLE, Window(tail_lines=10))
    data = EXAMPLE.read_bytes()
    assert data[offset:].count(b"\n") == 10 and (offset == 0 or data[offset - 1:offset] == b"\n")


def test_tail_keeps_exact_line_numbers_and_the_verdict():
    whole = analyze([str(EXAMPLE)])
    tail = analyze([str(EXAMPLE)], window=Window(tail_lines=60))
    assert tail.verdict.kind == whole.verdict.kind
    assert [e.line for e in tail.verdict.evidence] == [e.line for e in whole.verdict.evidence]
    assert tail.timeline.prompt_lengths.count < whole.timeline.prompt_lengths.count


def test_tail_of_a_gzip_stream(tmp_path):
    packed = tmp_path / "x.log.gz"
    packed.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    tail = analyze([str(packed)], window=Window(tail_bytes=40_000))
    whole = analyze([str(EXAMPLE)])
    assert tail.verdict.kind.value == "deadlocked"
    assert [e.line for e in tail.verdict.evidence] == [e.line for e in whole.verdict.evidence]


def test_since_bisects_to_the_incident_and_until_stops_reading():
    start = since_start(EXAMPLE, parse_time("10-22 09:55:00", "--since"))
    assert 0 <= start < EXAMPLE.stat().st_size
    window = Window(since=parse_time("10-22 09:52:00", "--since"), until=parse_time("10-22 09:57:30", "--until"))
    result = analyze([str(EXAMPLE)], window=window)
    assert result.verdict.kind.value == "deadlocked"
    assert all(e.stamp is not None and (e.stamp.month, e.stamp.day) == (10, 22) and e.stamp.second >= 9 * 3600 + 52 * 60
               for e in result.timeline.events)
    early = analyze([str(EXAMPLE)], window=Window(until=parse_time("10-22 09:40:00", "--until")))
    assert early.verdict.kind.value == "healthy"
    assert max(i.lines for i in early.inputs) < len(LINES)


@pytest.mark.parametrize(("text", "lines", "size"), [("5000", 5000, None), ("200MiB", None, 200 << 20), ("1G", None, 1 << 30)])
def test_tail_specs(text, lines, size):
    assert parse_tail(text) == (lines, size)


def test_bad_window_options_are_usage_errors(cli):
    for args in (("--tail", "lots"), ("--tail", "0"), ("--since", "yesterday"), ("--until", "13-40 25:00"),
                 ("--jobs", "0")):
        result = cli("analyze", *args, str(EXAMPLE))
        assert result.exit_code == ExitCode.USAGE, args
        assert "engdiag: error:" in result.stderr


def test_cli_tail_and_jobs(cli):
    result = cli("analyze", "--json", "--tail", "100", "--jobs", "1", str(EXAMPLE))
    assert result.exit_code == 0 and json.loads(result.stdout)["verdict"]["kind"] == "deadlocked"
