"""What every rule family shares: the ``Rule`` itself, number parsing, lazy regexes, and the builders
that read no more than the line in front of them (a constant payload, a failure with its exception).

``last_exception`` lives here because most families read a traceback's ending: whether a wait ended in
a timeout, whether a stack frame came from a capture or from an exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engdiag.logs.events import Failure, Payload, Signal

Builder = Callable[[re.Match[str], str], Iterable[Payload]]


@dataclass(frozen=True)
class Rule:
    """One wording of one signal."""

    signal: Signal
    literal: str
    pattern: re.Pattern[str]
    build: Builder | None = None
    every: bool = False
    """Emit an event for every match in the record, not just the first."""


def _f(value: str | None) -> float | None:
    return None if value is None else float(value.replace(",", ""))


def _i(value: str | None) -> int | None:
    return None if value is None else int(value.replace(",", ""))


_EXCEPTION_LINE = re.compile(
    r"^\s*(?:\*\*|`)?((?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)\b(?:\([\w.]+\))?(?::.*)?"
    r"|(?:[a-z_]\w*\.)+[A-Z]\w*(?:\([\w.]+\))?:(?: .*)?)$",
    re.MULTILINE,
)
"""A traceback's last line: a class named ``…Error`` (optionally module-qualified), or any module-qualified
class (``torch._dynamo.exc.Unsupported: Graph break …``, issue 8066), each optionally with Ray's wrapped cause
(``ray.exceptions.RayTaskError(ValueError): …``), and a paste may set it in markdown bold or code
(``**RuntimeError: mat1 and mat2 shapes cannot be multiplied**``, vLLM issue 8613)."""


def last_exception(text: str) -> str | None:
    """The exception a traceback in ``text`` ends with (its last exception line)."""
    found = None
    for found in _EXCEPTION_LINE.finditer(text):  # keep the last
        pass
    return found.group(1).strip().rstrip("*`").strip()[:300] if found else None


def _failure(name: str) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield Failure(exception=last_exception(text[match.end() :]), name=name)

    return build


def _const(payload: Payload) -> Builder:
    def build(match: re.Match[str], text: str) -> Iterable[Payload]:
        yield payload

    return build


class _Lazy:
    """A rule's regex, compiled the first time a record holding its literal needs it (start-up stays short)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __getattr__(self, name: str) -> object:
        compiled = re.compile(self.pattern)
        self.__dict__.update(search=compiled.search, finditer=compiled.finditer, match=compiled.match,
                             fullmatch=compiled.fullmatch, findall=compiled.findall, sub=compiled.sub)
        return getattr(compiled, name)


def _c(pattern: str) -> re.Pattern[str]:
    return _Lazy(pattern)  # type: ignore[return-value]
