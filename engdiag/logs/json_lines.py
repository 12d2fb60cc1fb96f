"""vLLM's JSON log formatter (0.32+): one JSON object a line, read into the same pieces as the text format."""

from __future__ import annotations

import json
import re
from dataclasses import replace

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
    if not isinstance(record, dict) or not isinstance(record.get("message"), str):
        return []
    stamp = None
    when = re.match(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)", str(record.get("asctime", "")))
    if when is not None:
        year, *rest = (int(g) for g in when.groups())
        stamp = make_stamp(*rest, calendar=year)  # the formatter's asctime carries the year
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
