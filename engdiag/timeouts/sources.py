"""Inputs of ``recommend-timeout`` besides logs: prompt-length files and Prometheus scrapes.

The only module that reads these files, parses Prometheus text (with
prometheus-client's own parser) or touches the network — and only for a URL the
user named.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from engdiag.errors import InputError, NetworkError
from engdiag.quantile import nearest_rank
from engdiag.timeouts.observe import Figure, Observations, from_lengths

PROMPT_KEYS = ("prompt_tokens", "prompt_len", "prompt_length", "num_prompt_tokens", "input_tokens", "prompt_token_count")
"""JSON fields read as a prompt length (also inside ``usage``, as OpenAI responses carry it)."""
MAX_SCRAPE_BYTES = 64 << 20
URL_TIMEOUT_S = 5.0


def _length_from_json(text: str) -> int | None:
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    for holder in (record, record.get("usage")):
        if isinstance(holder, dict):
            for key in PROMPT_KEYS:
                value = holder.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
    return None


def read_prompt_lengths(path: str) -> Observations:
    """One integer a line, or JSON lines with a prompt-token field; ``#`` comments allowed."""
    lengths: list[int] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                value = int(line) if line.lstrip("-").isdigit() else _length_from_json(line)
                if value is None:
                    raise InputError(
                        f"{path}:{number}: neither an integer nor JSON with a prompt-token field",
                        hint=f"one integer per line, or JSON lines with one of {', '.join(PROMPT_KEYS)}",
                    )
                if value < 0:
                    raise InputError(f"{path}:{number}: a prompt length cannot be negative ({value})")
                lengths.append(value)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from error
    if not lengths:
        raise InputError(f"{path}: holds no prompt length")
    return from_lengths(lengths, f"--prompt-lens {Path(path).name}")


def fetch_metrics(location: str) -> str:
    """The text of a scrape: a file path, or an http(s) URL fetched with a short timeout."""
    if not location.startswith(("http://", "https://")):
        try:
            with open(location, encoding="utf-8", errors="replace") as handle:
                return handle.read(MAX_SCRAPE_BYTES)
        except OSError as error:
            raise InputError(f"{location}: cannot read ({error.strerror or error})") from error
    try:
        with urllib.request.urlopen(location, timeout=URL_TIMEOUT_S) as response:  # noqa: S310 - user's URL
            return response.read(MAX_SCRAPE_BYTES).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        raise NetworkError(f"{location}: the server answered {error.code} {error.reason}") from error
    except TimeoutError as error:
        raise NetworkError(f"{location}: no answer within {URL_TIMEOUT_S:g} s") from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise NetworkError(f"{location}: cannot fetch ({reason})") from error


def _is_url(name: str) -> bool:
    return name.startswith(("http://", "https://"))


def _metrics_hint(name: str) -> str:
    if _is_url(name):
        return "point it at the vLLM server's Prometheus endpoint, e.g. http://HOST:8000/metrics"
    return "save a scrape of the vLLM server's endpoint: curl -s http://HOST:8000/metrics > FILE"


def not_prometheus(name: str, text: str, error: Exception | None = None) -> InputError:
    """One precise line for a body that is not a vLLM scrape: say what it looks like instead."""
    body = text.lstrip()
    if not body:
        looks = "is empty"
    elif body.startswith("<"):
        looks = "is HTML (a web page or a proxy's error page)"
    elif body.startswith(("{", "[")):
        looks = "is JSON"
    else:
        looks = f"is not Prometheus text format ({error})" if error else "holds no vLLM metric (vllm:...)"
    where = "the answer from " if _is_url(name) else ""
    return InputError(f"{where}{name} {looks}, not a vLLM /metrics scrape", hint=_metrics_hint(name))


def parse_metrics(text: str, name: str) -> Observations:
    """Prompt-length histogram and per-request prefill/decode rates from vLLM's /metrics."""
    buckets: dict[float, float] = {}
    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "vllm:request_prompt_tokens_bucket":
                    bound = float(sample.labels.get("le", "inf"))
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
                elif sample.name in _TOTALS:
                    totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    except (ValueError, TypeError) as error:
        raise not_prometheus(name, text, error) from error
    if not buckets and not totals:
        raise not_prometheus(name, text)
    lengths, open_ended = _histogram_lengths(buckets)
    return Observations(
        prompt_lengths=lengths,
        prompt_sources=(f"metrics histogram ({sum(lengths.values())} requests)",) if lengths else (),
        lower_bound=open_ended,
        prefill_tps=_rate(totals, "vllm:prompt_tokens_total", "vllm:request_prefill_time_seconds_sum", "prefill"),
        decode_tps=_rate(totals, "vllm:generation_tokens_total", "vllm:request_decode_time_seconds_sum", "decode"),
    )


_TOTALS = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_prefill_time_seconds_sum",
    "vllm:request_decode_time_seconds_sum",
)


def _histogram_lengths(buckets: dict[float, float]) -> tuple[dict[int, int], bool]:
    """Per-bucket counts placed at each bucket's upper bound (the conservative reading)."""
    lengths: dict[int, int] = {}
    previous = 0.0
    finite = [b for b in sorted(buckets) if not math.isinf(b)]
    open_ended = False
    for bound in sorted(buckets):
        count = int(round(buckets[bound] - previous))
        previous = buckets[bound]
        if count <= 0:
            continue
        if math.isinf(bound):
            if not finite:
                continue
            open_ended = True
            bound = finite[-1]
        lengths[int(bound)] = lengths.get(int(bound), 0) + count
    return lengths, open_ended


def _rate(totals: dict[str, float], tokens: str, seconds: str, what: str) -> Figure | None:
    if totals.get(tokens, 0) > 0 and totals.get(seconds, 0) > 0:
        return Figure(totals[tokens] / totals[seconds], f"metrics: {tokens} ÷ {seconds} ({what} per request)")
    return None


@dataclass(frozen=True)
class MetricsSample:
    """One scrape of vLLM's /metrics, summed over engines and models."""

    running: float | None
    waiting: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    finished: float | None
    kv_pct: float | None
    prompt_p99: int | None


_GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "finished",
}
_KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


def parse_sample(text: str, name: str) -> MetricsSample:
    """The progress and load figures of one scrape (for ``watch``)."""
    values: dict[str, float] = {}
    kv: list[float] = []
    buckets: dict[float, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                field = _GAUGES.get(sample.name)
                if field is not None:
                    values[field] = values.get(field, 0.0) + sample.value
                elif sample.name in _KV:
                    kv.append(sample.value * 100)
                elif sample.name == "vllm:request_prompt_tokens_bucket":
                    bound = float(sample.labels.get("le", "inf"))
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
    except (ValueError, TypeError) as error:
        raise not_prometheus(name, text, error) from error
    if not values and not kv:
        raise not_prometheus(name, text)
    lengths, _ = _histogram_lengths(buckets)
    return MetricsSample(
        running=values.get("running"),
        waiting=values.get("waiting"),
        prompt_tokens=values.get("prompt_tokens"),
        generation_tokens=values.get("generation_tokens"),
        finished=values.get("finished"),
        kv_pct=max(kv) if kv else None,
        prompt_p99=nearest_rank(lengths, 0.99),
    )
