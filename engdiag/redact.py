"""Everything a user sends is user data: replace it with its size, before anything reads it.

vLLM's request logs print the prompt (``prompt: '...'``), its token ids, the
sampling parameters — stop strings, bad words, guided-decoding / structured-output
JSON schemas, regexes, choices and grammars — and, with ``--enable-log-outputs``,
the output; API-server debug lines can carry tool definitions and response
formats.  ``mask`` replaces each value with its size — ``<prompt: 812 chars>``,
``<2048 token ids>``, ``<stop: 21 chars>`` — and is applied to every record
*before* signal matching, so a request with ``stop=['CUDA out of memory']`` is
never mistaken for an OOM, and none of it reaches an output unless the user
asked for ``--show-prompts``.  Values are skipped by a bracket-and-quote walk
(``str.find`` and one character-class search): no backtracking pattern ever
runs over user data.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

_KEY = re.compile(
    r"(?<![\w.])['\"]?(?P<key>prompt|Prompt|output|Generated text|prompt_token_ids|output_token_ids|"
    r"token_ids|prompt_embeds|"
    r"stop|bad_words|json|regex|choice|grammar|structural_tag|whitespace_pattern|"
    r"guided_json|guided_regex|guided_choice|guided_grammar|guided_whitespace_pattern|"
    r"tools|functions|tool_choice|response_format|messages|extra_args|logit_bias)"
    r"['\"]?(?P<sep>\s*[:=]\s*)(?=['\"\[{])"
)
_VALUE_OPENINGS = ("'", '"', "[", "{")
"""What ``_KEY``'s lookahead needs after the separator: text holding none of them has nothing to mask."""
_TOKEN_KEYS = frozenset({"prompt_token_ids", "output_token_ids", "token_ids", "prompt_embeds"})
_TEXT_KEYS = frozenset({"prompt", "Prompt", "output", "Generated text"})
_STRUCTURE = re.compile(r"""[\[\]{}()'"\n]""")
_CLOSERS = {"[": "]", "{": "}", "(": ")"}
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


def _value_end(text: str, start: int) -> tuple[int, bool]:
    """Index after the repr / JSON value (list, dict, string) at ``start``, stopping at a line end."""
    if text[start] in "'\"":
        end, closed = _string_end(text, start)
        newline = text.find("\n", start, end)
        return (newline, False) if newline != -1 else (end, closed)
    expected: list[str] = []
    position = start
    while True:
        found = _STRUCTURE.search(text, position)
        if found is None:
            return len(text), False
        char, index = found.group(), found.start()
        if char == "\n":
            return index, False
        if char in "'\"":
            end, closed = _string_end(text, index)
            newline = text.find("\n", index, end)
            if newline != -1 or not closed:
                return (newline if newline != -1 else end), False
            position = end
        elif char in _CLOSERS:
            expected.append(_CLOSERS[char])
            position = index + 1
        else:
            if not expected or expected[-1] == char:
                expected.pop() if expected else None
            else:
                expected.clear()  # unbalanced: end the value here rather than run past it
            if not expected:
                return index + 1, True
            position = index + 1


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
    if not any(opening in text for opening in _VALUE_OPENINGS):
        return Masked(text)  # a stats or access line: four scans, not _KEY tried at every position
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
        key = match["key"]
        if text[value_start] == "[" and key not in _TEXT_KEYS and (key in _TOKEN_KEYS or _numbers(text, value_start)):
            end, items, closed = _list_end(text, value_start)
            noun = "token ids" if "token_ids" in key else "items"
            placeholder = f"<{'' if closed else '≥'}{items} {noun}>"
        else:
            end, closed = _value_end(text, value_start)
            quoted = text[value_start] in "'\""
            chars = max(end - value_start - ((2 if closed else 1) if quoted else 0), 0)
            placeholder = f"<{key.lower()}: {'' if closed or quoted else '≥'}{chars} chars>"
        out.append(placeholder)
        length += len(placeholder)
        shift += (end - value_start) - len(placeholder)
        edits.append((length, shift))
        position = end
        match = _KEY.search(text, position)
    out.append(text[position:])
    return Masked("".join(out), tuple(edits))


def _numbers(text: str, start: int) -> bool:
    """Does the list at ``start`` begin with a number (token ids), not a string or a dict?"""
    head = text[start + 1 : start + 2]
    return head.isdigit() or head in ("]", "-")


def redact(text: str) -> str:
    """The text with user data replaced by sizes."""
    return mask(text).text


def mask_value(value: str, limit: int = MASK_LIMIT) -> str:
    """Mask a frame-local repr (string, bytes, list) longer than ``limit`` characters."""
    if len(value) <= limit:
        return value
    return f"<masked: {len(value)} chars>"
