"""Waits on other parties: the API server on the engine, ranks on each other (collective mismatches, a
peer lost over InfiniBand / NCCL / gloo), the rendezvous (clients that never joined, a store nobody
answers, a Ray placement group that cannot be scheduled), and the communication libraries' own timeouts
(gloo, HCCL, DeepEP, the NCCL watchdog that hung itself, FlashInfer's all-reduce workspace retries).

Whether such a wait can ever be satisfied is what separates deadlocked from slow.
"""

from __future__ import annotations

import re

from engdiag.logs.events import NcclWork, Peer, Phase, Rendezvous, Signal, Timeout
from engdiag.logs.patterns.base import Rule, _c, _const, _f, _i, last_exception

_CLIENTS_JOINED = _c(r"Timed out after (?P<s>\d+) seconds waiting for clients\. (?P<j>\d+)/(?P<n>\d+) clients joined")
_CONNECT_TIMEOUT = _c(r"timed out after (?P<n>\d+)(?P<unit>ms|s) while trying to connect to \((?P<addr>[^)\n]*)\)?")
"""torch's c10d socket.cpp: "The client socket has timed out after 600000ms while trying to connect to (host,
port)"; older releases print the limit in seconds ("after 1800s":
openrlhf-vllm-weight-sync-group-docker-bridge-ip-unreachable, a store on an unreachable bridge address)."""


ASCEND_TASK = "HCCL collective or device task (the stream's work never finished)"
DIVERGED_OUTPUTS = "the tensor-parallel workers returned different outputs for one step"
"""V0 0.2.x's check that every worker's step output agrees, failed."""
MOONCAKE = "mooncake"
"""The guard of the Mooncake connector's KV-transfer wait (VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT)."""
OMNI_KV = "vllm-omni-kv"
"""The guard of vllm-omni's wait for a request's KV cache from the stage before (its KV transfer manager's limit)."""
OMNI_INPUT = "vllm-omni-input"
"""The guard of vllm-omni's scheduler on a request's input from the stage before (VLLM_OMNI_INPUT_WAIT_TIMEOUT_S:
300 s in 0.22, 600 s in 0.30)."""
TT_METAL = "tt-metal"
"""The guard of tt-metal's operation timeout (TT_METAL_OPERATION_TIMEOUT_SECONDS)."""
LLMDD_PULL = "llmdatadist-pull"
"""The guard of vllm-ascend's LLMDataDist connector on a KV pull from the prefill side (sync_kv_timeout)."""
OMNI_DLO = "vllm-omni-dlo"
"""The guard of vllm-omni's diffusion executor on a data-parallel DLO collective wave (VLLM_OMNI_DLO_DP_WAVE_TIMEOUT)."""
MORIIO_RECV = "moriio-recv"
"""The guard of vLLM's MoRIIO connector on an RDMA read of KV from the prefill side (recv_abort_timeout)."""
RAY_DP_GANG = "ray-serve-llm-dp-gang"
"""Ray Serve LLM's data-parallel gang: its replicas wait for the rank-0 replica to publish its master address."""
ASCEND_RECV = "ascend-mooncake-recv"
"""The guard of vllm-ascend's Mooncake connectors on an answer from the other instance's side channel (3 × 1 s)."""
_STORE_REMOTE = re.compile(r"remote=\[?(?:::ffff:)?(?P<host>[^\]\s)]+?)\]?:(?P<port>\d+)\)")
STORE_LOST = "c10d: the TCP store's host closed the connection (it exited or crashed)"


def _store_lost(text: str) -> Peer:
    remote = _STORE_REMOTE.search(text)
    return Peer(peer=f"{remote['host']}:{remote['port']}" if remote else None, detail=STORE_LOST)


def _joined(m: re.Match[str]) -> Rendezvous:
    return Rendezvous(joined=int(m["j"]), expected=int(m["n"]), limit_s=_f(m["s"]))


def _unreachable(m: re.Match[str]) -> Rendezvous:
    return Rendezvous(limit_s=int(m["n"]) / (1000 if m["unit"] == "ms" else 1),
                      address=m["addr"].replace(" ", "").rstrip(","), what="store")


