"""Timeout, hang and resource messages read in vllm-ascend's source (0.9.1, 0.11.0, 0.22.1rc1) and torch_npu's, each
on both sides of its line.  The wordings are the source's (or the issue that quotes them); the readings issue #10's
model."""

from __future__ import annotations

from tests.conftest import analysis_of, steps_of, verdict_of

_WATCHDOG = ("[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught collective operation "
             "timeout: Work{b}(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=3600000) ran for 3600185 milliseconds before "
             "timing out.\n"
             "terminate called after throwing an instance of 'std::runtime_error'\n")


def test_torch_npus_hccl_watchdog_is_the_collective_timeout_with_hcclsknobs(tmp_path):
    """torch_npu's ProcessGroupHCCL words its watchdog as torch's ProcessGroupNCCL does (vllm-ascend issue 382)."""
    hccl = analysis_of(tmp_path, _WATCHDOG.format(b="HCCL"))
    assert hccl.verdict.kind.value == "deadlocked" and "HCCL ALLREDUCE #196" in hccl.verdict.headline
    assert hccl.model.guard is not None and hccl.model.guard.name == "HCCL process-group timeout"
    commands = [step.command or "" for step in hccl.verdict.next_steps]
    assert any("HCCL_ENTRY_LOG_ENABLE" in c for c in commands) and not any("NCCL_DEBUG" in c for c in commands)
    nccl = analysis_of(tmp_path, _WATCHDOG.format(b="NCCL"))
    assert "NCCL ALLREDUCE #196" in nccl.verdict.headline
    assert any("NCCL_DEBUG" in (step.command or "") for step in nccl.verdict.next_steps)


def test_hccls_socket_wait_at_link_set_up_is_a_rendezvous_short_of_a_member(tmp_path):
    """EI0006 at set-up: "The remote does not initiate a connect request" (HCCL_CONNECT_TIMEOUT; issue 5461)."""
    line = ("(Worker_TP0 pid=4811) ERROR 07-01 20:30:01 [multiproc_executor.py:671] RuntimeError: Get_Socket_Timeout"
            "(EI0006): Getting socket times out. Reason: 1. The remote does not initiate a connect request. some NPUs "
            "in the cluster are abnormal.\n")
    verdict = verdict_of(tmp_path, line)
    assert verdict.kind.value == "deadlocked" and "HCCL_CONNECT_TIMEOUT" in verdict.headline
    # the other EI0006 reason, a remote rank that never sent its data inside a collective, stays a collective's wait
    mid_run = verdict_of(tmp_path, line.replace("The remote does not initiate a connect request",
                                                "Remote Rank did not send the data in time"))
    assert mid_run.kind.value == "deadlocked" and "HCCL_CONNECT_TIMEOUT" not in mid_run.headline


_EI0007 = ("(VllmWorker TP3 pid=2322) ERROR 09-04 09:44:06 [multiproc_executor.py:596] RuntimeError: EI0007: [PID: 2322] "
           "2025-09-04-09:44:05.909.517 Failed to allocate resource[{r}] with info [aicpu rank:7]. Reason: Memory "
           "resources are exhausted.\n")


def test_an_hccl_queue_pair_that_could_not_be_created_is_no_device_memory(tmp_path):
    """EI0007 on resource[qp]: an RDMA queue pair for a link (issue 9005: 20 GB free, fixed by a newer driver)."""
    qp = verdict_of(tmp_path, _EI0007.format(r="qp"))
    assert qp.kind.value == "crashed"
    assert any("ASCEND_LAUNCH_BLOCKING" in (step.command or "") for step in qp.next_steps)  # NPU steps, not CUDA's
    assert verdict_of(tmp_path, _EI0007.format(r="DeviceMemory")).kind.value == "fragmented"


_LLMDD = ("(EngineCore_DP0 pid=4750) WARNING 07-01 20:30:01 [llmdatadist_c_mgr_connector.py:886] Some requests in "
          "prefill node fail to receive KV Cache transfer done signal{within}. If a greater mean TTFT is acceptable, you "
          "can 'export {knob}=600' (10 minutes) to relax the timeout condition.\n")


