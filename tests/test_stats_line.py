"""A stats line read in one match (``engdiag.logs.statsline``) gives exactly what the general way gives, or None."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag.logs import bulk
from engdiag.logs.inputs import MAX_LINE_BYTES
from engdiag.logs.lines import pieces
from engdiag.logs.quick import hot_events, kube_piece, quick_piece
from engdiag.logs.statsline import STATS_ONLY, stats_line
from tests.conftest import write_log
from tests.test_bulk_scan import _kubectl, _same_everywhere
from tests.test_hot_scan import ACCESS, ADDED, RECEIVED

V1 = ("(APIServer pid=41) INFO 10-20 06:00:01 [loggers.py:127] Engine 000: Avg prompt throughput: 2400.0 tokens/s, "
      "Avg generation throughput: 598.4 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 45.1%, "
      "Prefix cache hit rate: 31.4%")
V0 = ("INFO 10-20 06:00:02 metrics.py:351] Avg prompt throughput: 2400.0 tokens/s, Avg generation throughput: 673.1 "
      "tokens/s, Running: 24 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 50.8%, CPU KV cache usage: "
      "0.0%.")
ODD = [
    V1.replace("Engine 000: ", ""),
    V1.replace("2400.0", "2400"),
    V1.replace("2400.0", "2,400.0"),
    V1.replace("2400.0", "2400.0.1"),
    V1.replace("598.4", ".4"),
    V1.replace("(APIServer pid=41) ", ""),
    V1.replace("(APIServer pid=41) ", "(APIServer pid=41)\t"),
    V1.replace("(APIServer pid=41) ", "(repeated pid=41) "),
    V1.replace("INFO", "WARNING"),
    V1.replace("06:00:01", "06:00:01.123"),
    V1.replace("10-20", "02-30"),
    V1.replace("[loggers.py:127]", "loggers.py:127]"),
    V1.replace("[loggers.py:127]", "[a:b:127]"),
    V1.replace("] Engine", "]  Engine"),
    V1.replace("] Engine", "]Engine"),
    V1.replace("Engine 000", "2 Engines Aggregated"),
    V1.replace("Waiting", "Pending"),
    V1.replace("Waiting: 0 reqs", "Swapped: 1 reqs, Waiting: 0 reqs"),
    V1 + ", Preemptions: 3",
    V1 + ".",
    V1 + " ",
    V1 + "\r",
    V1 + " | x",
    V1 + " NCCL x",
    V1.replace("GPU KV", "CPU KV"),
    V1.replace("Prefix cache hit rate: 31.4%", "Prefix cache hit rate: GPU: 31.4%"),
    V1.replace("Running", "Corrupted: 1 reqs, Running"),
    V1.replace("Running: 24", "Running: ２４"),
    V0.replace("0.0%.", "0.0%"),
    V0.replace("Swapped: 0 reqs, ", ""),
    V0.replace("Pending", "Waiting"),
    V0.replace("INFO", "(Worker pid=3) INFO"),
    V0[:-1] + ", prompt: 'x'.",
]
"""Odd fields and neighbours of the two wordings: each is read the same way in one match or not at all."""


def _general(line: str, quick: bool):  # type: ignore[no-untyped-def]
    """The piece the bulk planner builds, checked against the line reader's, and ``hot_events`` of it."""
    piece = (quick_piece if quick else kube_piece)(line.encode(), 7)
    if piece is None:
        return None
    assert [piece] == pieces(line, 7)
    return piece, hot_events(piece, set(STATS_ONLY), "log")


def _check(line: str, quick: bool) -> bool:
    read = stats_line(line.encode(), 7, "log", quick)
    if read is not None:
        assert (read[0], read[1]) == _general(line, quick), line
        assert read[0].stamp.calendar == pieces(line, 7)[0].stamp.calendar, line
    return read is not None


@pytest.mark.parametrize("line", [V1, V0, *ODD])
def test_a_stats_line_is_read_in_one_match_as_the_general_way_reads_it_or_not_at_all(line):
    read = _check(line, True)
    kube = _check(_kubectl(line) if line.startswith("(") else line, False)
    if line in (V1, V0):
        assert read, "the two wordings vLLM prints should be read in one match"
    if line == V1:
        assert kube, "behind kubectl's stamp and coloured tag too"
    for coded in ("[loggers[1m.py:127]", "[loggers\x1b[1m.py:127]", "[loggers\x1b.py:127]"):
        assert not _check(_kubectl(V1.replace("[loggers.py:127]", coded)), False), "a code after the tag"
    assert not _check(_kubectl(V1), True), "a window without colour codes reads no kubectl line this way"
    assert not _check(V1, False), "a window with colour codes reads only kubectl's lines this way"


def test_the_payload_holds_every_field():
    _, (v1,) = stats_line(V1.encode(), 1, "log", True)
    assert (v1.data.engine, v1.data.waiting, v1.data.swapped, v1.data.gpu_kv_pct, v1.data.prefix_hit_pct,
            v1.data.cpu_kv_pct) == (0, 0, None, 45.1, 31.4, None)
    _, (v0,) = stats_line(V0.encode(), 1, "log", True)
    assert (v0.data.engine, v0.data.waiting, v0.data.swapped, v0.data.cpu_kv_pct) == (None, 3, 0, 0.0)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([V1, V0]), st.integers(0, 400), st.integers(0, 3),
       st.text(alphabet="0123456789.,:% abcRPW[]()'\"\x1b\r\t|-=", max_size=6))
def test_a_mutated_stats_line_is_read_as_the_general_way_reads_it_or_not_at_all(line, at, drop, insert):
    at = min(at, len(line))
    mutated = line[:at] + insert + line[at + drop :]
    _check(mutated, True)
    if mutated.startswith("("):
        _check(_kubectl(mutated), False)


def test_stats_lines_in_user_data_over_the_cap_and_odd_ones_in_a_log_give_what_the_line_scanner_gives(
        tmp_path, monkeypatch):
    """Windows of request lines with plain and odd stats lines, a stats line quoted in a prompt, one over the line
    cap (cut as the line reader cuts it) and one continued by a traceback line: every backend as the line scanner,
    and the plain ones read in one match."""
    quoted = RECEIVED.replace("prompt: 'hi'", f"prompt: '{V1}'")
    huge = V1 + ", 1%" * (MAX_LINE_BYTES // 4 + 10)  # (one long word would make the rule's own searches quadratic)
    continued = [V1.replace("06:00:01", "06:00:05"), V1.replace("06:00:01", "06:00:05").split("]")[0] + "] Traceback"]
    odd = [line for line in ODD if "0.0.1" not in line]  # float() of it fails in the rule itself, on every backend
    stats = [V1, V0, quoted, huge, *continued, *odd]
    lines = [line for n, stat in enumerate(stats) for line in [RECEIVED, ADDED, ACCESS] * (5 + n % 7) + [stat]]
    read: list[bool] = []
    monkeypatch.setattr(bulk, "stats_line", lambda *args: read.append(found := stats_line(*args)) or found)
    for name, log in (("plain", lines), ("kubectl", [_kubectl(line) for line in lines])):
        for size in (1 << 12, 1 << 16):
            read.clear()
            _same_everywhere(write_log(tmp_path / f"{name}-{size}.log", log), monkeypatch, window_bytes=size)
            assert any(read), f"{name}: plain stats lines should be read in one match"
