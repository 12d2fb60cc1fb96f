"""Every scanner backend gives exactly what the straightforward line scanner gives.

The bulk backends read only candidate records and the lines that keep the
scanner's state exact; these tests compare whole timelines (events, counts,
sources, load, prompt histogram, version, config, last line of each process)
on the corpus, every generated incident and style, Hypothesis-made logs and
the hard cases: long tracebacks, runs without times, New Year, lines over
1 MiB, colour / kubectl / compose / Ray prefixes, and records cut by window
boundaries (windows shrunk to a few KiB so that every log crosses hundreds).
"""

from __future__ import annotations

import gzip
import random
from itertools import pairwise
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag import synth
from engdiag.analysis.timeline import TimelineBuilder
from engdiag.logs import bulk, counting
from engdiag.logs.engines import ENV, active_backend
from engdiag.logs.hotscan import native
from engdiag.logs.inputs import MAX_LINE_BYTES, expand
from engdiag.logs.source import scan_input
from engdiag.logs.patterns import LITERALS
from engdiag.logs.quick import hot_events
from tests.conftest import CORPUS, run_engdiag, write_log
from tests.test_hot_scan import ACCESS, ADDED, MUTATIONS, RECEIVED
from tests.test_user_data import FIELDS as USER_FIELDS
from tests.test_user_data import _request

BULK = ["python"]
if native() is not None:
    BULK.append("native")
try:
    import hyperscan  # noqa: F401

    BULK.append("hyperscan")
except ImportError:
    pass

FIELDS = ("events", "counts", "sources", "load", "prompt_histogram", "prompt_lengths", "version", "config", "proc_last")
STYLES = {
    "plain": synth.Style(),
    "kubectl-colour": synth.Style(version="0.20.0", kubectl=True, color="esc"),
    "kubectl-prefix": synth.Style(version="0.20.0", kubectl=True, pod="vllm-7d9f8-abcde"),
    "compose-crlf": synth.Style(version="0.9.2", compose="vllm-1", color="lost", crlf=True),
    "wrapped-caret": synth.Style(version="0.8.5", color="caret", wrap=140),
    "ray": synth.Style(ray=True, glue=True),
    "v0": synth.Style(version="0.6.3"),
}


def _timeline(path, backend, monkeypatch):
    monkeypatch.setenv(ENV, backend)
    builder = TimelineBuilder()
    summary = scan_input(expand([str(path)])[0], 0, 0, False, builder.add, count=builder.count)
    return builder.build([summary])


def _same_everywhere(path, monkeypatch, window_bytes=None, events=True):
    if window_bytes is not None:
        monkeypatch.setattr(bulk, "WINDOW_BYTES", window_bytes)
    reference = _timeline(path, "lines", monkeypatch)
    assert reference.events or not events, "the log should hold events"
    for backend in BULK:
        got = _timeline(path, backend, monkeypatch)
        for field in FIELDS:
            assert getattr(got, field) == getattr(reference, field), f"{backend}: {field} differs"


@pytest.mark.parametrize("case", sorted(p.parent.name for p in CORPUS.glob("*/log.txt")))
def test_corpus(tmp_path, monkeypatch, case):
    # a few real pastes hold no vLLM line at all (tests/test_corpus.py NOT_A_VLLM_LOG): same nothing everywhere
    _same_everywhere(CORPUS / case / "log.txt", monkeypatch, window_bytes=2048, events=False)


@pytest.mark.parametrize("style", list(STYLES))
def test_generated_incidents_in_every_style(tmp_path, monkeypatch, style):
    shape = STYLES[style]
    names = synth.V0_INCIDENTS if shape.v0 else synth.INCIDENTS
    for name in names:
        path = write_log(tmp_path / f"{name}.log",
                         synth.incident(name, shape, minutes=6, load=synth.Load(prompt_len=60, request_every=0.5)))
        _same_everywhere(path, monkeypatch, window_bytes=3000)


