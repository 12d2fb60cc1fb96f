"""Year-less vLLM times: ordering within and across inputs, Dec→Jan, ties in one second."""

from __future__ import annotations

from engdiag.analysis.analyze import analyze
from engdiag.logs.clock import Clock, base_years
from engdiag.logs.events import Stamp

from tests.conftest import write_log

STALL = "(EngineCore pid=7) INFO {} [shm_broadcast.py:1] No available shared memory broadcast block found in 60 seconds."


def test_clock_rolls_into_the_next_year_once():
    clock = Clock()
    placed = [clock.place(Stamp(m, d, 0)) for m, d in ((12, 31), (12, 31), (1, 1), (1, 2))]
    assert [s.year for s in placed] == [0, 0, 1, 1]
    assert [s.key for s in placed] == sorted(s.key for s in placed)


def test_clock_keeps_a_late_december_straggler_in_the_old_year():
    clock = Clock()
    clock.place(Stamp(12, 31, 100))
    clock.place(Stamp(1, 1, 5))
    straggler = clock.place(Stamp(12, 31, 200))
    assert straggler.year == 0
    assert clock.place(Stamp(1, 1, 6)).year == 1


def test_inputs_that_start_after_new_year_get_the_next_year():
    assert base_years([Stamp(12, 31, 0), Stamp(1, 1, 0), None]) == [0, 1, 0]
    assert base_years([Stamp(3, 1, 0), Stamp(3, 2, 0)]) == [0, 0]


def test_events_across_files_are_ordered_by_time_then_file(tmp_path):
    rank0 = write_log(tmp_path / "rank0.log", [STALL.format("12-31 23:59:00"), STALL.format("01-01 00:00:30")])
    rank1 = write_log(tmp_path / "rank1.log", [STALL.format("01-01 00:00:10"), STALL.format("12-31 23:59:30")])
    events = analyze([str(rank1), str(rank0)]).timeline.events
    order = [(e.source.rsplit("/", 1)[-1], e.line) for e in events]
    assert order == [("rank0.log", 1), ("rank1.log", 2), ("rank1.log", 1), ("rank0.log", 2)]


def test_lines_in_the_same_second_keep_file_order(tmp_path):
    same = "10-22 09:00:00"
    log = write_log(
        tmp_path / "a.log",
        [
            "(APIServer pid=1) INFO 10-22 09:00:00 [launcher.py:1] Shutting down FastAPI HTTP server.",
            STALL.format(same),
            "(EngineCore pid=7) ERROR 10-22 09:00:00 [core.py:1] EngineCore encountered a fatal error.",
        ],
    )
    events = analyze([str(log)]).timeline.events
    assert [e.line for e in events] == [1, 2, 3]


def test_a_file_that_starts_in_january_after_a_december_file(tmp_path):
    december = write_log(tmp_path / "a.log", [STALL.format("12-31 23:58:00")])
    january = write_log(tmp_path / "b.log", [STALL.format("01-01 00:01:00")])
    timeline = analyze([str(january), str(december)]).timeline
    assert timeline.first_stamp.text == "12-31 23:58:00"
    assert timeline.last_stamp.text == "01-01 00:01:00"
    assert timeline.last_stamp.key > timeline.first_stamp.key
