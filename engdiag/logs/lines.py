"""One physical log line → one or more cleaned pieces with their prefixes parsed.

Real vLLM logs arrive wrapped in other tools' prefixes and noise: kubectl's
RFC 3339 timestamps, docker compose's ``svc  |``, colour codes with or without
their ESC byte, Ray's ``[repeated 6x across cluster]``, tqdm bars redrawn with
``\\r`` or glued to the next record.  This module strips all of that, reads the
process tag and the header (vLLM, PyTorch glog, NCCL, uvicorn), and leaves a
``Piece`` whose ``msg`` is what the program meant to print.  Pure functions only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

from engdiag.logs.events import Proc, Stamp
from engdiag.logs.tags import process_tag

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\^\[\[[0-9;]*m|(?:ESC|#033)\[[0-9;]*m|\[[0-9;]*[0-9]m")
_NS_EPOCH = re.compile(r"\d{19} +")
"""Ray Data's nanosecond epoch before a forwarded worker line."""
_BRACKET_TS = re.compile(r"\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\] +")
"""``[2026-04-06 23:02:12] `` or ``[2025-03-13T08:00:58Z] `` before a line (launcher wrappers, ``ts``)."""
_ASCTIME = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)[,.]\d{3}\s+"
    r"(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.-]+\.py:\d+ -- )"
)
"""Ray's logging format, Python's ``asctime`` then ``LEVEL file.py:N -- `` (``2025-03-03 22:56:06,173\tINFO
worker.py:1636 -- ...``: its driver, GCS and autoscaler).  Only that shape: any Python program's asctime would
make another program's log look like a vLLM one."""
_PLATFORM = re.compile(
    r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?P<d>\d\d) +"
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)? +\\?\| ?"
)
"""Hosting platforms' console prefix: ``May 01  14:38:18.434 | ...`` (``\\|`` when pasted from a table)."""
_SYSLOG = re.compile(
    r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<d>\d\d?) "
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)? \S+ [^\s:\[\]]+(?:\[\d+\])?: "
)
"""journald's and syslog's prefix: ``Apr  3 17:38:57 host unit[140343]: ...`` (``journalctl``'s short format;
rsyslog spells ESC as ``#033``: vLLM issue 16030)."""
_PLOG = re.compile(
    r"\[(?P<level>ERROR|WARNING|INFO|DEBUG|EVENT)\] (?P<module>[A-Z][A-Z_]*\(\d+,[^)\n]*\):)?"
    r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)-(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)* ?"
)
"""Ascend's plog and torch_npu's lines (``[ERROR] RUNTIME(2817,):2026-08-04-06:53:21.437.447 [file.cc:N]…``): their
time orders them among the ranks' (ascend-dsv4-prefill-hccl-notify-wait-timeout: pasted after the watchdog)."""
_QUOTE = re.compile(r"(?:> ?)+")
_PYTEST_E = re.compile(r"E {1,4}(?=\()")
"""pytest's failure prefix before a captured process line (``E   (EngineCore pid=9) ...``)."""
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_NCCL_SPLIT = re.compile(r"\s+(?=[\w.-]+:\d+:\d+ \[\d+\] (?:[\w/.-]+:\d+ )?NCCL [A-Z]+ )")
"""Where NCCL lines flattened into one paragraph (a paste that lost its newlines) begin again."""
_KUBE_TS = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) ")
_KUBE_SOURCE = re.compile(r"\[pod/([^/\]\s]+)/[^\]\s]+\] ")
"""``kubectl logs --prefix``'s source before every line (``[pod/vllm-7d9f8-abcde/vllm] ``), before its stamp
with ``--timestamps``: the way to read every replica of a deployment (``-l app=vllm``) at once.  The pod is the
host of the line's process (a pod's host name is its name): replicas' processes of one pid stay apart."""
_COMPOSE = re.compile(r"([A-Za-z0-9][\w.-]{0,62})\s+\| ?")
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\]\s*$")
_VLLM = re.compile(
    r"\s*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|[DIWEC]) "
    r"(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)? "
    r"\[?(?P<file>[^\s\]]+):(?P<fl>\d+)\] ?",
)
_LEVEL_ONLY = re.compile(
    r"\s*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: \.\.\.)? "
    r"(?:\[(?P<file>[^\s\]]+):(?P<fl>\d+)\] )?"
)
_UVICORN = re.compile(r"\s*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
ACCESS = re.compile(r'\S+ - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
_GLOG = re.compile(
    r"\s*(?:\[rank(?P<rank>\d+)\]:)?\[?(?P<sev>[IWEF])"
    r"(?:(?P<mo>\d{1,2}?)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\.\d+(?: +\d+)? | )"
    r"(?P<file>[\w.]+):(?P<fl>\d+)\] ?"
)
_NCCL = re.compile(
    r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:[\w/.-]+:\d+ )?NCCL (?P<lvl>[A-Z]+) "
)
_BAR = re.compile(
    r"\s*(?:\[\w+\]: )?(?P<bar>[A-Za-z](?:[^:|\n]|::){0,120}):\s*(?P<pct>\d{1,3})%(?: Completed)?\s*"
    r"(?:(?:\|(?:[^|]*\|)?\s*|(?=\d+/(?:\d+|\?) \[))(?P<done>\d+)/(?P<total>\d+|\?)|\|\s*$)"
)
"""A tqdm bar; one cut right after its first ``|`` (a paste's last line) still names its activity; one drawn
without its bar (``67% 2/3 [02:41<01:19, 79.54s/it]``: a CI log's rendering) needs its timing block."""
_RECORD_START = re.compile(
    r"(?:\([A-Za-z_][\w .:=-]{0,120}? pid=\d+(?:, ip=[^)\s]*)?\)\s?)?"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
)
_TAGGED_RECORD_START = re.compile(
    r"\([A-Za-z_][\w .:=-]{0,120}? pid=\d+(?:, ip=[^)\s]*)?\)\s?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
)
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
_LETTER_LEVELS = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "C": "CRITICAL"}
"""SkyPilot's logger prints vLLM's old layout with the level's first letter (sky/sky_logging.py ``_FORMAT``:
``I 07-01 20:30:41 replica_managers.py:1321] …``)."""
_LEVEL_FIRST = frozenset("DIWEC ")
"""The first characters of a line that may start with a level."""


