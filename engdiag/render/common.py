"""Mappers shared by every document: the envelope, the verdict, one log event.

Explicit mappings (never a dataclass dumped as is), so that renaming an internal
field cannot change the published schema (docs/json-schema.md).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from engdiag import __version__
from engdiag.analysis.verdict import Evidence, Verdict
from engdiag.logs.events import Event
from engdiag.render.jsonout import SCHEMA_VERSION


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
        "inherited_time": event.inherited_time,
        "process": None
        if proc is None
        else {"name": proc.name, "pid": proc.pid, "role": proc.role.value},
        "level": event.level,
        "text": event.text,
    }


def evidence_doc(item: Evidence) -> dict[str, Any]:
    return {
        "source": item.source,
        "line": item.line,
        "time": item.time,
        "signal": item.signal,
        "role": item.role.value,
        "text": item.text,
        "note": item.note or None,
    }


def verdict_doc(verdict: Verdict) -> dict[str, Any]:
    """The verdict block shared by analyze and snapshot documents."""
    return {
        "kind": verdict.kind.value,
        "sub_kind": verdict.sub_kind.value if verdict.sub_kind is not None else None,
        "confidence": verdict.confidence,
        "headline": verdict.headline,
        "evidence": [evidence_doc(item) for item in verdict.evidence],
        "ruled_out": list(verdict.ruled_out),
        "next_steps": [{"text": s.text, "command": s.command} for s in verdict.next_steps],
        "undecided": verdict.undecided,
        "notes": list(verdict.notes),
    }
