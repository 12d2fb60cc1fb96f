"""The hot path: the C scanner and its Python twin agree, request lines are really counted, and counting
changes nothing a user sees.

``engdiag/logs/_scan.c`` and ``engdiag/logs/hotscan.py`` / ``windowscan.py`` implement the same
window-level searches; these tests feed both the corpus, every generated shape, request lines with rule
literals in every user-data field, and Hypothesis-made windows of real and mutated lines.  Whole-timeline
equality with the line scanner is in tests/test_bulk_scan.py.
"""

from __future__ import annotations

import io
import mmap
import os
import subprocess
import sys
from array import array
from collections import Counter
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag import synth
from engdiag.analysis.timeline import TimelineBuilder
from engdiag.logs import blocks, bulk, inputs, windowscan
from engdiag.logs.engines import ENV, available_backends
from engdiag.logs.events import Signal
from engdiag.logs.inputs import expand
from engdiag.logs.patterns import LITERALS
from engdiag.logs.source import scan_input
from engdiag.logs.windowscan import PYTHON, native
from tests.conftest import CORPUS, write_log
from tests.test_user_data import FIELDS as USER_FIELDS
from tests.test_user_data import _request

NATIVE = native()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the C scanner (engdiag.logs._scan) was not built here")

RECEIVED = (
    "(APIServer pid=41) INFO 10-20 06:00:00 [logger.py:41] Received request cmpl-1: prompt: 'hi', "
    "params: SamplingParams(n=1, max_tokens=8), prompt_token_ids: [1, 2, 3], lora_request: None."
)
ADDED = "(APIServer pid=41) INFO 10-20 06:00:00 [async_llm.py:270] Added request cmpl-1."
ACCESS = '(APIServer pid=41) INFO:     10.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK'
MUTATIONS = [
    RECEIVED.replace("[1, 2, 3]", "[]"),
    RECEIVED.replace("[1, 2, 3]", "[1, 2, 3"),
    RECEIVED.replace("[1, 2, 3]", "[ , ]"),
    RECEIVED.replace("[1, 2, 3]", "[-1, 2]"),
    RECEIVED.replace("lora_request: None.", "lora_request: 'x'."),
    RECEIVED.replace("'hi'", "'Added request x'"),
    RECEIVED.replace("'hi'", "'prompt_token_ids: [9]'"),
    RECEIVED.replace("'hi'", "'Received request y: z'"),
    RECEIVED.replace("'hi'", "'a | b'"),
    RECEIVED.replace("'hi'", "'\x1b[1mbold'"),
    RECEIVED.replace("'hi'", "'[1mbold'"),
    RECEIVED.replace("'hi'", "'x NCCL y'"),
    RECEIVED.replace("'hi'", "'h\u00e9'"),
    RECEIVED + " [repeated 3x across cluster]",
    RECEIVED + "\r",
    RECEIVED.replace("cmpl-1:", "cmpl 1:"),
    RECEIVED.replace("cmpl-1:", "cmpl-\u00e91:"),
    RECEIVED.replace("10-20", "02-30"),
    RECEIVED.replace("(APIServer pid=41)", "(APIServer pid=41, ip=10.0.0.2)"),
    RECEIVED.replace("(APIServer pid=41) ", ""),
    RECEIVED.replace("[logger.py:41]", "logger.py:41]"),
    RECEIVED.replace("INFO", "ERROR"),
    "2025-10-20T13:00:00.05Z \x1b[0;36m" + RECEIVED.replace(") INFO", ")\x1b[0;0m INFO"),
    "vllm-1  | " + RECEIVED,
    ADDED.replace("cmpl-1.", ""),
    ADDED.replace("cmpl-1.", " x"),
    ADDED + " Added request again",
    "Traceback: Added request x",
    "  File \"x.py\", line 1, in Received request",
    "(APIServer pid=41) INFO 10-20 06:00:00 [logger.py:41]   Traceback (most recent call last):",
    "(APIServer pid=41) INFO 10-20 06:00:00 [logger.py:41] ",
    RECEIVED.replace("'hi'", "'prompt_token_ids: [5'").replace("prompt_token_ids: [1, 2, 3], ", "") + " x: [1].",
    RECEIVED.replace("[1, 2, 3]", "[1, 'x']"),
    RECEIVED.replace("[1, 2, 3]", "[ 1,2 ,x]"),
    "(APIServer pid=41) INFO 10-20 06:00:00 [async_llm.py:270] ValueError: bad",
    "(APIServer) INFO 10-20 06:00:00 [core.py:1] x",
    "[rank0]:[W1020 06:00:00.000 1 a.cpp:1] warn",
    "host:1:2 [0] NCCL INFO x",
    "EngineCore_DP0 INFO 10-20 06:00:00 [core.py:1] bare role",
    "continued text without a prefix",
    "",
    ACCESS,
]


