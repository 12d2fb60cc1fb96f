"""rich building blocks shared by every command's human output.

Functions return renderables; only the CLI prints them.  Colour comes from the
Console, which honours ``NO_COLOR`` and plain pipes; nothing here mutates the
environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.render.common import inert, serve_args

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
    """Input text for the terminal: made inert (``render.common.inert``) and shortened (JSON keeps it whole)."""
    text = inert(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Hanging:
    """Prose after a marker (``1.``, ``•``): wrapped lines line up under the text, not under the marker."""

    def __init__(self, marker: str, text: str | Text, style: str = "", indent: int = 0) -> None:
        self.lead = " " * indent + marker + (" " if marker else "")
        self.body = text if isinstance(text, Text) else Text(text, style=style)
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(20, options.max_width - len(self.lead))
        for number, line in enumerate(self.body.wrap(console, width)):
            out = Text(self.lead if number == 0 else " " * len(self.lead), style=self.style)
            out.append_text(line.rstrip() or line)
            yield out


def hanging(marker: str, text: str | Text, style: str = "", indent: int = 0) -> RenderableType:
    """A ``Hanging`` paragraph."""
    return Hanging(marker, text, style, indent)


class _Head:
    """An evidence head: role, ``path:line`` never broken, time; parts move to the next line when they do not fit."""

    def __init__(self, role: Text, where: str, time: str) -> None:
        self.role = role
        self.where = where
        self.time = time

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = self.role.copy()
        parts = [(f" {self.where}", "blue")] + ([(f"  {self.time}", "")] if self.time else [])
        for text, style in parts:
            if line.cell_len + len(text) > options.max_width and line.cell_len > 2:
                yield line
                line = Text("  ")
                text = text.lstrip()
            line.append(text, style=style)
        line.no_wrap, line.overflow = True, "ignore"
        yield line


_TOKEN = re.compile(r"""(?:[^\s'"]+|'[^']*'|"(?:\\.|[^"\\])*")+""")


class Command:
    """A command to paste: never wrapped mid-token; past the width it breaks between words with ``\\``."""

    def __init__(self, prefix: str, command: str, style: str = "bold green") -> None:
        self.prefix = prefix
        self.command = command
        self.style = style

    def lines(self, width: int) -> Iterator[str]:
        body, _, comment = self.command.partition("   # ")
        words = _TOKEN.findall(body) + ([f"# {comment}"] if comment else [])
        pad = " " * (len(self.prefix) + 2)
        line = self.prefix + (words[0] if words else "")
        for word in words[1:]:
            if len(line) + 1 + len(word) + 2 > width:
                yield line + " \\"
                line = pad + word
            else:
                line += " " + word
        yield line

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(options.max_width):
            yield Text(line, style=self.style, no_wrap=True, overflow="ignore")


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
    line.append(inert(verdict.headline))
    return line


def evidence_table(verdict: Verdict, limit: int = 12) -> RenderableType:
    """Evidence, one block each: role, file:line and time, then the line itself and why it matters."""
    lines: list[RenderableType] = []
    for item in verdict.evidence[:limit]:
        where = inert(item.source) + (f":{item.line}" if item.line is not None else "")
        lines.append(_Head(Text(f"● {item.role.value:<11}", style=ROLE_STYLE[item.role]), where, inert(item.time or "")))
        lines.append(Text(f"  {clip(item.text)}", overflow="fold"))
        if item.note:
            lines.append(hanging("↳", inert(item.note), "italic dim", indent=2))
    if len(verdict.evidence) > limit:
        lines.append(Text(f"… {len(verdict.evidence) - limit} more (--json lists all)", style="dim"))
    return Group(*lines)


def reasons(verdict: Verdict) -> RenderableType:
    """Notes, what ruled the other verdicts out, and what would decide it."""
    lines: list[RenderableType] = []
    for note in verdict.notes:
        lines.append(hanging("•", inert(note)))
    for item in verdict.ruled_out:
        lines.append(hanging("✗", inert(item), "dim"))
    if verdict.undecided:
        lines.append(hanging("?", f"would decide it: {inert(verdict.undecided)}", "yellow"))
    return Group(*lines)


def steps(verdict: Verdict) -> RenderableType:
    """Numbered next steps with the exact command to run or setting to change."""
    lines: list[RenderableType] = []
    for number, step in enumerate(verdict.next_steps, start=1):
        lines.append(hanging(f"{number}.", inert(step.text)))
        shell, args = serve_args(step.command)
        if args:
            lines.append(Command("   vllm serve … ", inert(args)))
        elif shell:
            lines.append(Command("   $ ", inert(shell)))
    return Group(*lines) if lines else Text("nothing to do", style="dim")
