"""The timeout advice ``analyze`` prints, taken from the one recommender (``recommend-timeout``).

``analyze`` names the knob whose limit fired and the value ``recommend-timeout``
prints for the same log, with the command that prints it; so the two always
agree, and the printed command runs as printed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engdiag.analysis.timeline import Timeline
from engdiag.analysis.verdict import Step
from engdiag.errors import EngdiagError
from engdiag.timeouts import knobs as k
from engdiag.timeouts.observe import from_timeline
from engdiag.timeouts.recommend import Recommendation, recommend

if TYPE_CHECKING:
    from engdiag.analysis.analyze import Analysis
    from engdiag.analysis.model import Model


@dataclass(frozen=True)
class TimeoutAdvice:
    """One next step: what to set, and the command that prints the same value with its reasons."""

    text: str
    command: str


def recommend_command(names: list[str]) -> str:
    """``engdiag recommend-timeout --log A --log B --format env`` for exactly these inputs."""
    logs = " ".join(f"--log {shlex.quote(name)}" for name in names) or "--log -"
    return f"engdiag recommend-timeout {logs} --format env"


def recommendation(timeline: Timeline, verdict: str, model: Model | None = None) -> Recommendation | None:
    """What ``recommend-timeout --log`` says about this log (None when it has nothing to go on)."""
    try:
        return recommend(from_timeline(timeline, verdict, model))
    except EngdiagError:
        return None


def timeout_advice(timeline: Timeline, verdict: str, names: list[str], prefer: k.Knob | None = None,
                   model: Model | None = None) -> TimeoutAdvice | None:
    """Raise the knob that fired (or ``prefer``, or the step timeout) to the recommender's value."""
    rec = recommendation(timeline, verdict, model)
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


def probe_advice(timeline: Timeline, verdict: str, names: list[str], model: Model | None = None) -> TimeoutAdvice | None:
    """A Kubernetes probe the log proves (a kubelet probe failure): size it from the same recommendation."""
    rec = recommendation(timeline, verdict, model)
    if rec is None or k.Platform.K8S not in rec.observations.platforms:
        return None
    probe = rec.setting(k.K8S_PROBE)
    if probe is None or probe.value is None:
        return None
    proof = next((p for p in rec.observations.platform_proof if p.startswith("Kubernetes")), "Kubernetes")
    logs = recommend_command(names).replace("--format env", "--format k8s")
    return TimeoutAdvice(f"keep the liveness probe from restarting a working engine: {probe.value}, or probe with "
                         f"`engdiag watch --probe` (detected from the log — {proof})",
                         f"{logs}   # prints the livenessProbe block" + ("; pipe the same log in" if "-" in names or not names else ""))


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


def capture_advice(timeline: Timeline, verdict: str, model: Model | None = None) -> TimeoutAdvice:
    """Keep a hang alive long enough to snapshot it: the recommender's capture value, temporarily."""
    rec = recommendation(timeline, verdict, model)
    command = capture_command(rec) if rec is not None else f"export {k.EXECUTE_MODEL.name}=1800"
    return TimeoutAdvice("keep the hang alive long enough to capture it (temporarily; engdiag's hard cap, the "
                         "same value recommend-timeout gives for a capture)", command)


_SIZED = {knob.name: knob for knob in (k.ENGINE_READY, k.RAY_CGRAPH_GET, k.RAY_CGRAPH_SUBMIT, k.ITERATION, k.RPC,
                                       k.RAY_SERVE_HEALTH)}
"""Knobs a rule may name in an ``export`` of its own; their values always come from the recommender.
(The step timeout is left out: a deadlock's capture value is deliberately not the recommendation.)"""
_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)=(\d+)\b")


def agree(steps: list[Step], rec: Callable[[], Recommendation | None]) -> list[Step]:
    """Rule-specific steps that set a timeout knob, with the value ``recommend-timeout`` gives for the same log.

    A rule knows why a knob matters (a start-up phase outran it, Ray's compiled graph
    cut a step short); the one recommender says how high to set it, so ``analyze`` and
    ``recommend-timeout`` never print two numbers for one knob.  ``rec`` is called only
    when a step names such a knob.
    """
    out: list[Step] = []
    found: list[Recommendation | None] = []
    for step in steps:
        command = step.command or ""
        if any(name in _SIZED for name, _ in _ASSIGN.findall(f"{step.text} {command}")):
            if not found:
                found.append(rec())
            if found[0] is not None:
                sub = (lambda text: _ASSIGN.sub(lambda m: _value(found[0], m), text))  # type: ignore[arg-type]
                step = replace(step, text=sub(step.text), command=sub(command) if step.command else None)
        out.append(step)
    return out


def _value(rec: Recommendation, match: re.Match[str]) -> str:
    knob = _SIZED.get(match.group(1))
    setting = rec.setting(knob) if knob is not None else None
    if setting is None or setting.value is None or not setting.value.isdigit():
        return match.group(0)
    return f"{match.group(1)}={setting.value}"


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
