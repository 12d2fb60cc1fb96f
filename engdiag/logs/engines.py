"""Multi-literal search engines for the bulk scanner, and which one is active.

The literals come from the rule table at run time (``patterns.LITERALS``: every
rule's required literal, the tqdm bars and the 5xx access cue), so a rule added
there is searched for here without any change.  ``hyperscan`` finds them all in
one pass; the ``python`` engine runs ``bytes.find`` per literal.  ``native`` is
hyperscan (or ``bytes.find`` where hyperscan is missing) plus the C hot path of
``engdiag/logs/_scan.c`` for the request lines that are counted, not parsed
(``engdiag.logs.hotscan``; the other backends run its Python twin, ``hyperscan`` with the
request lines, cues and colour codes found by hyperscan: ``hotbulk``, ``cuebulk``).  ``lines`` is
no engine: it is the straightforward line scanner every backend must match.
``ENGDIAG_SCANNER=native|hyperscan|python|lines`` forces one.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import pairwise

from engdiag.errors import UsageError
from engdiag.logs import cuebulk, hotbulk, hscache
from engdiag.logs.hotscan import HOT_LITERALS, native
from engdiag.logs.patterns import LITERALS
from engdiag.logs.windowscan import PYTHON, Searches
from engdiag.logs.windowscan import native as native_searches

ENV = "ENGDIAG_SCANNER"
BACKENDS = ("native", "hyperscan", "python", "lines")

Finder = Callable[[bytes, Sequence[int]], dict[int, set[int]]]
"""(window, line start offsets) → line index → the indices (in ``literal_bytes()``) of the literals it holds."""


def literal_bytes() -> tuple[bytes, ...]:
    """The rules' literals as UTF-8 bytes (what a relevant line must contain one of)."""
    return tuple(dict.fromkeys(literal.encode() for literal in LITERALS))


def _searched(rare: bool) -> list[tuple[int, bytes]]:
    """(number, literal) of the literals a finder searches: all, or all but the hot ones (counted apart)."""
    return [(n, lit) for n, lit in enumerate(literal_bytes()) if not (rare and lit in HOT_LITERALS)]


_IDS = frozenset(b"0123456789, ")


def outside_id_lists(literal: bytes) -> bool:
    """Is every match of ``literal`` kept whole when the token id lists ``hot_scan`` reports are cut out?

    Such a list holds nothing but digits, commas and spaces between its ``[`` and ``]``: a match can
    only meet its bytes by being made of those bytes alone, or by holding ``[`` then one of them, or one
    of them then ``]``.  A match clear of the lists stays whole on its line (no list holds a newline).
    """
    if set(literal) <= _IDS:
        return False
    if b"[" not in literal and b"]" not in literal:  # most: no pair to walk (~1 ms of start-up for all)
        return True
    return not any((a == 0x5B and b in _IDS) or (a in _IDS and b == 0x5D) for a, b in pairwise(literal))


LISTS_CUT = all(outside_id_lists(literal) for _, literal in _searched(rare=True))
"""The search for the rare literals may skip the counted request lines' token id lists (checked at import
against the rule table: should a rule's literal ever hold what a list holds, the lists are searched again)."""


def _python_finder(rare: bool) -> Finder:
    literals = _searched(rare)

    def find(window: bytes, starts: Sequence[int]) -> dict[int, set[int]]:
        found: dict[int, set[int]] = {}
        for number, literal in literals:
            position = window.find(literal)
            while position != -1:
                line = bisect_right(starts, position) - 1
                found.setdefault(line, set()).add(number)
                end = starts[line + 1] if line + 1 < len(starts) else len(window)
                position = window.find(literal, end)
        return found

    return find


@lru_cache(maxsize=2)
def _hyperscan_database(rare: bool = False):  # -> hyperscan.Database
    import re

    literals = _searched(rare)
    expressions = [re.escape(literal) for _, literal in literals]
    return hscache.compiled("rare" if rare else "literals", expressions, [n for n, _ in literals], [0] * len(literals))


def _hyperscan_finder(rare: bool) -> Finder:
    database = _hyperscan_database(rare)

    def find(window: bytes, starts: Sequence[int]) -> dict[int, set[int]]:
        hits: list[tuple[int, int]] = []
        add = hits.append

        def on_match(number: int, _start: int, end: int, _flags: int, _context: object) -> None:
            add((end - 1, number))

        database.scan(window, match_event_handler=on_match)
        found: dict[int, set[int]] = {}
        for offset, number in hits:
            found.setdefault(bisect_right(starts, offset) - 1, set()).add(number)
        return found

    return find


def _hyperscan_works() -> bool:
    try:
        _hyperscan_database(True)
    except Exception:  # noqa: BLE001 - missing, no SIMD support, or a broken wheel: use the next backend
        return False
    return True


def active_backend() -> str:
    """The backend in use: the forced one (``ENGDIAG_SCANNER``) or the fastest available."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced:
        if forced not in BACKENDS:
            raise UsageError(f"{ENV} takes {', '.join(BACKENDS)}; got {forced!r}")
        if forced == "hyperscan" and not _hyperscan_works():
            raise UsageError(
                f"{ENV}=hyperscan but hyperscan cannot be loaded here",
                hint="pip install 'engdiag[fast]' (Linux x86_64/aarch64), or unset " + ENV,
            )
        if forced == "native" and native() is None:
            raise UsageError(
                f"{ENV}=native but the C scanner was not built in this installation",
                hint="reinstall with a C compiler and Python headers present (pip install .), or unset " + ENV,
            )
        return forced
    if native() is not None:
        return "native"
    return "hyperscan" if _hyperscan_works() else "python"


HYPERSCAN = Searches(hotbulk.hot_scan, cuebulk.cues, PYTHON.proc_tags, PYTHON.line_starts, cuebulk.colour,
                     PYTHON.strip_colour, PYTHON.cut_lists)
"""The Python searches, but the request lines, cues and colour codes found by hyperscan (where it loads)."""


@lru_cache(maxsize=8)
def finder(backend: str, rare: bool = False) -> Finder:
    """The literal search of a bulk backend: every literal, or (``rare``) all but the counted hot ones."""
    if backend == "hyperscan" or (backend == "native" and _hyperscan_works()):
        return _hyperscan_finder(rare)
    return _python_finder(rare)


def prepare(backend: str) -> None:
    """Make the rare literals' search now (compiled, or read from ``hscache``): byte ranges forked after this
    inherit it instead of each compiling its own."""
    if backend != "lines":
        finder(backend, rare=True)


def searches(backend: str) -> Searches:
    """The window-level searches of a bulk backend (hot lines, cues, tags, line starts): C for ``native``,
    the request lines, cues and colour codes found by hyperscan for ``hyperscan``."""
    found = native_searches() if backend == "native" else None
    if found is None and backend == "hyperscan":
        found = HYPERSCAN
    return found if found is not None else PYTHON


def available_backends() -> list[str]:
    """The bulk backends that work in this installation, fastest first (``lines`` always does)."""
    found = ["native"] if native() is not None else []
    return [*found, *(["hyperscan"] if _hyperscan_works() else []), "python"]


def describe_backend() -> str:
    """The active backend for ``engdiag --version`` (never raises: a bad setting is named instead)."""
    try:
        return active_backend()
    except UsageError as error:
        return f"none ({error})"
