"""A KV connector that could not load requests' KV from the other instance (vLLM's NixlConnector, wordings read in
0.12, 0.14 and 0.34): the engine is alive and serves on, and the handshake's exception says what to fix."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CORPUS, run_engdiag, steps_of, verdict_of

TAG = "(Worker_TP0 pid=4811) "
CONTEXT = ("| Context: {'failure_type': 'handshake_failed', 'request_id': 'cmpl-7f3a2c9e-0', 'engine_id': 'a1c3-decode', "
           "'remote_engine_id': 'b7d2-prefill', 'remote_request_id': 'cmpl-7f3a2c9e-0', 'remote_host': '10.0.0.12', "
           "'remote_port': 5600, 'num_local_blocks': 12, 'num_remote_blocks': 12, 'local_block_ids_sample': [1, 2]}")
TRACE = (
    "Traceback (most recent call last):",
    ('  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py",'
    " line 1544, in request_ready"),
    "    f.result()",
    '  File "/usr/local/lib/python3.12/dist-packages/zmq/sugar/socket.py", line 815, in recv_multipart',
    "    parts = [self.recv(flags, copy=copy, track=track)]",
)


def _log(*lines: str) -> str:
    return "".join(f"{TAG}{line}\n" for line in lines)


def _handshake(exception: str) -> tuple[str, ...]:
    return (f"ERROR 07-01 20:30:01 [base_worker.py:1548] NIXL transfer failure: handshake_failed {CONTEXT}",
            *TRACE, exception)


@pytest.mark.parametrize(("exception", "why", "fix"), [
    ("zmq.error.Again: Resource temporarily unavailable", "did not answer within 5 s", "nc -zv 10.0.0.12 5600"),
    ("RuntimeError: Remote NIXL agent engine ID mismatch. Expected a1, received b2.", "another engine answered",
     "VLLM_NIXL_SIDE_CHANNEL_HOST"),
    (("RuntimeError: NIXL compatibility hash mismatch. Local: 1a2b, Remote: 3c4d. Prefill and decode instances have "
     "incompatible configurations."), "configured differently", "same vLLM version"),
])
def test_a_failed_handshake_is_an_alive_engine_and_its_exception_names_the_fix(tmp_path, exception, why, fix):
    verdict = verdict_of(tmp_path, _log(*_handshake(exception)))
    assert verdict.kind.value == "healthy" and verdict.confidence >= 0.5, verdict.headline
    assert "handshake with the other instance failed" in verdict.headline and why in verdict.headline
    assert fix in steps_of(verdict)
    assert verdict.evidence[0].line == 1


def test_the_scheduler_s_policy_is_what_happened_to_the_requests(tmp_path):
    failed = "ERROR 07-01 20:30:06 [scheduler.py:3915] Failing 3 request(s) due to KV load failure (failure_policy=fail, " \
             "4096 tokens affected). Request IDs: {'cmpl-1', 'cmpl-2', 'cmpl-3'}"
    verdict = verdict_of(tmp_path, _log(*_handshake("zmq.error.Again: Resource temporarily unavailable"), failed))
    assert "those requests failed (kv_load_failure_policy=fail)" in verdict.headline
    assert '"kv_load_failure_policy": "recompute"' in steps_of(verdict)
    recovered = "WARNING 07-01 20:30:06 [scheduler.py:1718] Recovered from KV load failure: 3 request(s) rescheduled " \
                "(4096 tokens affected)."
    verdict = verdict_of(tmp_path, _log("ERROR 07-01 20:30:01 [nixl_connector.py:1125] Handshake failed for request "
                                        "cmpl-1, marking blocks as invalid", recovered))
    assert verdict.kind.value == "healthy" and "their prompts were recomputed here" in verdict.headline


def test_an_engine_that_died_after_it_is_judged_by_its_death(tmp_path):
    dead = ("(APIServer pid=4700) ERROR 07-01 20:30:09 [async_llm.py:480] EngineCore encountered an issue. See stack "
            "trace (above) for the root cause.")
    text = _log(*_handshake("zmq.error.Again: Resource temporarily unavailable")) + dead + "\n"
    assert verdict_of(tmp_path, text).kind.value != "healthy"


def test_the_real_engine_id_mismatch_names_the_side_channel_host():
    # vLLM issue 27083: a maintainer's 1P1D run with VLLM_NIXL_SIDE_CHANNEL_HOST unset; the decode node recomputed
    done = run_engdiag("analyze", "--json", str(CORPUS / "nixl-handshake-engine-id-mismatch-side-channel-host-unset"
                                                 / "log.txt"))
    verdict = json.loads(done.stdout)["verdict"]
    assert verdict["kind"] == "healthy" and "another engine answered" in verdict["headline"]
    assert any("VLLM_NIXL_SIDE_CHANNEL_HOST" in step["text"] for step in verdict["next_steps"])


def test_vllm_ascends_mooncake_read_that_failed_is_the_same_request_level_failure(tmp_path):
    # vllm-ascend 0.22 kv_p2p/mooncake_connector.py:816 (the request's blocks are then marked invalid for the scheduler)
    line = ("ERROR 07-01 20:30:01 [mooncake_connector.py:816] Mooncake transfer failed for request. "
            "remote_request_id=chatcmpl-7f3a2c9e, ret=-1. ")
    verdict = verdict_of(tmp_path, _log(line))
    assert verdict.kind.value == "healthy" and "a KV read from the other instance failed" in verdict.headline
    assert "ASCEND_TRANSFER_TIMEOUT" in verdict.headline and "hccn_tool" in steps_of(verdict)


def test_a_transfer_counted_failed_for_want_of_nixls_telemetry_names_the_fix(tmp_path):
    """vllm PR 57403: a backend without telemetry hands back None; record_transfer(None) raises AttributeError inside
    the DONE branch and the finished transfer is marked failed (every request, nixl issue 2266)."""
    failure = ("ERROR 07-30 15:51:33 [base_worker.py:2123] NIXL transfer failure: transfer_exception. Marking blocks "
               "as invalid " + CONTEXT.replace("handshake_failed", "transfer_exception"))
    trace = ("Traceback (most recent call last):",
             ('  File "/opt/venv/lib/python3.12/site-packages/vllm/distributed/kv_transfer/kv_connector/v1/nixl/'
             'base_worker.py", line 3016, in _pop_done_transfers'),
             "    self.xfer_stats.record_transfer(res)",
             "AttributeError: 'NoneType' object has no attribute 'xferDuration'")
    verdict = verdict_of(tmp_path, _log(failure, *trace))
    assert verdict.kind.value == "healthy" and "reading NIXL's telemetry for it raised" in verdict.headline
    assert "NIXL_TELEMETRY_ENABLE=1" in steps_of(verdict)


def test_the_real_telemetry_failure_is_an_alive_engine_with_its_transfer_failed():
    # ai-dynamo/dynamo issue 12952: the head of the decode instance's log, the traceback cut after its first line
    done = run_engdiag("analyze", "--json", str(CORPUS / "dynamo-pd-xpu-decode-nixl-telemetry-transfer-exception"
                                                 / "log.txt"))
    verdict = json.loads(done.stdout)["verdict"]
    assert verdict["kind"] == "healthy" and "a KV read from the other instance failed" in verdict["headline"]
    assert any("why the transfer failed" in step["text"] for step in verdict["next_steps"])
