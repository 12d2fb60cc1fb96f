"""The hyperscan backend's twins (``engdiag.logs.hotbulk``, ``cuebulk``) give exactly the Python twins' results.

It trusts patterns and window-level counts instead of reading each line: these tests feed it the
corpus, generated serving, Hypothesis-made windows and every odd request line next to plain ones
(a request literal or a cue in user data, a quote in or after the token list, CR, colour codes, ``|``, a line
over the cap, a window cut inside a line), and check that plain windows really take the bulk way.
``cuebulk``'s cues and colour are held to ``windowscan``'s on the same windows and on cue fragments.  The C
twins are held to the Python ones in tests/test_hot_scan.py.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag import synth
from engdiag.logs import cuebulk, hotbulk, hotscan, windowscan
from engdiag.logs.windowscan import PYTHON
from tests.conftest import CORPUS
from tests.test_hot_scan import ACCESS, ADDED, CUE_PARTS, MUTATIONS, POOL, RECEIVED

pytestmark = pytest.mark.skipif(not hotbulk.available(), reason="hyperscan does not load here")

PLAIN = [RECEIVED, ADDED, ACCESS] * 3
"""(tests/conftest.py lets every window, however small, take the hyperscan twins.)"""


def _same(data: bytes) -> tuple:
    starts = PYTHON.line_starts(data)[0]
    found = hotbulk.hot_scan(data, starts)
    assert found[:5] == hotscan.hot_scan(data, starts)[:5] and found[5] == b"", "no token id lists are cut"
    assert cuebulk.cues(data) == windowscan.cues(data)
    assert cuebulk.colour(data) == windowscan.colour(data)
    return found


def _bulk_only(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """``hotbulk.hot_scan`` with the exact twin's window-wide fallback made to fail."""
    with monkeypatch.context() as patch:
        patch.setattr(hotscan, "hot_scan", lambda *_: pytest.fail("the window went to the exact twin"))
        return hotbulk.hot_scan(data, PYTHON.line_starts(data)[0])


@pytest.mark.parametrize("case", sorted(p.parent.name for p in CORPUS.glob("*/log.txt")))
def test_it_agrees_on_the_corpus(case):
    data = (CORPUS / case / "log.txt").read_bytes()
    _same(data[: data.rfind(b"\n")] if data.endswith(b"\n") else data)


@pytest.mark.parametrize("style", [synth.Style(version="0.11.0", tp=2), synth.Style(kubectl=True, color="esc"),
                                   synth.Style(version="0.6.3"), synth.Style(compose="vllm-1", color="lost", crlf=True),
                                   synth.Style(ray=True, glue=True), synth.Style(color="caret", wrap=140)])
def test_it_agrees_on_generated_serving_across_new_year(style):
    writer = synth.Writer(style, datetime(2025, 12, 31, 23, 59, 0), 3)
    lines = list(synth.serving(writer, 2, synth.Load(prompt_len=60, request_every=0.05)))
    _same("\n".join(lines).encode())


@pytest.mark.parametrize("style", [synth.Style(version="0.11.0", tp=2), synth.Style(kubectl=True, color="esc"),
                                   synth.Style(version="0.6.3")])
