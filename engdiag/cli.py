"""The command line: a thin typer layer that registers the commands.

Each command (``engdiag.commands.*``) parses its options, calls the library and
picks a renderer; errors become exit codes in ``engdiag.commands.base.guard``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from engdiag import __version__
from engdiag.commands import analyze, recommend, snapshot, watch
from engdiag.commands.base import STATE

app = typer.Typer(
    name="engdiag",
    help="Say why a vLLM engine died or hangs — slow, deadlocked or out of GPU memory — and what to set.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from engdiag.logs.engines import describe_backend

        typer.echo(f"engdiag {__version__} (log scanner: {describe_backend()})")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """engdiag: vLLM EngineCore incident diagnosis."""
    STATE["debug"] = debug


for _module in (analyze, snapshot, recommend, watch):
    app.command(name=_module.NAME, help=_module.HELP, no_args_is_help=_module.NO_ARGS_HELP)(_module.command)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except SystemExit as done:
        exit_now(done.code)
        raise


def exit_now(code: object) -> None:
    """End the process with ``code`` (a ``SystemExit``'s) without the interpreter's teardown of every module and
    object (~10 ms of an ``analyze`` run, after its answer is written), when nothing needs that teardown: no
    other thread, no exit handler, an exit status (not a message) and standard streams that flush.  Otherwise
    return, and the process ends the usual way."""
    import atexit
    import os
    import sys
    import threading

    pending = getattr(atexit, "_ncallbacks", None)
    if threading.active_count() != 1 or pending is None or pending() != 0:
        return
    if code is not None and not isinstance(code, int):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: closed when the process started (``>&-``)
                stream.flush()
    except (OSError, ValueError):
        return  # the usual way reports it, as it always did
    os._exit(code or 0)
