"""The only module that serialises JSON (orjson): documents → bytes on stdout or disk."""

from __future__ import annotations

from typing import Any

import orjson

SCHEMA_VERSION = "1.1"
"""Version of every engdiag JSON document: MINOR adds fields, MAJOR changes or removes them."""


def dumps(document: dict[str, Any], *, pretty: bool = True) -> bytes:
    """Serialise a document with a trailing newline; NaN/inf become null."""
    option = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
    if pretty:
        option |= orjson.OPT_INDENT_2
    return orjson.dumps(document, option=option)


def loads(data: bytes | str) -> Any:
    """Parse JSON text (used to read engdiag's own documents back)."""
    return orjson.loads(data)
