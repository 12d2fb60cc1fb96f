"""vLLM's call tracer (VLLM_TRACE_FUNCTION=1): a trace's last line is where its thread was when it stopped.

The lines follow vllm/logger.py's ``_trace_calls`` (0.4: ``{datetime} Call to f in file:N``; 0.6+ adding
`` from g in file:N``, `` to g in file:N`` on a return).  Every earlier call in a trace returned, so only the
end of each trace counts; traces pasted together with ``tail``'s headers are each judged.
"""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import run_engdiag

VLLM = "/usr/local/lib/python3.12/dist-packages/vllm"
STAMP = "2025-09-02 21:59:{:02d}.{:06d}"


def _call(i: int, f: str, where: str, by: str = "execute_model", by_where: str = f"{VLLM}/worker/worker.py:300") -> str:
    return f"{STAMP.format(i // 1000 % 60, i % 10**6)} Call to {f} in {where} from {by} in {by_where}"


def _return(i: int, f: str, where: str, to: str = "execute_model", to_where: str = f"{VLLM}/worker/worker.py:301") -> str:
    return f"{STAMP.format(i // 1000 % 60, i % 10**6)} Return from {f} in {where} to {to} in {to_where}"


ALL_REDUCE = f"{VLLM}/distributed/parallel_state.py:420"


def _analyze(tmp_path, lines: list[str], name: str = "trace.log", scanner: str | None = None) -> dict:
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    env = {"ENGDIAG_SCANNER": scanner} if scanner else {}
    done = run_engdiag("analyze", str(log), "--json", env=env, timeout=120)
    assert done.returncode in (0, 10), done.stderr.decode()
    return orjson.loads(done.stdout)["verdict"]


@pytest.mark.parametrize("scanner", [None, "lines"])
def test_collectives_that_returned_are_no_deadlock(tmp_path, scanner):
    lines = []
    for i in range(0, 3000, 2):  # past what the timeline keeps of a high-volume signal
        lines += [_call(i, "all_reduce", ALL_REDUCE), _return(i + 1, "all_reduce", ALL_REDUCE)]
    lines.append(_call(3000, "load_weights", f"{VLLM}/model_executor/models/llama.py:500"))
    verdict = _analyze(tmp_path, lines, scanner=scanner)
    assert verdict["kind"] == "unknown", verdict["headline"]
    assert "stops inside load_weights (models/llama.py:500)" in verdict["headline"]
    assert [e["line"] for e in verdict["evidence"]] == [len(lines)]
    assert "still grows" in verdict["undecided"]


@pytest.mark.parametrize("scanner", [None, "lines"])
def test_a_trace_that_ends_inside_a_collective_is_a_rank_waiting_for_the_others(tmp_path, scanner):
    lines = [_call(0, "all_reduce", ALL_REDUCE), _return(1, "all_reduce", ALL_REDUCE), _call(2, "all_reduce", ALL_REDUCE)]
    verdict = _analyze(tmp_path, lines, scanner=scanner)
    assert verdict["kind"] == "deadlocked", verdict["headline"]
    assert "the call trace stops inside all_reduce (distributed/parallel_state.py:420)" in verdict["headline"]
    assert verdict["evidence"][0]["line"] == 3


def test_traces_pasted_with_tails_headers_name_the_ranks_outside_the_collective(tmp_path):
    """The shape of v040-pcie-tp4-custom-allreduce-gather-ipc-meta-trace-hang, with two more lines a trace."""
    lines = [
        "==> VLLM_TRACE_FUNCTION_for_process_11_thread_1_at_2025-09-02_21:58:00.000000.log <==",
        _call(0, "all_reduce", ALL_REDUCE), _return(1, "all_reduce", ALL_REDUCE), _call(2, "all_reduce", ALL_REDUCE),
        "",
        "==> VLLM_TRACE_FUNCTION_for_process_12_thread_1_at_2025-09-02_21:58:00.000000.log <==",
        _call(3, "all_reduce", ALL_REDUCE), _return(4, "all_reduce", ALL_REDUCE),
        _return(5, "execute_model", f"{VLLM}/worker/worker.py:301", "execute_method", f"{VLLM}/worker/worker_base.py:90"),
    ]
    verdict = _analyze(tmp_path, lines)
    assert verdict["kind"] == "deadlocked", verdict["headline"]
    assert "1 of 2 call traces stop inside all_reduce" in verdict["headline"]
    assert "1 stop elsewhere" in verdict["headline"]
    cited = {e["line"]: e for e in verdict["evidence"]}
    assert cited[4]["role"] == "root cause"
    assert "outside the collective" in cited[9]["note"]


