"""What every command shares: consoles, JSON output and the error funnel.

``guard`` wraps every command body: an ``EngdiagError`` becomes one line on
stderr plus a hint and its documented exit code; Ctrl-C is 130; a closed
stdout pipe ends quietly; anything else is a bug (exit 1, the traceback only
with ``--debug``).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, NoReturn

import typer

from engdiag.errors import EngdiagError, ExitCode, OutputError

if TYPE_CHECKING:
    from rich.console import Console

STATE = {"debug": False}
"""Global options (set by the CLI callback)."""


def _plain() -> bool:
    """NO_COLOR (https://no-color.org) set to anything: no escape codes at all, not even bold."""
    return bool(os.environ.get("NO_COLOR"))


@lru_cache(maxsize=1)
def _inert_console() -> type[Console]:
    """The console class, made on first use: rich costs ~15 ms of start-up that a ``--json`` run need not pay."""
    from rich.console import Console

    class InertConsole(Console):
        """A Console that makes every text segment inert before it reaches the terminal.

        Renderers already escape input text where they lay it out (``render.common.inert``); this is the
        backstop for any that slip through: no ESC, OSC/DCS/APC, BEL or bidi override from an input can
        reach the terminal, only rich's own styling (which is not part of a segment's text).
        """

        def print(self, *objects, crop: bool = False, **kwargs) -> None:  # type: ignore[no-untyped-def,override]
            """Never crop: a command or path longer than the terminal is printed whole (the terminal wraps it)."""
            super().print(*objects, crop=crop, **kwargs)

        def _render_buffer(self, buffer):  # type: ignore[no-untyped-def]
            from rich.segment import Segment

            from engdiag.render.common import inert_keep_newlines

            return super()._render_buffer(
                seg if seg.control else Segment(inert_keep_newlines(seg.text), seg.style, seg.control) for seg in buffer
            )

    return InertConsole


def stderr_console() -> Console:
    """Console for messages and progress (stdout carries only results)."""
    return _inert_console()(stderr=True, highlight=False, soft_wrap=True, color_system=None if _plain() else "auto")


def stdout_console() -> Console:
    """Console for human results on stdout."""
    if sys.stdout is None:
        raise OutputError("stdout is closed: nothing can be written", hint=OUTPUT_HINT)
    return _inert_console()(highlight=False, color_system=None if _plain() else "auto")


def echo(text: str) -> None:
    """Plain text results on stdout (env lines, flags, YAML); the caller made them."""
    if sys.stdout is None:
        raise OutputError("stdout is closed: nothing can be written", hint=OUTPUT_HINT)
    sys.stdout.write(text)
    sys.stdout.flush()


OUTPUT_HINT = "give the command a writable stdout (a file with free space, a pipe, or the terminal)"
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EROFS})


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
    except OSError as error:
        if error.errno not in _OUTPUT_ERRNOS:
            _internal(error)
        _quiet_stdout()
        fail(OutputError(f"cannot write the output: {error.strerror or error}", hint=OUTPUT_HINT))
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except Exception as error:
        _internal(error)


def _internal(error: Exception) -> NoReturn:
    if STATE["debug"]:
        raise error
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


_JSON_INVISIBLE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def json_inert(data: bytes) -> bytes:
    """JSON keeps input text whole but escaped: C1 controls and bidi overrides (legal raw in JSON strings,
    where alone they can occur) become ``\\u`` escapes, so ``cat``-ing a document cannot reorder or hijack
    the terminal.  orjson already escapes C0 controls."""
    text = data.decode("utf-8")
    if not _JSON_INVISIBLE.search(text):
        return data
    return _JSON_INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def write_json(data: bytes) -> None:
    """Write a JSON document to stdout as bytes (made inert by ``json_inert``)."""
    if sys.stdout is None:
        raise OutputError("stdout is closed: nothing can be written", hint=OUTPUT_HINT)
    data = json_inert(data)
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:  # pragma: no cover - text-only stdout
        sys.stdout.write(data.decode())
        sys.stdout.flush()