def _pool() -> list[str]:
    lines = [line for case in sorted(CORPUS.glob("*/log.txt")) for line in case.read_text().splitlines()[:200]]
    lines += [_request(i % 60, field, f"... {literal} ...") for i, (field, literal) in
              enumerate((f, lit) for f in USER_FIELDS for lit in LITERALS[::7])]
    return lines + MUTATIONS + [RECEIVED, ADDED, ACCESS] * 20


POOL = _pool()


def _hot(searches, data: bytes):  # type: ignore[no-untyped-def]
    """``hot`` of a window, given its line starts as the bulk scanner gives them."""
    return searches.hot(data, PYTHON.line_starts(data)[0])


def _same_searches(data: bytes) -> None:
    assert NATIVE is not None
    assert _hot(NATIVE, data) == _hot(PYTHON, data)
    for name in ("cues", "proc_tags", "line_starts", "colour", "strip_colour"):
        assert getattr(NATIVE, name)(data) == getattr(PYTHON, name)(data), name


@needs_native
@pytest.mark.parametrize("case", sorted(p.parent.name for p in CORPUS.glob("*/log.txt")))
def test_c_and_python_agree_on_the_corpus(case):
    data = (CORPUS / case / "log.txt").read_bytes()
    _same_searches(data[: data.rfind(b"\n")] if data.endswith(b"\n") else data)


@needs_native
@pytest.mark.parametrize("style", [synth.Style(version="0.11.0", tp=2), synth.Style(kubectl=True, color="esc"),
                                   synth.Style(version="0.6.3"), synth.Style(compose="vllm-1", color="lost", crlf=True),
                                   synth.Style(ray=True, glue=True), synth.Style(color="caret", wrap=140)])
def test_c_and_python_agree_on_generated_serving(style):
    writer = synth.Writer(style, datetime(2025, 12, 31, 23, 59, 0), 3)
    lines = list(synth.serving(writer, 2, synth.Load(prompt_len=60, request_every=0.05)))
    data = "\n".join(lines).encode()
    _same_searches(data)
    if not (style.compose or style.ray or style.wrap or style.color == "caret"):
        assert len(_hot(PYTHON, data)[0]) // 4 > len(lines) // 3, "request lines should be counted in this shape"


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(POOL), min_size=1, max_size=40), st.booleans())
def test_c_and_python_agree_on_any_window(lines, cut):
    data = "\n".join(lines).encode("utf-8", "replace")
    if cut and len(data) > 3:
        data = data[: len(data) // 2]
    _same_searches(data)


@needs_native
@pytest.mark.parametrize("starts", [[], [1], [0, 0], [0, 9, 5], [0, 18]])
def test_the_c_hot_scan_refuses_starts_that_cannot_be_the_windows(starts):
    """It walks the line starts it is given instead of searching each newline: none may lead it out of the data."""
    assert NATIVE is not None
    with pytest.raises(ValueError, match="line starts"):
        NATIVE.hot(b"line one\nline two", array("q", starts))


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.text(alphabet="\x1b^[]0123456789;mKAb( )pid=\n|,'\"", max_size=40))
def test_c_and_python_agree_on_noise(raw, text):
    _same_searches(raw)
    _same_searches(text.encode())


CUE_PARTS = ["(APIServer pid=41)", "(APIServer", "(ApiServer pid=1, ip=10.0.0.1)", "(EngineCore_DP0 pid=7)",
             "(VllmWorker rank=0 pid=9)", "(RayWorkerWrapper pid=3)", "(Worker_TP1)", "(RayWorker)", "(VllmWorker x)",
             "(EngineCore)", "(Worker", "((", ")", "(", "APIServer INFO ", "ApiServer_1 DEBUG ", "EngineCore INFO ",
             "Worker WARNING ", " pid=5", " pid=", "[rank0]:", "[rank", "]", "]:", "[Stage-0]", "[Stage", " NCCL ",
             " INFO ", "A", "[", "x", " ", "\n"]


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CUE_PARTS), max_size=60))
def test_c_and_python_agree_on_cue_fragments(parts):
    """Role tags, bare roles, glog and NCCL cues glued in any order (the C walk takes '[', 'A' and '(' together)."""
    _same_searches("".join(parts).encode())


