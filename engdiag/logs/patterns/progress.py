"""Serving progress and request sizes: the stats line, per-step ``Iteration(N)`` lines
(``--enable-logging-iteration-details``, 0.14+), the request log
(received / added / finished / aborted / failed), and every place a prompt's length shows (the request log's
``prompt_token_ids``, a crash dump's scheduler output, the context-length errors).

These are the lines that prove an engine was working, and the load that sizes a timeout.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import Iteration, Payload, PromptLength, ScheduledTokens, Signal, Stats, Timeout
from engdiag.logs.patterns.base import Rule, _c, _f, _i

EP_DRAIN = "ep-drain"
"""The API server's wait for running requests to drain before an elastic-EP scale (drain_timeout, 120 s)."""
CHAT_TEMPLATE = "chat-template"
"""The API server's limit on rendering one request's chat template (VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT)."""

_KV = re.compile(r"(?<!CPU )(?:GPU|\w{1,40}(?: \+ \w{1,40})?) KV cache usage: (\d+(?:\.\d+)?)%")
_CPU_KV = re.compile(r"CPU KV cache usage: (\d+(?:\.\d+)?)%")
_PREFIX = re.compile(r"Prefix cache hit rate: (\d+(?:\.\d+)?)%")
_PREEMPT = re.compile(r"Preemptions: (\d+)")
_CORRUPT = re.compile(r"Corrupted: (\d+) reqs")


def _stats(match: re.Match[str], text: str) -> Iterable[Payload]:
    rest = text[match.end() : text.find("\n", match.end()) if "\n" in text[match.end() :] else None]
    kv, cpu, prefix, preempt, corrupt = (p.search(rest) for p in (_KV, _CPU_KV, _PREFIX, _PREEMPT, _CORRUPT))
    yield Stats(
        prompt_tps=float(match["p"]),
        generation_tps=float(match["g"]),
        running=int(match["run"]),
        waiting=int(match["wait"]),
        swapped=_i(match["sw"]),
        gpu_kv_pct=_f(kv.group(1)) if kv else None,
        cpu_kv_pct=_f(cpu.group(1)) if cpu else None,
        prefix_hit_pct=_f(prefix.group(1)) if prefix else None,
        preemptions=_i(preempt.group(1)) if preempt else None,
        engine=_i(match["engine"]),
        corrupted=_i(corrupt.group(1)) if corrupt else None,
    )


def _scheduled(match: re.Match[str], text: str) -> Iterable[Payload]:
    lengths = [int(n) for n in re.findall(r"prompt_token_ids_len=(\d+)", text)]
    yield ScheduledTokens(
        total=int(match.group(1)),
        new_requests=text.count("NewRequestData("),
        largest_new_prompt=max(lengths) if lengths else None,
    )


def _stats_rule(literal: str) -> Rule:
    return Rule(Signal.STATS, literal, _STATS, _stats)


_STATS = re.compile(
    r"(?:Engine (?P<engine>\d+): |\d+ Engines Aggregated: )?"
    r"Avg prompt throughput: (?P<p>\d+(?:\.\d+)?) tokens/s, ?Avg generation throughput: (?P<g>\d+(?:\.\d+)?) tokens/s, ?"
    r"(?:(?!Running:)[^\n]){0,80}?Running: (?P<run>\d+) reqs, ?(?:Swapped: (?P<sw>\d+) reqs, ?)?(?:Pending|Waiting): (?P<wait>\d+) reqs"
)


