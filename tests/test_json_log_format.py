"""vLLM's JSON log formatter gives the same diagnosis as its text format, through the real CLI.

vLLM 0.32.0–0.34.0 (``--logging-config.formatter json``) configures
``pythonjsonlogger.jsonlogger.JsonFormatter`` with
``JSON_FORMAT = "%(asctime)s %(levelname)s %(name)s %(processName)s %(process)d %(message)s"``
(vllm/logging_utils/formatter.py:7 and vllm/logger.py:241-248 in 0.32.0, 0.33.0 and 0.34.0; absent in
0.18.1 and older).  The records below are formatted by that very class and format string, and the same
records by vLLM's text ``_FORMAT`` (vllm/logger.py:29-32 in 0.34.0, datefmt ``%m-%d %H:%M:%S``), so the
two logs say exactly the same thing and every scanner backend must judge them alike.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_engdiag, write_log

jsonlogger = pytest.importorskip("pythonjsonlogger.jsonlogger", reason="python-json-logger (vLLM's JSON formatter)")

JSON_FORMAT = "%(asctime)s %(levelname)s %(name)s %(processName)s %(process)d %(message)s"
TEXT_FORMAT = "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
TEXT_DATEFMT = "%m-%d %H:%M:%S"
START = time.mktime((2026, 12, 3, 4, 0, 0, 0, 0, -1))


def _timeout() -> tuple:
    try:
        raise TimeoutError("RPC call to execute_model timed out.")
    except TimeoutError:
        return sys.exc_info()


# (seconds after START, process name, pid, logger, file:line, level, message, exc_info)
# Wordings from vLLM 0.34.0: startup.py:18, core.py:459, loggers.py (stats), jit_monitor.py:129,
# multiproc_executor.py:533 (the RPC timeout), core.py:1759 (fatal error), async_llm.py (output_handler).
RECORDS = [
    (0, "MainProcess", "APIServer", 1, "vllm.entrypoints.common.startup", "startup.py", 18, logging.INFO,
     "vLLM server version 0.34.0, serving model m", None),
    (40, "EngineCore", "EngineCore", 9, "vllm.v1.engine.core", "core.py", 459, logging.INFO,
     "init engine (profile, create kv cache, warmup model) took 38.20 s (compilation: 20.10 s)", None),
    (60, "MainProcess", "APIServer", 1, "vllm.v1.metrics.loggers", "loggers.py", 326, logging.INFO,
     "Engine 000: Avg prompt throughput: 9000.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, "
     "Waiting: 0 reqs, GPU KV cache usage: 41.0%, Prefix cache hit rate: 0.0%", None),
    (61, "VllmWorker-0", "Worker_TP0", 11, "vllm.utils.jit_monitor", "jit_monitor.py", 143, logging.WARNING,
     "Triton kernel JIT compilation during inference: _chunk_scan_fwd (BLOCK=64). This causes a latency spike; "
     "consider extending warmup to cover this shape/config.", None),
    (361, "EngineCore", "EngineCore", 9, "vllm.v1.engine.core", "core.py", 1759, logging.ERROR,
     "EngineCore encountered a fatal error.", "timeout"),
    (361, "MainProcess", "APIServer", 1, "vllm.v1.engine.async_llm", "async_llm.py", 707, logging.ERROR,
     "AsyncLLM output_handler failed.", None),
]


def _record(at, process_name, vllm_name, pid, logger, filename, lineno, level, message, exc) -> logging.LogRecord:
    record = logging.makeLogRecord({
        "name": logger, "levelno": level, "levelname": logging.getLevelName(level), "msg": message,
        "args": None, "created": START + at, "msecs": 0.0, "processName": process_name, "process": pid,
        "lineno": lineno, "filename": filename, "exc_info": _timeout() if exc else None,
    })
    record.vllm_process_name = vllm_name
    record.fileinfo = filename
    return record


class _NewLineFormatter(logging.Formatter):
    """vLLM's text formatter repeats the prefix on every line of a message (logging_utils/formatter.py:74-77)."""

    def format(self, record: logging.LogRecord) -> str:
        msg = super().format(record)
        if record.message != "":
            msg = msg.replace("\n", "\r\n" + msg.split(record.message)[0])
        return msg


