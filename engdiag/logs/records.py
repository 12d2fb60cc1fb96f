"""Pieces → records: a logger record together with its traceback or hard-wrapped tail.

Whether a piece continues the record before it depends only on that piece and
the one before (``joins``).  Keeping the rule local is what lets the bulk scanner
find a record's start and end around a match without reading the whole log, and
still build exactly the records the line-by-line path builds.  A paste cut at one width
has its rows joined into lines before they are cut into pieces (``LineScanner``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from engdiag.logs.lines import Piece, Shape

MAX_RECORD_PIECES = 400
"""Pieces kept per record; a longer traceback keeps its first ones (bounded memory)."""

_TRACEBACKISH = re.compile(
    r"""\s
    |Traceback\ \(most\ recent\ call\ last\)
    |File\ "
    |frame\ \#\d+:
    |\.\.\.<\d+\ lines>\.\.\.
    |[~^]+\s*$
    |[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)\b(?:\([\w.]+\))?(?::|$)
    |(?:[a-z_]\w*\.)+[A-Z]\w*(?:\([\w.]+\))?:\ 
    """,
    re.VERBOSE,
)
_CHAINED = ("The above exception was", "During handling of the above exception")
_OWN_RECORD = (Shape.BAR, Shape.ACCESS, Shape.GLOG, Shape.NCCL)
_WRAP_WIDTH = 80
"""A bare line after a line at least this wide may be its hard-wrapped tail."""
_WRAP_STARTS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_,.;:)]}%")
"""How a hard-wrapped tail starts: mid-word or mid-sentence, never a new statement."""
_GLOG_TAIL_STARTS = frozenset("0123456789,.;:)]}%")
"""How the hard-wrapped tail of a glog line starts: mid-number or mid-list."""
_DATED = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
"""A line opening with a full date and time is a record of its own (a harness's or client's logger between
vLLM's lines: tt-tensor-cache-generation-exceeds-1200s-health-wait), never a wrapped tail."""
_SHELL_REPORT = re.compile(r"Killed\b|(?:[\w./-]+: )?line \d+: +\d+ ")
"""The shell's report of its job ("Killed", "bash: line 1:  1234 Killed   python …"): its own line, never a tail."""
_RUNTIME_ABORT = re.compile(r"libc\+\+abi: |terminate called after throwing an instance of ")
"""The C++ runtime reporting an exception nothing caught, just before it aborts the process (libc++'s and
libstdc++'s wordings): a line of its own, never a tail (metal-command-buffer-oom-guidellm: after a stats line)."""
_WRAP_ENDS = frozenset(",:;=([{-")
"""How a line cut mid-sentence ends: a separator that promises more."""
_FRAME_ENDS = re.compile(r'^\s*File "[^"\n]+", line \d+, in [\w<>.]+\s*$')
"""A traceback frame's whole header: the line after it is the frame's statement, even where the paste lost the
indent that marks it (verl-multinode-vllm-init-kv-blocks-allreduce-timeout: ``… in determine_num_available_blocks``
| ``dist.all_reduce(…)``, which a wrap join made ``…blocksdist.all_reduce(…)``)."""
_NAME_TAIL = re.compile(r"\w+\s*$")
"""A word alone: the rest of a frame header the paste cut inside its function's name (``in _allo`` | ``cate``)."""


class Join(str, Enum):
    """How a piece continues the record before it."""

    TRACEBACK = "traceback"
    WRAP = "wrap"


def tracebackish(msg: str) -> bool:
    """Does the message look like a line of a Python traceback or C++ exception?"""
    return _TRACEBACKISH.match(msg) is not None


def joins(prev: Piece, cur: Piece) -> Join | None:
    """How ``cur`` continues the record that ``prev`` belongs to, if it does."""
    if cur.shape in _OWN_RECORD:
        return None
    if prev.shape in _OWN_RECORD:
        # a paste cut at a fixed width splits glog lines too ("WorkNCCL(SeqNum=385" | "6, OpType=…":
        # openrlhf-vllm-weight-sync-group-docker-bridge-ip-unreachable); a tail that starts a word may be a
        # line of its own ("frame #0: …"), so only a tail starting with a digit or punctuation joins
        return Join.WRAP if prev.shape is Shape.GLOG and cur.msg[:1] in _GLOG_TAIL_STARTS and _hard_wrapped(prev, cur) else None
    blank = not cur.msg.strip()
    prev_blank = not prev.msg.strip()
    if cur.shape is Shape.VLLM:
        if prev.header is not None and prev.header == cur.header and (blank or tracebackish(cur.msg)):
            return Join.TRACEBACK
        return None
    if cur.shape is Shape.LEVEL:
        return None
    if cur.proc != prev.proc:
        return Join.WRAP if _hard_wrapped(prev, cur) else None
    if blank:
        return Join.TRACEBACK if not prev_blank and tracebackish(prev.msg) else None
    if cur.msg.startswith(_CHAINED):
        return Join.TRACEBACK
    if prev_blank:
        return None
    if _FRAME_ENDS.search(prev.msg) and not _NAME_TAIL.match(cur.msg):
        return Join.TRACEBACK
    if _word_wrapped(prev, cur):
        return Join.WRAP
    if tracebackish(cur.msg):
        return Join.TRACEBACK
    return Join.WRAP if _hard_wrapped(prev, cur) or _open_call(prev, cur) else None


def _open_call(prev: Piece, cur: Piece) -> bool:
    """A line left inside an open parenthesis after a comma goes on in the next, however short it is
    (omni-bagel-vae-patch-parallel-allreduce-timeout: ``WorkNCCL(SeqNum=115, …, NumelOut=71680,`` |
    ``Timeout(ms)=600000) ran for 600035 milliseconds before timing out.``, re-wrapped by the reporter)."""
    msg = prev.msg.rstrip()
    return (cur.shape is Shape.BARE and cur.proc is None and msg.endswith(",")
            and msg.count("(") > msg.count(")") and not _DATED.match(cur.msg))


def _word_wrapped(prev: Piece, cur: Piece) -> bool:
    """A long line cut just before a space: the tail keeps that one space (``tokens/s,`` | `` Running: 34``).

    A traceback indents by two or more (``  File``, ``    code``), so one space then a word is a wrap.
    """
    msg = cur.msg
    return (cur.shape is Shape.BARE and cur.proc is None and prev.width >= _WRAP_WIDTH
            and msg[:1] == " " and msg[1:2] not in ("", " ", "\t"))


def _hard_wrapped(prev: Piece, cur: Piece) -> bool:
    """A terminal or paste cut a long line: the tail has no prefix and goes on mid-sentence."""
    return (
        cur.shape is Shape.BARE
        and cur.proc is None
        and prev.width >= _WRAP_WIDTH
        and bool(prev.msg.strip())
        and (cur.msg[:1] in _WRAP_STARTS or prev.msg.rstrip(" ")[-1:] in _WRAP_ENDS)
        and not _DATED.match(cur.msg)
        and not _SHELL_REPORT.match(cur.msg)
        and not _RUNTIME_ABORT.match(cur.msg)
    )


@dataclass(slots=True)
class Record:
    """One logical record: its first piece and the pieces that continue it."""

    source: str
    pieces: list[Piece] = field(default_factory=list)
    kinds: list[Join | None] = field(default_factory=list)
    dropped: int = 0
    """Continuation pieces beyond ``MAX_RECORD_PIECES`` that were not kept."""

    @property
    def head(self) -> Piece:
        """The first piece."""
        return self.pieces[0]

    def add(self, piece: Piece, kind: Join | None) -> None:
        """Keep a continuation piece (or count it once the record is full)."""
        if len(self.pieces) >= MAX_RECORD_PIECES:
            self.dropped += 1
            return
        self.pieces.append(piece)
        self.kinds.append(kind)

    def text(self) -> tuple[str, list[int]]:
        """The record as text (wraps joined, traceback lines on new lines) and piece offsets."""
        parts: list[str] = []
        offsets: list[int] = []
        position = 0
        for piece, kind in zip(self.pieces, self.kinds, strict=True):
            separator = "\n" if kind is Join.TRACEBACK else ""
            position += len(separator)
            parts.append(separator + piece.msg)
            offsets.append(position)
            position += len(piece.msg)
        return "".join(parts), offsets


class Assembler:
    """Group a stream of pieces into records, one piece at a time."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._record: Record | None = None
        self._prev: Piece | None = None

    @property
    def empty(self) -> bool:
        """No record is open (nothing fed yet, or just finished)."""
        return self._record is None

    def feed(self, piece: Piece) -> Record | None:
        """Add the next piece; return the record it closed, if it started a new one."""
        prev, self._prev = self._prev, piece
        record = self._record
        if record is not None and prev is not None:
            kind = joins(prev, piece)
            if kind is not None:
                record.add(piece, kind)
                return None
        self._record = Record(self._source, [piece], [None])
        return record

    def finish(self) -> Record | None:
        """The last open record, at the end of the input."""
        record, self._record, self._prev = self._record, None, None
        return record