def test_vllm_ascends_prefill_holds_name_the_variable_that_sets_them(tmp_path):
    """LLMDataDist's hold (0.9.1: its own variable, 120 s; 0.11: NIXL's) and 0.11 Mooncake's "Force freed request"."""
    old = verdict_of(tmp_path, _LLMDD.format(within=" in 120s", knob="VLLM_LLMDD_ABORT_REQUEST_TIMEOUT"))
    assert old.kind.value == "unknown" and "within 120 s" in old.headline
    assert "VLLM_LLMDD_ABORT_REQUEST_TIMEOUT" in steps_of(old)
    for text in (_LLMDD.format(within="", knob="VLLM_NIXL_ABORT_REQUEST_TIMEOUT"),
                 "(Worker_TP0 pid=4811) INFO 07-01 20:30:01 [mooncake_connector.py:124] Force freed request: cmpl-7\n"):
        verdict = verdict_of(tmp_path, text)
        assert verdict.kind.value == "unknown" and "freed KV blocks" in verdict.headline
        steps = steps_of(verdict)
        assert "VLLM_NIXL_ABORT_REQUEST_TIMEOUT" in steps and "kv_lease_duration" not in steps  # no lease to set
    # the fork's Mooncake wording with its seconds stays the hold set short
    short = verdict_of(tmp_path, "(Worker_DP3_TP1_EP25 pid=649) ERROR 08-29 09:12:47 [mooncake_connector.py:233] Force "
                                 "freed expired request: r-1. Reason: Request exceeded timeout threshold (10 seconds). "
                                 "Action: released.\n")
    assert short.kind.value == "slow"


_PULL = ("(EngineCore_DP0 pid=4750) ERROR 07-01 20:30:01 [llmdatadist_c_mgr_connector.py:{line}] KV transfer task failed: "
         "LLMDataDistCMgrConnectorWorker: Timeout during pull_blocks, you can try to increase the sync_kv_timeout config "
         "or checking your connect status\n")


def test_an_llmdatadist_pull_that_timed_out_is_a_decode_request_waiting_on_its_prefill_peer(tmp_path):
    """The future's callback logs it (0.9.1 llmdatadist_c_mgr_connector.py:852, 20 s fixed; 0.11 :889, from
    ASCEND_TRANSFER_TIMEOUT): the raise skips the request's finish, so it never completes."""
    for line in (852, 889):
        result = analysis_of(tmp_path, _PULL.format(line=line))
        assert result.verdict.kind.value == "deadlocked" and "sync_kv_timeout" in result.verdict.headline
        assert any(w.on == "the prefill instance" and w.via == "KV pull (LLMDataDist)" for w in result.model.waits)
        guard = result.model.guard
        assert guard is not None and guard.knob == "ASCEND_TRANSFER_TIMEOUT (0.11+)" and "20 s" in guard.limit_origin
        assert "ASCEND_TRANSFER_TIMEOUT" in steps_of(result.verdict)
    # vLLM's own NIXL pull failing is another wording, read elsewhere: not this guard
    other = analysis_of(tmp_path, _PULL.format(line=852).replace("Timeout during pull_blocks", "pull_blocks failed"))
    assert other.model.guard is None or other.model.guard.name != "LLMDataDist KV-pull timeout"


def test_a_mooncake_side_channel_that_never_answers_is_a_peer_that_is_not_there(tmp_path):
    """ensure_zmq_recv polls 1 s three times (0.11 mooncake_connector.py:1260/:1262; 0.22
    kv_p2p/mooncake_connector.py:2843, worded 'Receive failed after all retries. source=…, error=Receive timeout.');
    the per-try 'retrying… (2 attempts left)' warning is no give-up."""
    head = "(EngineCore_DP0 pid=4750) ERROR 07-01 20:30:01 [mooncake_connector.py:1260] "
    for text in (head + "Receive failed after all retries: Receive timeout\n",
                 head + "Receive failed after all retries. source=10.0.0.2:30000, error=Receive timeout.\n",
                 "(EngineCore_DP0 pid=4750) RuntimeError: Failed to receive data after 3 retries: Receive timeout\n"):
        result = analysis_of(tmp_path, text)
        assert result.verdict.kind.value == "deadlocked" and "side channel" in result.verdict.headline, text
        assert result.model.guard is not None and result.model.guard.limit_s == 3.0
        assert "kv_port" in steps_of(result.verdict)
    retry = verdict_of(tmp_path, head.replace("ERROR", "WARNING") + "Receive failed: Receive timeout, retrying... "
                                                                   "(2 attempts left)\n")
    assert retry.kind.value != "deadlocked"