@needs_native
@pytest.mark.parametrize("code", ["\x1b[0m", "\x1b[1;36m", "\x1bK", "^[[1m", "^[[m", "[1;2m", "[12m", "[m", "[;m", "\x1b[",
                                  "^[", "[1"])
def test_the_walk_for_cues_finds_a_colour_code_wherever_it_sits(code):
    """``cues`` takes the colour code from its walk sixteen bytes at a time: at every offset around a block's
    edges, at the window's start and end, cut short by the window's end."""
    filler = "(APIServer pid=1) INFO x [f.py:1] a(b)A " * 2
    for at in range(50):
        for data in (filler[:at] + code + filler[at:], filler[:at] + code, (filler[:at] + code)[:-1]):
            raw = data.encode()
            assert NATIVE.cues(raw) == PYTHON.cues(raw), (at, data)
            assert NATIVE.cues(raw)[1] == NATIVE.colour(raw) == PYTHON.colour(raw), (at, data)


@pytest.mark.parametrize("ids", ["[1, 2, 3]", "[ 1,2 ]", "[1]", "[]", "[  ]", "[1, 2, x]", "[1, 2, 3.5]", "[1,\t2]",
                                 "[1, [2]]", "[1, 2m]", "[1, -2]", "[1\u00e9]"])
def test_only_token_id_lists_of_digits_commas_and_spaces_are_cut_from_the_literal_search(ids):
    data = RECEIVED.replace("[1, 2, 3]", ids).encode() + b"\n" + ACCESS.encode()
    found = _hot(PYTHON, data)
    pure = found[0] != b"" and set(ids[1:-1]) <= set("0123456789, ") and ids != "[]"
    assert (found[5] != b"") == pure, ids
    if NATIVE is not None:
        assert _hot(NATIVE, data) == found
        assert NATIVE.cut_lists(data, found[5], PYTHON.line_starts(data)[0]) == PYTHON.cut_lists(
            data, found[5], PYTHON.line_starts(data)[0])


def test_no_rule_literal_can_meet_a_cut_token_id_list():
    from engdiag.logs.engines import LISTS_CUT, outside_id_lists

    assert LISTS_CUT, "a rule literal holds what a token id list holds: the lists are searched again (slower)"
    for literal in (b"123", b", 5", b" ", b"ids: [1", b"[0", b"7]", b" ]", b"[,"):
        assert not outside_id_lists(literal), literal
    for literal in (b"out of memory", b"[rank", b"ids: [", b"], lora", b"[x]", b"x 1, 2"):
        assert outside_id_lists(literal), literal


@needs_native
@pytest.mark.parametrize("size", [0, 1, 14, 15, 16, 17, 31, 32, 233, 244, 245, 246, 249, 250, 251, 260])
def test_c_and_python_agree_on_tags_near_the_content_limit(size):
    """_TAG's content is 1 to 250 bytes: the C walk takes sixteen at a time, so every length near a block's
    end or the limit, with and without spaces, a window end right after, and a stop byte inside."""
    for filler in ("x" * size, ("ab " * size)[:size], ("x" * size)[: size // 2] + "(" + "x" * size):
        for tail in (" pid=7)", " pid=7, ip=10.0.0.1)", " pid=)", " pid=7", ""):
            _same_searches(f"({filler}{tail}".encode())
            _same_searches(f"a ({filler}{tail} INFO\n(x pid=1)".encode())


@pytest.mark.parametrize("distinct", [0, 1, 7, 8, 9, 40])
def test_process_tags_found_one_by_one_are_those_of_findall(distinct):
    tags = [f"(Worker_TP{n} pid={n}{', ip=10.0.0.1' if n % 3 else ''})" for n in range(distinct)]
    lines = [f"{tags[n % distinct] if distinct else ''} INFO x (a pid=1, ip=(b pid=2) (c)" for n in range(200)]
    data = "\n".join(lines).encode()
    assert PYTHON.proc_tags(data) == set(windowscan._TAG.findall(data))


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 5000), st.integers(-(2**31), 2**31 - 1)), max_size=300))
def test_the_c_histogram_counts_as_counter_does(values):
    from engdiag.logs._scan import histogram

    data = array("i", values).tobytes()
    assert histogram(data) == Counter(values)
    assert histogram(memoryview(data).cast("i")) == Counter(values)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=70_000), st.integers(min_value=-1, max_value=80_000), st.booleans())
