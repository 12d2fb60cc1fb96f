"""User data never becomes a signal: prompts, stop strings, bad words, guided-decoding schemas, grammars, tools.

A request whose ``stop=['CUDA out of memory']`` was once reported as a CUDA OOM.
Every literal of every rule, placed in any user-data field of a real request
line, must leave only the request's own events — in every scanner backend.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engdiag.analysis.analyze import analyze
from engdiag.logs.patterns import LITERALS
from engdiag.redact import redact
from tests.conftest import run_engdiag, write_log

HEAD = "(APIServer pid=7) INFO 10-22 09:30:{s:02d} [logger.py:43] "
REQUEST_SIGNALS = {"request_received", "prompt_length", "request_added"}


def _request(second: int, field: str, value: str) -> str:
    quoted = repr(value)
    fields = {
        "prompt": ("prompt: " + quoted, ""),
        "stop": ("prompt: 'hi'", f"stop=[{quoted}], "),
        "bad_words": ("prompt: 'hi'", f"bad_words=[{quoted}], "),
        "json": ("prompt: 'hi'", f"guided_decoding=GuidedDecodingParams(json={{'description': {quoted}}}, regex=None), "),
        "regex": ("prompt: 'hi'", f"guided_decoding=GuidedDecodingParams(json=None, regex={quoted}), "),
        "choice": ("prompt: 'hi'", f"structured_outputs=StructuredOutputsParams(choice=['ok', {quoted}]), "),
        "grammar": ("prompt: 'hi'", f"structured_outputs=StructuredOutputsParams(grammar={quoted}), "),
    }
    prompt, params = fields[field]
    return (
        HEAD.format(s=second) + f"Received request chatcmpl-{second}: {prompt}, params: SamplingParams(n=1, "
        f"temperature=0.7, {params}max_tokens=16), prompt_token_ids: [1, 2, 3], lora_request: None."
    )


FIELDS = ["prompt", "stop", "bad_words", "json", "regex", "choice", "grammar"]


def test_a_stop_string_saying_cuda_oom_is_not_an_oom(tmp_path):
    path = write_log(tmp_path / "server.log", [_request(1, "stop", "CUDA out of memory")])
    result = run_engdiag("analyze", "--json", str(path))
    doc = json.loads(result.stdout)
    assert "cuda_oom" not in doc["signals"]
    assert doc["verdict"]["kind"] != "oom"
    assert b"CUDA out of memory" not in result.stdout


@pytest.mark.parametrize("field", FIELDS)
def test_rule_literals_in_any_user_field_give_only_the_request(tmp_path, field):
    lines = [_request(i % 60, field, f"... {literal} ...") for i, literal in enumerate(LITERALS)]
    path = write_log(tmp_path / "server.log", lines)
    signals = {event.signal.value for event in analyze([str(path)], jobs=1).timeline.events}
    assert signals <= REQUEST_SIGNALS, signals - REQUEST_SIGNALS


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FIELDS), st.sampled_from(LITERALS), st.text(alphabet="[]{}()'\"\\,: ab", max_size=12))
def test_brackets_and_quotes_in_user_data_never_leak_a_literal(field, literal, noise):
    line = _request(1, field, noise + literal + noise)
    masked = redact(line.split("] ", 1)[1])
    assert literal not in masked.replace("Received request", "").replace("prompt_token_ids: ", "")


@pytest.mark.parametrize("value", ["prompt: 'tell me a secret'", 'prompt: "tell me a secret"',
                                   "prompt_token_ids: [1, 2, 3]", "extra_args={secret: 1}"])
def test_a_value_opened_by_any_one_quote_or_bracket_alone_is_masked(value):
    """Each of ' " [ { alone opens a value to mask (mask's quick check looks for all four)."""
    from engdiag.redact import mask

    masked = mask(f"Received request x: {value}, lora: none").text
    assert "secret" not in masked and "1, 2, 3" not in masked and masked.endswith(", lora: none")
