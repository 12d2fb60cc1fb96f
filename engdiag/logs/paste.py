"""Undo what a paste did to every line of a log: an indentation, doubled line breaks, a cut at one width.

A log pasted as a markdown code block indented by four spaces, or quoted inside an indented list item,
carries the same leading whitespace on every line.  Left in place it hides what is read only at a line's
start (a quote's ``>`` before NCCL's lines, kubectl's stamp) and makes the tail of a hard-wrapped line
(``    : 0 reqs, Pending: 0 reqs, GPU KV cache usage: 5.3%``) look like an indented continuation, so the
stats line it ends is never read.  The whitespace every non-blank line of the input's head shares is
removed from each line that starts with it.  A log never indents all of its lines: a pasted traceback
keeps its own indentation, because its ``Traceback (most recent call last):`` line (or any header) is not
indented, so nothing is shared.  A paste cut from inside one indented block (a traceback's frames, a
py-spy dump) loses only what all its lines share: their order and relative indentation stay, and every
corpus case of that shape gets the same verdict either way.

A paste that doubled every line break (a web page copied with a blank line after each line) is read
with the one blank line after each line skipped: a blank line ends a record, so left in place it cut every
traceback and every hard-wrapped line in two.  The head must show it on every line (no two lines of text
together, at least three of them); a blank line beyond the doubled one still ends a record.

A paste that a terminal or a paste box cut at one width shows it as lines piled up at exactly that width,
each followed by the rest of its line; the rest may start with anything (``OpType=_ALLGATHER_BA`` |
``SE, NumelIn=…``).  Such pastes are read line by line, and a row of that width is joined to the next row
that can be its rest (``rest_of``) before either is cut into pieces: the cut may fall inside a rule's literal
or a header (``INFO 08-09 0`` | ``3:02:26 metrics.py:406]``).

A search over several files (``grep -r``, ``grep -n``) puts the name of each line's file, and its line number,
before the line (``vllm_p3.log:(Worker_DP3_TP1_EP25 pid=649) ERROR 08-29 …``): left there, it hides the
record's header, so the line loses its time and process.  Slurm's ``srun --label`` puts the task's number
before each line of a job's output (``0: INFO 05-14 23:13:00 [block_pool.py:264] …``), ``grep -n`` over one
file the line's number (``988:INFO …``): the same.  Where most lines of the head start with such a label, it is
removed from every line that has it.

A call trace (``VLLM_TRACE_FUNCTION=1``: every line ``<date time> Call to f in file:N`` or ``… Return from …``)
is no paste, but its head says what it is the same way: only its last lines say where its thread stopped, and
such files grow to gigabytes, so ``source`` reads only their tail.

Line numbers are kept (only bytes within lines go, and skipped lines keep their numbers), so evidence
still points at the line the user sees.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from engdiag.logs.inputs import decode_line
from engdiag.logs.lines import Shape, clocks, pieces
from engdiag.logs.unzip import CHUNK, Converted, Prepended, read_head

HEAD_BYTES = 64 << 10
"""Bytes of an input's head in which the shared indentation is looked for."""
_WHITESPACE = b" \t"
_WRAP_MIN_WIDTH = 60
"""Narrower than this, a run of equally long lines is no sign of a wrap."""
_WRAP_MAX_WIDTH = 400
"""Wider than a terminal or a paste box gets: equally long lines that wide are not a wrap."""
_WRAP_MIN_LINES = 2
"""Different lines the head needs at exactly its widest width, most followed by their tails, to be taken as cut."""
_WRAP_TERMINALS = frozenset({80, 100, 120, 132, 160, 200})
"""The widths terminals and paste boxes cut at: a whole paste with one row exactly that wide and its rest below it
is cut there (a6000-tp2-iommu-acs-stall wrapped at 120 columns: NCCL's ``… - Init `` | ``COMPLETE``)."""
_WRAP_SPIKE = 10
"""A cut makes a spike: at least as many lines exactly at the width as in the ten characters below it."""
_NOT_TAILS = ("Traceback", "  ", "\t", "File ")
"""How a line after a full-width line starts when it is a traceback, not the rest of the line (which may
start with the one space the cut fell before)."""
_OWN_HEADER = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d|^\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
"""A vLLM header inside a line behind some prefix (a harness's ``[SERVER] ``), or a line opening with a full
date and time: a line of its own, never the rest of the line above (tt-tensor-cache-generation-exceeds-1200s-
health-wait: a client's and a server's lines, two of each of equal width, read as a paste cut at that width)."""
_SPACED_MIN_LINES = 3
"""Lines of text the head needs, each followed by a blank line, to be taken for a double-spaced paste."""
_NAMED = rb"(?:\./)?[\w./-]*?\.(?:log|txt|out|err)(?::\d+)?[:-]"
"""grep's name of the file a line came from (and its line number, with ``-n``; ``-`` on a context line)."""
_LABELS = {
    "grep": _NAMED,
    "grep -n": rb"\d{1,7}:(?!\d\d[:.])",
    "srun": rb" {0,6}\d{1,7}:(?: |(?=[\r\n])|$)",
}
"""What a tool put before every line, by the tool: grep's file names; grep's line number over one file
(``988:INFO``, ``6:  File …``); srun's task number and one space (``0: ``) — never a time's ``12:34:56`` or
``12:34.5``.  Read as ``grep -n``'s only where some line has its number right before the text (``_TIGHT_NUMBER``):
its number alone would leave srun's space on every line, srun's number and space take a frame's first space."""
_TIGHT_NUMBER = re.compile(rb"\d{1,7}:(?!\d\d[:.])[^ \t]")
_LABEL_AT = {name: re.compile(label) for name, label in _LABELS.items()}
_LABEL_AFTER_NEWLINE = {name: re.compile(rb"\n(?:" + label + rb")") for name, label in _LABELS.items()}
_TRACE_LINE = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ (?:Call to|Return from) [\w<>.]+ in ")
"""vllm/logger.py's ``_trace_calls`` line (tail's ``==> file <==`` headers between traces aside)."""
_GREP_MIN_LINES = 3
_NAME_MAX = 4096
"""Longest file name and line number grep puts before a line: a line is let through in parts only past it."""
"""Lines of text the head needs, two in three of them behind a file name, to be taken for grep's output."""


