"""Where a big log can be cut so that byte ranges scan independently and still give the exact events.

A range may start only at a line that opens a new record (``joins`` says it does
not continue the line before) and carries its own time, so that no record and
no borrowed timestamp spans the cut.  Only local reads: a window after each
target offset.
"""

from __future__ import annotations

from pathlib import Path

from engdiag.logs.inputs import decode_line
from engdiag.logs.lines import Piece, pieces
from engdiag.logs.records import joins

WINDOW_BYTES = 4 << 20
"""How far past a target offset a cut is looked for before giving up on splitting."""


def _pieces(raw: bytes, lineno: int) -> list[Piece]:
    """The pieces ``read_lines`` + ``pieces`` would make of one raw line (without its newline)."""
    return pieces(decode_line(raw), lineno)


def _cut_after(handle: object, target: int) -> int | None:
    """Offset of the first safe line start after ``target``, or None within the window."""
    handle.seek(target)  # type: ignore[attr-defined]
    data: bytes = handle.read(WINDOW_BYTES)  # type: ignore[attr-defined]
    first_newline = data.find(b"\n")
    if first_newline == -1:
        return None
    position = first_newline + 1
    previous: list[Piece] | None = None
    while True:
        end = data.find(b"\n", position)
        if end == -1:
            return None
        current = _pieces(data[position:end], 0)
        if previous is not None and current[0].stamp is not None and joins(previous[-1], current[0]) is None:
            return target + position
        previous = current
        position = end + 1


COUNT_SHARE = 0.035
"""What counting a byte's newlines costs against scanning it: every range but the first starts by counting the
lines before it (``inputs.count_lines``, 16-18 ms for 340 MB against ~0.48 s to scan them on a 2-core EPYC)."""
FIRST_SHARE = 0.035
"""What the first range's process does besides scanning, against scanning an equal share: it imports what the
run needs after the scan while the other ranges finish (``read_logs``' ``idle``, ~15 ms against ~0.48 s)."""


def targets(size: int, parts: int) -> list[int]:
    """Where to cut ``size`` bytes so that every range takes about as long, its other work included: the first
    gets ``1 - FIRST_SHARE`` of an equal share, range k ``1 - COUNT_SHARE * (its start)`` (two ranges: halves)."""
    starts: list[float] = []
    at = 0.0
    for k in range(parts):
        starts.append(at)
        at += 1 - (FIRST_SHARE if k == 0 else COUNT_SHARE * at)
    return [round(size * start / at) for start in starts[1:]]


def cut_points(path: Path, parts: int) -> list[int] | None:
    """Byte offsets that cut the file into ``parts`` ranges at record starts, or None if it cannot be."""
    size = path.stat().st_size
    points: list[int] = []
    with open(path, "rb") as handle:
        for target in targets(size, parts):
            point = _cut_after(handle, target)
            if point is None or (points and point <= points[-1]) or point >= size:
                return None
            points.append(point)
    return points
