"""rich building blocks shared by every command's human output.

Functions return renderables; only the CLI prints them.  Colour comes from the
Console, which honours ``NO_COLOR`` and plain pipes; nothing here mutates the
environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text

from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.render.common import evidence_time, inert, serve_args

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


_WORD = re.compile(r"\S+\s*")


def wrap_words(text: Text, width: int) -> list[Text]:
    """Greedy word wrap that never splits a word: one longer than the width (a ``path:line``, a URL)
    stays whole on its own line.  (rich folds such words, or with overflow "ignore" wraps nothing.)"""
    lines: list[Text] = []
    for paragraph in text.split("\n"):
        offsets, used = [], 0
        for match in _WORD.finditer(paragraph.plain):
            word = len(match.group().rstrip())
            if used and used + word > width:
                offsets.append(match.start())
                used = 0
            used += len(match.group())
        lines.extend(part.rstrip() or part for part in paragraph.divide(offsets)) if offsets else lines.append(paragraph)
    return lines


class Hanging:
    """Prose after a marker (``1.``, ``•``): wrapped lines line up under the text, not under the marker."""

    def __init__(self, marker: str, text: str | Text, style: str = "", indent: int = 0,
                 continuation: int | None = None) -> None:
        self.lead = " " * indent + marker + (" " if marker else "")
        self.body = text if isinstance(text, Text) else Text(text, style=style)
        self.style = style
        self.continuation = len(self.lead) if continuation is None else continuation

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(20, options.max_width - max(len(self.lead), self.continuation))
        for number, line in enumerate(wrap_words(self.body, width)):
            out = Text(self.lead if number == 0 else " " * self.continuation, style=self.style, no_wrap=True,
                       overflow="ignore")
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
        line.no_wrap, line.overflow = True, "ignore"
        parts = [(f" {self.where}", "blue")] + ([(f"  {self.time}", "")] if self.time else [])
        for text, style in parts:
            if line.cell_len + len(text) > options.max_width and line.cell_len > 2:
                yield line
                line = Text("  ", no_wrap=True, overflow="ignore")  # a path longer than the width stays whole
                text = text.lstrip()
            line.append(text, style=style)
        yield line


class Whole:
    """Parts that are never broken (a time, a ``path:line``): side by side while they fit, else one a line."""

    def __init__(self, *parts: tuple[str, str]) -> None:
        self.parts = [(text, style) for text, style in parts if text]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = Text(no_wrap=True, overflow="ignore")
        for text, style in self.parts:
            if line.cell_len and line.cell_len + 2 + len(text) > options.max_width:
                yield line
                line = Text(no_wrap=True, overflow="ignore")
            line.append(("  " if line.cell_len else "") + text, style=style)
        if line.cell_len:
            yield line


class Labelled:
    """``label  value`` rows; a value's wrapped lines keep a hanging indent under it (not under the label),
    and what must stay whole (``Whole``, a command) may run past the width rather than be folded."""

    def __init__(self, rows: list[tuple[str, RenderableType]], style: str = "bold") -> None:
        self.rows = rows
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        pad = max((len(label) for label, _ in self.rows), default=0) + 2
        stacked = options.max_width - pad < 24  # a narrow terminal: each label on its own line, values under it
        indent = 2 if stacked else pad
        inner = options.update_width(max(10, options.max_width - indent))
        for label, value in self.rows:
            if stacked:
                yield Segment(label, console.get_style(self.style))
                yield Segment.line()
            body = Text(value) if isinstance(value, str) else value
            for number, line in enumerate(Segment.split_lines(console.render(body, inner))):
                lead = label.ljust(pad) if number == 0 and not stacked else " " * indent
                yield Segment(lead, console.get_style(self.style) if lead.strip() else None)
                yield from (segment for segment in line if segment.text)
                yield Segment.line()


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


def verdict_line(verdict: Verdict) -> RenderableType:
    """The first line a tired engineer reads: kind, confidence, one sentence (wrapped under an indent)."""
    kind = verdict.kind.value.upper()
    if verdict.sub_kind is not None:
        kind += f" ({verdict.sub_kind.value})"
    line = Text()
    line.append(f" {kind} ", style=KIND_STYLE[verdict.kind])
    line.append(f"  confidence {verdict.confidence:.2f}  ", style="bold")
    line.append(inert(verdict.headline))
    return Hanging("", line, continuation=2)


def evidence_table(verdict: Verdict, limit: int = 12) -> RenderableType:
    """Evidence, one block each: role, file:line and time, then the line itself and why it matters."""
    lines: list[RenderableType] = []
    for item in verdict.evidence[:limit]:
        where = inert(item.source) + (f":{item.line}" if item.line is not None else "")
        lines.append(_Head(Text(f"● {item.role.value:<11}", style=ROLE_STYLE[item.role]), where, inert(evidence_time(item))))
        lines.append(hanging("", clip(item.text), indent=2))
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