class Shape(str, Enum):
    """Which kind of line a piece is, once its prefixes are gone."""

    VLLM = "vllm"
    """vLLM logger record with level, time and ``[file:line]``."""
    LEVEL = "level"
    """A level but no usable time (hand-edited pastes, uvicorn's own lines)."""
    GLOG = "glog"
    NCCL = "nccl"
    ACCESS = "access"
    BAR = "bar"
    TAGGED = "tagged"
    """Only a process tag: a print or traceback through vLLM's stdout wrapper."""
    BARE = "bare"


@dataclass(frozen=True, slots=True)
class Piece:
    """A cleaned line (or part of one, when a tqdm bar was glued to a record)."""

    lineno: int
    shape: Shape
    msg: str
    proc: Proc | None = None
    level: str | None = None
    stamp: Stamp | None = None
    fileinfo: str | None = None
    kube_ts: str | None = None
    repeat: int = 1
    width: int = 0
    """Length of the physical line, used to recognise hard wraps."""

    @property
    def header(self) -> tuple[object, ...] | None:
        """What every line of one logger record repeats (tracebacks included)."""
        if self.shape is not Shape.VLLM:
            return None
        return (self.proc, self.level, self.stamp, self.fileinfo)


_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def make_stamp(
    month: int, day: int, hours: int, minutes: int, seconds: int, calendar: int | None = None
) -> Stamp | None:
    """The one place a time of day becomes a Stamp, for every line shape and scanner backend.

    An impossible time (02-30, 25:61:61) is no time: the record is placed at the previous one's.
    ``calendar`` is the year when the input printed one (kubectl's stamp): output then shows it.
    """
    if not (1 <= month <= 12 and 1 <= day <= _DAYS[month - 1] and hours < 24 and minutes < 60 and seconds < 61):
        return None
    return Stamp(month, day, hours * 3600 + minutes * 60 + min(seconds, 59), 0, calendar)


