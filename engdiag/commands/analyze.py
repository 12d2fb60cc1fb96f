"""``engdiag analyze LOGS...``: options in, verdict out."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from engdiag.analysis.verdict import Kind
from engdiag.commands.base import guard, stderr_console, stdout_console, write_json
from engdiag.errors import ExitCode, UsageError

# NOTE: the analysis, rendering and progress modules are imported inside the command:
# `engdiag --help` and the other commands should not pay for them at start-up.

NAME = "analyze"
NO_ARGS_HELP = True
HELP = (
    "Read vLLM logs (files, directories, pipes, .gz/.bz2/.xz/.zst, - for stdin) and say whether the engine was "
    "slow, deadlocked, out of GPU memory or crashed, with the evidence and next steps."
)
FAIL_ON_CHOICES = [kind.value for kind in Kind] + ["any"]


def _maybe_terminal() -> bool:
    """Could rich take stderr for a terminal?  Only a tty, TTY_COMPATIBLE=1 or FORCE_COLOR make it one
    (rich's ``Console.is_terminal``); otherwise (a pipe, a file, a benchmark) rich is not even imported."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) or os.environ.get("TTY_COMPATIBLE") == "1" or "FORCE_COLOR" in os.environ


def _progress_bar():  # -> rich.progress.Progress | None
    if not _maybe_terminal():
        return None
    console = stderr_console()
    if not console.is_terminal:
        return None  # rich.progress is imported only when a bar is drawn: start-up stays short
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    return Progress(
        TextColumn("[bold]reading[/] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
        transient=True,
    )


def _run(paths: list[str], show_prompts: bool, jobs: int | None, window):  # -> Analysis
    from engdiag.analysis.analyze import analyze

    def note(line: str) -> None:
        stderr_console().print(f"engdiag: note: {line}", markup=False, highlight=False)

    bar = _progress_bar()
    if bar is None:
        return analyze(paths, show_prompts=show_prompts, jobs=jobs, window=window, note=note)
    tasks: dict[str, int] = {}

    def report(name: str, done: int, total: int | None) -> None:
        if name not in tasks:
            tasks[name] = bar.add_task(name, total=total)
        bar.update(tasks[name], completed=done)

    with bar:
        return analyze(paths, show_prompts=show_prompts, progress=report, jobs=jobs, window=window, note=note)


def command(
    paths: Annotated[list[str], typer.Argument(help="Log files, directories or - for stdin.", metavar="LOGS...")],
    json: Annotated[bool, typer.Option("--json", help="Print one JSON document (docs/json-schema.md).")] = False,
    show_prompts: Annotated[
        bool, typer.Option("--show-prompts", help="Show prompt and output text (redacted by default).")
    ] = False,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            help=f"Exit 10 when the verdict is this kind (repeatable): {', '.join(FAIL_ON_CHOICES)}.",
        ),
    ] = None,
    tail: Annotated[
        str | None, typer.Option("--tail", help="Only the last N lines (5000) or bytes (200MiB) of each input.")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Skip what comes before this time ('10-22 09:30' or ISO).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Stop after this time.")] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Worker processes for big plain files (default: the CPUs).")
    ] = None,
) -> None:
    """Analyse logs."""
    with guard():
        wanted = set(fail_on or [])
        unknown = wanted - set(FAIL_ON_CHOICES)
        if unknown:
            raise UsageError(f"--fail-on takes {', '.join(FAIL_ON_CHOICES)}; got {', '.join(sorted(unknown))}")
        from engdiag.logs.window import Window, parse_tail, parse_time

        tail_lines, tail_bytes = parse_tail(tail) if tail else (None, None)
        window = Window(
            tail_lines=tail_lines,
            tail_bytes=tail_bytes,
            since=parse_time(since, "--since") if since else None,
            until=parse_time(until, "--until") if until else None,
        )
        if window.since is not None and window.until is not None and window.since.key > window.until.key:
            raise UsageError(f"--since {since!r} is after --until {until!r}: no line can be in between",
                             hint="swap them (times are compared within one year)")
        if jobs is not None and jobs < 1:
            raise UsageError("--jobs must be at least 1")
        result = _run(paths, show_prompts, jobs, window)
        from engdiag.timeouts.advice import window_flags, windowed

        result = windowed(result, window_flags(tail, since, until))  # printed steps read the same part
        if json:  # each renderer imported only when used: the terminal one pulls in rich (~25 ms)
            from engdiag.render.analysis_doc import analysis_doc
            from engdiag.render.jsonout import dumps

            write_json(dumps(analysis_doc(result)))
        else:
            from engdiag.render.analysis_view import analysis_view

            stdout_console().print(analysis_view(result))
        if not result.found_vllm:
            stderr_console().print(
                "engdiag: no vLLM lines found in the input (verdict unknown)\n"
                "  hint: pass the vLLM server's own log (stdout of `vllm serve`, kubectl logs, journald)",
                markup=False,
            )
            raise typer.Exit(int(ExitCode.INPUT))
        kind = result.verdict.kind.value
        if kind in wanted or ("any" in wanted and kind != Kind.HEALTHY.value):
            raise typer.Exit(int(ExitCode.FINDING))
