"""Two clocks in one paste: a CI runner's UTC before vLLM's local time.  The wrapper's clock times every line;
a line with vLLM's time alone (a paste begun inside a runner's line) is moved onto it by the zone between them
(ci-llava-image-embeds-slow-shard-load-timeout: a 48 s excerpt once read as a 421-minute start-up)."""

from __future__ import annotations

from engdiag.analysis.analyze import analyze
from engdiag.logs.events import Stamp
from engdiag.logs.paste import paste_of

_WAIT = "(APIServer pid=7958) DEBUG 08-11 {t} [utils.py:750] Waiting for 1 local, 0 remote core engine proc(s) to start."
_HEAD = "Loading safetensors checkpoint shards:  67% 2/3 [02:41<01:19, 79.54s/it]" + _WAIT.format(t="12:38:36")


def _wrapped(utc: str, local: str) -> str:
    return f"[2025-08-11T{utc}Z] " + _WAIT.format(t=local)


def _span(tmp_path, lines: list[str]) -> int:
    path = tmp_path / "ci.log"
    path.write_text("\n".join(lines) + "\n")
    source = analyze([str(path)]).timeline.sources[0]
    return source.last.key - source.first.key


def test_a_line_with_vllms_time_alone_joins_the_wrappers_clock(tmp_path):
    lines = [_HEAD, _wrapped("19:38:46", "12:38:46"), _wrapped("19:39:16", "12:39:16")]
    assert paste_of("\n".join(lines).encode(), True).skew == 7 * 3600
    assert _span(tmp_path, lines) == 40


def test_every_line_on_the_wrappers_clock_needs_no_shift(tmp_path):
    lines = [_wrapped("19:38:36", "12:38:36"), _wrapped("19:39:16", "12:39:16")]
    assert paste_of("\n".join(lines).encode(), True).skew is None
    assert _span(tmp_path, lines) == 40


def test_two_stamps_that_are_not_one_moment_teach_no_zone(tmp_path):
    lines = [_HEAD, _wrapped("13:15:46", "12:38:46")]  # 37 minutes apart: not a time zone
    assert paste_of("\n".join(lines).encode(), True).skew is None


def test_a_shift_crosses_days_and_months():
    assert Stamp(3, 1, 3600).shifted(-7200).text == "02-29 23:00:00"
    assert Stamp(8, 31, 80000).shifted(7 * 3600).text == "09-01 05:13:20"


def test_vllms_time_alone_after_the_wrapper_began_is_another_log_not_a_cut(tmp_path):
    lines = [_HEAD, _wrapped("19:38:46", "12:38:46"), _WAIT.format(t="12:39:06")]
    assert paste_of("\n".join(lines).encode(), True).skew is None
