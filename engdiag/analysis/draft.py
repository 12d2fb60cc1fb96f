"""A verdict being put together by one rule: evidence with roles, notes, steps.

Shared by the rule families (phases, waits, timeouts, memory, crashes, benign) so
each family module reads as the domain facts it encodes, not as bookkeeping.
"""

from __future__ import annotations

from engdiag.analysis.advice import next_steps, ruled_out
from engdiag.analysis.facts import Facts
from engdiag.analysis.timeline import FATAL
from engdiag.analysis.verdict import Evidence, Kind, MemoryKind, Role, Step, Verdict
from engdiag.logs.events import Event, Signal
from engdiag.timeouts.advice import agree, recommendation

CONSEQUENCES = FATAL | {
    Signal.SHUTDOWN,
    Signal.NCCL_ABORT,
    Signal.HTTP_ERROR,
    Signal.REQUEST_FAILED,
    Signal.NCCL_WATCHDOG_TIMEOUT,
    Signal.PEER_LOST,
    Signal.COMM_TIMEOUT,
    Signal.RECOVERY_TIMEOUT,
    Signal.EXTERNAL_GUARD,
    Signal.OPERATOR_STOP,
}
_MAX_CONSEQUENCES = 6


def evidence(event: Event, role: Role, note: str = "") -> Evidence:
    """Evidence pointing at one log line."""
    return Evidence(
        source=event.source,
        line=event.line,
        time=event.stamp.text if event.stamp is not None else None,
        signal=event.signal.value,
        text=event.text,
        role=role,
        note=note,
        year=event.stamp.calendar if event.stamp is not None else None,
        inherited_time=event.inherited_time and event.stamp is not None,
    )


def clamp(value: float) -> float:
    """Confidence kept inside (0.05, 0.95): a log never proves more than that."""
    return round(min(0.95, max(0.05, value)), 2)


class Draft:
    """A verdict being put together by one rule."""

    def __init__(self, facts: Facts, kind: Kind, confidence: float, headline: str) -> None:
        self.facts = facts
        self.kind = kind
        self.confidence = confidence
        self.headline = headline
        self.sub_kind: MemoryKind | None = None
        self.items: list[Evidence] = []
        self.notes: list[str] = []
        self.steps: list[Step] = []
        """Steps that follow from this cause; they come before the generic ones."""
        self.generic_steps = True
        self.undecided: str | None = None
        self.root: Event | None = None

    def cite(self, event: Event | None, role: Role, note: str = "") -> Draft:
        if event is not None and not any(
            e.source == event.source and e.line == event.line and e.signal == event.signal.value
            for e in self.items
        ):
            self.items.append(evidence(event, role, note))
        return self

    def cite_consequences(self, root: Event) -> Draft:
        """Fatal lines after the root cause: results of it, not causes."""
        self.root = root
        shown: set[Signal] = {root.signal}
        for event in self.facts.after(root):
            if event.signal in CONSEQUENCES and event.signal not in shown:
                shown.add(event.signal)
                self.cite(event, Role.CONSEQUENCE)
            if len(shown) > _MAX_CONSEQUENCES:
                break
        return self

    def step(self, text: str, command: str | None = None) -> Draft:
        self.steps.append(Step(text, command))
        return self

    def _model_notes(self) -> list[str]:
        """The model behind the verdict, in one line each: the guard, the decisive wait, the phase."""
        model = self.facts.model
        notes: list[str] = []
        g = model.guard
        if g is not None:
            limit = f"{g.limit_s:g} s ({g.limit_origin})" if g.limit_s is not None else f"limit {g.limit_origin}"
            notes.append(f"timeout that fired: {g.name} ({g.owner}), {limit}; it guarded {g.guarded}")
        decisive = [w for w in model.waits if w.satisfiable is not None] or list(model.waits)
        if decisive:
            w = decisive[0]
            state = {True: "the party was working", False: "it can never complete", None: "undetermined"}
            notes.append(f"wait: {w.waiter} on {w.on} via {w.via} — {state[w.satisfiable]} ({w.why[:120]})")
        phases = [a for a in model.activities if a.advancing] or [
            a for a in model.activities if a.startup and a.seconds
        ]
        if phases:
            a = max(phases, key=lambda x: x.seconds or 0)
            took = f"{a.seconds:.0f} s" if a.seconds is not None else "unknown time"
            state = "still advancing" if a.advancing else ("finished" if a.finished else "stopped")
            notes.append(f"phase: {a.name}, {took}, {state} ({a.detail[:100]})")
        return notes

    def done(self) -> Verdict:
        # a knob this rule names gets the one recommender's value for the same log
        steps = agree(list(self.steps), lambda: recommendation(self.facts.t, self.kind.value, self.facts.model))
        if self.generic_steps:
            seen = {(s.text, s.command) for s in steps}
            commands = {s.command for s in steps if s.command}
            for generic in next_steps(self.facts, self.kind, self.sub_kind, self.root):
                if (generic.text, generic.command) not in seen and generic.command not in commands:
                    steps.append(generic)
        return Verdict(
            kind=self.kind,
            confidence=clamp(self.confidence),
            headline=self.headline,
            sub_kind=self.sub_kind,
            evidence=tuple(self.items),
            ruled_out=tuple(ruled_out(self.facts, self.kind)),
            next_steps=tuple(steps),
            undecided=self.undecided,
            notes=tuple(self.notes + self._model_notes()),
        )
