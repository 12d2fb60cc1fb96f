"""The only module that opens log inputs: files, directories, pipes, FIFOs and stdin.

Inputs are streamed in bounded pieces, never read whole; a line longer than
``MAX_LINE_BYTES`` keeps its first part and the rest is skipped as it streams
by.  Compression (gzip, also nested; bzip2; xz; zstd) and UTF-16/32 are
recognised by their first bytes (``engdiag.logs.unzip``).  Pipes, FIFOs and
``<(...)`` stream like stdin; character and block devices are refused before
anything is read (``/dev/zero`` would never end).  Every way an input can fail
becomes an ``InputError`` with a next step.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from engdiag.errors import InputError, NoLogsFound
from engdiag.logs.unzip import Unsupported, codec_of, read_errors, read_head, text_encoding, unwrap

MAX_LINE_BYTES = 1 << 20
"""Bytes kept of one line; a 64 MiB line costs 1 MiB of memory, not 64."""
LOG_SUFFIXES = (".log", ".txt", ".out", ".gz", ".bz2", ".xz", ".zst")
STDIN = "-"
_TOOLS = {".gz": ("gzip", "zcat"), ".bz2": ("bzip2", "bzcat"), ".xz": ("xz", "xzcat"), ".zst": ("zstd", "zstdcat")}
"""How a truncated file is named and read as far as it goes, by its usual suffix."""


@dataclass(frozen=True, slots=True)
class LogInput:
    """One input: a regular file (``seekable``), a pipe or FIFO by path, or ``-`` for stdin."""

    name: str
    path: Path | None
    seekable: bool = True
    """A regular file: it can be peeked, split and read from the end. Pipes and stdin cannot."""


def _stat_failure(raw: str, error: OSError) -> InputError:
    if error.errno == errno.ELOOP:
        return InputError(
            f"{raw}: symbolic link loop (a link in the path points back to itself)",
            hint=f"fix the link; see where it points: ls -l {raw}",
        )
    if error.errno == errno.ENOENT and os.path.islink(raw):
        return InputError(
            f"{raw}: broken symbolic link (it points to {os.readlink(raw)}, which does not exist)",
            hint="point the link at the log, or pass the log's own path",
        )
    if isinstance(error, PermissionError):
        return InputError(f"{raw}: permission denied", hint="run as a user who can read the file, or with sudo")
    if error.errno == errno.ENOENT:
        return InputError(f"{raw}: no such file or directory")
    return InputError(f"{raw}: cannot read ({error.strerror or error})")


def _classify(raw: str) -> LogInput | None:
    """A ``LogInput`` for a non-directory path, None for a directory; devices refused."""
    try:
        mode = os.stat(raw).st_mode
    except OSError as error:
        raise _stat_failure(raw, error) from error
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "character" if stat.S_ISCHR(mode) else "block"
        raise InputError(
            f"{raw}: a {kind} device, not a log (reading it might never end)",
            hint="pass a log file, or pipe the log in: command | engdiag analyze -",
        )
    return LogInput(raw, Path(raw), seekable=stat.S_ISREG(mode))


def expand(paths: list[str]) -> list[LogInput]:
    """Files as given, directories searched recursively for log files, ``-`` for stdin."""
    inputs: list[LogInput] = []
    for raw in paths:
        if raw == STDIN:
            inputs.append(LogInput(STDIN, None, seekable=False))
            continue
        found = _classify(raw)
        if found is not None:
            inputs.append(found)
            continue
        files = sorted(p for p in Path(raw).rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES))
        if not files:
            raise NoLogsFound(f"{raw}: directory holds no {', '.join('*' + s for s in LOG_SUFFIXES)} file")
        inputs.extend(LogInput(str(p), p) for p in files)
    return inputs


def _failure(name: str, error: BaseException) -> InputError:
    if isinstance(error, InputError):
        return error
    if isinstance(error, Unsupported):
        return InputError(str(error), hint="decompress it first, then pass the plain log")
    if isinstance(error, PermissionError):
        return InputError(
            f"{name}: permission denied", hint="run as a user who can read the file, or with sudo"
        )
    if isinstance(error, EOFError):
        codec, cat = next(
            (found for suffix, found in _TOOLS.items() if name.endswith(suffix)), ("compressed", "zcat -f")
        )
        return InputError(
            f"{name}: {codec} stream is truncated (the file was cut off or is still being written)",
            hint=f"analyse the part that is there: {cat} {name} 2>/dev/null | engdiag analyze -",
        )
    if isinstance(error, OSError) and error.errno is not None:
        return InputError(f"{name}: cannot read ({error.strerror or error})")
    return InputError(
        f"{name}: damaged compressed data ({error})",
        hint="check that the file was copied completely, or decompress it by hand to see where it breaks",
    )


def _stdin() -> BinaryIO:
    raw = sys.stdin.buffer if sys.stdin is not None else None
    if raw is None:
        raise InputError("stdin is closed", hint="pipe a log in, or name a file")
    return raw  # type: ignore[return-value]


@dataclass(frozen=True)
class Opened:
    """An open input: its text as UTF-8 bytes, and whether that is the file itself (seekable)."""

    stream: BinaryIO
    plain: bool
    layers: tuple[str, ...] = ()


@contextmanager
def open_input(log: LogInput) -> Iterator[Opened]:
    """Open an input; compression and UTF-16/32 are undone by their first bytes."""
    errors = (*read_errors(), Unsupported)
    try:
        if log.path is None:
            stream, layers = unwrap(_stdin(), log.name)
            yield Opened(stream, False, tuple(layers))
            return
        with open(log.path, "rb") as handle:
            if log.seekable:
                head = read_head(handle)
                handle.seek(0)
                if codec_of(head) is None and text_encoding(head) is None:
                    if log.name.endswith(".gz") and head:
                        raise InputError(
                            f"{log.name}: named .gz but not gzip-compressed",
                            hint="rename it without .gz if it is plain text",
                        )
                    yield Opened(handle, True)
                    return
            stream, layers = unwrap(handle, log.name)  # type: ignore[arg-type]
            yield Opened(stream, False, tuple(layers))
    except InputError:
        raise
    except errors as error:
        raise _failure(log.name, error) from error


@contextmanager
def open_binary(log: LogInput) -> Iterator[BinaryIO]:
    """The input's text as a binary stream (see ``open_input``)."""
    with open_input(log) as opened:
        yield opened.stream


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
    except read_errors() as error:
        raise _failure(name, error) from error


