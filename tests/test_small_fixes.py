"""Issue 12, item 6: the smaller defects, each through the real command line (loopback servers only)."""

from __future__ import annotations

import json

import pytest

from engdiag.errors import ExitCode

from tests.conftest import ROOT, run_engdiag, vllm_metrics

EXAMPLE = str(ROOT / "examples" / "tp2-decode-hang.log")


@pytest.mark.parametrize(("body", "looks"), [
    ("<html><body>502 Bad Gateway</body></html>", "is HTML"),
    ('{"status": "ok"}', "is JSON"),
    ("", "is empty"),
    ("process_cpu_seconds_total 1.0\n", "holds no vLLM metric"),
])
def test_a_non_prometheus_body_at_a_metrics_url_says_what_it_is(metrics_server, body, looks):
    metrics_server.body = body
    for args in (("recommend-timeout", "--metrics", metrics_server.url),
                 ("watch", "--once", "--metrics-url", metrics_server.url, "--once-gap", "0")):
        result = run_engdiag(*args)
        err = result.stderr.decode()
        assert result.returncode == ExitCode.INPUT and looks in err and "Traceback" not in err
        assert "http://HOST:8000/metrics" in err and "check the path" not in err


def test_a_vllm_scrape_at_a_url_still_works(metrics_server):
    metrics_server.body = vllm_metrics({1024: 10}, prompt_tokens=10_000, prefill_seconds=10.0)
    assert run_engdiag("recommend-timeout", "--metrics", metrics_server.url, "--json").returncode == 0


def test_one_of_a_thing_is_singular(tmp_path):
    one = tmp_path / "one.log"
    one.write_text("hello\n")
    out = run_engdiag("analyze", str(one)).stdout.decode()
    assert "1 line " in out and "1 input;" in out and "input(s)" not in out and "1 lines" not in out
    table = run_engdiag("recommend-timeout", "--prompt-len", "1", "--tokens-per-sec", "10", "--percentile", "100").stdout
    assert b"1 token " in table and b"1 tokens" not in table


def test_in_flight_is_a_whole_number(metrics_server):
    metrics_server.body = vllm_metrics({1024: 1}, running=15, generation_tokens=5)
    doc = json.loads(run_engdiag("watch", "--once", "--json", "--metrics-url", metrics_server.url,
                                 "--once-gap", "0").stdout)
    assert doc["in_flight"] == 15 and isinstance(doc["in_flight"], int)


def test_json_next_steps_hold_runnable_commands_or_serve_args():
    doc = json.loads(run_engdiag("analyze", EXAMPLE, "--json").stdout)
    for step in doc["verdict"]["next_steps"]:
        assert step["command"] is None or not step["command"].startswith("-")
        assert step["vllm_serve_args"] is None or step["vllm_serve_args"].startswith("--")
    assert any(s["vllm_serve_args"] == "--enforce-eager" for s in doc["verdict"]["next_steps"])


@pytest.mark.parametrize("command", [("analyze", EXAMPLE), ("recommend-timeout", "--log", EXAMPLE)])
def test_since_after_until_is_a_usage_error_not_an_empty_result(command):
    result = run_engdiag(*command, "--since", "10-22 09:50", "--until", "10-22 09:40")
    err = result.stderr.decode()
    assert result.returncode == ExitCode.USAGE and "is after --until" in err and "no vLLM lines" not in err
    assert "nothing to go on" not in err and "Traceback" not in err


def test_per_rank_startup_phases_carry_their_process():
    phases = json.loads(run_engdiag("analyze", EXAMPLE, "--json").stdout)["startup_phases"]
    loaded = [p for p in phases if p["name"] == "weights_loaded"]
    assert {p["process"]["name"] for p in loaded} == {"Worker_TP0", "Worker_TP1"}


@pytest.mark.parametrize("stamp", ["02-30 09:31:00", "10-22 25:61:61"])
def test_an_impossible_time_is_not_passed_off_as_the_previous_one(tmp_path, stamp):
    log = tmp_path / "impossible.log"
    log.write_text(
        "INFO 10-22 09:30:00 [loggers.py:123] Engine 000: Avg prompt throughput: 100.0 tokens/s, Avg generation "
        "throughput: 50.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 10.0%, Prefix cache hit "
        "rate: 0.0%\n"
        f"ERROR {stamp} [core.py:710] EngineCore encountered a fatal error.\n"
    )
    out = run_engdiag("analyze", str(log), env={"COLUMNS": "120", "ENGDIAG_SCANNER": "lines"}).stdout.decode()
    assert "no time of its own" in out and "≥ 0s" in out
    assert "no progress for  0s" not in out


@pytest.mark.parametrize("backend", ["native", "hyperscan", "python"])
def test_the_bulk_scanner_marks_an_impossible_time_like_the_line_scanner(tmp_path, backend):
    from engdiag.logs.engines import available_backends

    if backend not in available_backends():
        pytest.skip(f"the {backend} scanner backend is not available in this installation")
    log = tmp_path / "impossible.log"
    log.write_text(
        "INFO 10-22 09:30:00 [loggers.py:123] Engine 000: Avg prompt throughput: 100.0 tokens/s, Avg generation "
        "throughput: 50.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 10.0%, Prefix cache hit "
        "rate: 0.0%\n"
        "ERROR 02-30 09:31:00 [core.py:710] EngineCore encountered a fatal error.\n"
    )
    out = run_engdiag("analyze", str(log), env={"COLUMNS": "120", "ENGDIAG_SCANNER": backend}).stdout.decode()
    assert "no time of its own" in out and "≥ 0s" in out
    assert "no progress for  0s" not in out


def test_lines_with_no_signal_still_say_what_to_do_next(tmp_path):
    from engdiag.analysis.analyze import analyze

    path = tmp_path / "quiet.log"
    path.write_text("(APIServer pid=41) INFO 08-11 12:38:36 [api_server.py:1] args: port=8000\n")
    verdict = analyze([str(path)]).verdict
    assert verdict.kind.value == "unknown" and "no progress" in verdict.headline
    assert any(step.command and step.command.startswith("engdiag analyze") for step in verdict.next_steps)
