"""Follow a log as it grows, like ``tail -F``: rotation (a new file at the path) and truncation survive.

Reads only what was appended since the last call, in bounded pieces; a partial
last line waits for its newline (a line longer than ``MAX_LINE_BYTES`` is cut, as
``analyze`` does).
"""

from __future__ import annotations

import os
from pathlib import Path

from engdiag.logs.inputs import MAX_LINE_BYTES, decode_line

READ_BYTES = 4 << 20
"""Most bytes read per call, so one huge burst cannot stall the loop."""


class LogFollower:
    """New complete lines of one file each time ``read`` is called."""

    def __init__(self, path: Path, from_start: bool = False) -> None:
        self.path = path
        self._handle = None
        self._inode: tuple[int, int] | None = None
        self._position = 0
        self._partial = b""
        self.lineno = 0
        self.reopened = 0
        self._open(at_end=not from_start)

    def _open(self, at_end: bool) -> None:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
        except OSError:
            self._handle = None
            return
        stat = os.fstat(handle.fileno())
        if self._handle is not None:
            self._handle.close()
        self._handle = handle
        self._inode = (stat.st_dev, stat.st_ino)
        self._position = stat.st_size if at_end else 0
        self._partial = b""
        if at_end:
            self.lineno = 0

    def _rotated_or_truncated(self) -> bool:
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        if (stat.st_dev, stat.st_ino) != self._inode:
            return True
        return stat.st_size < self._position

    def read(self) -> list[tuple[int, str]]:
        """Lines appended since the last call, numbered from 1 in the current file."""
        if self._handle is None:
            self._open(at_end=False)
            if self._handle is None:
                return []
        lines = self._drain()
        if self._rotated_or_truncated():
            self.reopened += 1
            self.lineno = 0
            self._open(at_end=False)
            lines += self._drain()
        return lines

    def _drain(self) -> list[tuple[int, str]]:
        assert self._handle is not None
        self._handle.seek(self._position)
        data = self._handle.read(READ_BYTES)
        self._position += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n")
        if cut == -1:
            self._partial = data[-MAX_LINE_BYTES:] if len(data) > MAX_LINE_BYTES else data
            return []
        self._partial = data[cut + 1 :]
        out = []
        for raw in data[:cut].split(b"\n"):
            self.lineno += 1
            out.append((self.lineno, decode_line(raw)))
        return out

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
