"""Requests whose KV the connector could not load from the other instance: the engine is alive and serves on.

Domain facts encoded here (each read in vLLM's source, docs/verdicts.md "KV handed between prefill and decode"):

* A decode instance loads a request's KV from its prefill instance after a handshake over the prefill side's
  side channel (NixlConnector: a ZMQ request to VLLM_NIXL_SIDE_CHANNEL_HOST:PORT with a 5 s receive timeout,
  nixl/base_worker.py ``_nixl_handshake``).  A handshake or a read that fails marks the request's blocks invalid
  and the scheduler either recomputes the prompt here or fails the request (``kv_load_failure_policy``:
  0.12 always recomputes; "recompute" by default in 0.14, "fail" in 0.34).  Nothing waits on it: the engine is
  not hung, the link between the instances is broken (vLLM issue 27083: an engine-ID mismatch because
  VLLM_NIXL_SIDE_CHANNEL_HOST was unset; the decode node recomputed every prompt).
* What the handshake's exception says decides the fix: no answer within 5 s (``zmq.error.Again``) is an instance
  that is down or a side-channel address this host cannot reach; another engine's ID is another instance
  answering on that address; a compatibility-hash mismatch is two instances configured differently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engdiag.analysis.draft import Draft
from engdiag.analysis.facts import Facts
from engdiag.analysis.signal_kinds import FATAL
from engdiag.analysis.verdict import Kind, Role, Verdict
from engdiag.logs.events import Event, Failure, Signal
from engdiag.logs.patterns.kv_transfer import (
    KV_HANDSHAKE,
    KV_RECOMPUTED,
    KV_REQUESTS_FAILED,
    KV_TRANSFER_FAILED,
)

_NEARBY_LINES = 40
"""How far from a failure line its traceback's last line may be (a logger.exception's traceback follows it; a
paste may put it before)."""
_PEER = re.compile(r"'remote_host': '(?P<host>[^']+)', 'remote_port': (?P<port>\d+)")

@dataclass(frozen=True)
class _Cause:
    """What a handshake's exception says, and the fix it points to (``{peer}``: the address to check, if printed)."""

    pattern: re.Pattern[str]
    why: str
    fix: str


_CAUSES = (
    _Cause(re.compile(r"zmq\.error\.Again|Resource temporarily unavailable"),
           "the other instance's side channel did not answer within 5 s",
           "the other instance is down or busy, or its side channel listens on an address this host cannot reach: "
           "check it is up and that VLLM_NIXL_SIDE_CHANNEL_HOST on it is an address reachable from here{peer}"),
    _Cause(re.compile(r"engine ID mismatch"),
           "another engine answered on the side-channel address",
           "each instance's side channel must be its own: set VLLM_NIXL_SIDE_CHANNEL_HOST on every instance to the "
           "address others reach it at (not localhost across nodes) and give instances on one host distinct "
           "VLLM_NIXL_SIDE_CHANNEL_PORT values"),
    _Cause(re.compile(r"compatibility hash mismatch"),
           "the two instances are configured differently",
           "run both instances with the same vLLM version, model, dtype, KV-cache layout and attention backend"),
    _Cause(re.compile(r"NIXL_ERR_BACKEND|loadRemoteMD"),
           "NIXL's transport could not load the other instance's metadata",
           "check the transport between the instances (UCX / RDMA devices, UCX_TLS, UCX_NET_DEVICES) and that this "
           "release supports the two instances' parallel layouts (different TP sizes, block sizes)"),
    _Cause(re.compile(r"nixlNoTelemetryError|xferDuration|[Tt]elemetry is (?:not enabled|disabled)"),
           "the transfer had finished, but reading NIXL's telemetry for it raised, so vLLM counted it failed",
           "a NIXL build or backend without transfer telemetry fails every transfer this way (nixl issue 2266, "
           "dynamo issue 12952): run a vLLM or NIXL with the fix (vllm PR 58038, nixl PR 2271; Dynamo moved to NIXL "
           "1.3.2), or enable telemetry where the build has it (NIXL_TELEMETRY_ENABLE=1)"),
    _Cause(re.compile(r"Mooncake transfer failed"),
           "Mooncake's batch read returned an error (a link error, or ASCEND_TRANSFER_TIMEOUT, about 33 s, ran out)",
           "check the links between the two instances' NPUs (hccn_tool -i N -link -g on each) and the other instance's "
           "health; reads that were slow, not failing, get more time from ASCEND_TRANSFER_TIMEOUT"),
    _Cause(re.compile(r"Connection refused|No route to host|timed out"),
           "the other instance could not be reached",
           "check the other instance is up and reachable from this host{peer}"),
)