@pytest.mark.parametrize("window_bytes", [20_000, 60_000])
@pytest.mark.parametrize("style", ["plain", "kubectl-colour", "v0"])
def test_busy_windows_leave_their_last_requests_to_the_next_window(tmp_path, monkeypatch, style, window_bytes):
    """Windows with more than KEEP_LAST request lines each: a window counts even its last requests when the
    next window holds KEEP_LAST of each signal (those are the events the timeline keeps) — still exact."""
    shape = STYLES[style]
    name = next(iter(synth.V0_INCIDENTS if shape.v0 else synth.INCIDENTS))
    load = synth.Load(prompt_len=60, request_every=0.05)
    path = write_log(tmp_path / "busy.log", synth.incident(name, shape, minutes=2, load=load))
    shortened: list[int] = []
    keep = counting.HotWindow.keep

    def watched(self, later=None):  # type: ignore[no-untyped-def]
        found = keep(self, later)
        shortened.append(len(keep(self)) - len(found))
        return found

    monkeypatch.setattr(counting.HotWindow, "keep", watched)
    _same_everywhere(path, monkeypatch, window_bytes=window_bytes)
    assert max(shortened) > 0, "some window should have left its last requests to the next"


def _hard_lines() -> list[str]:
    head = "(EngineCore_DP0 pid=9) ERROR 12-31 23:59:58 [core.py:700] "
    traceback = [head + "EngineCore encountered a fatal error."] + [
        head + f'  File "/x/y{i}.py", line {i}, in f{i}' for i in range(600)
    ] + [head + "RuntimeError: CUDA error: an illegal memory access was encountered"]
    stampless = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "ValueError: bad",
                 "", "some print without a prefix", "Segmentation fault (core dumped)"]
    new_year = [
        "(APIServer pid=7) INFO 01-01 00:00:03 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 0.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%",
        "(APIServer pid=7) INFO 01-01 00:00:04 [logger.py:41] Received request r1: prompt: 'x', params: "
        "SamplingParams(n=1, stop=['CUDA out of memory']), prompt_token_ids: [1, 2], lora_request: None.",
    ]
    huge = "(APIServer pid=7) INFO 01-01 00:00:05 [logger.py:41] Received request big: prompt: '" + "y" * (
        MAX_LINE_BYTES + 4096) + "', params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3]"
    after_huge = "(APIServer pid=7) ERROR 01-01 00:00:06 [async_llm.py:480] AsyncLLM output_handler failed."
    impossible = "(EngineCore_DP0 pid=9) ERROR 02-30 09:31:00 [core.py:710] EngineCore encountered a fatal error."
    prefixed = [
        "2026-01-01T00:00:07.123456789Z \x1b[1;36m(EngineCore_DP0 pid=9)\x1b[0;0m WARNING 01-01 00:00:07 "
        "[shm_broadcast.py:466] No available shared memory broadcast block found in 60 second.",
        "vllm-1  | (APIServer pid=7) ERROR 01-01 00:00:08 [core_client.py:1] EngineDeadError: engine gone",
        "[pod/vllm-0/vllm] (APIServer pid=7) INFO 01-01 00:00:08 [logger.py:41] Received request r2: prompt: 'x', "
        "params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None.",
        "[pod/vllm-0/vllm] 2026-01-01T00:00:08.5Z (EngineCore_DP0 pid=9) ERROR 01-01 00:00:08 [core.py:1] "
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "(RayWorkerWrapper pid=55, ip=10.0.0.2) INFO 01-01 00:00:09 [worker.py:1] CUDA out of memory. "
        "Tried to allocate 2.00 GiB [repeated 3x across cluster]",
        "[rank0]:[E101 00:00:10.000000 12 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds",
        "host:12:34 [0] NCCL INFO Init COMPLETE rank 0 nranks 2",
        "(EngineCore_DP0) INFO 01-01 00:00:11 [core.py:1] Shutting down FastAPI HTTP server.",
        ("Jan  1 00:00:12 host unit[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m Traceback (most "
         "recent call last):"),
        ('Jan  1 00:00:12 host unit[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m   File "/x.py", '
         "line 1, in f"),
        "Jan  1 00:00:12 host unit[140343]: #033[1;36m(VllmWorker rank=3 pid=140343)#033[0;0m OSError: gone",
    ]
    return [head.replace("ERROR", "INFO") + "vLLM API server version 0.9.0", *traceback, *stampless, *new_year,
            huge, after_huge, impossible, *prefixed]


def test_hard_cases_across_tiny_windows(tmp_path, monkeypatch):
    lines = _hard_lines()
    for size in (512, 4096, 1 << 16):
        path = write_log(tmp_path / f"hard-{size}.log", lines + lines[: size % 7 + 3])
        _same_everywhere(path, monkeypatch, window_bytes=size)


def test_a_log_across_new_year(tmp_path, monkeypatch):
    lines = synth.incident("deadlock", minutes=40, start=datetime(2025, 12, 31, 23, 40, 0),
                           load=synth.Load(prompt_len=40, request_every=0.5))
    _same_everywhere(write_log(tmp_path / "newyear.log", lines), monkeypatch, window_bytes=5000)