def _skip_rest_of_line(stream: BinaryIO) -> int:
    skipped = 0
    while True:
        rest = stream.readline(MAX_LINE_BYTES)
        skipped += len(rest)
        if not rest or rest.endswith(b"\n"):
            return skipped


def count_lines(path: Path, end: int) -> int:
    """Newlines in the first ``end`` bytes of a file (the line number a byte range starts after).

    A byte range's worker waits for this before it scans: with the C scanner the file
    is mapped and counted without a copy (~10x faster than reading it and ``bytes.count``),
    16 MiB at a time (a mapped page counts in the process's RSS while it is mapped).
    """
    if end <= 0:
        return 0
    counter = _native_newlines()
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if counter is not None:
            total, end = 0, min(end, size)
            for offset in range(0, end, _MAPPED):
                length = min(_MAPPED, end - offset)
                with mmap.mmap(handle.fileno(), length, access=mmap.ACCESS_READ, offset=offset) as mapped:
                    total += counter(mapped, length)
            return total
        total = 0
        while end > 0:
            block = handle.read(min(end, 16 << 20))
            if not block:
                break
            total += block.count(b"\n")
            end -= len(block)
        return total


_MAPPED = 16 << 20
"""Bytes of a file mapped at once by ``count_lines`` (a multiple of every page size)."""


def _native_newlines():  # -> Callable[[Buffer, int], int] | None
    try:
        from engdiag.logs._scan import newlines  # type: ignore[import-not-found]
    except ImportError:
        return None
    return newlines


def is_plain(log: LogInput) -> bool:
    """A regular file whose bytes are the text itself (it can be split, tailed and bisected)."""
    if log.path is None or not log.seekable:
        return False
    with open(log.path, "rb") as handle:
        head = read_head(handle)
    return codec_of(head) is None and text_encoding(head) is None


def file_size(log: LogInput) -> int | None:
    """Size in bytes of a file input, if it has one."""
    try:
        return os.stat(log.path).st_size if log.path is not None and log.seekable else None
    except OSError:
        return None