@dataclass(frozen=True)
class Paste:
    """What pasting did to every line of an input, as its head shows."""

    indent: bytes = b""
    """Leading whitespace every line was given (removed as the input streams)."""
    double_spaced: bool = False
    """Every line was followed by a blank line (one blank line after each line of text is skipped)."""
    wrap: int | None = None
    """The width every long line was cut at (a terminal's, a paste box's): a line that wide goes on below."""
    skew: int | None = None
    """Seconds from vLLM's own clock to the wrapper's, when some lines carry both stamps and some vLLM's alone (a
    paste that begins inside a CI runner's line): added to the lone own stamps so that one clock times them all."""
    label: str | None = None
    """Most lines start with a label a tool put there (``_LABELS``: grep's name of their file in a search over
    several files, ``srun --label``'s task, ``grep -n``'s line): removed where it is."""
    trace: bool = False
    """The input is vLLM's call trace (every line of the head a traced call or return): its tail is what counts."""

    @property
    def untouched(self) -> bool:
        return (not self.indent and not self.label and not self.double_spaced and self.wrap is None and self.skew is None
                and not self.trace)


def paste_of(head: bytes, whole: bool) -> Paste:
    """How the paste whose first bytes are ``head`` was shaped (``whole``: ``head`` is all of it)."""
    lines = head.split(b"\n")
    if not whole:
        lines = lines[:-1]
    lines = [line.rstrip(b"\r") for line in lines]
    indent = _shared_indent([line for line in lines if line.strip()])
    own = [line.removeprefix(indent) for line in lines if line.strip()]
    label = _label(own)
    if label:
        own = [line[m.end():] if (m := _LABEL_AT[label].match(line)) else line for line in own]
    text = [decode_line(line) for line in own]
    wrap = _wrap_width(text, whole)
    return Paste(indent, _double_spaced(lines), wrap, _clock_skew(_rejoined(text, wrap)), label, _call_trace(own))


def _call_trace(lines: list[bytes]) -> bool:
    """Every line of text (``tail``'s headers aside), three at least, is a traced call or return."""
    text = [line for line in lines if not (line.startswith(b"==> ") and line.endswith(b" <=="))]
    return len(text) >= _GREP_MIN_LINES and all(_TRACE_LINE.match(line) for line in text)


def _label(lines: list[bytes]) -> str | None:
    """The tool whose label two in three lines of text start with (grep's ``--`` between groups aside)."""
    text = [line for line in lines if line != b"--"]
    if len(text) < _GREP_MIN_LINES:
        return None
    tight = any(_TIGHT_NUMBER.match(line) for line in text)  # srun never writes one; grep -n on most lines
    return next((name for name, at in _LABEL_AT.items() if (tight or name != "grep -n")
                 and 3 * sum(1 for line in text if at.match(line)) >= 2 * len(text)), None)


_SKEW_LINES = 50
"""Timed lines of the head looked at for two clocks: a paste begun inside a wrapped line shows it at once."""
_SAME_MOMENT_S = 120
"""Two stamps on one line within this of a whole number of quarter hours apart are one moment on two clocks."""