def kube_year(kube_ts: str | None, month: int) -> int | None:
    """The year of a line's own time, from kubectl's RFC 3339 stamp (``2024-05-01T14:38:18.434Z``).

    kubectl prints UTC, vLLM local time: around New Year the two can straddle it
    (``2025-01-01T01:00Z`` before a local ``12-31 20:00``), so December against January moves a year.
    """
    if kube_ts is None:
        return None
    year, kube_month = int(kube_ts[:4]), int(kube_ts[5:7])
    if kube_month == 1 and month == 12:
        return year - 1
    if kube_month == 12 and month == 1:
        return year + 1
    return year


def _stamp(match: re.Match[str], kube_ts: str | None = None) -> Stamp | None:
    month = int(match["mo"])
    return make_stamp(month, int(match["d"]), int(match["h"]), int(match["mi"]), int(match["s"]),
                      kube_year(kube_ts, month))


def _parse(
    text: str, lineno: int, kube_ts: str | None, repeat: int, width: int
) -> Piece:
    """Read the process tag and header of one prefix-free piece."""
    proc, rest = process_tag(text)
    common = {"lineno": lineno, "kube_ts": kube_ts, "repeat": repeat, "width": width}
    if (match := _VLLM.match(rest)) is not None:
        return Piece(
            shape=Shape.VLLM,
            msg=rest[match.end() :],
            proc=proc,
            level=_LETTER_LEVELS.get(match["level"], match["level"]),
            stamp=_stamp(match, kube_ts),
            fileinfo=f"{match['file']}:{match['fl']}",
            **common,
        )
    if "LMCache " in rest[:40]:
        from engdiag.logs.lmcache_lines import lmcache_piece  # only logs with LMCache's lines pay for it

        if (found := lmcache_piece(rest, proc, common)) is not None:
            return found
    if " -- " in rest[:240] and rest[:1] in _LEVEL_FIRST:
        from engdiag.logs.serving_lines import (
            ray_serve_piece,  # only lines shaped like Ray Serve's pay for it
        )

        if (found := ray_serve_piece(rest, proc, common)) is not None:
            return found
    if kube_ts is not None and rest[:1] == " ":
        from engdiag.logs.serving_lines import tracing_piece  # a time, then the level padded: Rust's tracing

        if (found := tracing_piece(rest, proc, common)) is not None:
            return found
    if (match := _UVICORN.match(rest)) is not None:
        msg = rest[match.end() :]
        shape = Shape.ACCESS if ACCESS.match(msg) else Shape.LEVEL
        return Piece(shape=shape, msg=msg, proc=proc, level=match["level"], **common)
    if (match := _LEVEL_ONLY.match(rest)) is not None:
        fileinfo = f"{match['file']}:{match['fl']}" if match["file"] else None
        return Piece(
            shape=Shape.LEVEL,
            msg=rest[match.end() :],
            proc=proc,
            level=match["level"],
            fileinfo=fileinfo,
            **common,
        )
    if "]" in rest and (match := _GLOG.match(rest)) is not None:
        if proc is None and match["rank"] is not None:
            proc = Proc(f"rank{match['rank']}")
        return Piece(
            shape=Shape.GLOG,
            msg=rest[match.end() :],
            proc=proc,
            level=_GLOG_LEVELS[match["sev"]],
            stamp=_stamp(match, kube_ts) if match["mo"] else None,
            fileinfo=f"{match['file']}:{match['fl']}",
            **common,
        )
    if " NCCL " in rest and (match := _NCCL.match(rest)) is not None:
        nccl_proc = proc or Proc(f"nccl dev{match['dev']}", int(match["pid"]), match["host"])
        level = "WARNING" if match["lvl"] == "WARN" else match["lvl"]
        return Piece(
            shape=Shape.NCCL, msg=rest[match.end() :], proc=nccl_proc, level=level, **common
        )
    if "%" in rest and _BAR.match(rest) is not None:
        return Piece(shape=Shape.BAR, msg=rest.strip(), proc=proc, **common)
    shape = Shape.TAGGED if proc is not None else Shape.BARE
    return Piece(shape=shape, msg=rest, proc=proc, **common)


_COLOUR_HEAD = 256
_COLOUR_TAIL = 96


