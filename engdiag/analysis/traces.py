"""vLLM's call tracer (``VLLM_TRACE_FUNCTION=1``): where each traced thread was when its trace stopped.

vLLM's troubleshooting guide offers the tracer for hangs: every process and thread writes each call into and
return from vLLM's code to its own file, so a thread that hangs stops writing.  A trace's *last* line is
therefore a capture of that thread — the call it never returned from, or the caller it was back in — while
every earlier ``Call to all_reduce`` returned and says nothing.  Traces pasted together (``tail`` of several
files) are told apart by the lines between them.
"""

from __future__ import annotations

import re

from engdiag.analysis.draft import Draft, Role
from engdiag.analysis.facts import Facts
from engdiag.analysis.signal_kinds import is_progress
from engdiag.analysis.verdict import Kind, Verdict
from engdiag.logs.events import Event, Peer, Signal
from engdiag.logs.patterns.captures import COLLECTIVES, COMPILERS

_PID = re.compile(r"for_process_(\d+)_thread_")
"""The tracer's file name: ``VLLM_TRACE_FUNCTION_for_process_{pid}_thread_{tid}_at_{time}.log``."""


def trace_ends(facts: Facts) -> list[Event]:
    """The last line of each trace: consecutive tracer lines of one input are one trace."""
    points = sorted(facts.t.of(Signal.TRACE_CALL), key=lambda e: (e.source, e.line))
    return [e for e, after in zip(points, [*points[1:], None])
            if after is None or after.source != e.source or after.line != e.line + 1]


def _where(event: Event) -> str:
    return event.data.detail or "" if isinstance(event.data, Peer) else ""


_PATH = re.compile(r"\(\S*?([^/\s()]+/[^/\s()]+:\d+)\)")


def _short(where: str) -> str:
    """Traced files by their last two parts (``(flashinfer/prefill.py:2131)``), for a headline."""
    return _PATH.sub(r"(\1)", where)


def _in_call(event: Event) -> bool:
    """The trace's last line is a call that never returned (not a return into its caller)."""
    return isinstance(event.data, Peer) and event.data.peer == "call"


def _in_collective(event: Event) -> bool:
    """The trace stopped in a call into a collective (one that waits for every rank)."""
    name = _where(event).split(" ", 1)[0]
    return _in_call(event) and any(c in name for c in COLLECTIVES)


def stopped_traces(facts: Facts) -> Verdict | None:
    """Judge the traces by where they stopped.

    A trace that stops inside a collective is a rank waiting for every other; traces that stop elsewhere
    name the ranks it waits for (v040-pcie-tp4-custom-allreduce-gather-ipc-meta-trace-hang: two workers'
    traces end in ``_gather_ipc_meta``, the driver's after ``init_device``).  A trace stopped in a compiler
    is working.  Anywhere else, one trace cannot tell a hang from a long call
    (vllm-b200-flashinfer-fa2-prefill-random-hang: it ends inside FlashInfer's prefill ``run``).
    """
    ends = trace_ends(facts)
    if not ends or any(is_progress(e) for e in facts.after(ends[0])):
        return None
    waiting = [e for e in ends if _in_collective(e)]
    if waiting:
        others = [e for e in ends if not _in_collective(e)]
        where = _short(_where(waiting[0]).split(",", 1)[0])
        elsewhere = f"; {len(others)} stop elsewhere — the ranks it waits for" if others else ""
        which = "the call trace stops" if len(ends) == 1 else f"{len(waiting)} of {len(ends)} call traces stop"
        draft = Draft(facts, Kind.DEADLOCKED, 0.6,
                      f"deadlocked: {which} inside {where} — a collective that waits for every rank{elsewhere}")
        draft.cite(waiting[0], Role.ROOT_CAUSE, "this thread never returned from the collective")
        for event in waiting[1:3]:
            draft.cite(event, Role.SUPPORTING)
        for event in others[:3]:
            draft.cite(event, Role.SUPPORTING, "stopped outside the collective")
        draft.undecided = "every rank's trace (or engdiag snapshot on each worker): the one not in the collective is the culprit"
        draft.step("rule out CUDA graphs and custom all-reduce around the collective",
                   "--enforce-eager --disable-custom-all-reduce")
        return draft.done()
    last = ends[-1]
    where = _where(last)
    if any(folder in where for folder in COMPILERS):
        draft = Draft(facts, Kind.SLOW, 0.45,
                      f"slow: a call trace stops in compilation, inside {_short(where.split(',', 1)[0])} — "
                      "first-use compilation takes minutes; working, not stuck")
        draft.cite(last, Role.ROOT_CAUSE, "the thread's last traced call: compiling")
        draft.undecided = "whether the trace still grows a minute later (a stuck thread's trace stops for good)"
        return draft.done()
    draft = Draft(facts, Kind.UNKNOWN, 0.2,
                  f"unknown: a call trace stops {'inside' if _in_call(last) else 'in'} {_short(where)} — where "
                  "its thread was when tracing stopped; one trace cannot tell a hang from a long call")
    draft.cite(last, Role.ROOT_CAUSE, "the thread's last traced call")
    draft.undecided = ("whether the trace file still grows (ls -l it twice, a minute apart): a hung thread's stops "
                       "for good; or a live stack of that process (engdiag snapshot)")
    pid = _PID.search(last.source)
    if pid:
        draft.step("capture that process's live stacks, native frames included", f"engdiag snapshot {pid[1]} --native")
    return draft.done()
