"""Prompts and generated text are user data: replace them with their size, before anything reads them.

vLLM's request logs print the prompt (``prompt: '...'``), its token ids and, with
``--enable-log-outputs``, the output.  ``mask`` replaces each with its size —
``<prompt: 812 chars>``, ``<2048 token ids>`` — and is applied to every record
*before* signal matching, so a prompt that happens to say "CUDA out of memory"
is never mistaken for one, and prompt text never reaches an output unless the
user asked for ``--show-prompts``.  The scan jumps over each value with
``str.find``: user data is never run through a regular expression.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

_KEY = re.compile(
    r"\b(?P<key>prompt|Prompt|output|Generated text|prompt_token_ids|output_token_ids|"
    r"token_ids|prompt_embeds)(?P<sep>\s*[:=]\s*)(?=['\"\[])"
)
MASK_LIMIT = 32
"""Strings longer than this in frame locals are masked (they can hold prompts)."""


def _string_end(text: str, start: int) -> tuple[int, bool]:
    """Index after the Python repr string starting at ``start``, and whether it was closed."""
    quote = text[start]
    position = start + 1
    while True:
        found = text.find(quote, position)
        if found == -1:
            return len(text), False
        backslashes = 0
        while text[found - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return found + 1, True
        position = found + 1


def _list_end(text: str, start: int) -> tuple[int, int, bool]:
    """Index after the ``[...]`` list at ``start`` (stopping at a line end), its items, and whether it closed."""
    close = text.find("]", start)
    newline = text.find("\n", start)
    if newline != -1 and (close == -1 or newline < close):
        close = -1
    stop = close if close != -1 else (newline if newline != -1 else len(text))
    items = text.count(",", start + 1, stop) + 1 if text[start + 1 : stop].strip() else 0
    return (close + 1 if close != -1 else stop), items, close != -1


@dataclass(frozen=True, slots=True)
class Masked:
    """Text with user data replaced, and a way back to positions in the original."""

    text: str
    edits: tuple[tuple[int, int], ...] = ()
    """(position in the masked text after an edit, original minus masked length so far)."""

    def origin(self, position: int) -> int:
        """The original position of a position in the masked text."""
        index = bisect_right(self.edits, (position, float("inf"))) - 1
        return position + (self.edits[index][1] if index >= 0 else 0)


def mask(text: str) -> Masked:
    """Replace prompt and output text and token-id lists with their sizes."""
    match = _KEY.search(text)
    if match is None:
        return Masked(text)
    out: list[str] = []
    edits: list[tuple[int, int]] = []
    position = 0
    length = 0
    shift = 0
    while match is not None:
        value_start = match.end()
        out.append(text[position:value_start])
        length += value_start - position
        if text[value_start] == "[":
            end, items, closed = _list_end(text, value_start)
            noun = "token ids" if "token_ids" in match["key"] else "items"
            placeholder = f"<{'' if closed else '≥'}{items} {noun}>"
        else:
            end, closed = _string_end(text, value_start)
            chars = max(end - value_start - (2 if closed else 1), 0)
            placeholder = f"<{match['key'].lower()}: {chars} chars>"
        out.append(placeholder)
        length += len(placeholder)
        shift += (end - value_start) - len(placeholder)
        edits.append((length, shift))
        position = end
        match = _KEY.search(text, position)
    out.append(text[position:])
    return Masked("".join(out), tuple(edits))


def redact(text: str) -> str:
    """The text with user data replaced by sizes."""
    return mask(text).text


def mask_value(value: str, limit: int = MASK_LIMIT) -> str:
    """Mask a frame-local repr (string, bytes, list) longer than ``limit`` characters."""
    if len(value) <= limit:
        return value
    return f"<masked: {len(value)} chars>"