LINE_POOL = [line for case in sorted(CORPUS.glob("*/log.txt")) for line in case.read_text().splitlines()] + \
    _hard_lines()[:40] + MUTATIONS + [RECEIVED, ADDED, ACCESS] * 40 + \
    [_request(i % 60, field, f"... {literal} ...") for i, field in enumerate(USER_FIELDS) for literal in LITERALS[::11]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(LINE_POOL) - 1), min_size=1, max_size=120), st.integers(64, 4096),
       st.booleans())
def test_hypothesis_logs(tmp_path_factory, picks, window, trailing_newline):
    path = tmp_path_factory.mktemp("h") / "x.log"
    text = "\n".join(LINE_POOL[i] for i in picks) + ("\n" if trailing_newline else "")
    path.write_text(text)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(bulk, "WINDOW_BYTES", window)
        reference = _timeline(path, "lines", monkeypatch)
        for backend in BULK:
            got = _timeline(path, backend, monkeypatch)
            for field in FIELDS:
                assert getattr(got, field) == getattr(reference, field), f"{backend}: {field}"


def test_ten_million_tiny_lines_in_seconds_not_minutes(tmp_path):
    path = tmp_path / "tiny.log"
    path.write_bytes(b"a\n" * 10_000_000)
    result = run_engdiag("analyze", str(path), timeout=110)
    assert result.returncode == 3  # read through, and no vLLM line in it
    assert b"no vLLM lines found" in result.stderr


def test_gzip_goes_through_the_bulk_scanner_too(tmp_path, monkeypatch):
    lines = list(synth.incident("deadlock", minutes=5, load=synth.Load(prompt_len=30, request_every=0.5)))
    plain = write_log(tmp_path / "x.log", lines)
    packed = tmp_path / "x.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for backend in BULK:
        assert _timeline(packed, backend, monkeypatch).events == _timeline(packed, "lines", monkeypatch).events


def test_version_names_the_active_backend(monkeypatch):
    for backend in ["lines", *BULK]:
        result = run_engdiag("--version", env={ENV: backend})
        assert result.returncode == 0
        assert f"log scanner: {backend})".encode() in result.stdout


def test_an_unknown_or_unavailable_backend_is_a_usage_error(monkeypatch):
    result = run_engdiag("analyze", "-", input=b"x\n", env={ENV: "turbo"})
    assert result.returncode == 2 and b"ENGDIAG_SCANNER takes" in result.stderr
    monkeypatch.delenv(ENV, raising=False)
    assert active_backend() in BULK
    random.seed(0)


def test_blank_lines_and_many_tiny_windows(tmp_path, monkeypatch):
    monkeypatch.setattr(bulk, "WINDOW_LINES", 7)
    lines = ["", "", *_hard_lines()[:30], "", "", *list(synth.incident("crash-ima", minutes=2))[:300], ""]
    _same_everywhere(write_log(tmp_path / "blank.log", lines), monkeypatch, window_bytes=700)


def test_a_ray_worker_named_by_two_tags_keeps_its_last_line_in_a_counted_window(tmp_path, monkeypatch):
    nested = ("(RayWorkerProc pid=7, ip=10.0.0.2) (Worker_TP0 pid=7) INFO 10-20 06:00:01 [worker.py:1] loading "
              "the model")
    lines = [RECEIVED, ADDED, ACCESS] * 30 + [nested] + [RECEIVED, ADDED, ACCESS] * 30
    for size in (1000, 5000, 1 << 16):
        _same_everywhere(write_log(tmp_path / f"ray-{size}.log", lines), monkeypatch, window_bytes=size)


