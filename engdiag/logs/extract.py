"""Record → events: mask user data, then run the rules whose literal the record contains.

Prompt and output text are masked first (``engdiag.redact.mask``), so a signal
is never read from inside user data and prompt text never reaches an event
(unless ``show_prompts``).  A record yields events only if one of its kept
pieces holds a rule literal on its own (after masking), as the bulk scanner's
literal search sees lines.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable

from engdiag.logs.events import Event, HttpStatus, Payload, Progress, Signal, Stamp
from engdiag.logs.lines import Shape, access_status, bar_progress
from engdiag.logs.patterns import (
    BAR_LITERALS,
    HTTP_ERROR_LITERAL,
    LITERAL_PATTERN,
    RULES_BY_LITERAL,
)
from engdiag.logs.records import Record
from engdiag.redact import Masked, mask

MAX_EVENT_TEXT = 400
"""Characters of evidence text kept per event."""

Place = Callable[[Stamp], Stamp]


def _piece_masks(record: Record) -> list[Masked]:
    return [mask(piece.msg) for piece in record.pieces]


def _literals(text: str) -> list[str]:
    return list(dict.fromkeys(match.group() for match in LITERAL_PATTERN.finditer(text)))


def event_text(text: str, position: int) -> str:
    """The line holding ``position``, cut to ``MAX_EVENT_TEXT`` around it: a match deep in a long line (a
    controller's line quoting the server's answer) keeps the line's start and the words before the match."""
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    line = text[start : end if end != -1 else len(text)]
    column = position - start
    if column + _AFTER_MATCH <= MAX_EVENT_TEXT:
        return line[:MAX_EVENT_TEXT]
    cut = line.rfind(" ", 0, column - _BEFORE_MATCH) + 1
    word_end = _WORD_END.search(line, _HEAD, _HEAD + 30)
    head = line[: word_end.end() if word_end else _HEAD].rstrip()
    return f"{head} … {line[cut : cut + MAX_EVENT_TEXT - len(head) - 3]}"


_HEAD = 60
_WORD_END = re.compile(r"[\s(\[{,:]")
"""Characters of the line's start kept before a cut: what the line is (``SchedulerOutput(``, a controller's call)."""
_AFTER_MATCH = 160
"""Characters after a match that the evidence keeps at least."""
_BEFORE_MATCH = 80
"""Characters before a match kept when the line must be cut before it."""


class _Builder:
    """Turns matches inside one record into events with place, time and process."""

    def __init__(
        self, record: Record, masks: list[Masked], inherited: Stamp | None, place: Place, show_prompts: bool
    ) -> None:
        self.record = record
        self.original, self.offsets = record.text()
        self.masked: Masked = masks[0] if len(masks) == 1 else mask(self.original)
        self.text = self.masked.text
        self.inherited = inherited
        self.place = place
        self.show_prompts = show_prompts
        self.own_stamp = next((p.stamp for p in record.pieces if p.stamp is not None), None)

    def event(self, signal: Signal, position: int, data: Payload | None) -> Event:
        original = self.masked.origin(position)
        index = max(bisect_right(self.offsets, original) - 1, 0)
        piece = self.record.pieces[index]
        head = self.record.head
        stamp = piece.stamp or self.own_stamp
        inherited = stamp is None and self.inherited is not None
        if stamp is None:
            stamp = self.inherited
        if self.show_prompts:
            line = event_text(self.original, original).strip()
        else:
            line = event_text(self.text, position).strip()
        return Event(
            signal=signal,
            source=self.record.source,
            line=piece.lineno,
            stamp=self.place(stamp) if stamp is not None else None,
            proc=piece.proc or head.proc,
            level=piece.level or head.level,
            text=line.rstrip(),
            data=data,
            inherited_time=inherited,
        )


def _special(builder: _Builder) -> list[Event]:
    """Events from a record's shape rather than a rule: tqdm bars and 5xx access lines."""
    head = builder.record.head
    # the head's line as the paste had it: a line a paste cut at its width goes on in the next pieces
    line = builder.original.partition("\n")[0] if len(builder.record.pieces) > 1 else head.msg
    if head.shape is Shape.BAR and any(literal in line for literal in BAR_LITERALS):
        found = bar_progress(line)
        if found is not None:
            return [builder.event(Signal.PROGRESS_BAR, 0, Progress(*found))]
    if head.shape is Shape.ACCESS and HTTP_ERROR_LITERAL in line:
        found_status = access_status(line)
        if found_status is not None and found_status[2] >= 500:
            return [builder.event(Signal.HTTP_ERROR, 0, HttpStatus(*found_status))]
    return []


def extract(
    record: Record,
    *,
    inherited: Stamp | None,
    place: Place,
    show_prompts: bool = False,
) -> list[Event]:
    """The events of one record (none if it is not relevant)."""
    masks = _piece_masks(record)
    found = [_literals(masked.text) for masked in masks]
    if not any(found):
        return []
    builder = _Builder(record, masks, inherited, place, show_prompts)
    events = _special(builder)
    text = builder.text
    literals = found[0] if len(found) == 1 else _literals(text)
    seen: set[Signal] = {event.signal for event in events}
    for literal in literals:
        for rule in RULES_BY_LITERAL.get(literal, ()):
            if rule.signal in seen and not rule.every:
                continue
            matches = rule.pattern.finditer(text) if rule.every else _first(rule.pattern, text)
            for match in matches:
                payloads = list(rule.build(match, text)) if rule.build else [None]
                for payload in payloads:
                    events.append(builder.event(rule.signal, match.start(), payload))
                if payloads:
                    seen.add(rule.signal)
    return events


def _first(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    match = pattern.search(text)
    return [] if match is None else [match]
