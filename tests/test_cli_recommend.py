"""``engdiag recommend-timeout`` end to end: logs, a metrics scrape over HTTP, prompt-length files."""

from __future__ import annotations

import json

import pytest

from engdiag import synth
from engdiag.errors import ExitCode
from engdiag.timeouts.knobs import KNOBS, parse_version

from tests.conftest import ROOT, closed_port_url, vllm_metrics, write_log

EXAMPLE = str(ROOT / "examples" / "tp2-decode-hang.log")


def doc(cli, *args):
    result = cli("recommend-timeout", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def setting(document, name):
    return next(r for r in document["recommendations"] if r["name"] == name)


@pytest.mark.parametrize(("prompt", "expected"), [(32_000, 240), (10_000_000, 1800), (100, 120)])
def test_done_when_numbers(cli, prompt, expected):
    d = doc(cli, "--tokens-per-sec", "200", "--base", "120", "--factor", "1.5", "--hard-cap", "1800",
            "--percentile", "100", "--prompt-len", str(prompt))
    assert d["timeout_s"] == expected
    assert d["schema"] == "engdiag.timeout-recommendation" and d["schema_version"] == "1.1"


def test_buckets_show_the_timeout_growing_with_the_prompt(cli):
    d = doc(cli, "--tokens-per-sec", "200", "--percentile", "100", "--prompt-len", "32000")
    timeouts = [b["timeout_s"] for b in d["buckets"]]
    assert timeouts == sorted(timeouts) and d["buckets"][-1]["prompt_len"] >= 32000


@pytest.mark.parametrize("version", ["0.6.3", "0.8.5", "0.9.1", "0.10.1.1", "0.11.0", "0.14.0", "0.20.0", "0.34.0"])
def test_every_recommended_knob_exists_in_the_version_it_is_given_for(cli, version):
    d = doc(cli, "--tokens-per-sec", "500", "--prompt-len", "8000", "--vllm-version", version)
    parsed = parse_version(version)
    knobs = {knob.name: knob for knob in KNOBS}
    for entry in d["recommendations"]:
        if entry["value"] is not None and entry["applies"]:
            knob = knobs[entry["name"]]
            engine = None if knob.engine is None else knob.engine
            assert knob.exists_in(parsed, engine), (version, entry["name"])
            if knob.since:
                assert parsed >= knob.since
            if knob.until:
                assert parsed < knob.until


def test_v1_step_timeout_is_sized_from_the_worst_step_with_chunked_prefill(cli):
    d = doc(cli, "--tokens-per-sec", "100", "--prompt-len", "100000", "--percentile", "100",
            "--vllm-version", "0.11.0", "--max-num-batched-tokens", "2048", "--allow-lower")
    step = setting(d, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")
    assert d["step"]["tokens"] == 2048
    assert int(step["value"]) == 120  # 2048 / 100 = 20.5 s × 1.5 = 31 s → base 120 (below 300: --allow-lower)
    unchunked = doc(cli, "--tokens-per-sec", "100", "--prompt-len", "100000", "--percentile", "100",
                    "--vllm-version", "0.11.0", "--no-chunked-prefill")
    assert int(setting(unchunked, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")["value"]) == 1500  # 1000 s × 1.5


def test_v0_gets_iteration_and_rpc_timeouts_not_v1_knobs(cli):
    d = doc(cli, "--tokens-per-sec", "1000", "--prompt-len", "30000", "--vllm-version", "0.6.3")
    assert setting(d, "VLLM_ENGINE_ITERATION_TIMEOUT_S")["applies"] is True
    assert setting(d, "VLLM_RPC_TIMEOUT")["value"] == "40000" and setting(d, "VLLM_RPC_TIMEOUT")["unit"] == "ms"
    assert setting(d, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")["applies"] is False
    assert setting(d, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")["value"] is None


def test_single_gpu_v1_is_told_it_has_no_per_step_guard(cli, tmp_path):
    style = synth.Style(version="0.34.0", tp=1)
    log = write_log(tmp_path / "one-gpu.log", synth.incident("healthy", style, minutes=5))
    d = doc(cli, "--log", str(log))
    step = setting(d, "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS")
    assert step["applies"] is False and "NO per-step timeout" in step["why"]
    assert setting(d, "--watchdog-config")["applies"] is True
    assert any("no per-step guard" in note for note in d["notes"])


def test_from_a_log_the_recommendation_clears_the_longest_healthy_gap(cli):
    d = doc(cli, "--log", EXAMPLE)
    gap = d["observed"]["longest_healthy_gap"]
    assert gap["seconds"] > 0 and d["step"]["timeout_s"] > gap["seconds"]
    assert "clears" in d["clears"]
    fired = [w for w in d["what_if"] if w["name"] == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"][0]
    assert fired["would_fire"] is True and "tp2-decode-hang.log:" in fired["note"]
    assert d["observed"]["vllm_version"] == "0.11.0" and d["observed"]["tensor_parallel"] == 2
    assert "stats intervals" in d["tokens_per_sec"]["source"]


def test_startup_phases_size_the_engine_ready_timeout(cli, tmp_path):
    log = write_log(tmp_path / "s.log", synth.incident("healthy", synth.Style(version="0.20.0"), minutes=3))
    d = doc(cli, "--log", str(log))
    ready = setting(d, "VLLM_ENGINE_READY_TIMEOUT_S")
    assert ready["applies"] is True and int(ready["value"]) >= 600


def test_metrics_scrape_over_http(cli, metrics_server):
    metrics_server.body = vllm_metrics(
        {256: 500, 1024: 300, 4096: 150, 16384: 50}, prompt_tokens=1_200_000, prefill_seconds=600.0,
        generation_tokens=400_000, decode_seconds=20_000.0,
    )
    d = doc(cli, "--metrics", metrics_server.url, "--percentile", "99")
    assert d["prompt_len"] == 16384  # p99 falls in the last bucket, read at its upper bound
    assert d["tokens_per_sec"]["value"] == pytest.approx(2000.0)
    assert d["observed"]["decode_tps_per_request"] == pytest.approx(20.0)
    assert metrics_server.hits == 1


def test_metrics_from_a_file_and_prompt_lengths_from_json_lines(cli, tmp_path):
    scrape = tmp_path / "metrics.txt"
    scrape.write_text(vllm_metrics({1024: 10}, prompt_tokens=10_000, prefill_seconds=10.0))
    lens = tmp_path / "lens.jsonl"
    lens.write_text('{"usage": {"prompt_tokens": 70000}}\n# comment\n5000\n{"prompt_len": 12}\n')
    d = doc(cli, "--metrics", str(scrape), "--prompt-lens", str(lens), "--percentile", "100")
    assert d["prompt_len"] == 70000 and d["tokens_per_sec"]["value"] == 1000.0
    assert d["observed"]["prompt_count"] == 13


@pytest.mark.parametrize("fmt", ["env", "args", "k8s", "table"])
def test_output_formats(cli, fmt):
    result = cli("recommend-timeout", "--format", fmt, "--tokens-per-sec", "200", "--prompt-len", "32000",
                 "--vllm-version", "0.20.0")
    assert result.exit_code == 0
    out = result.stdout
    if fmt == "env":  # the model says 120 s for one step; never below vLLM's default 300 s without --allow-lower
        assert "export VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=300" in out and "VLLM_RPC_TIMEOUT" not in out
    elif fmt == "args":
        assert out.strip() == "--distributed-timeout-seconds 600"
    elif fmt == "k8s":
        yaml = pytest.importorskip("yaml")
        spec = yaml.safe_load(out)
        assert spec["env"] == [{"name": "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "value": "300"}]
        assert spec["args"] == ["--distributed-timeout-seconds", "600"]
    else:
        assert "STEP TIMEOUT 300 s" in out and "→ 240 s" in out
        assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS = 300 s" in out and "Not in your setup" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), ExitCode.INPUT, "nothing to go on"),
        (("--prompt-len", "100"), ExitCode.INPUT, "no throughput"),
        (("--prompt-len", "100", "--tokens-per-sec", "0"), ExitCode.USAGE, "--tokens-per-sec must be positive"),
        (("--prompt-len", "100", "--tokens-per-sec", "-5"), ExitCode.USAGE, "must be positive"),
        (("--prompt-len", "-1", "--tokens-per-sec", "5"), ExitCode.USAGE, "cannot be negative"),
        (("--prompt-len", "1", "--tokens-per-sec", "5", "--base", "600", "--hard-cap", "60"), ExitCode.USAGE, "below the base"),
        (("--prompt-len", "1", "--tokens-per-sec", "5", "--factor", "0"), ExitCode.USAGE, "factor must be a positive"),
        (("--prompt-len", "1", "--tokens-per-sec", "5", "--percentile", "0"), ExitCode.USAGE, "--percentile"),
        (("--prompt-len", "1", "--tokens-per-sec", "5", "--vllm-version", "banana"), ExitCode.USAGE, "not a version"),
        (("--prompt-lens", "/nonexistent/lens.txt", "--tokens-per-sec", "5"), ExitCode.INPUT, "cannot read"),
    ],
)
def test_bad_input_gets_one_clear_line(cli, args, code, message):
    result = cli("recommend-timeout", *args)
    assert result.exit_code == code
    assert message in result.stderr and "Traceback" not in result.stderr


def test_garbage_log_and_garbage_prompt_file(cli, tmp_path):
    garbage = tmp_path / "garbage.log"
    garbage.write_bytes(bytes(range(256)) * 50)
    assert cli("recommend-timeout", "--log", str(garbage)).exit_code == ExitCode.INPUT
    lens = tmp_path / "lens.txt"
    lens.write_text("12\nbanana\n")
    result = cli("recommend-timeout", "--prompt-lens", str(lens), "--tokens-per-sec", "5")
    assert result.exit_code == ExitCode.INPUT and "lens.txt:2" in result.stderr


def test_metrics_url_that_refuses_or_times_out(cli, metrics_server, monkeypatch):
    refused = cli("recommend-timeout", "--metrics", closed_port_url())
    assert refused.exit_code == ExitCode.NETWORK and "cannot fetch" in refused.stderr
    monkeypatch.setattr("engdiag.timeouts.sources.URL_TIMEOUT_S", 0.5)
    metrics_server.hang = True
    slow = cli("recommend-timeout", "--metrics", metrics_server.url)
    assert slow.exit_code == ExitCode.NETWORK and "no answer within" in slow.stderr


def test_metrics_url_answering_an_error(cli, metrics_server):
    metrics_server.status = 503
    result = cli("recommend-timeout", "--metrics", metrics_server.url)
    assert result.exit_code == ExitCode.NETWORK and "503" in result.stderr