def test_count_lines_counts_the_newlines_before_a_range(tmp_path_factory, data, end, python):
    """A byte range's first line number: the mapped C count (mapped piece by piece, so that the pages it read
    leave the RSS) and the Python fallback agree with bytes.count."""
    path = tmp_path_factory.mktemp("count") / "log"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        if python:
            patch.setattr(inputs, "_native_newlines", lambda: None)
        patch.setattr(inputs, "_MAPPED", mmap.ALLOCATIONGRANULARITY)  # several mappings for the longer files
        assert inputs.count_lines(path, end) == data[: max(end, 0)].count(b"\n")


class _Trickle(io.RawIOBase):
    """A raw stream that returns at most ``most`` bytes a read, like a pipe or the gzip thread."""

    def __init__(self, data: bytes, most: int) -> None:
        self._data, self._at, self._most = data, 0, most

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        chunk = self._data[self._at : self._at + min(len(buffer), self._most)]
        buffer[: len(chunk)] = chunk
        self._at += len(chunk)
        return len(chunk)


def _lines_of(stream, size: int, most: int, limit: int | None, fill) -> list[bytes]:  # type: ignore[no-untyped-def]
    found: list[bytes] = []
    for window, starts in blocks.windows(stream, NATIVE.line_starts, size, most, limit, fill):
        assert len(starts) <= most
        found.extend(blocks.Lines(window, starts))
    return found


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"", b"a", b"line of text", b"x" * 50, b"\r", b"\xff\xfe"]), max_size=30),
       st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=9),
       st.one_of(st.none(), st.integers(min_value=0, max_value=400)), st.integers(min_value=1, max_value=70))
def test_windows_read_in_one_object_hold_the_lines_read_and_joined(lines, size, most, limit, trickle):
    """``_scan.read_window`` gives the lines of read + join + slice: line cuts, long lines, byte limits, short reads.

    (Where a window ends may differ: it reads until its size is full, ``read`` takes one short read.)
    """
    data = b"\n".join(lines)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blocks, "MAX_LINE_BYTES", 40)
        got = _lines_of(_Trickle(data, trickle), size, most, limit, NATIVE.read_window)
        assert got == _lines_of(_Trickle(data, trickle), size, most, limit, None)
        assert got == _lines_of(io.BytesIO(data), size, most, limit, None)


@needs_native
def test_a_failing_read_raises_its_own_error():
    """A read error under ``read_window`` (a truncated .bz2 raises EOFError) reaches the caller as itself."""

    def readinto(buffer):  # type: ignore[no-untyped-def]
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    with pytest.raises(EOFError, match="end-of-stream"):
        NATIVE.read_window(readinto, b"carried", 64)


def test_the_last_requests_of_each_signal_are_read_the_full_way():
    from engdiag.logs.counting import HotWindow
    from engdiag.logs.hotscan import KEEP_LAST

    kinds = bytes([1, 2] * 40 + [2] * 30)
    tokens = [5 if i % 4 == 0 else 0 for i in range(len(kinds))]
    hot = HotWindow(memoryview(array("i", range(len(kinds))).tobytes()).cast("i"), kinds,
                    memoryview(array("i", tokens).tobytes()).cast("i"), [])
    kept = set(hot.keep())
    received = [i for i, k in enumerate(kinds) if k == 1]
    added = [i for i, k in enumerate(kinds) if k == 2]
    with_length = [i for i in received if tokens[i]]
    assert kept == set(received[-KEEP_LAST:]) | set(added[-KEEP_LAST:]) | set(with_length[-KEEP_LAST:])

    def later(kinds: bytes, tokens: list[int]) -> HotWindow:
        return HotWindow(memoryview(array("i", range(len(kinds))).tobytes()).cast("i"), kinds,
                         memoryview(array("i", tokens).tobytes()).cast("i"), [])

    # a next window with KEEP_LAST of every signal takes over; one with empty prompts only takes over two of them
    assert hot.keep(later(bytes([1, 2] * KEEP_LAST), [7, 0] * KEEP_LAST)) == []
    assert set(hot.keep(later(bytes([1, 2] * KEEP_LAST), [0, 0] * KEEP_LAST))) == set(with_length[-KEEP_LAST:])
    assert set(hot.keep(later(bytes([2] * 40), [0] * 40))) == kept - set(added[-KEEP_LAST:])
    assert set(hot.keep(later(bytes([1, 2] * (KEEP_LAST - 1)), [7, 0] * (KEEP_LAST - 1)))) == kept


