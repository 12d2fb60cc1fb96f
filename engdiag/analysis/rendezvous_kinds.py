"""Every kind of start-up rendezvous engdiag reads, one row each: whom the waiter waits on, why that wait can never
complete, and what to do about it.

A failed rendezvous (``Signal.RENDEZVOUS_FAILED``) carries its kind in ``Rendezvous.what``; ``waits`` builds the
``Wait`` from the row and ``wait_rules`` takes its steps, so adding a kind is adding a row.  The real case behind each
row is in the comment above it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from engdiag.logs.events import Event, Rendezvous
from engdiag.logs.patterns.fatals import FT_ROUND
from engdiag.logs.patterns.lmcache import LMCACHE_SERVER
from engdiag.logs.patterns.waits import RAY_DP_GANG
from engdiag.units import plural

Step = tuple[str, str | None]

_NODE_PIN = re.compile(r"'node:(?P<ip>[0-9a-fA-F.:]+)'")
"""A Ray resource request pinned to one node's IP (vLLM pins the driver's bundle to node:<VLLM_HOST_IP>)."""

_MEMBER_STEPS: tuple[Step, ...] = (
    ("make every member reach the master address: a routable IP, never 127.0.0.1 on multi-node",
     "export VLLM_HOST_IP=$(hostname -I | cut -d' ' -f1)   # and MASTER_ADDR / --data-parallel-address"),
    ("check that every node and rank was launched and can open the port", 'nc -vz "$MASTER_ADDR" "${MASTER_PORT:-29500}"'),
)


def _pinned_node(event: Event) -> Step | None:
    """Ray cannot place a bundle pinned to an IP it has no node under: vLLM pins its driver's bundle to
    node:<VLLM_HOST_IP> (ray-placement-group-host-ip-not-in-cluster)."""
    if (pinned := _NODE_PIN.search(event.text)) is None:
        return None
    return ((f"the request pins a GPU to node:{pinned['ip']}, an address Ray has no node under: set VLLM_HOST_IP to the "
            "IP `ray status` lists for the head node, on every node"), None)


@dataclass(frozen=True, slots=True)
class RendezvousKind:
    """One kind of rendezvous: the party waited on, why it never completed, and the steps that follow."""

    party: Callable[[Rendezvous], str]
    why: Callable[[Rendezvous], str]
    steps: tuple[Step, ...] = _MEMBER_STEPS
    waiter: str = "process-group rendezvous"
    channel: str = "rendezvous"
    first_step: Callable[[Event], Step | None] | None = None
    """A step read from the line itself, placed before the others when it applies."""

    def all_steps(self, event: Event) -> list[Step]:
        found = self.first_step(event) if self.first_step is not None else None
        return [*([found] if found is not None else []), *self.steps]


def _members(meet: Rendezvous) -> str:
    return plural((meet.expected or 0) - (meet.joined or 0), "missing member") if meet.expected else "missing members"


def _members_why(meet: Rendezvous) -> str:
    if meet.expected:
        return f"{meet.joined}/{meet.expected} joined before the {meet.limit_s:.0f} s limit"
    return "not every member joined"


def _mesh_why(meet: Rendezvous) -> str:
    why = "the CPU (gloo) group's ranks could not connect to each other"
    if meet.address and meet.address.startswith(("127.", "::1", "localhost")):
        why += "; a rank advertised a loopback address, which no other node can reach"
    return why


def _gang_why(meet: Rendezvous) -> str:
    if meet.limit_s:
        return f"it never published its master address within {meet.limit_s:g} s: not placed, dead, or still starting"
    return "it never published its master address"


def _ft_why(meet: Rendezvous) -> str:
    if meet.limit_s:
        return (f"not all joined the fault-tolerance recovery round within {meet.limit_s:g} s: one is gone, or the "
                "recovery request did not reach every engine")
    return "not all joined the recovery round"


MEMBERS = RendezvousKind(_members, _members_why)
"""A store-based rendezvous short of members (``DistStoreError … 2/8 clients joined``:
v092-v0-dp8-store-rendezvous-1-of-8-clients, dp4-embed-task-tcpstore-1-of-4-clients-joined)."""

KINDS: dict[str, RendezvousKind] = {
    # torch's TCP store that nothing answers at (swift-infer-tp2-tcpstore-connect-timeout)
    "store": RendezvousKind(lambda m: f"the TCP store at {m.address}", lambda m: "nothing answered at that address"),
    # gloo's full mesh that could not connect (eks-lws-pp2-gloo-loopback-connectfullmesh: a loopback address advertised)
    "mesh": RendezvousKind(
        lambda m: f"the peer at {m.address}" if m.address else "its peer ranks", _mesh_why,
        (("bind gloo to the interface the nodes reach each other on (on every node)",
          "export GLOO_SOCKET_IFNAME=$(ip -o -4 route show default | awk '{print $5}')"),
         ("make every rank advertise a routable IP, never 127.0.0.1 on multi-node",
          "export VLLM_HOST_IP=$(hostname -I | cut -d' ' -f1)"))),
    # Ray cannot place the GPUs asked for (ray-placement-group-short-of-gpus-waiting-multinode)
    "placement": RendezvousKind(
        lambda m: "Ray placement group", lambda m: "the cluster cannot place the requested GPUs",
        (("see what Ray can place: GPUs per node against the parallel sizes", "ray status"),), first_step=_pinned_node),
    # the engine core's handshake with a front-end that never answered (vLLM core.py's 5-minute handshake)
    "front-end": RendezvousKind(
        lambda m: "the front-end process (the API server, or the data-parallel head)",
        lambda m: "it never answered the engine core's handshake: gone, or not at the address the engine was given",
        ((("read the front-end's own log (the API server, or the data-parallel head's vLLM): its crash or exit is the "
          "cause"), None),
         ("on a headless node, check that the head's address and RPC port are reachable from it",
          ('nc -vz "${DATA_PARALLEL_ADDRESS:?set it to the address given as --data-parallel-address}" 29550   '
          "# the default --data-parallel-rpc-port")))),
    # Ray Serve LLM 2.60's DP gang: a replica waiting for its rank-0 replica's master address (dp_server.py)
    RAY_DP_GANG: RendezvousKind(
        lambda m: f"the rank-0 replica of its {m.address or 'gang'}", _gang_why,
        ((("find the gang's rank-0 replica: placed or pending (the cluster's GPUs), and its own log (an error before it "
          "registered, or a start-up still running)"), "serve status"),
         ("a replica still pending for GPUs is placement: see what Ray can place", "ray status")),
        waiter="a Ray Serve LLM data-parallel replica", channel="DP gang's master address (Ray KV)"),
    # vLLM 0.34's fault-tolerance recovery round short of engines (core.py's FT round)
    FT_ROUND: RendezvousKind(
        lambda m: "the other data-parallel engines", _ft_why,
        (("send the recovery request, with the same request_id, to every data-parallel engine", None),
         (("read each engine's log at that time: one that died or never received the request is the one that did not "
          "join"), None))),
    # LMCache's MP server that never answered vLLM's registration (LMCache's mp adapter)
    LMCACHE_SERVER: RendezvousKind(
        lambda m: "LMCache's MP server",
        lambda m: "it never answered vLLM's registration: not running, or not reachable from this node",
        ((("start the LMCache MP server before vLLM (or let vLLM start it: lmcache.mp.autostart), and check that this "
          "node reaches it at lmcache.mp.host / lmcache.mp.port (kv_connector_extra_config)"), None),)),
    # Ascend's HCCL links that never formed, HCCL_CONNECT_TIMEOUT 120 s (ascend-hccl-listen-fail-link-timeout)
    "hccl": RendezvousKind(
        lambda m: f"HCCL {m.address}" if m.address else "its HCCL peers",
        lambda m: m.error or "the HCCL link to it was never established",
        (("check every NPU's NIC link and that no other process holds HCCL's ports (on every node)",
          "for i in 0 1 2 3 4 5 6 7; do hccn_tool -i $i -link -g; done"),
         (("a link that never forms is not slow: raise HCCL_CONNECT_TIMEOUT (120 s) only when ranks start minutes "
          "apart"), "export HCCL_CONNECT_TIMEOUT=600"))),
}


def kind_of(meet: Rendezvous) -> RendezvousKind:
    """The row for this rendezvous (members short when its kind has none of its own)."""
    return KINDS.get(meet.what, MEMBERS)