def _clock_skew(lines: list[str]) -> int | None:
    """How far the wrapper's clock runs from vLLM's (a multiple of 15 minutes, a time zone), learnt from the first
    line that carries both, when only lines before it carry vLLM's alone; else None (one clock times every line).

    ci-llava-image-embeds-slow-shard-load-timeout: the paste's first line, begun inside a Buildkite line, has
    vLLM's 12:38:36 (UTC-7) only, the next ones Buildkite's 19:38:46Z before vLLM's 12:38:46: a start-up that
    took a minute read as 421.
    """
    skew: int | None = None
    alone = False
    for line in [line for line in lines if ":" in line][:_SKEW_LINES]:  # a line without a colon has no time
        outer, own = clocks(line)
        if outer is not None and own is not None and skew is None:
            apart = outer.key - own.key
            zone = round(apart / 900) * 900
            if abs(apart - zone) > _SAME_MOMENT_S or zone == 0:
                return None
            skew = zone
        elif outer is None and own is not None:
            if skew is not None:
                return None  # vLLM's time alone after the wrapper began: not one wrapped log (logs pasted together)
            alone = True
    return skew if alone else None


def _wrap_width(lines: list[str], whole: bool = False) -> int | None:
    """The width of the head's longest lines, when at least two different ones are exactly that wide (and no
    fewer than are a little narrower: a cut piles lines up at its width) and most of them are followed by a
    bare line that does not start a traceback or a frame: the rest of a line cut there.

    A whole paste (its head is all of it) cut at a terminal's width may show one such row only: a paste of a
    few lines has few long ones.  A longer log keeps the stricter test, so that its bulk scan is never given up
    for one line that happens to be that wide."""
    widest = max(map(len, lines), default=0)
    cut = [i for i, line in enumerate(lines[:-1]) if len(line) == widest]
    if not _WRAP_MIN_WIDTH <= widest <= _WRAP_MAX_WIDTH or not cut:
        return None
    if whole and widest in _WRAP_TERMINALS and len(cut) == 1:
        return widest if _cut_once(lines[cut[0]], lines[cut[0] + 1]) else None
    if len({lines[i] for i in cut}) < _WRAP_MIN_LINES:
        return None  # one line printed twice (lscpu's flags) is no cut
    if len(cut) < sum(widest - _WRAP_SPIKE <= len(line) < widest for line in lines):
        return None  # no spike at the widest width: lines of every length, a few as long as the longest
    tails = 0
    for i in cut:
        follower = pieces(lines[i + 1], 0)[0]
        tails += (follower.shape is Shape.BARE and follower.proc is None and not follower.msg.startswith(_NOT_TAILS)
                  and not _OWN_HEADER.search(follower.msg))
    return widest if 2 * tails > len(cut) else None


_FRAME = re.compile(r'File "[^"\n]+", line \d+, in \w')
"""A traceback frame's header, whole: a cut inside it (``line 410, i`` | ``n _allocate_buffers``) breaks it."""


def _cut_once(row: str, below: str) -> bool:
    """One row at a terminal's width, read as cut there only when joining it to its rest makes what neither half
    is: a rule's literal (``…MEMORY_APERTURE_`` | ``VIOLATION``) or a traceback frame's header.  A natural line that
    wide above a short one (``… # CPU blocks: 4681`` at 80 columns, then the shell's ``Killed``) makes nothing."""
    # only a short paste with one long row pays for importing the rules
    from engdiag.logs.patterns import LITERAL_PATTERN

    follower = pieces(below, 0)[0]
    rest = rest_of(below)
    if follower.shape is not Shape.BARE or follower.proc is not None or rest is None or rest.startswith(_NOT_TAILS):
        return False
    joined = row + rest
    made = {m.group() for m in LITERAL_PATTERN.finditer(joined)} - {m.group() for m in LITERAL_PATTERN.finditer(row)}
    made -= {m.group() for m in LITERAL_PATTERN.finditer(rest)}
    return bool(made) or (_FRAME.search(joined) is not None and _FRAME.search(row) is None)


def _rejoined(rows: list[str], wrap: int | None) -> list[str]:
    """The head's lines as they were before the paste cut them at ``wrap``: a wrapped line's two stamps may
    fall on two rows (ci-llava-image-embeds-slow-shard-load-timeout, cut at 120 columns)."""
    if wrap is None:
        return rows
    lines: list[str] = []
    cut = False
    for row in rows:
        rest = rest_of(row) if cut else None
        if rest is not None:
            lines[-1] += rest
        else:
            lines.append(row)
        cut = len(row) == wrap
    return lines