def test_a_trace_that_ends_in_a_compiler_is_slow(tmp_path):
    inductor = "/usr/local/lib/python3.12/dist-packages/torch/_inductor/compile_fx.py:1700"
    verdict = _analyze(tmp_path, [_call(0, "compile_fx", inductor, "__call__", f"{VLLM}/compilation/backends.py:80")])
    assert verdict["kind"] == "slow", verdict["headline"]
    assert "compilation, inside compile_fx (_inductor/compile_fx.py:1700)" in verdict["headline"]


def test_the_older_tracer_lines_without_the_caller_are_read(tmp_path):
    """vLLM 0.4's tracer printed no ``from g in …`` (v040-pcie-tp4-custom-allreduce-gather-ipc-meta-trace-hang)."""
    line = ("2024-04-15 13:59:04.981153 Call to _gather_ipc_meta in "
            "/workspace/vllm/model_executor/parallel_utils/custom_all_reduce.py:222")
    verdict = _analyze(tmp_path, [line])
    assert verdict["kind"] == "deadlocked" and "_gather_ipc_meta" in verdict["headline"]


def test_a_trace_files_name_gives_the_pid_to_capture(tmp_path):
    name = "VLLM_TRACE_FUNCTION_for_process_4242_thread_139_at_2025-09-02_21:58:00.123456.log"
    verdict = _analyze(tmp_path, [_call(0, "run", f"{VLLM}/attention/backends/flashinfer.py:900")], name=name)
    assert verdict["kind"] == "unknown"
    commands = [s["command"] for s in verdict["next_steps"]]
    assert "engdiag snapshot 4242 --native" in commands
    # the step runs as printed: with no such process it says so, not a usage error
    done = run_engdiag("snapshot", "4242", "--native", "--no-bundle", timeout=60)
    assert done.returncode != 2, done.stderr.decode()


def test_a_log_line_that_mentions_a_call_is_no_trace(tmp_path):
    """Only the tracer's own shape counts: a datetime, then the call, then ``in file:N``."""
    verdict = _analyze(tmp_path, ["INFO 09-02 21:59:00 [api_server.py:1] Call to wake_up method failed: nothing",
                                  "2025-09-02 21:59:00,123 Call to all_reduce in progress"])
    assert "call trace" not in verdict["headline"]


def test_a_long_trace_is_judged_by_its_end_and_only_its_tail_is_read(tmp_path):
    """A trace of gigabytes is read from its end (a note says so); evidence keeps the file's own line numbers."""
    lines = []
    for i in range(0, 12_000, 2):  # over a megabyte, three times the lines read from the end
        lines += [_call(i, "all_reduce", ALL_REDUCE), _return(i + 1, "all_reduce", ALL_REDUCE)]
    lines.append(_call(12_000, "load_weights", f"{VLLM}/model_executor/models/llama.py:500"))
    log = tmp_path / "trace.log"
    log.write_text("\n".join(lines) + "\n")
    assert log.stat().st_size > 1 << 20
    done = run_engdiag("analyze", str(log), "--json", timeout=120)
    verdict = orjson.loads(done.stdout)["verdict"]
    assert verdict["kind"] == "unknown" and "load_weights" in verdict["headline"]
    assert [e["line"] for e in verdict["evidence"]] == [len(lines)]
    assert b"a call trace (VLLM_TRACE_FUNCTION): its last 4096 lines are read" in done.stderr


def test_an_early_call_into_a_collective_that_returned_never_splits_a_trace(tmp_path):
    """The timeline keeps a trace's last lines only: a kept early line would look like the end of a second trace."""
    lines = [_call(i, "forward", f"{VLLM}/model_executor/layers/linear.py:715") if i % 2 == 0 else
             _return(i, "forward", f"{VLLM}/model_executor/layers/linear.py:730") for i in range(1000)]
    lines[63] = _call(63, "all_reduce", ALL_REDUCE)
    verdict = _analyze(tmp_path, lines)
    assert verdict["kind"] == "unknown", verdict["headline"]
