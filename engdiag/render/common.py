"""Mappers shared by every document: the envelope, the verdict, one log event.

Explicit mappings (never a dataclass dumped as is), so that renaming an internal
field cannot change the published schema (docs/json-schema.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from engdiag import __version__
from engdiag.analysis.verdict import Evidence, Verdict
from engdiag.logs.events import Event
from engdiag.render.jsonout import SCHEMA_VERSION

if TYPE_CHECKING:
    from engdiag.analysis.timeline import Timeline


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_KEEP_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    if match.group() in _NAMED:
        return _NAMED[match.group()]
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """Text from the inputs made safe for a terminal: every C0/C1 control (so every ESC, OSC, DCS, APC
    introducer and BEL), newline included, and every bidi override shown as a visible escape (``\\x1b``,
    ``\\u202e``), so a log line can neither retitle the window, hide the rest of the report, nor reorder text."""
    return _UNSAFE.sub(_escape, text)


def inert_keep_newlines(text: str) -> str:
    """``inert`` for text whose line breaks are layout (a whole rendered report): newlines stay."""
    return _UNSAFE_KEEP_NEWLINE.sub(_escape, text)


def serve_args(command: str | None) -> tuple[str | None, str | None]:
    """Split a next step into (shell command, vllm serve arguments): a bare ``--flag`` is not runnable on its own."""
    if command and command.lstrip().startswith("--"):
        return None, command
    return command, None


def envelope(schema: str, generated_at: datetime | None = None) -> dict[str, Any]:
    """The head every engdiag document starts with."""
    moment = generated_at or datetime.now(timezone.utc)
    return {
        "schema": schema,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "engdiag", "version": __version__},
        "generated_at": moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def event_doc(event: Event | None) -> dict[str, Any] | None:
    """One log event: where, when, who and what."""
    if event is None:
        return None
    proc = event.proc
    return {
        "signal": event.signal.value,
        "source": event.source,
        "line": event.line,
        "time": event.stamp.text if event.stamp is not None else None,
        "year": event.stamp.calendar if event.stamp is not None else None,
        "inherited_time": event.inherited_time,
        "process": None
        if proc is None
        else {"name": proc.name, "pid": proc.pid, "role": proc.role.value},
        "level": event.level,
        "text": event.text,
    }


def year_at(timeline: Timeline) -> Callable[[str, int], int | None]:
    """The calendar year of the line at ``source:line`` (the guard that fired keeps its time as text), when
    the input printed years; without them no index is built."""
    first, last = timeline.first_stamp, timeline.last_stamp
    if (first is None or first.calendar is None) and (last is None or last.calendar is None):
        return lambda source, line: None
    index = {(e.source, e.line): e.stamp.calendar for e in timeline.events if e.stamp is not None}
    return lambda source, line: index.get((source, line))


def single_year(timeline: Timeline) -> int | None:
    """The year of every time in the logs, when the input printed it and the logs stay within one year
    (then a time kept as text — a phase's start — takes it too)."""
    first, last = timeline.first_stamp, timeline.last_stamp
    if first is None or last is None or first.calendar is None or first.calendar != last.calendar:
        return None
    return first.calendar


def dated(time: str | None, year: int | None) -> str:
    """``MM-DD HH:MM:SS`` with its year in front when known."""
    return "" if not time else (f"{year}-{time}" if year is not None else time)


def evidence_time(item: Evidence) -> str:
    """An evidence line's time for people: with its year when the input gave one, marked when borrowed."""
    time = dated(item.time, item.year)
    return f"≈ {time} (no time of its own)" if time and item.inherited_time else time


def evidence_doc(item: Evidence) -> dict[str, Any]:
    return {
        "source": item.source,
        "line": item.line,
        "time": item.time,
        "year": item.year,
        "inherited_time": item.inherited_time,
        "signal": item.signal,
        "role": item.role.value,
        "text": item.text,
        "note": item.note or None,
    }


def _step_doc(text: str, command: str | None) -> dict[str, Any]:
    """``command`` runs in a shell as is; ``vllm_serve_args`` are added to the ``vllm serve`` command line."""
    shell, args = serve_args(command)
    return {"text": text, "command": shell, "vllm_serve_args": args}


def verdict_doc(verdict: Verdict) -> dict[str, Any]:
    """The verdict block shared by analyze and snapshot documents."""
    return {
        "kind": verdict.kind.value,
        "sub_kind": verdict.sub_kind.value if verdict.sub_kind is not None else None,
        "confidence": verdict.confidence,
        "headline": verdict.headline,
        "evidence": [evidence_doc(item) for item in verdict.evidence],
        "ruled_out": list(verdict.ruled_out),
        "next_steps": [_step_doc(s.text, s.command) for s in verdict.next_steps],
        "undecided": verdict.undecided,
        "notes": list(verdict.notes),
    }
