"""Recommendation → a table with the reasoning, or the settings as env / CLI args / a Kubernetes env list."""

from __future__ import annotations

import shlex

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engdiag.render.human import heading
from engdiag.timeouts.knobs import Kind
from engdiag.timeouts.recommend import Recommendation, Setting


def _settable(rec: Recommendation, kind: Kind) -> list[Setting]:
    return [s for s in rec.settings if s.knob.kind is kind and s.value is not None and s.applies is not False]


def env_lines(rec: Recommendation) -> str:
    """``export NAME=value`` lines for the environment variables that apply."""
    lines = ["# engdiag recommend-timeout"]
    for setting in _settable(rec, Kind.ENV):
        lines.append(f"export {setting.knob.name}={setting.value}")
    lines += [f"# vllm serve flag: {setting.knob.name} {shlex.quote(setting.value or '')}" for setting in _settable(rec, Kind.FLAG)]
    return "\n".join(lines) + "\n"


def args_line(rec: Recommendation) -> str:
    """The ``vllm serve`` flags that apply, on one line."""
    parts = [f"{s.knob.name} {shlex.quote(s.value or '')}" for s in _settable(rec, Kind.FLAG)]
    if not parts:
        return "# no vllm serve flag to set for this version (see --format env or table)\n"
    return " ".join(parts) + "\n"


def k8s_env(rec: Recommendation) -> str:
    """An ``env:`` list for a container spec (values quoted: Kubernetes wants strings)."""
    lines = ["env:"]
    for setting in _settable(rec, Kind.ENV):
        lines.append(f"  - name: {setting.knob.name}")
        lines.append(f'    value: "{setting.value}"')
    flags = _settable(rec, Kind.FLAG)
    if flags:
        lines.append("# and add to the container args:")
        lines += [f"#   {s.knob.name} {s.value}" for s in flags]
    return "\n".join(lines) + "\n"


def _value(setting: Setting) -> str:
    unit = setting.knob.unit
    return f"{setting.value} {unit}" if unit in ("s", "ms") else str(setting.value)


def timeout_view(rec: Recommendation) -> RenderableType:
    """The human table with the reasoning behind every number."""
    p = rec.policy
    head = Text()
    head.append(f" TIMEOUT {rec.timeout_s:.0f} s ", style="bold black on cyan")
    subject = (
        f"p{rec.percentile:g} prompt = {rec.prompt_len:,} tokens" if rec.prompt_len is not None
        else f"one step of {rec.step_tokens:,} tokens"
    )
    head.append(f"  for {subject} at {rec.tokens_per_sec.value:,.0f} tokens/s ({rec.tokens_per_sec.source})")
    model = Text(
        f"model: min(hard cap {p.hard_cap_s:g}, max(base {p.base_s:g}, max(10, tokens ÷ tokens/s) × {p.factor:g})) s",
        style="dim",
    )
    scale = Table(box=None, padding=(0, 2), show_edge=False)
    for column in ("prompt tokens", "est. prefill s", "timeout s"):
        scale.add_column(column, justify="right")
    for bucket in rec.buckets:
        mark = " ◀" if bucket.prompt_len == rec.prompt_len else ""
        scale.add_row(f"{bucket.prompt_len:,}{mark}", f"{bucket.prefill_s:,.1f}", f"{bucket.timeout_s:,.0f}")
    parts: list[RenderableType] = [head, model, heading("How it scales"), scale]
    setting_rows = [s for s in rec.settings if s.applies is not False and s.value is not None]
    keep = [s for s in rec.settings if s.applies is not False and s.value is None]
    absent = [s for s in rec.settings if s.applies is False]
    parts.append(heading("Set these" + (" (vLLM version unknown: check each range)" if any(s.applies is None for s in setting_rows) else "")))
    for setting in setting_rows:
        line = Text()
        line.append(f"{setting.knob.name} = {_value(setting)}", style="bold green")
        line.append(f"   [{setting.knob.versions()}]", style="dim")
        parts += [line, Text(f"    {setting.why}")]
    for setting in keep:
        parts.append(Text(f"{setting.knob.name}: leave as is — {setting.why}", style="dim"))
    if absent:
        parts.append(heading("Not in your setup"))
        for setting in absent:
            parts.append(Text(f"{setting.knob.name} [{setting.knob.versions()}]: {setting.why}", style="yellow"))
    if rec.what_if:
        parts.append(heading("What vLLM's defaults did or would do"))
        for row in rec.what_if:
            if row.note.startswith("fired"):
                parts.append(Text(f"{row.knob} = {row.default_s:g} s: {row.note}", style="red"))
                continue
            observed = "nothing observed" if row.observed_s is None else f"observed {row.observed_s:,.0f} s"
            verdict = {True: "would fire", False: "holds", None: "cannot tell"}[row.would_fire]
            parts.append(Text(f"{row.knob} = {row.default_s:g} s: {verdict} ({observed}, {row.note})"))
    if rec.clears:
        parts.append(Text(f"✓ {rec.clears}", style="green"))
    if rec.notes:
        parts.append(heading("Notes"))
        parts += [Text(f"• {note}") for note in rec.notes]
    return Group(*parts)