def _raised_in_rendezvous(error: str | None) -> Rendezvous:
    """What a traceback through the rendezvous ends with: the members or the address when its error names them
    (dp4-embed-task-tcpstore-1-of-4-clients-joined: the frame comes first in the record and wins it)."""
    if error is not None and (joined := _CLIENTS_JOINED.search(error)) is not None:
        return _joined(joined)
    if error is not None and (unreachable := _CONNECT_TIMEOUT.search(error)) is not None:
        return _unreachable(unreachable)
    return Rendezvous(what="traceback", error=error)


WAITS: tuple[Rule, ...] = (
    # waits on other parties ----------------------------------------------------------
    Rule(
        Signal.WAITING,
        "Waiting for output from MQLLMEngine",
        _c(r"Waiting for output from MQLLMEngine"),
        _const(Peer(peer="engine", detail="API server waiting for engine output")),
    ),
    Rule(
        Signal.COLLECTIVE_MISMATCH,
        "op.preamble.length <= op.nbytes",
        _c(r"op\.preamble\.length <= op\.nbytes\.? ?(?P<a>\d+)? ?(?:vs (?P<b>\d+))?"),
        lambda m, t: [Peer(detail=f"a peer sent {m['a']} bytes where this rank expected {m['b']}" if m["a"] else None)],
    ),
    Rule(
        Signal.COLLECTIVE_MISMATCH,
        "Detected mismatch between collectives",
        _c(r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d+) is running collective: [^\n]*?, but Rank (?P<b>\d+)"),
        lambda m, t: [Peer(peer=f"rank {m['b']}", detail=f"rank {m['a']} and rank {m['b']} ran different collectives")],
    ),
    # V0 0.2.x's LLMEngine._run_workers ran each step on every tensor-parallel worker and checked the outputs
    # agree ("for other_output in all_outputs[1:]: assert output == other_output"): the assert failing is ranks that
    # sampled different tokens for the same step, diverged for good (v02-tp-workers-diverge-assert-high-temperature,
    # v021-source-build-tp2-long-prompts-worker-output-mismatch: high temperatures, long sequences, TP only)
    Rule(
        Signal.COLLECTIVE_MISMATCH,
        "assert output == other_output",
        _c(r"assert output == other_output"),
        _const(Peer(detail=DIVERGED_OUTPUTS)),
    ),
    Rule(
        Signal.PEER_LOST,
        "NET/IB",
        _c(r"NET/IB ?: ?(?:Got completion from peer (?P<peer>[\w.:]+)(?:<\d+>)? with (?:error|status)[ =]?(?P<st>\w+)|(?P<other>[^\n]*?(?:error|Error|failed)))"),
        lambda m, t: [Peer(peer=m["peer"], detail=f"InfiniBand/RoCE transport error{': ' + m['st'] if m['st'] else ''}")],
    ),
    # A traceback through a collective of the data-parallel group's CPU (gloo) group, its error cut off
    # (``dist.all_reduce(tensor, group=get_dp_group().cpu_group)`` in the per-step batch sync:
    # dp-two-node-extra-dp-allreduce-gloo-recv-timeout, where one node ran one all_reduce more).  A gloo
    # collective fails only on its peers: a recv that timed out, a peer that closed or reset the connection,
    # a peer that sent another size; a GPU fault cannot surface there.  Where the error line is kept, the
    # rules of those lines decide instead.
    Rule(
        Signal.PEER_LOST,
        "cpu_group",
        _c(r"\b(?:dist|distributed)\.(?:all_reduce|all_gather|broadcast|barrier|reduce|gather|scatter)\w*\([^\n]*cpu_group"),
        lambda m, t: [] if last_exception(t[m.end():]) else [
            Peer(detail="a CPU (gloo) collective raised; its error is cut off", cut=True)],
    ),
    # KV-cache transfer between disaggregated prefill and decode instances: UCX's endpoint timeout
    # (UCS_ERR_ENDPOINT_TIMEOUT, status -80) and NIXL's remote disconnect say the other instance stopped
    # answering, so the transfer and the request waiting on it never complete
    # (lmcache-pd-ucx-tcp-endpoint-timeout, nixl-pd-stale-endpoint-after-decode-restart-kv-stall).  A UCX
    # set-up failure (NIXL_ERR_BACKEND after ibv_create_ah) is no lost peer.
    Rule(Signal.PEER_LOST, "Endpoint timeout", _c(r"Endpoint timeout"),
         _const(Peer(detail="UCX: the KV-transfer peer stopped answering (endpoint timeout)"))),
    Rule(Signal.PEER_LOST, "NIXL_ERR_REMOTE_DISCONNECT", _c(r"NIXL_ERR_REMOTE_DISCONNECT"),
         _const(Peer(detail="NIXL: the remote agent disconnected"))),
    Rule(
        Signal.PEER_LOST,
        "ncclRemoteError",
        _c(r"ncclRemoteError"),
        _const(Peer(detail="NCCL: a remote process exited or the network failed")),
    ),
    Rule(
        Signal.PEER_LOST,
        "remote process exited or there was a network error",
        _c(r"remote process exited or there was a network error"),
        _const(Peer(detail="NCCL: a remote process exited or the network failed")),
    ),
    Rule(
        Signal.PEER_LOST,
        "Connection closed by peer",
        _c(r"Connection closed by peer(?: \[(?P<peer>[^\]]+)\])?"),
        lambda m, t: [Peer(peer=m["peer"], detail="gloo: the peer closed the connection (it exited)")],
    ),
    Rule(
        Signal.PEER_LOST,
        "Connection reset by peer",
        _c(r"(?:gloo|pair\.cc)[^\n]*Connection reset by peer"),
        _const(Peer(detail="gloo: the peer reset the connection (it exited)")),
    ),
    # torch's TCPStore client (c10d Utils.hpp recvBytes): "Failed to recv, got 0 bytes. Connection was likely
    # closed. Did the remote server shutdown or crash?" — the store's host (rank 0's process; with data
    # parallelism the head node's vLLM) is gone, and every rank that polls it is left waiting
    # (dp16-headless-node-stuck-after-head-exit-tcpstore-recv).  After an operator's stop it is exit-time noise,
    # which the benign rules read first.
    Rule(Signal.PEER_LOST, "Connection was likely closed", _c(r"Connection was likely closed"), lambda m, t: [_store_lost(t)]),
    Rule(Signal.RENDEZVOUS_FAILED, "clients joined", _CLIENTS_JOINED, lambda m, t: [_joined(m)]),
    # vLLM's StatelessProcessGroup.barrier (0.34 distributed/utils.py): every rank sets an arrival key in the
    # TCP store and polls for the others' until "Barrier timed out after %.2f seconds" (or, leaving it,
    # "Barrier departure timed out …"): a member never arrived
    # (0.9.2–0.11 raised it with the format and the number apart: "RuntimeError: ('Barrier timed out after %f
    # seconds', 300.0)")
    Rule(Signal.RENDEZVOUS_FAILED, "Barrier ",
         _c(r"Barrier (?:departure )?timed out after (?:(?P<s>\d+(?:\.\d+)?) s|%f s[^\n]*?', (?P<t>\d+(?:\.\d+)?)\))"),
         lambda m, t: [Rendezvous(limit_s=float(m["s"] or m["t"]))]),
    Rule(Signal.RENDEZVOUS_FAILED, "while trying to connect to", _CONNECT_TIMEOUT, lambda m, t: [_unreachable(m)]),
    # torch's TCP store giving up a wait for keys its peers set as they join: "DistStoreError: wait timeout after
    # 1800000ms, keys: /default_pg/0//54//cpu//0/2" (c10d TCPStore::wait) — making a process group, the ranks
    # that would set them never came (ascend-multinode-gloo-store-timeout).  PyNccl's KV pipe waits on its
    # store for the next tensor (keys /send_to/…), which an idle receiver times out on too
    # (pynccl-disagg-idle-kv-receive-thread-300s-timeout): not a rendezvous.
    Rule(Signal.RENDEZVOUS_FAILED, "wait timeout after",
         _c(r"[Ww]ait timeout after (?P<ms>\d+)\s*ms, keys: (?!/send_to/)(?P<k>\S+)"),
         lambda m, t: [Rendezvous(limit_s=int(m["ms"]) / 1000, error=f"no peer set {m['k'][:120]} in the store")]),
    # A traceback through the rendezvous itself: torch's init_process_group raised inside
    # ``store, rank, world_size = next(rendezvous_iterator)`` (distributed_c10d.py), where the TCP store is made:
    # its members never all joined (dgx-spark-2node-rank1-never-joins-hardwrapped: 1/2 clients joined), it could
    # not be reached, or its port could not be bound (skyrl-vllm-engine-restart-eaddrinuse-rendezvous: EADDRINUSE
    # after a restart).  The error line, which says which, is kept when the paste has it.
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "next(rendezvous_iterator)",
        _c(r"next\(rendezvous_iterator\)"),
        lambda m, t: [_raised_in_rendezvous(last_exception(t[m.end():]))],
    ),
    # torch's ProcessGroupGloo: "Gloo connectFullMesh failed with [...pair.cc:N] timed out connecting:
    # SO_ERROR: Connection refused, remote=[127.0.0.1]:<port> (rank=8, size=16, local=[127.0.0.1])" — the CPU
    # group's ranks could not connect to each other, so the group never forms
    # (eks-lws-gloo-world-group-loopback-bind-ray-handle-red-herring: every rank advertised loopback).
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "Gloo connectFullMesh failed",
        _c(r"Gloo connectFullMesh failed(?:[^\n]*\n?[^\n]*?remote=\[(?P<addr>[^\]]+)\](?::(?P<port>[\w<>]+))?)?"),
        lambda m, t: [Rendezvous(address=m["addr"], what="mesh")],
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "cannot be scheduled right now",
        _c(r"(?:resource request|tasks?|actors?)[^\n]*cannot be scheduled right now"),
        _const(Rendezvous(what="placement")),
    ),
    # Ray's autoscaler on a request no node type can ever hold (autoscaler/_private/resource_demand_scheduler.py:
    # "Error: No available node types can fulfill resource request {...}. Add suitable node types to this cluster
    # to resolve this issue.").  vLLM pins the driver's bundle to node:<VLLM_HOST_IP>; an IP Ray registered the
    # node under differently can never be placed (ray-placement-group-host-ip-not-in-cluster; vLLM's
    # docs/serving/distributed_troubleshooting.md names the same cause).
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "No available node types can fulfill resource request",
        _c(r"No available node types can fulfill resource requests?"),
        _const(Rendezvous(what="placement")),
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "Cannot provide a placement group",
        _c(r"Cannot provide a placement group"),
        _const(Rendezvous(what="placement")),
    ),
    # Ray Serve LLM's data-parallel gangs (2.60 llm/_internal/serve/serving_patterns/data_parallel/dp_server.py:93):
    # every replica polls Ray's KV store for the master address its gang's rank-0 replica publishes, and gives up with
    # "TimeoutError: Timed out waiting for DP master info for gang 3 after 600s." — that replica was not placed, or
    # died (or is still starting) before it published
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "Timed out waiting for DP master info",
        _c(r"Timed out waiting for DP master info for gang (?P<g>\S+?) after (?P<s>\d+(?:\.\d+)?) ?s"),
        lambda m, t: [Rendezvous(what=RAY_DP_GANG, address=f"gang {m['g']}", limit_s=float(m["s"]))],
    ),
    # Ray Serve's controller on replicas Ray cannot place (2.44 deployment_state.py:2155, 2.60 :5673), every 30 s:
    # "Deployment '…' in application '…' has 1 replicas that have taken more than 30s to be scheduled. … Resources
    # required for each replica: {…}, total resources available: {…}." (ray-llm issue 143, ray issue 54830)
    Rule(
        Signal.WAITING,
        "s to be scheduled",
        _c(r"replicas? that ha(?:ve|s) taken more than (?P<s>\d+)s to be scheduled"),
        lambda m, t: [Peer(peer="Ray placement group", detail=f"Ray Serve replicas unscheduled for over {m['s']} s")],
    ),
    Rule(
        Signal.WAITING,
        "Waiting for creating a placement group",
        _c(r"Waiting for creating a placement group of specs for (?P<s>\d+) seconds"),
        lambda m, t: [Peer(peer="Ray placement group", detail=f"waited {m['s']} s for GPUs to be placed")],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "operation to complete",
        _c(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>recv|send) operation to complete"),
        lambda m, t: [Timeout(call=f"gloo {m['op']}", limit_s=int(m["ms"]) / 1000, guard="gloo")],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "Notify register times out",
        _c(r"Notify register times out\. Reason: The Notify register has not received the Notify record from "
           r"remote rank:? ?\[(?P<r>[^\]]*)\](?:[^\n]*?tag\[(?P<tag>[A-Za-z]+))?"),
        lambda m, t: [Timeout(call=f"HCCL {m['tag'] or 'collective'} (remote rank {m['r']} never signalled)",
                              guard="hccl")],
    ),
    # Ascend's runtime giving up on a stream whose work never finished: "rtStreamSynchronizeWithTimeout execute
    # failed, reason=[fftsplus timeout]" / "reason=task timeout", torch_npu's "The execution of the internal task
    # times out." (507048) — on vLLM's Ascend workers nearly always an HCCL collective left waiting for a peer
    # (vllm-ascend issues 1443 and 2800 print the Notify-register wait beside it;
    # flashcomm1-shared-expert-two-stream-hccl-deadlock-profile-run: collectives of two groups on two streams
    # deadlocked in the profile run)
    Rule(
        Signal.COMM_TIMEOUT,
        "rtStreamSynchronizeWithTimeout execut",
        _c(r"rtStreamSynchronizeWithTimeout execut\w* failed, reason=\[?[\w ]*timeout"),
        _const(Timeout(call=ASCEND_TASK, guard="hccl")),
    ),
    # The runtime's device-error report for an HCCL task: "hccl fftsplus task timeout occurred during task
    # execution, stream_id:9, sq_id:9, task_id:51052, stuck notify num:1, timeout=1836s." — the collective's
    # task waited the whole limit on a notify no peer sent (ascend-glm53-hccl-fftsplus-stuck, as pasted)
    Rule(
        Signal.COMM_TIMEOUT,
        "hccl fftsplus task timeout",
        _c(r"hccl fftsplus task timeout occurred"),
        _const(Timeout(call=ASCEND_TASK, guard="hccl")),
    ),
    # the Ascend runtime's report of a notify wait (the primitive HCCL's ranks signal each other with) that ran out
    # (runtime device_error_proc.cc, RT_STARS_SQE_TYPE_NOTIFY_WAIT: "The error from device(chipId:3, dieId:1), serial
    # number is 27, notify wait timeout occurred during task execution, stream_id:142, …, notify_id=671,
    # timeout=204s.") — a collective whose peer never signalled (ascend-dsv4-prefill-hccl-notify-wait-timeout: a TP
    # all-gather on a P/D prefill node under load, the ProcessGroupHCCL watchdog then took the process down)
    Rule(
        Signal.COMM_TIMEOUT,
        "notify wait timeout occurred",
        _c(r"notify wait timeout occurred during task execution(?:[^\n]*?timeout=(?P<s>\d+)s)?"),
        lambda m, t: [Timeout(call=ASCEND_TASK, limit_s=_f(m["s"]), guard="hccl")],
    ),
    # the same report for an event wait: a stream waiting on an event another stream records ("… serial number is
    # 18, event wait timeout occurred during task execution, stream_id:39, …, event_id=37, timeout=234s.") — the
    # other stream's work never finished (ascend-flashcomm1-shared-expert-multistream-event-wait-timeout: the
    # shared experts' all-gather on their own stream and the routed experts' collectives on the default one, each
    # waiting for the other across ranks; vllm-ascend PR 15500 moved them onto one stream)
    Rule(
        Signal.COMM_TIMEOUT,
        "event wait timeout occurred",
        _c(r"event wait timeout occurred during task execution(?:[^\n]*?timeout=(?P<s>\d+)s)?"),
        lambda m, t: [Timeout(call=ASCEND_TASK, limit_s=_f(m["s"]), guard="hccl")],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "internal task times out",
        _c(r"The execution of the internal task times out"),
        _const(Timeout(call=ASCEND_TASK, guard="hccl")),
    ),
    # HCCL's own log (Ascend plog, or stdout with ASCEND_SLOG_PRINT_TO_STDOUT=1) forming a communicator: a rank
    # that cannot listen on its NIC's port ("[HcclSocket][Listen] ... listen on ip[A] and specific port[P] fail"),
    # and the link to a rank never established within HCCL_CONNECT_TIMEOUT ("[Wait][LinkEstablish]wait socket
    # establish timeout, role[1] rank[12] timeout[120]"): the group can never form, however long it waits
    # (ascend-hccl-listen-fail-link-timeout: DP4/TP4/EP16, the listen failure two minutes before the timeout).
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "wait socket establish timeout",
        _c(r"wait socket establish timeout, role\[\d+\] rank\[(?P<r>\d+)\] timeout\[(?P<s>\d+)(?: ?s)?\]"),
        lambda m, t: [Rendezvous(address=f"rank {m['r']}", limit_s=int(m["s"]), what="hccl")],
    ),
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "and specific port[",
        _c(r"listen on ip\[(?P<ip>[^\]]*)\] and specific port\[(?P<port>\d+)\] fail"),
        lambda m, t: [Rendezvous(what="hccl", error=f"this rank could not listen on {m['ip']}:{m['port']}, so no "
                                 "peer could connect to it: the port taken, or the NIC down")],
    ),
    # HCCL's socket wait at link set-up (EI0006): "Getting socket times out. Reason: 1. The remote does not
    # initiate a connect request. some NPUs in the cluster are abnormal. 2. … started too late" — a peer rank
    # never connected within HCCL_CONNECT_TIMEOUT (120 s by default): a rendezvous short of a member
    # (vllm-ascend issue 5461)
    Rule(
        Signal.RENDEZVOUS_FAILED,
        "The remote does not initiate a connect request",
        _c(r"The remote does not initiate a connect request"),
        _const(Rendezvous(what="hccl", error="a peer rank never connected to this one within HCCL_CONNECT_TIMEOUT "
                                             "(120 s by default): stuck before the collective, slower to start, or "
                                             "unreachable")),
    ),
    # HCCL's socket wait (EI0006): "Getting socket times out. Reason: Remote Rank did not send the data in
    # time. Please check the reason for the rank being stuck" (ascend-grpo-colocated-vllm-hccl-allreduce-
    # remote-rank-stuck, inside an all_reduce)
    Rule(
        Signal.COMM_TIMEOUT,
        "Remote Rank did not send the data in time",
        _c(r"Remote Rank did not send the data in time"),
        _const(Timeout(call="HCCL collective (a remote rank never sent its data)", guard="hccl")),
    ),
    Rule(
        Signal.NCCL_WATCHDOG_TIMEOUT,
        "watchdog got stuck for",
        _c(r"(?:\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\] )?ProcessGroupNCCL's watchdog got stuck for (?P<s>\d+) seconds"),
        lambda m, t: [NcclWork(rank=_i(m["rank"]), op="a CUDA/NCCL call (the watchdog itself hung)",
                               ran_ms=int(m["s"]) * 1000)],
    ),
    # vLLM's Mooncake connector, prefill side: the decode instance asked for requests' KV and the prefill side
    # did not have it ready within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (480 s default), so the pull fails
    # "Timeout waiting for P side ready." (mooncake_connector.py; mooncake-pd-decode-stuck-waiting-p-side-ready:
    # decode requests piling up waiting on prefill)
    Rule(
        Signal.COMM_TIMEOUT,
        "Timeout waiting for P side ready",
        _c(r"Timeout waiting for P side ready"),
        _const(Timeout(call="Mooncake KV pull", limit_s=None, guard=MOONCAKE)),
    ),
    # vllm-omni's KV transfer between stages, on the receiving stage: "Timeout waiting for KV cache for request %s
    # after %ss" (kv_transfer_manager.py; later "…; missing keys=%s"): the stage before never delivered that
    # request's KV (vllm-omni-hunyuan-ar-replica-kv-wait-timeout: the AR stage produced 0 tokens after a
    # multimodal-cache miss, the DiT stage waited 30 s).  The profile run's own request ("dummy_req_id") waits at
    # start-up for KV that no stage sends: not a wait on anyone.
    Rule(
        Signal.COMM_TIMEOUT,
        "Timeout waiting for KV cache for request",
        _c(r"Timeout waiting for KV cache for request (?P<r>\S+) after (?P<s>\d+(?:\.\d+)?)s"),
        lambda m, t: [] if m["r"].startswith("dummy") else [
            Timeout(call="KV cache from the stage before (vllm-omni)", limit_s=_f(m["s"]), guard=OMNI_KV)],
    ),
    # vllm-ascend's LLMDataDistCMgrConnector on the decode side, from the pull's future callback: "KV transfer task
    # failed: LLMDataDistCMgrConnectorWorker: Timeout during pull_blocks, you can try to increase the sync_kv_timeout
    # config or checking your connect status" (0.9.1 llmdatadist_c_mgr_connector.py:852/:869, 20 s fixed; 0.11
    # :889/:921/:938, ASCEND_TRANSFER_TIMEOUT or ~33 s): the raise skips the request's finish, it never completes
    Rule(
        Signal.COMM_TIMEOUT,
        "Timeout during pull_blocks",
        _c(r"Timeout during pull_blocks"),
        _const(Timeout(call="KV pull from the prefill instance (LLMDataDist)", guard=LLMDD_PULL)),
    ),
    # vllm-ascend's Mooncake connectors' side channel (ensure_zmq_recv: three polls of 1 s): "Receive failed after
    # all retries: Receive timeout" then "RuntimeError: Failed to receive data after 3 retries: Receive timeout"
    # (0.11 mooncake_connector.py:1260/:1262, mooncake_layerwise_connector.py:1150); 0.22 "Receive failed after all
    # retries. source=%s, error=Receive timeout." (kv_p2p/mooncake_connector.py:2843)
    Rule(
        Signal.COMM_TIMEOUT,
        "Receive failed after all retries",
        _c(r"Receive failed after all retries[^\n]{0,200}?Receive timeout"),
        _const(Timeout(call="the other instance's side channel (Mooncake, ZMQ)", guard=ASCEND_RECV)),
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "Failed to receive data after",
        _c(r"Failed to receive data after \d+ retries: Receive timeout"),
        _const(Timeout(call="the other instance's side channel (Mooncake, ZMQ)", guard=ASCEND_RECV)),
    ),
    # vLLM 0.34's MoRIIO connector on the decode side (moriio_connector.py:3026): "RDMA read TIMED OUT for req %s after
    # %.1fs (kv_connector_extra_config.recv_abort_timeout=%.0f)" — a read whose completion never arrived, aborted
    # "otherwise a lost RDMA completion would leave the decode worker hung indefinitely on this request"
    Rule(
        Signal.COMM_TIMEOUT,
        "RDMA read TIMED OUT for req",
        _c(r"RDMA read TIMED OUT for req \S+ after [\d.]+s \(kv_connector_extra_config\.recv_abort_timeout="
           r"(?P<s>\d+(?:\.\d+)?)\)"),
        lambda m, t: [Timeout(call="RDMA read of KV from the prefill instance (MoRIIO)", limit_s=_f(m["s"]),
                              guard=MORIIO_RECV)],
    ),
    # vllm-omni 0.30's diffusion executor (diffusion/executor/multiproc_executor.py:505): "DLO DP collective wave timed
    # out after %.1fs; shutting down the worker group: %s" — "once one rank is stuck in a DLO AllGather, that process
    # group cannot be reused safely" (its docstring): a collective one rank never joined
    Rule(
        Signal.COMM_TIMEOUT,
        "DLO DP collective wave timed out",
        _c(r"DLO DP collective wave timed out after (?P<s>\d+(?:\.\d+)?)s"),
        lambda m, t: [Timeout(call="DLO AllGather across the diffusion DP ranks (vllm-omni)", limit_s=_f(m["s"]),
                              guard=OMNI_DLO)],
    ),
    # vllm-omni's scheduler on a request's input from the stage before, 10–20× the KV wait: "Marking %d
    # request(s) as FINISHED_ERROR after waiting > %.0fs for connector input: %s" (0.22 and 0.30
    # core/sched/omni_scheduler_mixin.py:105 / :452), its async-chunk twin "… after stalling > %.0fs waiting for a
    # chunk: %s" (0.30 :552), and the coordinator's per-request "[Coordinator stage-%s] Request %s timed out waiting
    # for input (waited > %.0fs)" (0.30 omni_scheduling_coordinator.py:275; 0.22 "… for chunk/input …" :305) and
    # "[Stage-%s] Request %s timed out waiting for a chunk (stalled > %.0fs)" (chunk_transfer_adapter.py:1348)
    Rule(
        Signal.COMM_TIMEOUT,
        "as FINISHED_ERROR after",
        _c(r"as FINISHED_ERROR after (?:waiting|stalling) > (?P<s>\d+(?:\.\d+)?)s (?:for connector input|waiting for a chunk)"),
        lambda m, t: [Timeout(call="input from the stage before (vllm-omni)", limit_s=_f(m["s"]), guard=OMNI_INPUT)],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "imed out waiting for ",  # the launcher-wait rule's literal: one that began a space earlier would hide it
        _c(r"Request \S+ timed out waiting for (?:input|chunk/input|a chunk) \((?:waited|stalled) > (?P<s>\d+(?:\.\d+)?)s\)"),
        lambda m, t: [Timeout(call="input from the stage before (vllm-omni)", limit_s=_f(m["s"]), guard=OMNI_INPUT)],
    ),
    # Tenstorrent's tt-metal, under the vLLM TT plugin: with TT_METAL_OPERATION_TIMEOUT_SECONDS set, a device
    # that stops answering its dispatch queue raises "TIMEOUT: device timeout[ in fetch queue wait], potential
    # hang detected[, the device is unrecoverable]" instead of hanging silently (tt-t3k-vlm-prefill-dispatch-
    # queue-stall-5s-watchdog: the same stall on another board and another op, 5 s into a prefill)
    Rule(
        Signal.COMM_TIMEOUT,
        "potential hang detected",
        _c(r"TIMEOUT: device timeout(?: in (?P<q>[\w ]+?))?, potential hang detected"),
        lambda m, t: [Timeout(call=f"tt-metal's device wait{' (' + m['q'] + ')' if m['q'] else ''}", guard=TT_METAL)],
    ),
    # the same watchdog's handler in later tt-metal (MetalContext::on_dispatch_timeout_detected, metal_context.cpp):
    # tt-logger's "… | error | Metal | Timeout detected (metal_context.cpp:778)", then the Inspector's data and the
    # tt-triage command it runs (tt-qwen36-27b-prefill-dispatch-timeout: the first prefill, then the engine core died)
    Rule(
        Signal.COMM_TIMEOUT,
        "Metal | Timeout detected",
        _c(r"Metal \| Timeout detected\b"),
        lambda m, t: [Timeout(call="tt-metal's dispatch wait", guard=TT_METAL)],
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "DeepEP error: timeout",
        _c(r"DeepEP error: timeout \((?P<w>[^)]*)\)"),
        lambda m, t: [Timeout(call=f"DeepEP {m['w']}", guard="deepep")],
    ),
    # vLLM's own check after an expert-parallel step (0.34 v1/worker/gpu/async_utils.py): "Fault detected in EP
    # all2all communication: one or more ranks timed out during dispatch/combine. Mask: [...]"
    Rule(
        Signal.COMM_TIMEOUT,
        "Fault detected in EP all2all",
        _c(r"Fault detected in EP all2all communication: one or more ranks timed out"),
        _const(Timeout(call="EP all2all dispatch/combine")),
    ),
    Rule(
        Signal.COMM_TIMEOUT,
        "DeepEP timeout check failed",
        _c(r"DeepEP timeout check failed: rank = (?P<r>\d+)"),
        lambda m, t: [Timeout(call="DeepEP dispatch/combine", guard="deepep")],
    ),
    # huggingface_hub's HTTP back-off, while vLLM fetches the model's files or metadata: "'(ReadTimeoutError(...))'
    # thrown while requesting HEAD https://huggingface.co/...", "HTTP Error 504 thrown while requesting HEAD ..."
    # then "Retrying in 8s [Retry 4/5]." — start-up waits on the network
    # (ci-hf-hub-504-outage-stall-until-harness-timeout, omni-hf-read-timeouts-orchestrator-600s-ci).
    Rule(
        Signal.BUSY_RETRY,
        " thrown while requesting ",
        _c(r" thrown while requesting (?:HEAD|GET) https?://"),
        lambda m, t: [Phase("model download from the Hugging Face Hub (requests failing, retried)")],
    ),
    Rule(
        Signal.BUSY_RETRY,
        "All Reduce workspace",
        _c(r"Failed to initialize FlashInfer All Reduce workspace: (?P<d>[^\n]{0,160})"),
        lambda m, t: [Phase("all-reduce workspace set-up (timed out, retried)")],
    ),
    # vllm-omni's stages sharing a device take turns at start-up behind a file lock; one that waited past
    # stage_init_timeout goes on without it: "Timeout waiting for device %s initialization lock, proceeding anyway"
    # (0.14 omni_stage.py:651, 0.22 :1025, 0.30 engine/stage_init_utils.py:1862) — the stage holding it was still
    # starting
    Rule(
        Signal.BUSY_RETRY,
        "initialization lock, proceeding anyway",
        _c(r"Timeout waiting for device \S+ initialization lock, proceeding anyway"),
        _const(Phase("a co-located vllm-omni stage's start-up (its device lock held past stage_init_timeout)")),
    ),
)
