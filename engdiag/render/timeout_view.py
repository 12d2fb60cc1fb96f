"""Recommendation → a table with the reasoning, or the settings as env / CLI args / Kubernetes YAML.

The machine formats print only what the user's version has: a flag whose range
is unknown (no version in the inputs) is left out of ``args`` and commented out
in ``k8s``, and the reason goes to stderr (``skipped``), so the output can be
pasted into ``vllm serve`` or a container spec as is.
"""

from __future__ import annotations

import json
import shlex

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engdiag.render.human import Command, hanging, heading
from engdiag.timeouts import knobs as k
from engdiag.timeouts.advice import capture_command
from engdiag.timeouts.recommend import Recommendation, Setting
from engdiag.timeouts.settings import PROBE_PERIOD_S, probe_failures
from engdiag.units import plural


def _settable(rec: Recommendation, kind: k.Kind, known_only: bool = False) -> list[Setting]:
    wanted = (True,) if known_only else (True, None)
    return [s for s in rec.settings if s.knob.kind is kind and s.value is not None and s.applies in wanted]


def skipped(rec: Recommendation, fmt: str) -> list[str]:
    """Why flags were left out of ``args``/``k8s``: the version is unknown and they exist only in some."""
    if fmt not in ("args", "k8s"):
        return []
    out = []
    for setting in rec.settings:
        if setting.knob.kind is k.Kind.FLAG and setting.value is not None and setting.applies is None:
            out.append(f"left out {setting.knob.name} {setting.value}: it exists only in vLLM {setting.knob.versions()} "
                       "and the version is unknown (pass --vllm-version, or a log with the version line)")
    return out


def env_lines(rec: Recommendation) -> str:
    """``export NAME=value`` lines for the environment variables that apply (unknown version: with the range)."""
    lines = ["# engdiag recommend-timeout"]
    for setting in _settable(rec, k.Kind.ENV):
        note = f"  # only vLLM {setting.knob.versions()}" if setting.applies is None and setting.knob.since else ""
        lines.append(f"export {setting.knob.name}={shlex.quote(setting.value or '')}{note}")
    for setting in _settable(rec, k.Kind.FLAG):
        lines.append(f"# vllm serve flag ({setting.knob.versions()}): {setting.knob.name} {shlex.quote(setting.value or '')}")
    return "\n".join(lines) + "\n"