def _strip_colour(text: str) -> str:
    """Remove colour codes where loggers put them: the prefix and Ray's suffix, never mid-message.

    Bounding the work keeps a 12 KB request line as cheap as a short one.
    """
    if "[" not in text:
        return text
    if len(text) <= _COLOUR_HEAD + _COLOUR_TAIL:
        return _ANSI.sub("", text)
    middle = text[_COLOUR_HEAD : len(text) - _COLOUR_TAIL]
    return _ANSI.sub("", text[:_COLOUR_HEAD]) + middle + _ANSI.sub("", text[len(text) - _COLOUR_TAIL :])


def _split_glued(text: str) -> list[str]:
    """Split a record from what was printed just before it on the same line without a newline.

    A tqdm bar (it redraws without one), or a native library's line cut off mid-write by another
    process (hami-libvgpu-tp2-nccl-init-stall-fused-line-waiting-engine: ``... NCCL INFO Channel 01/0 :
    (APIServer pid=1) DEBUG 08-09 ...``): a process tag, a level and a time start a record.
    """
    if "it/s" in text or "s/it" in text:
        match = _RECORD_START.search(text, 1)
        if match is not None and _BAR.match(text[: match.start()]) is not None:
            return [text[: match.start()], text[match.start() :]]
    if " NCCL " in text and " pid=" in text:
        match = _TAGGED_RECORD_START.search(text, 1)
        if match is not None:
            return [text[: match.start()], text[match.start() :]]
    return [text]


def pieces(line: str, lineno: int) -> list[Piece]:
    """Clean one physical line (no trailing newline) into its pieces.

    A line holds several pieces when tqdm redrew a bar with ``\\r`` or glued a bar
    to the record that followed.  Empty redraw segments are dropped; a blank line
    gives one empty BARE piece so that it still separates records.
    """
    width = len(line)
    segments = [s for s in line.split("\r") if s.strip()] if "\r" in line else [line]
    if not segments:
        return [Piece(lineno=lineno, shape=Shape.BARE, msg="", width=width)]
    if line[:2] == '{"' and _json_logged(line):
        from engdiag.logs.json_lines import json_record  # only JSON-formatter logs pay for it

        found = json_record(line, lineno, width)
        if found:
            return found
    out: list[Piece] = []
    for segment in segments:
        text = _strip_colour(segment)
        kube_ts = pod = None
        outer: Stamp | None = None
        if text[:5] == "[pod/" and (match := _KUBE_SOURCE.match(text)) is not None:
            pod, text = f"pod/{match.group(1)}", text[match.end() :]
        if text[:2] == "20" and (match := _KUBE_TS.match(text)) is not None:
            kube_ts, text = match.group(1), text[match.end() :]
        text, outer = _outer_prefix(text)
        if "|" in text and (match := _COMPOSE.match(text)) is not None:
            text = text[match.end() :]
        if _json_logged(text) and (found := _wrapped(text, lineno, width, kube_ts, outer)):
            out.extend(found)
            continue
        repeat = 1
        if "repeated" in text and (match := _REPEATED.search(text)) is not None:
            repeat, text = int(match.group(1)), text[: match.start()]
        parts = _NCCL_SPLIT.split(text) if text.count(" NCCL ") > 1 else _split_glued(text)
        for part in parts:
            piece = _parse(part, lineno, kube_ts, repeat, width)
            # the wrapper's clock stamps every line; vLLM's own may run in another time zone
            # (modal-runner-init-300s-timeout-during-torch-compile: console 14:38, vLLM 12:38), so one clock wins
            if outer is not None and piece.shape is not Shape.BARE:
                piece = replace(piece, stamp=outer)
            if pod is not None and piece.proc is not None and piece.proc.host is None:
                piece = replace(piece, proc=Proc(piece.proc.name, piece.proc.pid, pod))
            out.append(piece)
    return out