def rest_of(row: str) -> str | None:
    """This row as the rest of a row the paste cut at its width, without the prefix the paste put before every
    row (a quote's ``> ``); None where it opens a line of its own: a header, a process's prefix, a full date, a
    blank."""
    first = pieces(row, 0)[0]
    if first.shape is not Shape.BARE or first.proc is not None or not first.msg.strip():
        return None
    start = row.find(first.msg)
    rest = row[start:] if start >= 0 else row
    # an indented row may be a rest: the cut fell before two spaces (``…949]            `` | ``  ^^^^^^^``)
    return None if _OWN_HEADER.match(rest) else rest


def _double_spaced(lines: list[bytes]) -> bool:
    text = [bool(line.strip()) for line in lines]
    if sum(text) < _SPACED_MIN_LINES:
        return False
    last = max(i for i, is_text in enumerate(text) if is_text)
    return all(text[i + 1] is False for i in range(last) if text[i])


def _shared_indent(lines: list[bytes]) -> bytes:
    """The leading whitespace every one of ``lines`` (none blank) shares."""
    if not lines or lines[0][:1] not in (b" ", b"\t"):
        return b""
    common = os.path.commonprefix(lines)
    indent = common[: len(common) - len(common.lstrip(_WHITESPACE))]
    return indent


def input_paste(stream: BinaryIO, seekable: bool) -> tuple[Paste, BinaryIO]:
    """How the input was pasted (``paste_of`` its head) and the stream to read from its start.

    A seekable stream is rewound; a pipe gets its head put back in front of the rest.
    """
    head = read_head(stream, HEAD_BYTES)
    if seekable:
        stream.seek(0)
    else:
        stream = io.BufferedReader(Prepended(head, stream), buffer_size=CHUNK)  # type: ignore[assignment]
    return paste_of(head, len(head) < HEAD_BYTES), stream


def file_paste(path: Path) -> Paste:
    """``paste_of`` a plain file's head (a byte range of a shaped paste cannot be read alone)."""
    with open(path, "rb") as handle:
        head = read_head(handle, HEAD_BYTES)
    return paste_of(head, len(head) < HEAD_BYTES)


def skip_doubled(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Numbered lines without the blank line that follows each line in a double-spaced paste.

    A blank line of the log was doubled too: it is kept once, as the log had it (a traceback's chained
    "CancelledError", blank, "During handling …" stays one record: pascal-p40-gptq-long-prompt-engine-loop-
    timeout, double-spaced, lost the exception chained on).
    """
    doubled = False
    for lineno, line in lines:
        if doubled and not line.strip():
            doubled = False
            continue
        yield lineno, line
        doubled = True


def unpasted(stream: BinaryIO, paste: Paste) -> BinaryIO:
    """``stream`` (positioned at a line start) with the indentation and a tool's labels removed from its lines."""
    if paste.indent:
        stream = io.BufferedReader(_Dedented(stream, paste.indent), buffer_size=CHUNK)  # type: ignore[assignment]
    if paste.label:
        stream = io.BufferedReader(_Unlabelled(stream, paste.label), buffer_size=CHUNK)  # type: ignore[assignment]
    return stream


class _Dedented(Converted):
    """A stream with one indentation removed from its line starts, whole lines at a time."""

    def __init__(self, source: BinaryIO, indent: bytes) -> None:
        super().__init__(source)
        self._indent = indent
        self._hold = len(indent)
        """Bytes past a read's size that an unfinished line may grow to before it is let through in parts."""
        self._carry = b""
        """The last, unfinished line read."""
        self._at_start = True
        """The carry (or the next byte read) starts a line: only a line over ``CHUNK`` is let through in parts."""

    def convert(self, raw: bytes, last: bool) -> bytes:
        data = self._carry + raw
        cut = len(data) if last else data.rfind(b"\n") + 1
        if cut == 0 and len(data) <= CHUNK + self._hold:
            self._carry = data  # no line end yet: wait for it (a longer line goes on in parts)
            return b""
        cut = cut or len(data)
        out = self._strip(data[:cut])
        self._carry = data[cut:]
        self._at_start = data[cut - 1 : cut] == b"\n"
        return out

    def _strip(self, data: bytes) -> bytes:
        """Drop the indentation after every newline of ``data``, and at its start when that starts a line."""
        indent = self._indent
        out = data.replace(b"\n" + indent, b"\n")
        return out.removeprefix(indent) if self._at_start else out


class _Unlabelled(_Dedented):
    """A stream with a tool's label removed from the start of every line that has one."""

    def __init__(self, source: BinaryIO, label: str) -> None:
        super().__init__(source, b"")
        self._hold = _NAME_MAX
        self._at, self._after_newline = _LABEL_AT[label], _LABEL_AFTER_NEWLINE[label]

    def _strip(self, data: bytes) -> bytes:
        out = self._after_newline.sub(b"\n", data)
        if self._at_start and (match := self._at.match(out)) is not None:
            out = out[match.end():]
        return out
