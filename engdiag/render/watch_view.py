"""Watch records → a live panel for people, or one JSON line per record for machines."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from engdiag.render.common import envelope, inert
from engdiag.render.spark import sparkline
from engdiag.units import format_duration, plural
from engdiag.watch.judge import State, Verdict
from engdiag.watch.watcher import Record, Watcher

STATE_STYLE = {
    State.UNKNOWN: "bold black on white",
    State.IDLE: "bold black on cyan",
    State.NO_PROGRESS_YET: "bold black on yellow",
    State.ALIVE: "bold black on green",
    State.SLOW: "bold black on yellow",
    State.DEAD: "bold white on red",
}


def _count(value: float | None) -> int | float | None:
    """Request counts are whole numbers even when a gauge reports 15.0."""
    return int(value) if value is not None and float(value).is_integer() else value


def verdict_doc(verdict: Verdict) -> dict[str, Any]:
    return {
        "state": verdict.state.value,
        "since_progress_s": None if verdict.since_progress_s is None else round(verdict.since_progress_s, 1),
        "timeout_s": round(verdict.timeout_s, 1),
        "heartbeat_s": round(verdict.heartbeat_s, 1),
        "in_flight": _count(verdict.in_flight),
        "prompt_len": verdict.prompt_len,
        "tokens_per_sec": round(verdict.tokens_per_sec, 1),
        "reason": verdict.reason,
    }


def record_doc(record: Record) -> dict[str, Any]:
    """One JSON line: ``type`` is state, heartbeat, snapshot or on_dead."""
    doc = envelope("engdiag.watch", record.at)
    doc |= {"type": record.kind, "previous": record.previous.value if record.previous else None}
    doc |= verdict_doc(record.verdict)
    if record.detail:
        doc["detail"] = record.detail
    return doc


def live_view(watcher: Watcher, verdict: Verdict, history: list[str]) -> RenderableType:
    """The panel redrawn every round."""
    line = Text()
    line.append(f" {verdict.state.value.upper()} ", style=STATE_STYLE[verdict.state])
    line.append(f"  {inert(verdict.reason)}")
    quiet = "never" if verdict.since_progress_s is None else format_duration(verdict.since_progress_s)
    numbers = Text(
        f"no progress for {quiet}   adaptive timeout {format_duration(verdict.timeout_s)} "
        f"(prompt {plural(verdict.prompt_len, 'token')} at {verdict.tokens_per_sec:,.0f} tokens/s)   "
        f"heartbeat {verdict.heartbeat_s:.0f} s   in flight {_count(verdict.in_flight) if verdict.in_flight is not None else '?'}"
    )
    rows: list[RenderableType] = [line, numbers]
    if watcher.generation:
        rows.append(Text(f"generation tok/s {sparkline(list(watcher.generation))}  last {watcher.generation[-1]:,.1f}"))
    kv = [v for v in watcher.kv if v is not None]
    if kv:
        rows.append(Text(f"KV cache usage   {sparkline(list(watcher.kv), top=100)}  last {kv[-1]:.1f}%"))
    if watcher.last_event is not None:
        rows.append(Text(f"last log signal: {watcher.last_event.signal.value}: {inert(watcher.last_event.text[:100])}", style="dim"))
    for problem in list(watcher.problems)[-2:]:
        rows.append(Text(inert(problem), style="yellow"))
    rows += [Text(inert(item), style="dim") for item in history[-6:]]
    return Panel(Group(*rows), title="engdiag watch", subtitle="Ctrl-C to stop")