def _cause(facts: Facts, event: Event) -> str | None:
    """The exception that failed the handshake or the transfer: the record's own traceback, else the nearest one in
    that file."""
    own = facts.exception_of(event)
    if own:
        return own
    near = [(abs(e.line - event.line), e) for e in facts.t.of(Signal.EXCEPTION)
            if e.source == event.source and abs(e.line - event.line) <= _NEARBY_LINES and facts.exception_of(e)]
    return facts.exception_of(min(near, key=lambda pair: pair[0])[1]) if near else None


def load_failed(facts: Facts) -> Verdict | None:
    """The KV connector failed to load requests' KV from the other instance, and the engine served on."""
    failed = facts.t.of(Signal.KV_LOAD_FAILED)
    if not failed or facts.t.of(*FATAL):
        return None
    names = {e.data.name for e in failed if isinstance(e.data, Failure)}
    first = next((e for e in failed if isinstance(e.data, Failure) and e.data.name in (KV_HANDSHAKE, KV_TRANSFER_FAILED)),
                 failed[0])
    what = {KV_HANDSHAKE: "the KV handshake with the other instance failed",
            KV_TRANSFER_FAILED: "a KV read from the other instance failed"}.get(
        first.data.name if isinstance(first.data, Failure) else None, "requests' KV could not be loaded")
    cause = _cause(facts, first)
    known = next((c for c in _CAUSES if c.pattern.search(cause or first.text)), None)
    outcome = ("those requests failed (kv_load_failure_policy=fail)" if KV_REQUESTS_FAILED in names
               else "their prompts were recomputed here" if KV_RECOMPUTED in names
               else "those requests are recomputed here or failed (kv_load_failure_policy)")
    because = (f" — {known.why}" if known else "") + (f" ({cause[:100]})" if cause else "")
    draft = Draft(facts, Kind.HEALTHY, 0.55 if cause else 0.45,
                  f"healthy (for the engine): {what}{because}; {outcome} — nothing waits on it")
    draft.generic_steps = False
    draft.cite(first, Role.ROOT_CAUSE, "the KV of these requests did not load")
    for event in failed:
        if isinstance(event.data, Failure) and event.data.name in (KV_REQUESTS_FAILED, KV_RECOMPUTED):
            draft.cite(event, Role.CONSEQUENCE, "the scheduler's answer: " + event.data.name)
            break
    draft.cite(facts.t.last_progress, Role.CONTEXT, "the engine's last work")
    peer = _PEER.search(first.text)
    where = f" (from this host: nc -zv {peer['host']} {peer['port']})" if peer else ""
    kind = first.data.name if isinstance(first.data, Failure) else None
    if known:
        draft.step(known.fix.format(peer=where))
    elif kind in (KV_HANDSHAKE, KV_TRANSFER_FAILED):
        draft.undecided = "the exception that failed it: the traceback after the failure line"
        draft.step("read the traceback after the failure line: it says why "
                   + ("the other instance could not be reached" if kind == KV_HANDSHAKE else "the transfer failed"))
    else:
        draft.undecided = "why the KV did not load: the KV connector's failure lines on this instance's workers"
        draft.step("the KV connector's lines before this one say why the KV did not load (its 'NIXL transfer failure' "
                   "or 'Handshake' lines, on this instance's workers)")
    if KV_REQUESTS_FAILED in names:
        draft.step("to serve such requests from scratch here while the link is down, set \"kv_load_failure_policy\": "
                   "\"recompute\" in --kv-transfer-config (0.34's default is \"fail\")")
    return draft.done()
