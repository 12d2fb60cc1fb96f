"""Prompts and generated text are user data: replace them with their size.

vLLM's request logs print the prompt (``prompt: '...'``), its token ids and, with
``--enable-log-outputs``, the output.  Every line engdiag shows passes through
``redact`` unless the user asked for ``--show-prompts``; the structure of the
line stays, the content becomes ``<prompt: 812 chars>`` / ``<2048 token ids>``.
"""

from __future__ import annotations

import re

_KEY = re.compile(
    r"\b(?P<key>prompt|Prompt|output|Generated text|prompt_token_ids|output_token_ids|"
    r"token_ids|prompt_embeds)(?P<sep>\s*[:=]\s*)(?=['\"\[])"
)
MASK_LIMIT = 32
"""Strings longer than this in frame locals are masked (they can hold prompts)."""


def _string_end(text: str, start: int) -> int:
    """Index after the Python repr string starting at ``start`` (or the text's end)."""
    quote = text[start]
    position = start + 1
    while True:
        found = text.find(quote, position)
        if found == -1:
            return len(text)
        backslashes = 0
        while text[found - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return found + 1
        position = found + 1


def _list_end(text: str, start: int) -> tuple[int, int]:
    """Index after the ``[...]`` list at ``start`` and how many items it holds."""
    close = text.find("]", start)
    end = len(text) if close == -1 else close + 1
    inner = text[start + 1 : close if close != -1 else len(text)]
    items = inner.count(",") + 1 if inner.strip() else 0
    return end, items


def redact(text: str) -> str:
    """Replace prompt and output text and token-id lists with their sizes."""
    if not _KEY.search(text):
        return text
    out: list[str] = []
    position = 0
    for match in _KEY.finditer(text):
        if match.start() < position:
            continue
        value_start = match.end()
        out.append(text[position:value_start])
        if text[value_start] == "[":
            end, items = _list_end(text, value_start)
            out.append(f"<{items} token ids>" if "token_ids" in match["key"] else f"<{items} items>")
        else:
            end = _string_end(text, value_start)
            out.append(f"<{match['key'].lower()}: {max(end - value_start - 2, 0)} chars>")
        position = end
    out.append(text[position:])
    return "".join(out)


def mask_value(value: str, limit: int = MASK_LIMIT) -> str:
    """Mask a frame-local repr longer than ``limit`` characters."""
    if len(value) <= limit:
        return value
    return f"<masked: {len(value)} chars>"
