"""What every command shares: consoles, JSON output and the error funnel.

``guard`` wraps every command body: an ``EngdiagError`` becomes one line on
stderr plus a hint and its documented exit code; Ctrl-C is 130; a closed
stdout pipe ends quietly; anything else is a bug (exit 1, the traceback only
with ``--debug``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console

from engdiag.errors import EngdiagError, ExitCode

STATE = {"debug": False}
"""Global options (set by the CLI callback)."""


def _plain() -> bool:
    """NO_COLOR (https://no-color.org) set to anything: no escape codes at all, not even bold."""
    return bool(os.environ.get("NO_COLOR"))


def stderr_console() -> Console:
    """Console for messages and progress (stdout carries only results)."""
    return Console(stderr=True, highlight=False, soft_wrap=True, color_system=None if _plain() else "auto")


def stdout_console() -> Console:
    """Console for human results on stdout."""
    return Console(highlight=False, color_system=None if _plain() else "auto")


def fail(error: EngdiagError) -> NoReturn:
    """Print one error line and its hint, then exit with the error's code."""
    console = stderr_console()
    console.print(f"engdiag: error: {error}", markup=False)
    if error.hint:
        console.print(f"  hint: {error.hint}", markup=False, style="dim")
    raise typer.Exit(int(error.exit_code))


@contextmanager
def guard() -> Iterator[None]:
    """Map every failure inside a command to its exit code (see docs/exit-codes.md)."""
    try:
        yield
    except EngdiagError as error:
        fail(error)
    except KeyboardInterrupt:
        stderr_console().print("engdiag: interrupted", markup=False)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BrokenPipeError:
        _quiet_stdout()
        raise typer.Exit(int(ExitCode.OK)) from None
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except Exception as error:
        if STATE["debug"]:
            raise
        stderr_console().print(
            f"engdiag: internal error: {error.__class__.__name__}: {error}\n"
            "  hint: this is a bug; re-run with --debug for the traceback and report it",
            markup=False,
        )
        raise typer.Exit(int(ExitCode.INTERNAL)) from None


def _quiet_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so interpreter shutdown stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def write_json(data: bytes) -> None:
    """Write a JSON document to stdout as bytes."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:  # pragma: no cover - text-only stdout
        sys.stdout.write(data.decode())
        sys.stdout.flush()
