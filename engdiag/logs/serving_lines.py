"""The loggers of the serving layers that run vLLM, whose lines an on-call engineer pastes with vLLM's own.

Ray Serve's ``ServeFormatter`` (ray/serve/_private/logging_utils.py, 2.44–2.60) prints ``%(levelname)s %(asctime)s
{component_name} {component_id} [%(request_id)s] -- %(message)s``: ``ERROR 2025-07-01 20:30:31,002
llm_app_LLMServer:qwen-32b rut1591v -- Healthcheck failed. …``, ``WARNING 2025-07-01 20:30:51,030 controller 1758
-- Replica … failed health check, stopping it.``  Read as a record with its level and time (the year included),
so a Ray Serve LLM paste has a timeline.

NVIDIA Dynamo routes Python's logging, vLLM's included, through Rust's ``tracing`` (dynamo/runtime/logging.py,
1.6: ``log_message`` with the target ``module.funcName``), whose default format is ``2025-09-29T03:16:36.842262Z
ERROR engine_monitor._check_engine_health: vLLM AsyncLLM health check failed: …`` — the RFC 3339 time (read by
``lines.py`` as kubectl's), the level padded to five, the target.

Split from ``lines.py``: only lines shaped like these import it.
"""

from __future__ import annotations

import re
from typing import Any

from engdiag.logs.events import Proc
from engdiag.logs.lines import Piece, Shape, make_stamp

_SERVE = re.compile(
    r"\s*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) "
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)[,.]\d{3} (?:[^\s-][^\s]{0,160} ){1,4}?-- "
)
"""Level, asctime, the component's name and id, at most two more fields (a request id, a route), then ``-- ``."""


_TRACING = re.compile(r"\s*(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) (?P<target>[A-Za-z_][\w:.]{0,200}): ")
"""Rust ``tracing``'s level and target after its time."""
_LEVELS = {"WARN": "WARNING", "TRACE": "DEBUG"}


def tracing_piece(rest: str, proc: Proc | None, common: dict[str, Any]) -> Piece | None:
    """A line of Rust's ``tracing`` format (Dynamo's): its level, the time kubectl's stamp pattern read, the
    message after the target."""
    kube_ts = common.get("kube_ts")
    match = _TRACING.match(rest)
    if match is None or not kube_ts:
        return None
    year, month, day = int(kube_ts[:4]), int(kube_ts[5:7]), int(kube_ts[8:10])
    stamp = make_stamp(month, day, int(kube_ts[11:13]), int(kube_ts[14:16]), int(kube_ts[17:19]), calendar=year)
    level = _LEVELS.get(match["level"], match["level"])
    return Piece(shape=Shape.LEVEL, msg=rest[match.end() :], proc=proc, level=level, stamp=stamp, **common)


def ray_serve_piece(rest: str, proc: Proc | None, common: dict[str, Any]) -> Piece | None:
    """A Ray Serve logger line: its level and its time, the rest the message."""
    match = _SERVE.match(rest)
    if match is None:
        return None
    stamp = make_stamp(int(match["mo"]), int(match["d"]), int(match["h"]), int(match["mi"]), int(match["s"]),
                       calendar=int(match["y"]))
    return Piece(shape=Shape.LEVEL, msg=rest[match.end() :], proc=proc, level=match["level"], stamp=stamp, **common)
