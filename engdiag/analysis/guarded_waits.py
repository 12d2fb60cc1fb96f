"""Waits on another party that a guard of their own gave up on: KV between a prefill and a decode instance, a
payload between vllm-omni's stages, a device's dispatch queue.  Each is one ``Timeout.guard``; what engdiag says
of it — who waits on whom, the guard and its limit, the reading, the next steps — is one row here, so the wait
model (``waits.py``), the guard model (``guards.py``) and the verdict (``wait_rules.py``) say the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from engdiag.analysis.guard_row import GuardRow
from engdiag.logs.patterns.waits import (
    ASCEND_RECV,
    LLMDD_PULL,
    MOONCAKE,
    MORIIO_RECV,
    OMNI_DLO,
    OMNI_INPUT,
    OMNI_KV,
    TT_METAL,
)


@dataclass(frozen=True)
class GuardedWait:
    """One guard on a wait for another party, and everything said when it fires."""

    waiter: str
    """Who waits, when the line names no process."""
    on: str
    via: str | None
    """The channel; None: the timeout's own call names it."""
    why: str
    headline: str
    confidence: float
    decides: str | None
    row: GuardRow
    """The guard that gave up: its owner, what it guards, its knob, its limit when the line prints none."""
    steps: tuple[tuple[str, str | None], ...] = ()


def _do(text: str, command: str | None = None) -> tuple[str, str | None]:
    """A next step: what to do, and the command that does it where one does."""
    return text, command


_STAGE_BEFORE = ("the stage before's log for that request id: it failed or produced nothing (stuck for good), or was "
                 "still generating (a limit shorter than its work)")

