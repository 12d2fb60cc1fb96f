"""One guard as data: who owns it, what it guards, its knob, and its limit when the line that fired it printed none.

``guard_rows`` holds the table of them; ``guarded_waits`` gives each wait on another party its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engdiag.analysis.facts import Facts
from engdiag.logs.events import Event, Phase, Timeout

VersionDefault = Callable[[Facts, str | None], tuple[float | None, str]]


@dataclass(frozen=True, slots=True)
class GuardRow:
    """One guard.  ``{call}`` in its name or ``guarded`` is the call the line named (``call_default`` if none)."""

    name: str
    owner: str
    guarded: str
    knob: str | None
    default_s: float | None = None
    """The limit when the line printed none and no start-up line armed it."""
    default_origin: str = "default"
    unprinted: str = "unknown"
    """Where the limit comes from when nothing above gives it (the setting that decides it)."""
    armed_by: str | None = None
    """A start-up ``Phase`` named ``<armed_by> <seconds>``: the limit the guard was configured with."""
    version_default: VersionDefault | None = None
    """The default where it depends on the version (vLLM's step RPC, Ray's compiled-graph read)."""
    call_default: str = ""

    def limit(self, facts: Facts, event: Event, data: Timeout) -> tuple[float | None, str]:
        """The limit and where it comes from: printed, armed at start-up, the default, or what decides it."""
        if data.limit_s is not None:
            return data.limit_s, "printed"
        if self.armed_by is not None:
            armed = [float(e.data.name.split()[-1]) for e in facts.before(event)
                     if isinstance(e.data, Phase) and e.data.name.startswith(self.armed_by)]
            if armed:
                return armed[-1], "printed"
        if self.version_default is not None:
            return self.version_default(facts, data.call)
        if self.default_s is not None:
            return self.default_s, self.default_origin
        return None, self.unprinted