def test_plain_request_lines_are_ok_and_anything_odd_is_not():
    data = f"{RECEIVED}\n{ADDED}\n{ACCESS}".encode()
    index, kind, tokens, bad, months, lists = _hot(PYTHON, data)
    assert list(memoryview(index).cast("i")) == [0, 1] and list(kind) == [1, 2]
    assert list(memoryview(tokens).cast("i")) == [3, 0] and bad == [] and months == 0
    start, end = memoryview(lists).cast("q")
    assert data[start - 1 : end + 1] == b"[1, 2, 3]"
    still_plain = {0, 12, 17}  # no token ids, a non-ASCII prompt, an impossible date: counted all the same
    for number, odd in enumerate(MUTATIONS[:18]):
        found = _hot(PYTHON, f"{odd}\n{ACCESS}".encode())
        assert (found[0] != b"") == (number in still_plain), odd
        assert (found[3] == []) == (number in still_plain), odd


class _Spy(TimelineBuilder):
    def __init__(self) -> None:
        super().__init__()
        self.counted: Counter[Signal] = Counter()

    def count(self, source, signals, prompt_lengths):  # type: ignore[no-untyped-def]
        self.counted.update(signals)
        super().count(source, signals, prompt_lengths)


@pytest.mark.parametrize("backend", ["native", "hyperscan", "python"])
def test_request_lines_are_counted_not_built_and_the_timeline_is_the_same(tmp_path, monkeypatch, backend):
    if backend not in available_backends():
        pytest.skip(f"the {backend} scanner backend is not available in this installation")
    monkeypatch.setattr(bulk, "WINDOW_BYTES", 1 << 16)
    path = write_log(tmp_path / "v1.log", synth.incident("deadlock", synth.Style(version="0.11.0"), minutes=4,
                                                          load=synth.Load(prompt_len=60, request_every=0.05)))
    timelines = {}
    for name in ("lines", backend):
        monkeypatch.setenv(ENV, name)
        spy = _Spy()
        summary = scan_input(expand([str(path)])[0], 0, 0, False, spy.add, count=spy.count)
        timelines[name] = (spy.build([summary]), spy.counted)
    reference, counted = timelines["lines"][0], timelines[backend][1]
    assert not timelines["lines"][1], "the line scanner counts nothing"
    assert counted[Signal.REQUEST_RECEIVED] > reference.counts[Signal.REQUEST_RECEIVED] * 0.5
    assert counted[Signal.REQUEST_ADDED] > reference.counts[Signal.REQUEST_ADDED] * 0.5
    got = timelines[backend][0]
    for field in ("events", "counts", "prompt_histogram", "prompt_lengths", "load", "proc_last", "sources"):
        assert getattr(got, field) == getattr(reference, field), field


def test_a_forced_native_backend_without_the_extension_is_a_usage_error(monkeypatch):
    from engdiag.errors import UsageError
    from engdiag.logs import engines

    monkeypatch.setattr(engines, "native", lambda: None)
    monkeypatch.setenv(ENV, "native")
    with pytest.raises(UsageError, match="C scanner was not built"):
        engines.active_backend()
    monkeypatch.delenv(ENV)
    assert engines.active_backend() in ("hyperscan", "python")


def test_version_names_the_default_backend_native_where_built():
    env = {k: v for k, v in os.environ.items() if k != ENV}
    result = subprocess.run([sys.executable, "-m", "engdiag", "--version"], capture_output=True, env=env, check=False)
    expected = "native" if NATIVE is not None else available_backends()[0]
    assert f"log scanner: {expected})".encode() in result.stdout