@pytest.mark.parametrize("backend", BULK)
def test_only_the_lines_naming_unseen_processes_are_read_line_by_line(backend, tmp_path, monkeypatch):
    """A log that ends in an NCCL watchdog's ``[rankN]:`` lines: its request lines are still planned, and only
    the span from the first such line to the last is read line by line (it was the whole 8 MiB window)."""
    requests = [RECEIVED, ADDED, ACCESS] * 300
    timeout = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20585, OpType=ALLREDUCE,"
               " NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600080 milliseconds before timing out.")
    stats = ("INFO 10-20 15:01:57 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput:"
             " 0.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%.")
    watchdog = [
        f"[rank0]:[E1020 15:01:56.081662161 ProcessGroupNCCL.cpp:684] [Rank 0] {timeout}",
        stats,
        f"[rank1]:[E1020 15:01:56.081662161 ProcessGroupNCCL.cpp:684] [Rank 1] {timeout}",
    ]
    after = [ACCESS] * 5
    data = "\n".join(requests + watchdog + after).encode()
    searches = bulk.engine(backend).searches
    starts = memoryview(searches.line_starts(data)[0]).cast("q")
    parts = [(len(starts), cued) for _, starts, cued, _ in bulk._cut_at_cues([(data, starts)], searches)]
    assert parts == [(len(requests), False), (len(watchdog), True), (len(after), False)]
    _same_everywhere(write_log(tmp_path / "watchdog.log", requests + watchdog + after), monkeypatch)


def test_a_line_said_to_start_its_own_record_never_continues_the_vllm_line_before_it():
    """``starts_own_record`` lets the planner skip building the piece after a stats line; where it says
    "certain", ``joins`` must agree, on every pair of adjacent corpus lines and the hot-scan pool."""
    from engdiag.logs.lines import Shape, pieces
    from engdiag.logs.quick import starts_own_record
    from engdiag.logs.records import joins
    from tests.test_hot_scan import POOL

    lines = [line for case in sorted(CORPUS.glob("*/log.txt")) for line in case.read_text().splitlines()] + POOL
    said = 0
    for number, (prev_line, line) in enumerate(pairwise(lines)):
        prev = pieces(prev_line, number)[-1]
        if prev.shape is not Shape.VLLM or not starts_own_record(line.encode(), prev):
            continue
        said += 1
        assert joins(prev, pieces(line, number + 1)[0]) is None, (prev_line, line)
    assert said > 300, "the check should be certain for many lines after a vLLM line"


def test_a_kubectl_line_said_to_start_its_own_record_never_continues_the_vllm_line_before_it():
    """``kube_starts_own_record`` (a window with colour codes): where it says "certain", the piece the planner would
    have built for the next line (``kube_piece``, else the line reader's) must not join the line before."""
    from engdiag.logs.lines import Shape, pieces
    from engdiag.logs.quick import kube_piece, kube_starts_own_record
    from engdiag.logs.records import joins
    from tests.test_hot_scan import POOL

    lines = [line for case in sorted(CORPUS.glob("*/log.txt")) for line in case.read_text().splitlines()] + POOL
    tagged = [_kubectl(line) for line in lines if line.startswith("(") and ") INFO" in line]
    odd = [line.replace("INFO", "INFO \x1b[1m", 1) for line in tagged[:50]] + [line + " [0m" for line in tagged[:50]]
    head = "(APIServer pid=41) INFO 10-20 06:00:01 [logger.py:41] "
    traceback = [_kubectl(head + "Received request x"), _kubectl(head.replace("log", "log\x1b[0m") + "Traceback (most recent call last):")]
    said = 0
    for number, (prev_line, line) in enumerate(pairwise(tagged + odd + tagged[::-1] + traceback)):
        prev = (kube_piece(prev_line.encode(), number) or pieces(prev_line, number)[-1])
        if prev.shape is not Shape.VLLM or not kube_starts_own_record(line.encode(), prev):
            continue
        said += 1
        built = kube_piece(line.encode(), number + 1) or pieces(line, number + 1)[0]
        assert joins(prev, built) is None, (prev_line, line)
    assert said > 300, "the check should be certain for many kubectl lines after a vLLM line"


KUBE = "2025-10-20T13:00:00.05Z \x1b[0;36m{}"
"""kubectl's stamp and the colour codes around the process tag (the benchmark's v1-kubectl shape)."""


def _kubectl(line: str) -> str:
    return KUBE.format(line.replace(") INFO", ")\x1b[0;0m INFO", 1))


