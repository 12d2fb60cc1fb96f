"""Analysis → what a person reads: verdict, evidence, timeline, memory, prompts, next steps."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engdiag.analysis.analyze import Analysis
from engdiag.logs.events import CudaOom, Event, Memory, Signal
from engdiag.render.common import dated, inert, single_year
from engdiag.render.human import Labelled, Whole, clip, evidence_table, heading, reasons, steps, verdict_line
from engdiag.render.spark import sparkline
from engdiag.units import format_bytes, format_duration, plural


def _when(event: Event) -> str:
    """The event's time with its year when known; marked when it is the previous line's (none of its own,
    or an impossible one)."""
    if event.stamp is None:
        return ""
    return f"≈ {event.stamp.dated} (no time of its own)" if event.inherited_time else event.stamp.dated


def _where(event: Event | None) -> RenderableType:
    if event is None:
        return Text("—")
    return Group(Whole((_when(event), ""), (f"{inert(event.source)}:{event.line}", "blue")),
                 Text(clip(event.text, 160), style="dim"))


def _timeline(analysis: Analysis) -> RenderableType:
    t = analysis.timeline
    incident = analysis.incident
    rows: list[tuple[str, RenderableType]] = []
    span = f"{t.first_stamp.dated} → {t.last_stamp.dated}" if t.first_stamp and t.last_stamp else "no timestamps"
    lines = sum(i.lines for i in analysis.inputs)
    rows.append(("log span", f"{span}  ({plural(lines, 'line')}, {plural(len(analysis.inputs), 'input')})"))
    rows.append(("last progress", _where(incident.last_progress)))
    rows.append(("first anomaly", _where(incident.first_anomaly)))
    same = incident.fatal is not None and incident.fatal is incident.first_anomaly
    rows.append(("fatal", Text("the first anomaly") if same else _where(incident.fatal)))
    if incident.no_progress_seconds is not None:
        lower = incident.fatal is not None and incident.fatal.inherited_time
        rows.append(("no progress for", ("≥ " if lower else "") + format_duration(incident.no_progress_seconds)
                     + (" (the fatal line has no readable time of its own)" if lower else "")))
    silent = [row for row in t.proc_last if row.stamp is not None]
    if len(silent) > 1:
        names = ", ".join(f"{row.proc.label} {row.stamp.dated}" for row in silent[:6] if row.stamp)
        rows.append(("last line per process", names + (" …" if len(silent) > 6 else "")))
    return Labelled(rows)


def _memory(analysis: Analysis) -> RenderableType | None:
    t = analysis.timeline
    rows: list[RenderableType] = []
    startup = {e.data.name: e.data for e in t.of(Signal.MEMORY) if isinstance(e.data, Memory)}
    if startup:
        parts = [f"{m.name.replace('_', ' ')} {_number(m.value)} {m.unit}" for m in startup.values()]
        rows.append(Text("start-up: " + "; ".join(parts[:6])))
    for event in t.of(Signal.CUDA_OOM)[:2]:
        oom = event.data if isinstance(event.data, CudaOom) else CudaOom()
        if oom.tried is not None:
            rows.append(
                Text(
                    f"CUDA OOM at {event.source}:{event.line}: tried {format_bytes(oom.tried)}, free {format_bytes(oom.free)}, "
                    f"allocated {format_bytes(oom.allocated)}, reserved-but-unallocated {format_bytes(oom.reserved_unallocated)}"
                )
            )
        else:
            rows.append(Text(f"CUDA OOM at {event.source}:{event.line} (no allocator numbers)"))
    kv = [s.gpu_kv_pct for _, s in t.stats]
    if any(v is not None for v in kv):
        known = [v for v in kv if v is not None]
        rows.append(
            Text(f"KV cache usage  {sparkline(kv, top=100)}  peak {max(known):.1f}%, last {known[-1]:.1f}%")
        )
    preempt = t.counts.get(Signal.PREEMPTION, 0) + sum(1 for _, s in t.stats if s.preemptions)
    if preempt:
        rows.append(Text(f"preemptions reported in {plural(preempt, 'line')}"))
    return Group(*rows) if rows else None


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


def _throughput(analysis: Analysis) -> RenderableType | None:
    stats = analysis.timeline.stats
    if not stats:
        return None
    gen = [s.generation_tps for _, s in stats]
    running = [s.running for _, s in stats]
    return Group(
        Text(f"generation tok/s {sparkline(gen)}  last {gen[-1]:,.1f}"),
        Text(f"running reqs     {sparkline(running)}  last {running[-1]}"),
    )


def _prompts(analysis: Analysis) -> RenderableType | None:
    p = analysis.timeline.prompt_lengths
    if not p.count:
        return None
    bound = " (lower bounds: the log truncated some token lists)" if p.lower_bound else ""
    return Text(
        f"{plural(p.count, 'prompt')}: p50 {p.p50:,}, p95 {p.p95:,}, p99 {p.p99:,}, max {p.max:,} tokens{bound}"
    )


def _seconds(value: float | None) -> str:
    return format_duration(int(value)) if value is not None else "—"


def _activities(analysis: Analysis) -> RenderableType | None:
    """What each process was doing, for how long, and whether it still advanced."""
    model = analysis.model
    if not model.activities:
        return None
    year = single_year(analysis.timeline)
    table = Table(box=None, padding=(0, 1), show_edge=False)
    for column in ("phase", "start", "took", "state", "detail"):
        table.add_column(column, overflow="fold", no_wrap=column in ("start", "took"))
    for a in model.activities:
        state = "advancing" if a.advancing else ("finished" if a.finished else "stopped")
        style = "yellow" if a.advancing else ("green" if a.finished else "")
        table.add_row(a.name, dated(a.start, year) or "—", _seconds(a.seconds), Text(state, style=style), clip(a.detail, 90))
    if model.startup_seconds:
        return Group(table, Text(f"start-up so far: {_seconds(model.startup_seconds)}", style="dim"))
    return table


def _waits(analysis: Analysis) -> RenderableType | None:
    """Who waited on whom, and whether that wait could ever be satisfied."""
    waits = analysis.model.waits
    if not waits:
        return None
    table = Table(box=None, padding=(0, 1), show_edge=False)
    for column in ("waiter", "waits on", "via", "for", "can complete?"):
        table.add_column(column, overflow="fold")
    for w in waits[:8]:
        answer = {True: Text("yes — the party is working", style="yellow"),
                  False: Text("never", style="red"), None: Text("unknown", style="dim")}[w.satisfiable]
        answer.append(f"\n{clip(w.why, 90)}", style="dim")
        table.add_row(w.waiter, w.on, w.via, _seconds(w.seconds), answer)
    return table


def _guard(analysis: Analysis) -> RenderableType | None:
    """The timeout that fired: whose, its limit, what it guarded."""
    g = analysis.model.guard
    if g is None:
        return None
    limit = f"{g.limit_s:g} s ({g.limit_origin})" if g.limit_s is not None else f"not printed — {g.limit_origin}"
    rows: list[tuple[str, RenderableType]] = [("guard", f"{g.name} ({g.owner})"), ("limit", limit),
                                               ("guarded", g.guarded)]
    if g.knob:
        rows.append(("knob", g.knob))
    fired = next((e for e in analysis.timeline.events if e.line == g.line and e.source == g.source), None)
    rows.append(("fired", Whole((_when(fired) if fired is not None else g.time or "", ""),
                                (f"{inert(g.source)}:{g.line}", "blue"))))
    return Labelled(rows)


def analysis_view(analysis: Analysis) -> RenderableType:
    """Everything, in reading order."""
    verdict = analysis.verdict
    parts: list[RenderableType] = [verdict_line(verdict)]
    if not analysis.found_vllm:
        lines = sum(i.lines for i in analysis.inputs)
        parts.append(Text(f"read {plural(lines, 'line')} from {plural(len(analysis.inputs), 'input')}; none is a vLLM line"))
        return Group(*parts, heading("Why"), reasons(verdict))
    if verdict.evidence:
        parts += [heading("Evidence"), evidence_table(verdict)]
    parts += [heading("Timeline"), _timeline(analysis)]
    for title, block in (
        ("Phases", _activities(analysis)),
        ("Waits", _waits(analysis)),
        ("Timeout that fired", _guard(analysis)),
        ("Memory", _memory(analysis)),
        ("Throughput before the incident", _throughput(analysis)),
        ("Prompt lengths", _prompts(analysis)),
    ):
        if block is not None:
            parts += [heading(title), block]
    parts += [heading("Why"), reasons(verdict), heading("Next steps"), steps(verdict)]
    return Group(*parts)
