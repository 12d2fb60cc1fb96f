"""The only module that opens log inputs: files, directories, ``.gz`` and stdin.

Inputs are streamed in bounded pieces, never read whole; a line longer than
``MAX_LINE_BYTES`` keeps its first part and the rest is skipped as it streams
by.  Every way an input can fail becomes an ``InputError`` with a next step.
"""

from __future__ import annotations

import io
import os
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from engdiag.errors import InputError, NoLogsFound
from engdiag.logs.unzip import open_gzip

MAX_LINE_BYTES = 1 << 20
"""Bytes kept of one line; a 64 MiB line costs 1 MiB of memory, not 64."""
LOG_SUFFIXES = (".log", ".txt", ".out", ".gz")
STDIN = "-"
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class LogInput:
    """One input stream: a file path or ``-`` for stdin."""

    name: str
    path: Path | None


def expand(paths: list[str]) -> list[LogInput]:
    """Files as given, directories searched recursively for log files, ``-`` for stdin."""
    inputs: list[LogInput] = []
    for raw in paths:
        if raw == STDIN:
            inputs.append(LogInput(STDIN, None))
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES)
            )
            if not found:
                raise NoLogsFound(f"{raw}: directory holds no *.log, *.txt, *.out or *.gz file")
            inputs.extend(LogInput(str(p), p) for p in found)
        elif path.exists():
            inputs.append(LogInput(raw, path))
        else:
            raise InputError(f"{raw}: no such file or directory")
    return inputs


def _failure(name: str, error: BaseException) -> InputError:
    if isinstance(error, PermissionError):
        return InputError(
            f"{name}: permission denied", hint="run as a user who can read the file, or with sudo"
        )
    if isinstance(error, EOFError):
        return InputError(
            f"{name}: gzip stream is truncated (the file was cut off or is still being written)",
            hint=f"analyse the part that is there: zcat {name} 2>/dev/null | engdiag analyze -",
        )
    if isinstance(error, zlib.error):
        return InputError(
            f"{name}: not valid gzip data ({error})",
            hint="rename the file if it is plain text, or check that it was copied completely",
        )
    return InputError(f"{name}: cannot read ({error.__class__.__name__}: {error})")


@contextmanager
def open_binary(log: LogInput) -> Iterator[BinaryIO]:
    """Open an input as a binary stream, decompressing gzip by its magic bytes."""
    try:
        if log.path is None:
            raw = sys.stdin.buffer if sys.stdin is not None else None
            if raw is None:
                raise InputError("stdin is closed", hint="pipe a log in, or name a file")
            buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
            stream: BinaryIO = buffered
            if buffered.peek(2)[:2] == _GZIP_MAGIC:
                stream = open_gzip(buffered)  # type: ignore[assignment]
            yield stream
            return
        with open(log.path, "rb") as handle:
            head = handle.read(2)
            handle.seek(0)
            if head == _GZIP_MAGIC:
                with open_gzip(handle) as unzipped:  # type: ignore[arg-type]
                    yield unzipped  # type: ignore[misc]
            elif log.name.endswith(".gz") and head:
                raise InputError(
                    f"{log.name}: named .gz but not gzip-compressed",
                    hint="rename it without .gz if it is plain text",
                )
            else:
                yield handle
    except InputError:
        raise
    except (OSError, EOFError, zlib.error) as error:
        raise _failure(log.name, error) from error


def decode_line(raw: bytes) -> str:
    """One line's bytes (without its newline) as every reader sees it: cut, CR dropped, bad UTF-8 replaced.

    The byte-range splitter, ``--since`` and ``watch`` must read lines exactly as
    ``read_lines`` does, or their records would differ from a plain scan's.
    """
    return raw[:MAX_LINE_BYTES].rstrip(b"\r").decode("utf-8", "replace")


def read_lines(
    stream: BinaryIO, name: str, *, first_line: int = 1, byte_limit: int | None = None
) -> Iterator[tuple[int, str]]:
    """Numbered lines without their line ending, invalid UTF-8 replaced.

    ``byte_limit`` stops before a line that would start past that many bytes (a
    byte range of a file); ``first_line`` numbers the first line read.
    """
    lineno = first_line - 1
    consumed = 0
    try:
        while byte_limit is None or consumed < byte_limit:
            chunk = stream.readline(MAX_LINE_BYTES)
            if not chunk:
                return
            lineno += 1
            consumed += len(chunk)
            if not chunk.endswith(b"\n"):
                consumed += _skip_rest_of_line(stream)
            yield lineno, decode_line(chunk.rstrip(b"\n"))
    except (OSError, EOFError, zlib.error) as error:
        raise _failure(name, error) from error


def _skip_rest_of_line(stream: BinaryIO) -> int:
    skipped = 0
    while True:
        rest = stream.readline(MAX_LINE_BYTES)
        skipped += len(rest)
        if not rest or rest.endswith(b"\n"):
            return skipped


def count_lines(path: Path, end: int) -> int:
    """Newlines in the first ``end`` bytes of a file (the line number a byte range starts after)."""
    total = 0
    with open(path, "rb") as handle:
        while end > 0:
            block = handle.read(min(end, 16 << 20))
            if not block:
                break
            total += block.count(b"\n")
            end -= len(block)
    return total


def is_gzip(path: Path) -> bool:
    """Does the file start with the gzip magic bytes?"""
    with open(path, "rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def file_size(log: LogInput) -> int | None:
    """Size in bytes of a file input, if it has one."""
    try:
        return os.stat(log.path).st_size if log.path is not None else None
    except OSError:
        return None