def _logs(tmp_path: Path) -> tuple[Path, Path]:
    as_json = jsonlogger.JsonFormatter(JSON_FORMAT)
    as_text = _NewLineFormatter(TEXT_FORMAT, TEXT_DATEFMT)
    json_lines = [as_json.format(_record(*r)) for r in RECORDS]
    text_lines = [as_text.format(_record(*r)) for r in RECORDS]
    return write_log(tmp_path / "json.log", json_lines), write_log(tmp_path / "text.log", text_lines)


def test_the_formatter_writes_one_object_a_line_with_the_keys_vllm_configures(tmp_path):
    json_log, _ = _logs(tmp_path)
    lines = json_log.read_text().splitlines()
    assert len(lines) == len(RECORDS)
    fatal = json.loads(lines[4])
    assert list(fatal)[:6] == ["asctime", "levelname", "name", "processName", "process", "message"]
    assert fatal["exc_info"].endswith("TimeoutError: RPC call to execute_model timed out.")


def _verdict(path: Path, scanner: str | None) -> dict:
    env = {"ENGDIAG_SCANNER": scanner} if scanner else {}
    result = run_engdiag("analyze", str(path), "--json", env=env, timeout=120)
    assert result.returncode in (0, 10), result.stderr.decode()
    return json.loads(result.stdout)


@pytest.mark.parametrize("scanner", [None, "lines", "python"])
def test_a_json_log_gets_the_verdict_of_the_same_text_log(tmp_path, scanner):
    json_log, text_log = _logs(tmp_path)
    from_json, from_text = _verdict(json_log, scanner), _verdict(text_log, scanner)
    assert from_text["verdict"]["kind"] == "slow", from_text["verdict"]["headline"]
    assert from_json["verdict"]["kind"] == from_text["verdict"]["kind"]
    assert from_json["verdict"]["headline"] == from_text["verdict"]["headline"]
    cited = [(e["role"], e["text"]) for e in from_json["verdict"]["evidence"]]
    assert cited == [(e["role"], e["text"]) for e in from_text["verdict"]["evidence"]]
    # the traceback inside exc_info belongs to the fatal record: its TimeoutError is cited on that record's line
    lines = {e["line"] for e in from_json["verdict"]["evidence"] if "execute_model timed out" in e["text"]}
    assert lines == {5}, from_json["verdict"]["evidence"]


def test_a_uvicorn_access_line_through_the_json_formatter_is_still_a_5xx():
    """uvicorn's access logger gets the same JsonFormatter (vllm/logging_utils/uvicorn_logging.py:143-151, 0.32–0.34);
    its message is uvicorn's ``'%s - "%s %s HTTP/%s" %d'`` (uvicorn/protocols/http/h11_impl.py)."""
    from engdiag.logs.events import Signal
    from engdiag.logs.scan import LineScanner

    record = logging.makeLogRecord({
        "name": "uvicorn.access", "levelno": logging.INFO, "levelname": "INFO", "msg": '%s - "%s %s HTTP/%s" %d',
        "args": ("10.0.0.7:51234", "POST", "/v1/chat/completions", "1.1", 500), "created": START,
        "processName": "MainProcess", "process": 1,
    })
    line = jsonlogger.JsonFormatter(JSON_FORMAT).format(record)
    scanner = LineScanner("t.log", 0)
    events = scanner.feed(1, line) + scanner.finish()
    errors = [e for e in events if e.signal is Signal.HTTP_ERROR]
    assert len(errors) == 1 and errors[0].data.status == 500 and errors[0].line == 1


@pytest.mark.parametrize("prefix", ["2026-12-03T04:00:05.123456789Z ", "vllm-1  | ", "(RayWorkerWrapper pid=7, ip=10.0.0.2) "])
def test_a_json_record_behind_a_wrappers_prefix_is_still_one_record(prefix):
    """kubectl --timestamps, docker compose and Ray's actor tag wrap JSON lines as they wrap text ones."""
    from engdiag.logs.lines import Shape, pieces

    as_json = jsonlogger.JsonFormatter(JSON_FORMAT)
    line = prefix + as_json.format(_record(*RECORDS[4]))
    found = pieces(line, 3)
    assert found[0].shape is Shape.VLLM and found[0].msg == "EngineCore encountered a fatal error."
    assert found[-1].msg == "TimeoutError: RPC call to execute_model timed out."
    assert len({p.header for p in found}) == 1 and found[0].proc.name == "EngineCore"
    assert (found[0].kube_ts is not None) == prefix.startswith("2026")