def test_one_line_records_of_a_window_with_colour_codes_skip_extract_only_where_the_search_saw_them(
        tmp_path, monkeypatch):
    """Behind kubectl's colour codes a stats line is read without ``extract`` too, unless a colour code sits in
    its message: past the first 256 characters the line reader keeps it, and there it can make a literal that
    the search, which strips every code, does not see ('\\x1b[1m' + 'emory allocation…').  (A dense window, read
    line by line, skipped extract for such a line before, and lost its event.)"""
    stats = ("(APIServer pid=41) INFO 10-20 06:00:01 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 "
             "tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache "
             "usage: 1.0%")
    hidden = (stats + ", " + "x" * 300 + " \x1b[1memory allocation failed with OOM on device 0 while trying to "
              "allocate 1024 bytes, " + "y" * 120)
    tail_code = stats + " done \x1b[0m"
    lines = [_kubectl(line) for line in [RECEIVED, ADDED, ACCESS] * 40 + [stats, hidden, tail_code] * 3]
    read: list[str] = []
    monkeypatch.setattr(bulk, "hot_events", lambda piece, *more: read.append(piece.msg) or hot_events(piece, *more))
    for size in (2000, 1 << 16):  # dense windows, then one sparse (planned) window
        read.clear()
        _same_everywhere(write_log(tmp_path / f"kube-{size}.log", lines), monkeypatch, window_bytes=size)
        assert not any("\x1b" in msg for msg in read), "a message with a colour code must go through extract"
    assert any(msg.endswith("usage: 1.0%") for msg in read), "a plain stats line should skip extract"


def _kube_variants(line: str) -> list[str]:
    stamps = ("2025-10-20T13:00:00.05Z", "2026-01-01T00:00:07.123456789Z", "2025-12-31T23:59:59+01:00")
    return [f"{stamp} {code}{line.replace(') ', ')' + end + ' ', 1)}"
            for stamp, code, end in zip(stamps, ("\x1b[0;36m", "\x1b[1;36m", "\x1b[36m"), ("\x1b[0;0m", "\x1b[0m", "\x1b[0;0m"))]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="\x1b^[]0123456789;mE#SC( )pid=:|'\"NCL\r", max_size=40))
def test_a_kubectl_line_read_quickly_is_read_as_the_line_reader_reads_it(noise):
    """``kube_piece`` gives exactly the one piece ``lines.pieces`` gives (with kubectl's stamp and its year),
    or None: on every corpus and pool line behind kubectl's stamp and a coloured tag, and with noise (colour
    codes, parts of them, NCCL, CR, ``|``) in the message."""
    from engdiag.logs.lines import pieces
    from engdiag.logs.quick import kube_piece
    from tests.test_hot_scan import POOL

    lines = [line for case in sorted(CORPUS.glob("*/log.txt")) for line in case.read_text().splitlines()]
    tagged = [line for line in lines + POOL if line.startswith("(") and ") " in line][:400]
    read = 0
    for line in [variant for line in tagged for variant in _kube_variants(line + noise)]:
        quick = kube_piece(line.encode(), 7)
        if quick is None:
            continue
        read += 1
        assert [quick] == pieces(line, 7), line
        assert quick.stamp is None or quick.stamp.calendar == pieces(line, 7)[0].stamp.calendar, line
    assert read > 100 or noise, "most tagged lines should be read quickly"


def test_a_vllm_line_glued_to_another_process_s_record_after_nccl_output_is_read_as_two(tmp_path, monkeypatch):
    """``lines.pieces`` cuts a line with ``" NCCL "`` where another process's record begins (a native library's
    line cut off mid-write); ``quick_piece`` read it as one vLLM line, and the bulk backends lost the fatal error."""
    glued = ("(APIServer pid=41) INFO 10-20 06:00:01 [x.py:1] NCCL INFO Channel 00 : "
             "(EngineCore_DP0 pid=7) ERROR 10-20 06:00:02 [core.py:1] EngineCore encountered a fatal error.")
    lines = [RECEIVED, ADDED, ACCESS] * 30 + [glued] + [RECEIVED, ADDED, ACCESS] * 30
    _same_everywhere(write_log(tmp_path / "glued.log", lines), monkeypatch)


def test_the_first_time_is_found_past_first_windows_without_one(tmp_path, monkeypatch):
    """Long untimed lines (a progress bar) filling the first windows left the input's first time to no window:
    every bulk backend reported a later line's time as the log's start (found by the Hypothesis test above)."""
    bar = "Loading safetensors checkpoint shards:  64% Completed | 105/163 [09:30<04:59,  5.16s/it]"
    path = write_log(tmp_path / "x.log", [
        bar, bar,
        "ERROR 09-03 14:19:04 [dump_input.py:79] Dumping scheduler stats: SchedulerStats(num_running_reqs=1)",
        "(Worker_TP1 pid=4135344) INFO 06-27 19:49:58 [gpu_worker.py:580] Completed CPU memory pinning",
        bar,
    ])
    _same_everywhere(path, monkeypatch, window_bytes=147)
    assert _timeline(path, "python", monkeypatch).sources[0].first.month == 9
