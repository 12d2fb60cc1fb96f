"""``engdiag recommend-timeout``: observed prompts and throughput in, timeout settings out."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from engdiag.commands.base import echo, guard, stderr_console, stdout_console, write_json
from engdiag.errors import UsageError
from engdiag.timeouts.knobs import Platform
from engdiag.timeouts.model import (
    DEFAULT_BASE_S,
    DEFAULT_FACTOR,
    DEFAULT_HARD_CAP_S,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PERCENTILE,
    Policy,
)

# NOTE: the log parser, prometheus-client and the renderers load only when this command runs.

NAME = "recommend-timeout"
NO_ARGS_HELP = False
HELP = (
    "Size vLLM's timeouts from observed prompt lengths and throughput (logs, a /metrics scrape, "
    "prompt-length files) and print the settings for the knobs your version really has."
)


class Format(str, Enum):
    """Output formats."""

    TABLE = "table"
    ENV = "env"
    ARGS = "args"
    JSON = "json"
    K8S = "k8s"


def _window(tail: str | None, since: str | None, until: str | None):  # -> Window
    from engdiag.logs.window import Window, parse_tail, parse_time

    tail_lines, tail_bytes = parse_tail(tail) if tail else (None, None)
    window = Window(tail_lines=tail_lines, tail_bytes=tail_bytes,
                    since=parse_time(since, "--since") if since else None,
                    until=parse_time(until, "--until") if until else None)
    if window.since is not None and window.until is not None and window.since.key > window.until.key:
        raise UsageError(f"--since {since!r} is after --until {until!r}: no line can be in between")
    return window


def _gather(logs: list[str], metrics: str | None, prompt_lens: str | None, prompt_len: list[int],
            window=None):  # -> Observations
    from engdiag.analysis.analyze import analyze
    from engdiag.timeouts.observe import from_lengths, from_timeline, merge
    from engdiag.timeouts.sources import fetch_metrics, parse_metrics, read_prompt_lengths

    parts = []
    if prompt_len:
        if any(n < 0 for n in prompt_len):
            raise UsageError("--prompt-len cannot be negative")
        parts.append(from_lengths(prompt_len, "--prompt-len"))
    if prompt_lens:
        parts.append(read_prompt_lengths(prompt_lens))
    if metrics:
        parts.append(parse_metrics(fetch_metrics(metrics), metrics))
    if logs:
        analysis = analyze(logs, window=window) if window is not None else analyze(logs)
        parts.append(from_timeline(analysis.timeline, analysis.verdict.kind.value, analysis.model))
    return merge(*parts)


def command(
    log: Annotated[list[str] | None, typer.Option("--log", help="vLLM log file or directory (repeatable).")] = None,
    metrics: Annotated[str | None, typer.Option("--metrics", help="A /metrics scrape: file or http(s) URL.")] = None,
    prompt_lens: Annotated[
        str | None, typer.Option("--prompt-lens", help="File: one prompt length a line, or JSON lines.")
    ] = None,
    prompt_len: Annotated[list[int] | None, typer.Option("--prompt-len", help="A prompt length (repeatable).")] = None,
    tokens_per_sec: Annotated[
        float | None, typer.Option("--tokens-per-sec", help="Prefill throughput, tokens/s (overrides the inputs).")
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option("--max-num-batched-tokens", help="Tokens one engine step may hold.")
    ] = None,
    no_chunked_prefill: Annotated[
        bool, typer.Option("--no-chunked-prefill", help="Chunked prefill is off: one step holds a whole prompt.")
    ] = False,
    vllm_version: Annotated[str | None, typer.Option("--vllm-version", help="e.g. 0.11.0 (default: from the log).")] = None,
    base: Annotated[float, typer.Option("--base", help="Never below this many seconds.")] = DEFAULT_BASE_S,
    factor: Annotated[float, typer.Option("--factor", help="Safety factor on the estimate.")] = DEFAULT_FACTOR,
    hard_cap: Annotated[float, typer.Option("--hard-cap", help="Never above this many seconds.")] = DEFAULT_HARD_CAP_S,
    percentile: Annotated[
        float, typer.Option("--percentile", help="Prompt-length quantile to size for (100 = the longest).")
    ] = DEFAULT_PERCENTILE,
    output_tokens: Annotated[
        int, typer.Option("--output-tokens", help="Output tokens a request may generate (client timeout).")
    ] = DEFAULT_OUTPUT_TOKENS,
    allow_lower: Annotated[
        bool,
        typer.Option("--allow-lower", help="Allow a step timeout below vLLM's default (a slow step is then killed sooner)."),
    ] = False,
    platform: Annotated[
        list[Platform] | None,
        typer.Option("--platform", help="Also size the guards of ray (compiled graphs, Serve health checks) or k8s "
                     "(liveness probes); Ray is also recognised in the log."),
    ] = None,
    tail: Annotated[str | None, typer.Option("--tail", help="Only the last N lines or bytes of each log (as analyze).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Skip log lines before this time (as analyze).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Stop reading logs after this time (as analyze).")] = None,
    format: Annotated[Format, typer.Option("--format", help="table, env, args, json or k8s.")] = Format.TABLE,
    json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
) -> None:
    """Recommend timeouts."""
    with guard():
        from engdiag.render.jsonout import dumps
        from engdiag.render.timeout_doc import timeout_doc
        from engdiag.render.timeout_view import args_line, env_lines, k8s_snippet, skipped, timeout_view
        from engdiag.timeouts.recommend import Options, recommend

        policy = Policy(base_s=base, factor=factor, hard_cap_s=hard_cap).validate()
        options = Options(
            percentile=percentile,
            tokens_per_sec=tokens_per_sec,
            max_num_batched_tokens=max_num_batched_tokens,
            chunked_prefill=False if no_chunked_prefill else None,
            vllm_version=vllm_version,
            output_tokens=output_tokens,
            allow_lower=allow_lower,
            platforms=frozenset(platform or ()),
        ).validate()
        window = _window(tail, since, until) if (tail or since or until) else None
        observations = _gather(log or [], metrics, prompt_lens, prompt_len or [], window)
        result = recommend(observations, policy, options)
        chosen = Format.JSON if json else format
        for reason in skipped(result, chosen.value):
            stderr_console().print(f"engdiag: {reason}", markup=False)
        if chosen is Format.JSON:
            write_json(dumps(timeout_doc(result)))
        elif chosen is Format.ENV:
            echo(env_lines(result))
        elif chosen is Format.ARGS:
            echo(args_line(result))
        elif chosen is Format.K8S:
            echo(k8s_snippet(result))
        else:
            stdout_console().print(timeout_view(result))
