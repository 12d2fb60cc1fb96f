"""Cut a stream into windows of whole lines, as the line reader would see them, without a list per line.

The bulk scanner searches a window at once; the windows hold about ``size`` bytes of
whole lines (``engdiag.logs.bulk.WINDOW_BYTES``), at most ``lines`` lines, every line cut
to ``MAX_LINE_BYTES`` exactly as ``inputs.read_lines`` cuts it, so that every backend
reads the lines the line scanner reads.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO

from engdiag.logs.inputs import MAX_LINE_BYTES

Starts = Callable[[bytes], tuple[bytes, int]]
"""data → (line start offsets as int64 bytes, longest line): ``windowscan.line_starts`` or its C twin."""
Fill = Callable[[Callable[[memoryview], int | None], bytes, int], tuple[bytes | None, bytes, int]]
"""(readinto, carried bytes, size) → (window or None, bytes after it, bytes read): ``_scan.read_window``."""

_ONE_LINE = array("q", [0])
"""The line starts of a last line without a newline (a buffer, as the C searches take them)."""


class Lines(Sequence[bytes]):
    """A window's lines, cut from its bytes only when asked for (no list of a million small objects)."""

    def __init__(self, data: bytes, starts: Sequence[int]) -> None:
        self._data, self._starts = data, starts

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        if index < 0:
            index += len(self._starts)
        end = self._starts[index + 1] - 1 if index + 1 < len(self._starts) else len(self._data)
        return self._data[self._starts[index] : end]


def windows(
    stream: BinaryIO, starts_of: Starts, size: int, lines: int, byte_limit: int | None = None,
    fill: Fill | None = None,
) -> Iterator[tuple[bytes, Sequence[int]]]:
    """The stream in windows of about ``size`` bytes of whole lines (at most ``lines`` lines), each line cut
    to ``MAX_LINE_BYTES`` as ``read_lines`` does, with the offsets of their line starts.

    ``fill`` (the C ``read_window``) reads each window into one object; without it a window is
    read, joined to the carried partial line and sliced (the same windows, three copies).
    """
    carry = b""
    skipping = False
    left = byte_limit
    while True:
        step = size if left is None else min(size, left)
        if fill is not None and not skipping and step > 0:
            data, carry, got = fill(stream.readinto, carry, step)
            if left is not None:
                left -= got
            if not got:
                if carry:
                    yield carry, _ONE_LINE
                return
            if len(carry) > MAX_LINE_BYTES:
                carry, skipping = carry[:MAX_LINE_BYTES], True
            if data is not None:
                yield from _by_lines(data, starts_of, lines)
            continue
        block = stream.read(step) if step > 0 else b""
        if left is not None:
            left -= len(block)
        if not block:
            if carry:
                yield carry, _ONE_LINE
            return
        if skipping:
            newline = block.find(b"\n")
            if newline == -1:
                continue
            block, skipping = block[newline:], False
        cut = block.rfind(b"\n")
        if cut == -1:
            carry += block
            if len(carry) > MAX_LINE_BYTES:
                carry, skipping = carry[:MAX_LINE_BYTES], True
            continue
        data = b"".join((carry, memoryview(block)[:cut]))  # one copy
        carry = block[cut + 1 :]
        if len(carry) > MAX_LINE_BYTES:
            carry, skipping = carry[:MAX_LINE_BYTES], True
        yield from _by_lines(data, starts_of, lines)


def _by_lines(window: bytes, starts_of: Starts, most: int) -> Iterator[tuple[bytes, Sequence[int]]]:
    """A block cut into windows of at most ``most`` lines (memory is per line as much as per byte)."""
    raw, longest = starts_of(window)
    if longest > MAX_LINE_BYTES:
        window = b"\n".join(line[:MAX_LINE_BYTES] for line in window.split(b"\n"))
        raw, longest = starts_of(window)
    starts = memoryview(raw).cast("q")
    if len(starts) <= most:
        yield window, starts
        return
    for first in range(0, len(starts), most):
        begin = starts[first]
        end = starts[first + most] - 1 if first + most < len(starts) else len(window)
        part = window[begin:end]
        yield part, memoryview(starts_of(part)[0]).cast("q")