GUARDED_WAITS: dict[str, GuardedWait] = {
    # mooncake-pd-decode-stuck-waiting-p-side-ready
    MOONCAKE: GuardedWait(
        "the decode instance", "the prefill instance", "KV transfer (Mooncake)",
        "the prefill side never had the requests' KV ready within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT",
        "deadlocked (likely): the decode instance gave up pulling KV from the prefill instance, whose side never had "
        "it ready within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s by default)", 0.5,
        "the prefill instance's log at that time: those requests still prefilling there (a slow prefill under load) "
        "or never scheduled (stuck)",
        GuardRow("Mooncake KV-transfer abort timeout", "vLLM (Mooncake connector)",
                 "the prefill side making a request's KV ready for the decode side",
                 "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", default_s=480.0),
        (_do("read the prefill instance's log for those request ids: scheduled and still running, or never there (the "
          "proxy's routing, or a prefill engine that stopped)"),
         _do("only if the prefill side was still working on them: raise VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s by "
          "default) on both instances, above the longest prefill under that load"))),
    # vllm-omni-hunyuan-ar-replica-kv-wait-timeout
    OMNI_KV: GuardedWait(
        "a stage", "the stage before it", "KV transfer (vllm-omni)",
        "that stage never delivered the request's KV within the limit",
        "deadlocked (likely): a stage gave up waiting for a request's KV cache from the stage before it, which never "
        "delivered it", 0.5, _STAGE_BEFORE,
        GuardRow("vllm-omni KV-transfer wait", "vllm-omni",
                 "the next stage receiving a request's KV cache from the stage before it", None),
        (_do("read the stage before's log for that request id: an error or zero tokens there is the cause"),
         _do("check that the stages agree on the KV keys: the same tensor-parallel size on both, or a connector that "
          "maps ranks between them"))),
    # vllm-omni 0.22 / 0.30 omni_scheduler_mixin.py (tests/test_omni_lmcache_wordings.py)
    OMNI_INPUT: GuardedWait(
        "a stage", "the stage before it", "stage input (vllm-omni)",
        "that stage never delivered the requests' input within the limit",
        "deadlocked (likely): a stage's scheduler gave up on requests whose input from the stage before it never "
        "came (vllm-omni's VLLM_OMNI_INPUT_WAIT_TIMEOUT_S; it marked them FINISHED_ERROR)", 0.5, _STAGE_BEFORE,
        GuardRow("vllm-omni stage-input wait", "vllm-omni",
                 "a stage's scheduler receiving a request's input from the stage before it",
                 "VLLM_OMNI_INPUT_WAIT_TIMEOUT_S"),
        (_do("read the stage before's log for those request ids: an error, zero tokens, or a send that gave up ('chunk "
          "send gave up', 'Pool exhausted') there is the cause"),
         _do("only if the stage before was still generating them: raise VLLM_OMNI_INPUT_WAIT_TIMEOUT_S (seconds; 600 in "
          "0.30, 300 in 0.22) on the waiting stage"))),
    # vLLM 0.34 moriio_connector.py:3026 (tests/test_vllm_source_wordings.py)
    MORIIO_RECV: GuardedWait(
        "the decode instance", "the prefill instance", "KV read (MoRIIO, RDMA)",
        "the read's RDMA completion never arrived within recv_abort_timeout; the request's KV load failed",
        "deadlocked (likely): the decode instance aborted an RDMA read of a request's KV from the prefill instance "
        "whose completion never came (MoRIIO's recv_abort_timeout); that load failed", 0.5,
        "the prefill instance's log and the RDMA fabric at that time: an instance that went away or a link that "
        "dropped the completion (stuck for good); a read that was still moving is rare at this limit",
        GuardRow("MoRIIO RDMA read timeout", "vLLM (MoRIIO connector)",
                 "an RDMA read of a request's KV from the prefill instance",
                 "kv_connector_extra_config.recv_abort_timeout"),
        (_do("check the RDMA link between the two instances (link state, errors) and that the prefill instance is up",
             "ibv_devinfo; ibstat"),
         _do("only if the fabric was saturated, not broken: raise recv_abort_timeout in --kv-transfer-config's "
             "kv_connector_extra_config"))),
    # vllm-omni 0.30 diffusion/executor/multiproc_executor.py:505 (tests/test_omni_lmcache_wordings.py)
    OMNI_DLO: GuardedWait(
        "a diffusion DP rank", "the other DP ranks", "DLO AllGather (vllm-omni)",
        "one rank never joined the data-parallel collective wave within the limit",
        "deadlocked: a diffusion data-parallel rank never joined a DLO collective wave, and vllm-omni shut the worker "
        "group down (a group with a rank stuck in its AllGather cannot be reused)", 0.7,
        "each DP rank's log at that time: the rank with no step that wave (an uneven batch, an error, a crash) is the "
        "one the others waited for",
        GuardRow("vllm-omni DLO DP wave timeout", "vllm-omni", "an AllGather of the diffusion data-parallel ranks (DLO)",
                 "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT", default_s=600.0),
        (_do("read every DP rank's log for the wave that timed out: the rank that did not reach it is the cause"),
         _do("restart the server: vllm-omni shut the worker group down, it does not recover by itself"))),
    # vllm-ascend 0.9.1 / 0.11 llmdatadist_c_mgr_connector.py (tests/test_vllm_ascend_wordings.py)
    LLMDD_PULL: GuardedWait(
        "the decode instance", "the prefill instance", "KV pull (LLMDataDist)",
        "the blocks did not arrive within LLMDataDist's sync_kv_timeout; that request never completes",
        "deadlocked (likely): the decode instance gave up pulling a request's KV blocks from the prefill instance "
        "(LLMDataDist's sync_kv_timeout), and that request never completes", 0.5,
        "the prefill instance's log at that time: gone or restarting (a dead peer), or its NPUs' links down; a busy "
        "prefill instance still answers a pull within the limit",
        GuardRow("LLMDataDist KV-pull timeout", "vllm-ascend (LLMDataDist)",
                 "the decode side pulling a request's KV blocks from the prefill side", "ASCEND_TRANSFER_TIMEOUT (0.11+)",
                 unprinted="20 s fixed in 0.9.1; from 0.11 ASCEND_TRANSFER_TIMEOUT (ms), else about 33 s from "
                 "HCCL_RDMA_TIMEOUT"),
        (_do("check that the prefill instance is up and its NPUs' links to this node work (on both nodes)",
          "for i in 0 1 2 3 4 5 6 7; do hccn_tool -i $i -link -g; done"),
         _do("only if the links are up and the prefill side is loaded: raise ASCEND_TRANSFER_TIMEOUT (milliseconds, "
          "vllm-ascend 0.11+) on the decode instance"))),
    # vllm-ascend 0.11 / 0.22 mooncake connectors' ensure_zmq_recv (tests/test_vllm_ascend_wordings.py)
    ASCEND_RECV: GuardedWait(
        "a KV-transfer worker", "the other instance's side channel", "KV-transfer handshake (Mooncake, ZMQ)",
        "three receives of 1 s each got no answer",
        "deadlocked (likely): vllm-ascend's Mooncake connector got no answer from the other instance's side channel "
        "(three tries of 1 s), a peer that is gone, unreachable or hung", 0.5,
        "the other instance's log at that time: down or restarting (gone), or alive (then its side-channel port is "
        "not reachable from this node)",
        GuardRow("Mooncake side-channel receive", "vllm-ascend (Mooncake connector)",
                 "an answer from the other instance's side channel (metadata, ACK)", None, default_s=3.0,
                 default_origin="fixed (3 × 1 s)"),
        (_do("check that the other instance is up and that this node reaches its side-channel port (the kv_port in "
          "--kv-transfer-config)"),)),
    # tt-t3k-vlm-prefill-dispatch-queue-stall-5s-watchdog
    TT_METAL: GuardedWait(
        "the host", "the device", None,
        "the device stopped answering its dispatch queue before the operation timeout",
        "deadlocked (likely): the device stopped answering its dispatch queue and tt-metal's operation watchdog "
        "reported a potential hang", 0.6,
        "how long the operation may run: a longer TT_METAL_OPERATION_TIMEOUT_SECONDS that still trips confirms a hang",
        GuardRow("tt-metal operation timeout", "tt-metal", "one device operation, from dispatch to completion",
                 "TT_METAL_OPERATION_TIMEOUT_SECONDS", unprinted="TT_METAL_OPERATION_TIMEOUT_SECONDS (off unless set)"),
        (_do("reset the wedged device before starting again (tt-smi from Tenstorrent's tools)", "tt-smi -r"),
         _do("tell a hang from a long operation: rerun with a longer watchdog (a hang still trips it)",
          "export TT_METAL_OPERATION_TIMEOUT_SECONDS=60"))),
}
