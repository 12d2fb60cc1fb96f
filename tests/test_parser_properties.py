"""Property tests of the parser: total on any bytes, bounded, and blind to how input is chunked.

The example budget comes from the ``ci`` Hypothesis profile (tests/conftest.py,
ENGDIAG_FUZZ_EXAMPLES); a failure prints the seed and a reproduction blob.
"""

from __future__ import annotations

import io
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag.logs.inputs import MAX_LINE_BYTES, read_lines
from engdiag.logs.scan import LineScanner

from tests.conftest import CORPUS

REAL_LINES = [
    line
    for path in sorted(CORPUS.glob("*/log.txt"))
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
]


class ChunkedStream(io.RawIOBase):
    """A raw stream that hands out its bytes in the chunk sizes it is given."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._data = data
        self._sizes = sizes or [1]
        self._position = 0
        self._turn = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        size = min(len(buffer), self._sizes[self._turn % len(self._sizes)])
        self._turn += 1
        chunk = self._data[self._position : self._position + size]
        buffer[: len(chunk)] = chunk
        self._position += len(chunk)
        return len(chunk)


def scan_bytes(data: bytes, sizes: list[int] | None = None) -> tuple[list, int]:
    stream = io.BufferedReader(ChunkedStream(data, sizes or [len(data) or 1]), buffer_size=64)
    scanner = LineScanner("x.log", 0)
    events = []
    for number, line in read_lines(stream, "x.log"):
        assert len(line.encode("utf-8", "replace")) <= MAX_LINE_BYTES * 3
        events += scanner.feed(number, line)
    events += scanner.finish()
    return events, scanner.summary.lines


@settings(deadline=5000)  # a regex that backtracks without end would blow this
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_raise(data):
    events, lines = scan_bytes(data)
    assert lines == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert all(1 <= e.line <= max(lines, 1) for e in events)


def _mutate(line: str, rng: random.Random) -> str:
    chars = list(line)
    for _ in range(rng.randrange(1, 6)):
        action = rng.randrange(4)
        spot = rng.randrange(len(chars) + 1)
        if action == 0 and chars:
            del chars[min(spot, len(chars) - 1)]
        elif action == 1:
            chars.insert(spot, rng.choice("\x1b[]()|:\r\t 0123456789%,'\"\\\x00é"))
        elif action == 2 and chars:
            chars[min(spot, len(chars) - 1)] = rng.choice("[]():%|")
        else:
            chars[spot:spot] = list(rng.choice(REAL_LINES)[: rng.randrange(1, 40)])
    return "".join(chars)


@settings(deadline=5000)
@given(st.lists(st.integers(0, len(REAL_LINES) - 1), min_size=1, max_size=40), st.integers(0, 2**32))
def test_mutated_real_lines_never_raise(indices, seed):
    rng = random.Random(seed)
    text = "\n".join(_mutate(REAL_LINES[i], rng) for i in indices)
    events, _ = scan_bytes(text.encode("utf-8", "replace"))
    assert all(e.text == e.text.strip() for e in events)


@given(
    st.lists(st.integers(0, len(REAL_LINES) - 1), min_size=1, max_size=60),
    st.lists(st.integers(1, 97), min_size=1, max_size=8),
)
def test_events_do_not_depend_on_read_chunking(indices, sizes):
    data = ("\n".join(REAL_LINES[i] for i in indices) + "\n").encode()
    whole, _ = scan_bytes(data)
    chunked, _ = scan_bytes(data, sizes)
    assert chunked == whole


def test_a_64_mib_line_costs_at_most_the_kept_prefix():
    data = b"INFO 01-01 00:00:00 [x.py:1] Received request a: prompt_token_ids: [" + b"1, " * (22 << 20) + b"2]\n"
    data += b"INFO 01-01 00:00:01 [x.py:1] EngineCore encountered a fatal error.\n"
    events, lines = scan_bytes(data, [1 << 20])
    assert lines == 2
    assert [e.signal.value for e in events] == ["request_received", "prompt_length", "engine_fatal"]
    truncated = events[1].data
    assert truncated.lower_bound and truncated.tokens < (1 << 20)


def _peak_bytes(path) -> int:
    import tracemalloc

    from engdiag.analysis.analyze import analyze

    tracemalloc.start()
    try:
        analyze([str(path)])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_as_the_log_grows(tmp_path, monkeypatch):
    """Days of stats and request lines: what is kept is capped, so 4x the log is not 4x the memory.

    The bulk scanner holds one window at a time; windows are shrunk so that both logs span several
    (with the default 4 MiB the smaller log would fit in one and look cheaper than it is).
    """
    from datetime import datetime

    from engdiag import synth
    from engdiag.logs import bulk

    monkeypatch.setattr(bulk, "WINDOW_BYTES", 512 << 10)

    peaks = {}
    for intervals in (2_000, 8_000):
        path = tmp_path / f"{intervals}.log"
        writer = synth.Writer(synth.Style(), datetime(2025, 1, 1), seed=1)
        load = synth.Load(prompt_len=40)
        with path.open("w") as handle:
            for _ in range(intervals):
                writer.tick(10)
                for line in synth.stats_line(writer, load) + synth.request_lines(writer, load):
                    handle.write(line + "\n")
        peaks[intervals] = _peak_bytes(path)
    assert peaks[8_000] < 1.2 * peaks[2_000] + (1 << 20), peaks
