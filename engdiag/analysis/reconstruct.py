"""Timeline → the incident model (activities, waits, the guard that fired)."""

from __future__ import annotations

from engdiag.analysis import guards, phases, waits
from engdiag.analysis.facts import Facts
from engdiag.analysis.model import Model


def build_model(facts: Facts) -> Model:
    """Reconstruct what each process did, who waited on whom, and which guard fired."""
    activities = tuple(phases.activities(facts))
    return Model(
        activities=activities,
        waits=tuple(waits.waits(facts)),
        guard=guards.guard(facts) or guards.cut_startup_wait(facts, activities),
        startup_seconds=phases.startup_seconds(facts, activities),
    )
