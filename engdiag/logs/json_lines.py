"""One JSON object a line, read into the same pieces as the text format: vLLM's JSON log formatter (0.32+) and
zap's production encoder, which the Go components around vLLM log with (llm-d's routing sidecar and endpoint picker,
controller-runtime operators)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timezone

from engdiag.logs.events import Proc, Stamp
from engdiag.logs.lines import ACCESS, Piece, Shape, make_stamp
from engdiag.logs.tags import process_tag


def wrapped_json_record(
    text: str, lineno: int, width: int, kube_ts: str | None, outer: Stamp | None
) -> list[Piece]:
    """A JSON record behind a wrapper's prefix: kubectl's timestamp, compose's ``svc |``, Ray's ``(actor pid=N)``."""
    tag, rest = process_tag(text)
    rest = rest.lstrip()
    if rest[:2] != '{"':
        return []
    found = json_record(rest, lineno, width)
    return [replace(p, kube_ts=kube_ts, proc=p.proc or tag, stamp=p.stamp or outer) for p in found]


def json_record(line: str, lineno: int, width: int) -> list[Piece]:
    """vLLM's JSON log formatter (``--logging-config.formatter json``, 0.32+): one object a line.

    Keys (``JSON_FORMAT``, vllm/logging_utils/formatter.py:7 in 0.32–0.34): ``asctime``
    (``YYYY-MM-DD HH:MM:SS,mmm``), ``levelname``, ``name``, ``processName``, ``process``,
    ``message``; python-json-logger adds ``exc_info`` (and ``stack_info``) as text.  Each
    message line becomes a piece with the record's header, so a traceback stays one record.
    ``processName`` is the multiprocessing name (``EngineCore``, ``EngineCore_DP0``,
    ``VllmWorker-0``); the API server's is ``MainProcess``, which names no role and is dropped.
    """
    try:
        record = json.loads(line)
    except ValueError:
        return []
    if not isinstance(record, dict):
        return []
    if not isinstance(record.get("message"), str):
        return _zap_record(record, lineno, width) if isinstance(record.get("msg"), str) else []
    stamp = _stamp(str(record.get("asctime", "")))  # the formatter's asctime carries the year
    level = str(record.get("levelname", "INFO")).upper()
    name = str(record.get("processName") or "")
    pid = record.get("process")
    proc = Proc(name, int(pid) if isinstance(pid, int) else None) if name and name != "MainProcess" else None
    message = record["message"]
    if "\n" not in message and ACCESS.match(message) is not None:
        # uvicorn's access logger shares the formatter (uvicorn_logging.py:143): a request line, as in the text log
        return [Piece(lineno=lineno, shape=Shape.ACCESS, msg=message, proc=proc, level=level, stamp=stamp, width=width)]
    fileinfo = f"{record.get('name', 'vllm')}:0"
    extra = "".join(f"\n{record[key]}" for key in ("exc_info", "stack_info") if isinstance(record.get(key), str))
    return [
        Piece(lineno=lineno, shape=Shape.VLLM, msg=msg, proc=proc, level=level, stamp=stamp, fileinfo=fileinfo,
              width=width)
        for msg in (message + extra).split("\n")
    ]


_ZAP_KEYS = ("level", "ts", "logger", "caller", "msg", "stacktrace")
"""zap's production encoder's own keys (zapcore.NewProductionEncoderConfig); the rest are the call's fields."""
_USER_DATA = re.compile(r"prompt|message|input|body|content|payload|request|text|query|completion", re.IGNORECASE)
"""Fields that may hold what a client sent: user data, never read for signals (a request logged at debug level)."""


def _stamp(text: str) -> Stamp | None:
    when = re.match(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)", text)
    if when is None:
        return None
    year, *rest = (int(g) for g in when.groups())
    return make_stamp(*rest, calendar=year)


def _zap_record(record: dict, lineno: int, width: int) -> list[Piece]:
    """zap's JSON line: ``level``, ``ts`` (epoch seconds, or RFC 3339 with ``--zap-time-encoding``), ``caller``
    (``file.go:N``), ``msg``, the call's fields (logr's ``error`` among them) and ``stacktrace``.

    The fields follow the message as zap's console encoder prints them (``msg {"error": "…"}``), so a rule reads
    an error's words where the line carries them (llm-d's sidecar: ``failed to connect to vLLM decoder`` with
    ``"error": "dial tcp [::1]:8200: connect: connection refused"``, pkg/sidecar/proxy/proxy_helpers.go:144).
    Fields that may carry a client's request (a prompt, a body, nested objects) are left out: user data is never a
    signal.
    """
    ts = record.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and 0 < ts < 1e11:
        stamp = _stamp(datetime.fromtimestamp(ts, tz=timezone.utc).isoformat())
    else:
        stamp = _stamp(str(ts or ""))
    fields = {key: value for key, value in record.items() if key not in _ZAP_KEYS and not _USER_DATA.search(key)
              and not isinstance(value, (dict, list))}
    message = record["msg"] + (f" {json.dumps(fields, ensure_ascii=False)}" if fields else "")
    if isinstance(record.get("stacktrace"), str):
        message += "\n" + record["stacktrace"]
    caller = record.get("caller")
    fileinfo = caller if isinstance(caller, str) and re.fullmatch(r"[\w./-]+:\d+", caller) else f"{record.get('logger', 'zap')}:0"
    level = str(record.get("level", "info")).upper()
    return [Piece(lineno=lineno, shape=Shape.VLLM, msg=msg, level=level, stamp=stamp, fileinfo=fileinfo, width=width)
            for msg in message.split("\n")]
