"""rich building blocks shared by every command's human output.

Functions return renderables; only the CLI prints them.  Colour comes from the
Console, which honours ``NO_COLOR`` and plain pipes; nothing here mutates the
environment.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from engdiag.analysis.verdict import Kind, Role, Verdict

KIND_STYLE = {
    Kind.SLOW: "bold black on yellow",
    Kind.DEADLOCKED: "bold white on red",
    Kind.FRAGMENTED: "bold white on magenta",
    Kind.CRASHED: "bold white on red",
    Kind.HEALTHY: "bold black on green",
    Kind.UNKNOWN: "bold black on white",
}
ROLE_STYLE = {
    Role.ROOT_CAUSE: "bold red",
    Role.SUPPORTING: "yellow",
    Role.CONSEQUENCE: "dim",
    Role.CONTEXT: "cyan",
}


def clip(text: str, limit: int = 240) -> str:
    """Shorten long evidence text for the terminal (JSON keeps it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def heading(title: str) -> Text:
    """A section title."""
    return Text(f"\n{title}", style="bold underline")


def verdict_line(verdict: Verdict) -> Text:
    """The first line a tired engineer reads: kind, confidence, one sentence."""
    kind = verdict.kind.value.upper()
    if verdict.sub_kind is not None:
        kind += f" ({verdict.sub_kind.value})"
    line = Text()
    line.append(f" {kind} ", style=KIND_STYLE[verdict.kind])
    line.append(f"  confidence {verdict.confidence:.2f}  ", style="bold")
    line.append(verdict.headline)
    return line


def evidence_table(verdict: Verdict, limit: int = 12) -> RenderableType:
    """Evidence, one block each: role, file:line and time, then the line itself and why it matters."""
    lines: list[RenderableType] = []
    for item in verdict.evidence[:limit]:
        head = Text()
        head.append(f"● {item.role.value:<11}", style=ROLE_STYLE[item.role])
        head.append(f" {item.source}" + (f":{item.line}" if item.line is not None else ""), style="blue")
        if item.time:
            head.append(f"  {item.time}")
        lines.append(head)
        lines.append(Text(f"  {clip(item.text)}", overflow="fold"))
        if item.note:
            lines.append(Text(f"  ↳ {item.note}", style="italic dim"))
    if len(verdict.evidence) > limit:
        lines.append(Text(f"… {len(verdict.evidence) - limit} more (--json lists all)", style="dim"))
    return Group(*lines)


def reasons(verdict: Verdict) -> RenderableType:
    """Notes, what ruled the other verdicts out, and what would decide it."""
    lines: list[RenderableType] = []
    for note in verdict.notes:
        lines.append(Text(f"• {note}"))
    for item in verdict.ruled_out:
        lines.append(Text(f"✗ {item}", style="dim"))
    if verdict.undecided:
        lines.append(Text(f"? would decide it: {verdict.undecided}", style="yellow"))
    return Group(*lines)


def steps(verdict: Verdict) -> RenderableType:
    """Numbered next steps with the exact command to run or setting to change."""
    lines: list[RenderableType] = []
    for number, step in enumerate(verdict.next_steps, start=1):
        lines.append(Text(f"{number}. {step.text}"))
        if step.command and step.command.startswith("--"):
            lines.append(Text(f"   vllm serve … {step.command}", style="bold green"))
        elif step.command:
            lines.append(Text(f"   $ {step.command}", style="bold green"))
    return Group(*lines) if lines else Text("nothing to do", style="dim")
