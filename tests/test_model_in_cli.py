"""The model behind a verdict is what the user sees: through the real CLI, on real corpus incidents,
the human view and ``--json`` show the phases (name, start, duration, advancing), the waits (who on whom,
satisfied or not) and the timeout that fired (guard, limit, what it guarded), and the verdict cites them."""

from __future__ import annotations

import json

from tests.conftest import CORPUS, run_engdiag


def _run(case: str, *extra: str):
    result = run_engdiag("analyze", str(CORPUS / case / "log.txt"), *extra, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def test_a_phase_still_advancing_and_the_start_up_guard_it_outlasted():
    case = "nightly-161-shard-load-timeout-ascend"
    doc = json.loads(_run(case, "--json"))
    (loading,) = [a for a in doc["model"]["activities"] if a["name"] == "weight loading"]
    assert loading["advancing"] is True and loading["seconds"] == 2572 and "138/161" in loading["detail"]
    guard = doc["model"]["guard"]
    # the traceback through launch_core_engines is cut before its exception: the guard is inferred, and says so
    assert guard["knob"] == "VLLM_ENGINE_READY_TIMEOUT_S" and guard["limit_seconds"] == 600
    assert "inferred" in guard["limit_origin"] and "weight loading" in guard["guarded"]
    notes = doc["verdict"]["notes"]
    assert any(n.startswith("phase: weight loading") and "still advancing" in n for n in notes)
    assert any(n.startswith("timeout that fired: engine start-up timeout") for n in notes)
    human = _run(case)
    assert "Timeout that fired" in human and "VLLM_ENGINE_READY_TIMEOUT_S" in human
    assert "weight loading" in human and "advancing" in human


def test_a_wait_on_a_working_party_with_its_phase_and_start():
    case = "mnnvl-allreduce-workspace-fd-exchange-30s-retries"
    doc = json.loads(_run(case, "--json"))
    (wait,) = doc["model"]["waits"]
    assert (wait["waiter"], wait["on"], wait["via"], wait["satisfiable"]) == (
        "EngineCore pid=2025", "workers", "shared-memory queue", True)
    (phase,) = doc["model"]["activities"]
    assert phase["start"] == "08-13 11:16:00" and phase["seconds"] == 60 and phase["advancing"] is True
    assert any(n.startswith("wait: EngineCore pid=2025 on workers") for n in doc["verdict"]["notes"])
    human = _run(case)
    for heading in ("Phases", "Waits", "can complete?", "yes — the party is"):
        assert heading in human, heading


def test_a_wait_that_can_never_complete_and_a_guard_with_its_limit():
    roce = json.loads(_run("roce-ib-error-first-allreduce-dual-spark-hang", "--json"))
    assert any(w["satisfiable"] is False and "10.20.21.20" in w["on"] for w in roce["model"]["waits"])
    assert any("it can never complete" in n for n in roce["verdict"]["notes"])
    gather = json.loads(_run("llama405b-fp8-gather-watchdog", "--json"))
    guard = gather["model"]["guard"]
    assert guard["limit_seconds"] == 600 and guard["limit_origin"] == "printed" and "GATHER" in guard["guarded"]
    assert any(n.startswith("timeout that fired: NCCL process-group timeout") for n in gather["verdict"]["notes"])
    assert "Timeout that fired" in _run("llama405b-fp8-gather-watchdog")