def args_line(rec: Recommendation) -> str:
    """The ``vllm serve`` flags the user's version has, on one line (nothing else on stdout)."""
    parts = [f"{s.knob.name} {shlex.quote(s.value or '')}" for s in _settable(rec, k.Kind.FLAG, known_only=True)]
    return " ".join(parts) + "\n" if parts else ""


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar (a JSON string is one)."""
    return json.dumps(value, ensure_ascii=False)


def k8s_snippet(rec: Recommendation) -> str:
    """``env:`` and ``args:`` lists (and a livenessProbe with ``--platform k8s``) to merge into a container spec."""
    lines = ["# engdiag recommend-timeout: merge into the vLLM container's spec"]
    env = _settable(rec, k.Kind.ENV)
    if env:
        lines.append("env:")
        for setting in env:
            lines.append(f"  - name: {setting.knob.name}")
            lines.append(f"    value: {_yaml(setting.value or '')}")
    flags = _settable(rec, k.Kind.FLAG, known_only=True)
    unknown = [s for s in _settable(rec, k.Kind.FLAG) if s.applies is None]
    if flags:
        lines.append("args:  # append to the vllm serve arguments")
        for setting in flags:
            lines += [f"  - {_yaml(setting.knob.name)}", f"  - {_yaml(setting.value or '')}"]
    for setting in unknown:
        lines.append(f"# only vLLM {setting.knob.versions()} (version unknown): "
                     f"- {_yaml(setting.knob.name)} - {_yaml(setting.value or '')}")
    probe = next((s for s in rec.settings if s.knob is k.K8S_PROBE), None)
    if probe is not None:
        lines += [
            "livenessProbe:",
            "  httpGet: {path: /health, port: 8000}",
            f"  periodSeconds: {PROBE_PERIOD_S}",
            "  timeoutSeconds: 5",
            f"  failureThreshold: {probe_failures(rec.step_timeout_s)}",
        ]
    return "\n".join(lines) + "\n"


def _value(setting: Setting) -> str:
    unit = setting.knob.unit
    return f"{setting.value} {unit}" if unit in ("s", "ms") else str(setting.value)


def _model(rec: Recommendation) -> list[RenderableType]:
    p = rec.policy
    tps = rec.tokens_per_sec
    if tps is None or rec.timeout_s is None:
        return []
    subject = (f"p{rec.percentile:g} prompt = {plural(rec.prompt_len, 'token')}" if rec.prompt_len is not None
               else f"one step of {plural(rec.step_tokens, 'token')}")
    parts: list[RenderableType] = [
        hanging("model:", f"{subject} at {tps.value:,.0f} tokens/s ({tps.source}) → {rec.timeout_s:.0f} s; "
                f"min(hard cap {p.hard_cap_s:g}, max(base {p.base_s:g}, max(10, tokens ÷ tokens/s) × {p.factor:g}))",
                "dim"),
    ]
    if rec.buckets:
        scale = Table(box=None, padding=(0, 2), show_edge=False)
        for column in ("prompt tokens", "est. prefill s", "timeout s"):
            scale.add_column(column, justify="right")
        for bucket in rec.buckets:
            mark = " ◀" if bucket.prompt_len == rec.prompt_len else ""
            scale.add_row(f"{bucket.prompt_len:,}{mark}", f"{bucket.prefill_s:,.1f}", f"{bucket.timeout_s:,.0f}")
        parts += [heading("How it scales"), scale]
    return parts


def timeout_view(rec: Recommendation) -> RenderableType:
    """The human view with the reasoning behind every number."""
    head = Text(f" STEP TIMEOUT {rec.step_timeout_s:.0f} s ", style="bold black on cyan")
    parts: list[RenderableType] = [head]
    if rec.step_bounds:
        parts.append(hanging("", rec.step_bounds[0].why, indent=2))
    if len(rec.step_bounds) > 1:
        parts.append(heading("Sized from (the largest wins)"))
        for number, bound in enumerate(rec.step_bounds):
            parts.append(hanging("✓" if number == 0 else "·", f"{bound.seconds:,.0f} s: {bound.why}",
                                 "" if number == 0 else "dim"))
    parts += _model(rec)
    setting_rows = [s for s in rec.settings if s.applies is not False and s.value is not None]
    keep = [s for s in rec.settings if s.applies is not False and s.value is None]
    absent = [s for s in rec.settings if s.applies is False]
    unknown = any(s.applies is None for s in setting_rows)
    parts.append(heading("Set these" + (" (vLLM version unknown: check each range)" if unknown else "")))
    for setting in setting_rows:
        line = Text(no_wrap=True, overflow="ignore")
        line.append(f"{setting.knob.name} = {_value(setting)}", style="bold green")
        line.append(f"   [{setting.knob.versions()}]", style="dim")
        parts += [line, hanging("", setting.why, indent=3)]
    for setting in keep:
        parts.append(hanging("·", f"{setting.knob.name}: leave as is — {setting.why}", "dim"))
    if absent:
        parts.append(heading("Not in your setup"))
        for setting in absent:
            parts.append(hanging("·", f"{setting.knob.name} [{setting.knob.versions()}]: {setting.why}", "yellow"))
    if rec.what_if:
        parts.append(heading("What vLLM's defaults did or would do"))
        for row in rec.what_if:
            if row.note.startswith("fired"):
                parts.append(hanging("·", f"{row.knob} = {row.default_s:g} s: {row.note}", "red"))
                continue
            observed = "nothing observed" if row.observed_s is None else f"observed {row.observed_s:,.0f} s"
            verdict = {True: "would fire", False: "holds", None: "cannot tell"}[row.would_fire]
            parts.append(hanging("·", f"{row.knob} = {row.default_s:g} s: {verdict} ({observed}, {row.note})"))
    if rec.clears:
        parts.append(hanging("✓", rec.clears, "green"))
    if rec.observations.verdict == "deadlocked":
        parts.append(heading("To capture the hang (temporarily)"))
        parts.append(Command("$ ", capture_command(rec)))
    if rec.notes:
        parts.append(heading("Notes"))
        parts += [hanging("•", note) for note in rec.notes]
    return Group(*parts)
