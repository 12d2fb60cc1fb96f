"""LMCache's own logger lines, in the processes of the vLLM it serves: a record with its level, time and place.

Split from ``lines.py`` like the JSON formatter's records: only lines naming LMCache import it.
"""

from __future__ import annotations

import re
from typing import Any

from engdiag.logs.events import Proc
from engdiag.logs.lines import Piece, Shape, make_stamp

_LMCACHE = re.compile(
    r"\s*(?:\[(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)[,.]\d+\] )?"
    r"LMCache (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL): ?"
)
"""LMCache's own logger, in the processes of the vLLM it serves (lmcache/logging.py ``build_format``, the same in
0.3.3, 0.4.4 and 0.5.6): ``[2026-04-02 07:50:18,315] LMCache WARNING: msg (file.py:N:logger.name)``, colour codes
around the head and the tail.  Behind vLLM's process tag the time is part of the match; without one the outer
prefix took it (``[YYYY-MM-DD HH:MM:SS,mmm] ``)."""
_LMCACHE_WHERE = re.compile(r" ?\((?P<file>[\w.-]+\.py):(?P<fl>\d+):[\w.]+\)\s*$")
"""The tail LMCache's format ends each line with: file, line and the logger's name (kept in the message: the
logger's name says which of LMCache's backends spoke, e.g. ``storage_backend.pd_backend``)."""
_TAIL = 240
"""How far from the end the tail is looked for: a file name and a dotted logger name, however long the message."""


def lmcache_piece(rest: str, proc: Proc | None, common: dict[str, Any]) -> Piece | None:
    """An LMCache logger line: a record of its own with its level, time (with the year) and file:line, like a
    vLLM one, so LMCache-only excerpts (its busy-loop and give-up warnings) are read at all."""
    match = _LMCACHE.match(rest)
    if match is None:
        return None
    msg = rest[match.end() :]
    where = _LMCACHE_WHERE.search(msg, max(len(msg) - _TAIL, 0))
    fileinfo = f"{where['file']}:{where['fl']}" if where else None
    stamp = None
    if match["y"]:
        stamp = make_stamp(int(match["mo"]), int(match["d"]), int(match["h"]), int(match["mi"]), int(match["s"]),
                           calendar=int(match["y"]))
    return Piece(shape=Shape.VLLM, msg=msg, proc=proc, level=match["level"],
                 stamp=stamp, fileinfo=fileinfo, **common)