def test_plain_serving_is_read_in_bulk(style, monkeypatch):
    writer = synth.Writer(style, datetime(2025, 12, 31, 23, 59, 0), 3)
    lines = list(synth.serving(writer, 2, synth.Load(prompt_len=60, request_every=0.05)))
    data = "\n".join(lines).encode()
    found = _bulk_only(data, monkeypatch)
    assert found == _same(data)
    assert len(found[0]) // 4 > len(lines) // 3 and found[4] == 1 << 1 | 1 << 12


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(POOL), min_size=1, max_size=40), st.booleans())
def test_it_agrees_on_any_window(lines, cut):
    data = "\n".join(lines).encode("utf-8", "replace")
    _same(data[: len(data) // 2] if cut and len(data) > 3 else data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.text(alphabet="\x1b^[]0123456789;mKAb( )pid=\n|,'\":", max_size=40))
def test_it_agrees_on_noise(raw, text):
    _same(raw)
    _same(text.encode())


@pytest.mark.parametrize("odd", MUTATIONS)
def test_an_odd_line_among_plain_ones_is_read_as_the_exact_twin_reads_it(odd):
    for at in (0, 4, 9):
        _same("\n".join([*PLAIN[:at], odd, *PLAIN[at:]]).encode())


@pytest.mark.parametrize("odd", [
    RECEIVED.replace("'hi'", "'a \x1b[1m b'"), RECEIVED.replace("'hi'", "'a | b'"), RECEIVED + "\r",
    RECEIVED.replace("[1, 2, 3]", "[1, 2, '3']"), RECEIVED.replace("lora_request: None.", "stop: ['x']."),
    ADDED.replace("cmpl-1.", "cmpl-1 [repeated 2x]"), ACCESS + "\r",
    "(APIServer pid=41) INFO 10-20 06:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s",
])
def test_a_line_that_breaks_no_window_guard_is_judged_on_its_own(odd, monkeypatch):
    """CR, colour codes, ``|``, quotes or a second ``[`` in a request line make that line bad, and a next line
    that is neither a plain request nor an access line sends only its predecessor to the exact classifier."""
    data = "\n".join([*PLAIN, odd, *PLAIN]).encode()
    assert _bulk_only(data, monkeypatch) == _same(data)


@pytest.mark.parametrize("user_data", ["'Added request x'", "'Received request y: z'", "'prompt_token_ids: [9]'",
                                       "'x [1m y'", "'x [repeated 2x] y'"])
def test_a_request_literal_or_a_cue_in_user_data_makes_only_its_line_bad(user_data, monkeypatch):
    """The window's literal counts then differ from the reported lines': the literals are placed on their lines,
    and only the line that holds them otherwise is classified the exact way (and found bad)."""
    data = "\n".join([*PLAIN, RECEIVED.replace("'hi'", user_data), *PLAIN]).encode()
    found = _bulk_only(data, monkeypatch)
    assert found == _same(data)
    assert found[3] == [(9, 7 if "Added" in user_data else 3)] and len(found[0]) == 4 * 2 * 6


def test_lines_over_the_cap_and_a_window_cut_inside_a_line():
    long = RECEIVED.replace("[1, 2, 3]", "[" + ", ".join(["7"] * 400_000) + "]")
    found = _same("\n".join([*PLAIN, long, *PLAIN]).encode())
    assert 400_000 in memoryview(found[2]).cast("i")
    for cut in (RECEIVED[:-5], RECEIVED[: RECEIVED.rindex("]")], ADDED):
        found = _same("\n".join([*PLAIN, cut]).encode())
        assert found[3] == [(9, 4 if cut == ADDED else 3)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CUE_PARTS), max_size=60))
def test_cues_agree_on_cue_fragments(parts):
    _same("".join(parts).encode())


@pytest.mark.parametrize("cue", ["[rank0]:", "[rank1]:[W1020 x]", "[rank[rank2]:", " NCCL ", " NCCL NCCL ", "[Stage-0]",
                                 "EngineCore_DP0 INFO ", "APIServer WARNING ", "Worker_TP1 ERROR ", "(Worker_TP0)",
                                 "\x1b[0m", "^[[1m", "[12m"])
def test_a_cue_anywhere_in_a_window_is_found_as_windowscan_finds_it(cue):
    lines = [RECEIVED, ADDED, ACCESS] * 2
    for at in range(len(lines) + 1):
        for place in (0, 30, -1):
            with_cue = [*lines]
            if at < len(lines):
                line = with_cue[at]
                with_cue[at] = line[:place] + cue + line[place:] if place >= 0 else line + cue
            else:
                with_cue.append(cue)
            _same("\n".join(with_cue).encode())


def test_a_small_window_takes_the_python_twins_and_compiles_nothing(monkeypatch):
    monkeypatch.setattr(hotbulk, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(cuebulk, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(hotbulk, "_databases", lambda: pytest.fail("compiled for a small window"))
    monkeypatch.setattr(cuebulk, "_databases", lambda: pytest.fail("compiled for a small window"))
    data = "\n".join(PLAIN).encode()
    assert hotbulk.hot_scan(data, PYTHON.line_starts(data)[0]) == (*hotscan.hot_scan(data, PYTHON.line_starts(data)[0])[:5], b"")
    assert cuebulk.cues(data) == windowscan.cues(data) and cuebulk.colour(data) == windowscan.colour(data)
