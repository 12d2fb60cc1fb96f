"""Snapshot → a tree a person reads: process → role → threads (stuck ones first), GPUs, verdict."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from engdiag.render.human import clip, evidence_table, heading, reasons, steps, verdict_line
from engdiag.snapshot.capture import Snapshot
from engdiag.snapshot.model import IDLE_POLLING, Motion, NvmlState, ProcessReport, ThreadReport, named_frames
from engdiag.snapshot.waitfor import Picture, pictures
from engdiag.units import format_bytes, plural

_MOTION_STYLE = {Motion.STUCK: "bold red", Motion.MOVING: "green", Motion.WAITING: "dim", Motion.ONCE: "yellow"}
_IDLE_SHOWN = 3


def _thread_line(thread: ThreadReport) -> Text:
    text = Text()
    text.append(f"{thread.motion.value:<7}", style=_MOTION_STYLE[thread.motion])
    text.append(f" {thread.category.value:<14}")
    text.append(f" {clip(thread.name) if thread.name else thread.thread_id}", style="bold")
    if thread.gil:
        text.append(" [GIL]", style="dim")
    if thread.progress:
        text.append(f"  ({thread.progress})", style="green")
    for index, frame in enumerate(named_frames(thread.frames)):
        text.append(f"\n    {frame.where}", style="dim" if thread.category in IDLE_POLLING else "")
        if frame.code and index == 0:
            text.append(f"  │ {clip(frame.code, 70)}", style="italic dim")
    return text


def _process_node(report: ProcessReport) -> Tree:
    info = report.info
    label = Text()
    label.append(f"pid {info.pid}", style="bold")
    ranks = report.ranks.label()
    label.append(f"  {report.role.value}{' ' + ranks if ranks else ''}", style="cyan")
    label.append(f"  {clip(' '.join(info.cmdline), 70) or clip(info.name)}", style="dim")
    if report.pause_ms:
        label.append(f"  paused ≤ {max(report.pause_ms):.0f} ms/sample", style="dim")
    if report.cpu_s is not None and report.wall_s:
        label.append(f"  CPU {report.cpu_s:.2f} s in {report.wall_s:.1f} s", style="dim")
    node = Tree(label)
    if report.error:
        node.add(Text(f"not sampled: {report.error}", style="yellow"))
        return node
    ordered = sorted(report.threads, key=lambda t: (t.motion is not Motion.STUCK, t.category in IDLE_POLLING))
    idle = [t for t in ordered if t.category in IDLE_POLLING and t.motion is not Motion.STUCK]
    for thread in ordered:
        if thread in idle[_IDLE_SHOWN:]:
            continue
        node.add(_thread_line(thread))
    if len(idle) > _IDLE_SHOWN:
        node.add(Text(f"… {len(idle) - _IDLE_SHOWN} more idle threads", style="dim"))
    return node


def _gpus(state: NvmlState) -> RenderableType:
    if not state.available:
        return Text(f"no NVML: {state.reason}", style="yellow")
    table = Table(box=None, padding=(0, 1))
    for column in ("GPU", "name", "memory used", "util", "temp", "power", "processes"):
        table.add_column(column)
    for gpu in state.gpus:
        f = gpu.fields
        memory = f.get("memory") or {}
        used = f"{format_bytes(memory.get('used'))} / {format_bytes(memory.get('total'))}" if memory else "?"
        util = f.get("utilization_pct")
        procs = ", ".join(f"{p['pid']}{'*' if p.get('in_tree') else ''}" for p in gpu.processes) or "—"
        table.add_row(
            str(f.get("index")), str(f.get("name")), used,
            f"{util['gpu']}%" if isinstance(util, dict) else "?",
            f"{f.get('temperature_c')}°C" if f.get("temperature_c") is not None else "?",
            f"{f.get('power_w'):.0f} W" if f.get("power_w") is not None else "?",
            procs,
        )
    parts: list[RenderableType] = [Text(f"driver {state.driver}, CUDA {state.cuda_version}", style="dim"), table]
    if state.pid_note:
        parts.append(Text(state.pid_note, style="yellow"))
    return Group(*parts)


def _picture(picture: Picture) -> Text:
    text = Text()
    text.append(f"{picture.kind.replace('_', ' ')}: ", style="bold")
    text.append("; ".join(f"{op}: {', '.join(s.name for s in ranks)}" for op, ranks in picture.ops))
    if picture.culprits:
        text.append("  ← not there: ", style="bold red")
        text.append(", ".join(f"{s.name} {s.state}" for s in picture.culprits), style="red")
    text.append(f"  (same op in every sample: {picture.consistency:.0%} of the waiting ranks)", style="dim")
    return text


def _pauses(snapshot: Snapshot) -> str:
    """The longest pause of any target per sample (``--native`` on torch processes makes it long)."""
    worst = max(((max(p.pause_ms), p.info.pid) for p in snapshot.processes if p.pause_ms), default=None)
    if worst is None:
        return ""
    native = ", native frames" if snapshot.options.native else ""
    return f"; longest pause per target {worst[0]:.0f} ms (pid {worst[1]}{native})"


def snapshot_view(snapshot: Snapshot) -> RenderableType:
    """Verdict first, then the process tree, GPUs, reasons and next steps."""
    verdict = snapshot.verdict
    root = Tree(Text(f"tree of pid {snapshot.root_pid}: {plural(len(snapshot.processes), 'process', 'processes')}, "
                     f"{plural(snapshot.options.samples, 'sample')} {snapshot.options.interval_s:g} s apart"
                     f"{_pauses(snapshot)}", style="bold"))
    for report in snapshot.processes:
        root.add(_process_node(report))
    parts: list[RenderableType] = [verdict_line(verdict)]
    if verdict.evidence:
        parts += [heading("Evidence"), evidence_table(verdict)]
    waits = pictures(snapshot.processes)
    if waits:
        parts += [heading("Wait-for")] + [_picture(picture) for picture in waits]
    parts += [heading("Processes"), root, heading("GPUs"), _gpus(snapshot.nvml)]
    if snapshot.xid.lines:
        parts += [heading("Kernel log (Xid)")] + [Text(line) for line in snapshot.xid.lines]
    if verdict.notes or verdict.ruled_out or verdict.undecided:
        parts += [heading("Why"), reasons(verdict)]
    parts += [heading("Next steps"), steps(verdict)]
    return Group(*parts)