def _outer_prefix(text: str) -> tuple[str, Stamp | None]:
    """Strip a wrapper's time prefix (Ray Data epoch, ``[YYYY-MM-DD HH:MM:SS]``, Python logging's asctime, a
    platform console).

    A markdown quote (``> `` from a reply that quotes a log) is stripped first.
    """
    if text[:1] == ">" and (match := _QUOTE.match(text)) is not None or text[:2] == "E " and (match := _PYTEST_E.match(text)) is not None:
        text = text[match.end() :]
    if text[:1].isdigit() and (match := _NS_EPOCH.match(text)) is not None:
        return text[match.end() :], None
    if text[:2] == "[2" and (match := _BRACKET_TS.match(text)) is not None or \
            text[:1] == "2" and (match := _ASCTIME.match(text)) is not None:
        year, *rest = (int(g) for g in match.groups())
        return text[match.end() :], make_stamp(*rest, calendar=year)
    if text[:2] in ("[E", "[W", "[I", "[D") and (match := _PLOG.match(text)) is not None:
        stamp = make_stamp(int(match["mo"]), int(match["d"]), int(match["h"]), int(match["mi"]), int(match["s"]),
                           calendar=int(match["y"]))
        return f"{match['level']} {match['module'] or ''}{text[match.end():]}", stamp
    if text[:3] in _MONTHS and (match := _PLATFORM.match(text) or _SYSLOG.match(text)) is not None:
        stamp = make_stamp(_MONTHS.index(match["mon"]) + 1, int(match["d"]), int(match["h"]), int(match["mi"]),
                           int(match["s"]))
        rest = text[match.end() :]
        return (rest.replace("\\|", "|") if match.re is _PLATFORM else rest), stamp
    return text, None


def _json_logged(text: str) -> bool:
    """A JSON logger's line: vLLM's formatter names the level ``levelname``, zap's message ``msg``."""
    return '"levelname"' in text or '"msg"' in text


def _wrapped(text: str, lineno: int, width: int, kube_ts: str | None, outer: Stamp | None) -> list[Piece]:
    from engdiag.logs.json_lines import wrapped_json_record

    return wrapped_json_record(text, lineno, width, kube_ts, outer)


def clocks(line: str) -> tuple[Stamp | None, Stamp | None]:
    """A line's wrapper time (a CI runner's: it wins in ``pieces``) and vLLM's own, either possibly missing."""
    text = _strip_colour(line)
    if text[:5] == "[pod/" and (match := _KUBE_SOURCE.match(text)) is not None:
        text = text[match.end() :]
    if text[:2] == "20" and (match := _KUBE_TS.match(text)) is not None:
        text = text[match.end() :]
    text, outer = _outer_prefix(text)
    return outer, next((piece.stamp for piece in pieces(text, 0) if piece.stamp is not None), None)


def first_stamp(lines: Iterable[str]) -> Stamp | None:
    """The time of the first line that has one."""
    for line in lines:
        for piece in pieces(line, 0):
            if piece.stamp is not None:
                return piece.stamp
    return None


def access_status(msg: str) -> tuple[str, str, int] | None:
    """Method, path and status of a uvicorn access line."""
    match = ACCESS.match(msg)
    if match is None:
        return None
    return match["method"], match["path"], int(match["status"])


_BAR_TIMING = re.compile(
    r"\[(?P<elapsed>(?:\d+:)?\d+:\d\d)(?:<[^,\]]*)?(?:, *(?P<rate>\d+(?:\.\d+)?) ?(?P<unit>s/[A-Za-z]+|[A-Za-z]+/s))?"
)
"""tqdm's timing block; its unit is the bar's own (``s/it``, FlashInfer's autotuner ``s/profile``)."""


def _clock_seconds(text: str) -> float:
    """``42:52`` or ``1:02:03`` → seconds."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def bar_progress(msg: str) -> tuple[str, int, int | None, float | None, float | None] | None:
    """Name, done, total, elapsed seconds and seconds per item of a tqdm bar piece.

    The timing block ``[42:52<05:11, 13.56s/it]`` says how long the activity has run
    and how fast it advances: what tells a slow start-up from a stuck one.
    """
    match = _BAR.match(msg)
    if match is None:
        return None
    if match["done"] is None:
        return match["bar"].strip(), 0, None, None, None
    total = match["total"]
    elapsed = rate = None
    timing = _BAR_TIMING.search(msg, match.end())
    if timing is not None:
        elapsed = _clock_seconds(timing["elapsed"])
        if timing["rate"] is not None:
            value = float(timing["rate"])
            rate = value if timing["unit"].startswith("s/") else (1 / value if value > 0 else None)
    return match["bar"].strip(), int(match["done"]), None if total == "?" else int(total), elapsed, rate
