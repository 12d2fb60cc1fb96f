"""The parallel byte-range scan gives exactly what the line-by-line scan gives.

Cuts land wherever ``cut_points`` finds a record start, including right after
tracebacks and wrapped lines; records split across read chunks are covered by
test_parser_properties.py.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag import synth
from engdiag.analysis.analyze import analyze
from engdiag.logs.source import scan_input, scan_parallel
from engdiag.analysis.timeline import TimelineBuilder
from engdiag.logs.inputs import expand
from engdiag.logs.paste import file_paste

from tests.conftest import CORPUS, write_log

STYLES = {
    "plain": synth.Style(),
    "kubectl-colour": synth.Style(version="0.20.0", kubectl=True, color="esc"),
    "compose-crlf": synth.Style(version="0.9.2", compose="vllm-1", color="lost", crlf=True),
    "wrapped": synth.Style(version="0.8.5", color="caret", wrap=140),
    "v0": synth.Style(version="0.6.3"),
}


def _timelines(path, jobs):
    log = expand([str(path)])[0]
    sequential = TimelineBuilder()
    summary = scan_input(log, 0, 0, False, sequential.add)
    joined = scan_parallel(log, 0, 0, False, jobs, TimelineBuilder)
    if not file_paste(path).untouched:
        assert joined is None, "a pasted log (here cut at a width) is read whole: a range cannot see its head"
        return None
    assert joined is not None, "the file should be cut"
    return sequential.build([summary]), joined[0].build([joined[1]])


def _same(a, b):
    assert a.events == b.events
    assert a.counts == b.counts
    assert a.sources == b.sources
    assert a.load == b.load
    assert a.prompt_histogram == b.prompt_histogram and a.prompt_lengths == b.prompt_lengths
    assert a.version == b.version and a.config == b.config and a.proc_last == b.proc_last


@pytest.mark.parametrize("style", list(STYLES), ids=list(STYLES))
@pytest.mark.parametrize("jobs", [2, 3, 5])
def test_generated_incidents_scan_the_same_in_parallel(tmp_path, style, jobs):
    shape = STYLES[style]
    name = "nccl-watchdog" if shape.v0 else "deadlock"
    path = write_log(tmp_path / "x.log", synth.incident(name, shape, minutes=30, load=synth.Load(prompt_len=200)))
    timelines = _timelines(path, jobs)
    if timelines is not None:
        _same(*timelines)


def test_every_corpus_case_concatenated_analyses_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr("engdiag.logs.source.PARALLEL_MIN_BYTES", 0)
    text = "".join((case / "log.txt").read_text() + "\n" for case in sorted(CORPUS.glob("*")) if (case / "log.txt").exists())
    path = tmp_path / "all.log"
    path.write_text(text * 8)  # several copies: ranges cut each case at many different points
    sequential = analyze([str(path)], jobs=1)
    for jobs in (2, 4, 7):
        parallel = analyze([str(path)], jobs=jobs)
        _same(sequential.timeline, parallel.timeline)
        assert sequential.verdict == parallel.verdict


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 6), st.integers(0, 2**16), st.sampled_from(sorted(synth.INCIDENTS)))
def test_any_cut_count_and_seed(tmp_path_factory, jobs, seed, name):
    import engdiag.logs.source as module

    path = tmp_path_factory.mktemp("cut") / "x.log"
    write_log(path, synth.incident(name, synth.Style(wrap=150 if seed % 2 else None), minutes=8, seed=seed,
                                   load=synth.Load(prompt_len=100)))
    saved, module.PARALLEL_MIN_BYTES = module.PARALLEL_MIN_BYTES, 0
    try:
        sequential, parallel = analyze([str(path)], jobs=1), analyze([str(path)], jobs=jobs)
    finally:
        module.PARALLEL_MIN_BYTES = saved
    _same(sequential.timeline, parallel.timeline)
    assert sequential.verdict == parallel.verdict


def test_a_log_across_new_year_falls_back_to_the_exact_sequential_scan(tmp_path):
    lines = list(synth.incident("deadlock", minutes=60, start=datetime(2025, 12, 31, 23, 20, 0),
                                load=synth.Load(prompt_len=50)))
    path = write_log(tmp_path / "newyear.log", lines)
    sequential = analyze([str(path)], jobs=1)
    parallel = analyze([str(path)], jobs=4)
    assert sequential.timeline.events == parallel.timeline.events
    assert sequential.verdict == parallel.verdict
    assert sequential.timeline.last_stamp.year == 1


@pytest.mark.parametrize("failing", ["child", "parent"])
def test_an_error_in_any_range_is_raised_and_no_child_is_left_behind(tmp_path, monkeypatch, failing):
    """The first range is scanned in this process, the others in forked children: an exception in a child comes
    back through its pipe and is raised here, as ``pool.map`` raised it; one here kills and reaps the children."""
    import os

    from engdiag.logs import source

    path = write_log(tmp_path / "busy.log", list(synth.incident("deadlock", minutes=6)))
    scan = source.bulk_scan

    def broken(stream, *args, **kwargs):  # type: ignore[no-untyped-def]
        here = os.getpid() == parent
        if (failing == "child") != here:
            raise ValueError(f"broken scanner in the {failing}")
        return scan(stream, *args, **kwargs)

    parent = os.getpid()
    monkeypatch.setattr(source, "bulk_scan", broken)
    with pytest.raises(ValueError, match=f"in the {failing}"):
        scan_parallel(expand([str(path)])[0], 0, 0, False, 3, TimelineBuilder)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_idle_runs_once_here_after_the_first_range_and_an_error_in_it_reaps_the_children(tmp_path, monkeypatch):
    """``read_logs``' ``idle`` (what the caller needs after the scan) runs in this process once its own range is
    scanned, before the children's results are read, once for all inputs; raising there kills and reaps them."""
    import os

    from engdiag.logs import source
    from engdiag.logs.source import read_logs

    path = write_log(tmp_path / "busy.log", list(synth.incident("deadlock", minutes=6)))
    monkeypatch.setattr(source, "PARALLEL_MIN_BYTES", 0)
    calls: list[int] = []
    scan_range = source._scan_range
    monkeypatch.setattr(source, "_scan_range", lambda part: (calls.append(-1), scan_range(part))[1])
    builder, _ = read_logs([str(path), str(path)], TimelineBuilder, jobs=3, idle=lambda: calls.append(os.getpid()))
    assert calls == [-1, os.getpid(), -1], "the first range here, then idle, once: the second input's none"
    reference, _ = read_logs([str(path), str(path)], TimelineBuilder, jobs=1)
    assert builder.build([]).events == reference.build([]).events

    def broken() -> None:
        raise ValueError("broken idle work")

    with pytest.raises(ValueError, match="broken idle"):
        read_logs([str(path)], TimelineBuilder, jobs=3, idle=broken)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


@pytest.mark.parametrize("parts", [2, 3, 5, 8])
def test_ranges_are_shorter_by_their_other_work(parts):
    """Every range but the first counts the lines before it before it scans, the first one's process imports what
    follows the scan while the others finish: the cut targets give each less by that (two ranges: halves)."""
    from itertools import pairwise

    from engdiag.logs.split import FIRST_SHARE, targets

    size = 1 << 30
    cuts = [0, *targets(size, parts), size]
    lengths = [b - a for a, b in pairwise(cuts)]
    assert len(lengths) == parts and all(a > b > 0 for a, b in pairwise(lengths[1:])), lengths
    assert lengths[0] < lengths[1] / (1 - FIRST_SHARE) < lengths[0] * 1.5
    if parts == 2:
        assert abs(cuts[1] / size - 0.5) < 0.01