PROGRESS: tuple[Rule, ...] = (
    # progress ------------------------------------------------------------------------
    _stats_rule("Avg prompt throughput"),
    Rule(Signal.PREFIX_CACHE, "Prefix cache hit rate: GPU", _c(r"Prefix cache hit rate: GPU: (\d+(?:\.\d+)?)%")),
    Rule(
        Signal.ITERATION,
        "Iteration(",
        _c(
            r"Iteration\(\d+\): (?P<cr>\d+) context requests, (?P<ct>\d+) context tokens, "
            r"(?P<gr>\d+) generation requests, (?P<gt>\d+) generation tokens, "
            r"iteration elapsed time: (?P<ms>\d+(?:\.\d+)?) ms"
        ),
        lambda m, t: [Iteration(int(m["cr"]), int(m["ct"]), int(m["gr"]), int(m["gt"]), float(m["ms"]))],
    ),
    Rule(Signal.REQUEST_RECEIVED, "Received request", _c(r"Received request \S+?:")),
    Rule(
        Signal.PROMPT_LENGTH,
        "prompt_token_ids: ",
        _c(r"prompt_token_ids: <(?P<least>≥)?(?P<n>\d+) token ids>"),
        lambda m, t: [PromptLength(int(m["n"]), bool(m["least"]), "request_log")] if m["n"] != "0" else [],
    ),
    Rule(Signal.REQUEST_ADDED, "Added request", _c(r"Added request \S+")),
    Rule(Signal.REQUEST_FINISHED, "Finished request", _c(r"Finished request \S+")),
    Rule(Signal.REQUEST_ABORTED, "Aborted request", _c(r"Aborted request(?:\(s\))? \S+")),
    Rule(Signal.REQUEST_FAILED, " failed (", _c(r"Request \S+ failed \((?:engine dead|bad request)")),
    # vLLM 0.34's guard on rendering a request's chat template in the API server's thread pool (renderers/hf.py
    # _render_with_timeout, VLLM_CHAT_TEMPLATE_RENDER_TIMEOUT, 30 s): it warns "Chat template render timed out —
    # executor pool replaced (%d worker(s)). …" and the request fails with "TimeoutError: Chat template rendering
    # timed out after 30.0s. …" (at DEBUG, in its error response); the engine never saw the request
    Rule(Signal.REQUEST_FAILED, "Chat template render", _c(r"Chat template render(?:ing)? timed out(?: after "
                                                             r"(?P<s>\d+(?:\.\d+)?)s)?"),
         lambda m, t: [Timeout(call="chat template rendering", limit_s=_f(m["s"]),
                               guard=CHAT_TEMPLATE)]),
    # An elastic-EP scale (POST /scale_elastic_ep) waits drain_timeout (120 s from the API router) for running
    # requests to finish: "TimeoutError: Timeout reached after %d seconds waiting for requests to drain." (0.11–0.34
    # v1/engine/async_llm.py, 0.34 :1295), answered 408 "Scale failed due to request drain timeout after %d
    # seconds" (entrypoints/serve/elastic_ep/api_router.py:73): the scale is refused, the requests keep running
    Rule(Signal.REQUEST_FAILED, "waiting for requests to drain",
         _c(r"Timeout reached after (?P<s>\d+(?:\.\d+)?) seconds waiting for requests to drain"),
         lambda m, t: [Timeout(call="draining requests before an elastic-EP scale", limit_s=_f(m["s"]),
                               guard=EP_DRAIN)]),
    Rule(Signal.REQUEST_FAILED, "Scale failed due to request drain timeout",
         _c(r"Scale failed due to request drain timeout after (?P<s>\d+) seconds"),
         lambda m, t: [Timeout(call="draining requests before an elastic-EP scale", limit_s=_f(m["s"]),
                               guard=EP_DRAIN)]),
    Rule(Signal.RESPONSE_GENERATED, "Generated response", _c(r"Generated response \S+?:")),
    # prompt sizes --------------------------------------------------------------------
    Rule(
        Signal.PROMPT_LENGTH,
        "prompt_token_ids_len=",
        _c(r"prompt_token_ids_len=(\d+)"),
        lambda m, t: [PromptLength(int(m.group(1)), False, "crash_dump")],
        every=True,
    ),
    Rule(Signal.SCHEDULED_TOKENS, "total_num_scheduled_tokens=", _c(r"total_num_scheduled_tokens=(\d+)"), _scheduled),
    Rule(
        Signal.PROMPT_LENGTH,
        "maximum context length is",
        _c(
            r"maximum context length is \d+ tokens\. However, (?:you requested (?P<a>\d+) tokens"
            r"|your request has (?P<b>\d+) input tokens|your prompt contains (?P<least>at least )?(?P<c>\d+) input tokens)"
        ),
        lambda m, t: [PromptLength(int(m["a"] or m["b"] or m["c"]), bool(m["least"]), "context_error")],
    ),
    Rule(
        Signal.PROMPT_LENGTH,
        "is longer than the maximum model length",
        _c(r"prompt \(length (\d+)\) (?:plus the number of requested output tokens \(at least 1\) )?is longer than"),
        lambda m, t: [PromptLength(int(m.group(1)), False, "context_error")],
    ),
)
