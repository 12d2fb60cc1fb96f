"""The timeout advice ``analyze`` prints, taken from the one recommender (``recommend-timeout``).

``analyze`` names the knob whose limit fired and the value ``recommend-timeout``
prints for the same log, with the command that prints it; so the two always
agree, and the printed command runs as printed.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING
from dataclasses import dataclass, replace

from engdiag.analysis.timeline import Timeline
from engdiag.errors import EngdiagError

if TYPE_CHECKING:
    from engdiag.analysis.analyze import Analysis
from engdiag.timeouts import knobs as k
from engdiag.timeouts.observe import from_timeline
from engdiag.timeouts.recommend import Recommendation, recommend


@dataclass(frozen=True)
class TimeoutAdvice:
    """One next step: what to set, and the command that prints the same value with its reasons."""

    text: str
    command: str


def recommend_command(names: list[str]) -> str:
    """``engdiag recommend-timeout --log A --log B --format env`` for exactly these inputs."""
    logs = " ".join(f"--log {shlex.quote(name)}" for name in names) or "--log -"
    return f"engdiag recommend-timeout {logs} --format env"


def recommendation(timeline: Timeline, verdict: str) -> Recommendation | None:
    """What ``recommend-timeout --log`` says about this log (None when it has nothing to go on)."""
    try:
        return recommend(from_timeline(timeline, verdict))
    except EngdiagError:
        return None


def timeout_advice(timeline: Timeline, verdict: str, names: list[str], prefer: k.Knob | None = None) -> TimeoutAdvice | None:
    """Raise the knob that fired (or ``prefer``, or the step timeout) to the recommender's value."""
    rec = recommendation(timeline, verdict)
    if rec is None:
        return None
    killed = rec.observations.killed
    order = [killed.knob] if killed is not None else []
    order += ([prefer] if prefer is not None else []) + [k.EXECUTE_MODEL, k.ITERATION, k.RPC]
    for knob in order:
        setting = rec.setting(knob)
        if setting is None or setting.value is None or setting.applies is False:
            continue
        unit = f" {knob.unit}" if knob.unit in ("s", "ms") else ""
        return TimeoutAdvice(f"set {knob.name} to {setting.value}{unit}; {setting.why}",
                             f"{recommend_command(names)}   # prints {knob.name}={setting.value}"
                             + ("; pipe the same log in" if "-" in names or not names else ""))
    return None


def capture_command(rec: Recommendation) -> str:
    """``export KNOB=N``: the step limit this version really has, at the capture value (engdiag's hard cap)."""
    killed = rec.observations.killed
    order = ([killed.knob] if killed is not None else []) + [k.EXECUTE_MODEL, k.ITERATION, k.RPC]
    for knob in order:
        setting = rec.setting(knob)
        if knob.kind is k.Kind.ENV and setting is not None and setting.applies is not False:
            value = int(rec.capture_s * (1000 if knob.unit == "ms" else 1))
            return f"export {knob.name}={value}"
    return f"export {k.EXECUTE_MODEL.name}={int(rec.capture_s)}"


def capture_advice(timeline: Timeline, verdict: str) -> TimeoutAdvice:
    """Keep a hang alive long enough to snapshot it: the recommender's capture value, temporarily."""
    rec = recommendation(timeline, verdict)
    command = capture_command(rec) if rec is not None else f"export {k.EXECUTE_MODEL.name}=1800"
    return TimeoutAdvice("keep the hang alive long enough to capture it (temporarily; engdiag's hard cap, the "
                         "same value recommend-timeout gives for a capture)", command)


def window_flags(tail: str | None, since: str | None, until: str | None) -> str:
    """analyze's ``--tail/--since/--until`` as flags to repeat on the commands it prints."""
    pairs = (("--tail", tail), ("--since", since), ("--until", until))
    return " ".join(f"{flag} {shlex.quote(value)}" for flag, value in pairs if value)


def windowed(analysis: Analysis, flags: str) -> Analysis:
    """The same analysis with its engdiag commands reading the same part of the logs (same numbers)."""
    if not flags:
        return analysis
    steps = []
    for step in analysis.verdict.next_steps:
        command = step.command or ""
        if command.startswith(("engdiag recommend-timeout ", "engdiag analyze ")):
            body, sep, comment = command.partition("   # ")
            step = replace(step, command=f"{body} {flags}{sep}{comment}")
        steps.append(step)
    return replace(analysis, verdict=replace(analysis.verdict, next_steps=tuple(steps)))
