"""The console script ends without the interpreter's teardown only when nothing needs it (``cli.exit_now``):
the exit status, the output and the exit handlers are those of the usual way."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading

import pytest

from engdiag import cli
from tests.conftest import run_engdiag, write_log


ACTIVE_COUNT = threading.active_count


@pytest.fixture
def exits(monkeypatch) -> list[int]:
    done: list[int] = []
    monkeypatch.setattr(os, "_exit", done.append)
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: 0)  # pytest's own handlers are not the CLI's
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # nor the threads other tests left running
    return done


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (2, 2), (10, 10), (True, 1)])
def test_an_exit_status_with_nothing_pending_ends_at_once(exits, code, status):
    cli.exit_now(code)
    assert exits == [status]


def test_a_message_an_exit_handler_or_another_thread_takes_the_usual_way(exits, monkeypatch):
    cli.exit_now("a message to print")
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: 1)
    cli.exit_now(0)
    monkeypatch.setattr(atexit, "_ncallbacks", lambda: 0)
    monkeypatch.setattr(threading, "active_count", ACTIVE_COUNT)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        cli.exit_now(0)
    finally:
        stop.set()
        worker.join()
    assert exits == []


def test_streams_that_do_not_flush_take_the_usual_way(exits, monkeypatch):
    class Broken:
        def flush(self) -> None:
            raise BrokenPipeError

    monkeypatch.setattr(sys, "stdout", Broken())
    cli.exit_now(0)
    assert exits == []
    monkeypatch.setattr(sys, "stdout", None)  # closed from the start (``>&-``): nothing to flush
    cli.exit_now(7)
    assert exits == [7]


def test_the_script_writes_everything_and_keeps_its_exit_codes(tmp_path):
    log = write_log(tmp_path / "serve.log", [
        "(APIServer pid=41) INFO 10-20 06:00:00 [api_server.py:1000] vLLM API server version 0.11.0",
        *[f"(APIServer pid=41) INFO 10-20 06:00:{i:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 "
          f"tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
          f"usage: 1.0%, Prefix cache hit rate: 0.0%" for i in range(1, 50)],
    ])
    done = run_engdiag("analyze", "--json", str(log))
    assert done.returncode == 0 and done.stdout.rstrip().endswith(b"}")
    kind = json.loads(done.stdout)["verdict"]["kind"]
    assert run_engdiag("analyze", "--json", "--fail-on", kind, str(log)).returncode == 10
    assert run_engdiag("analyze", "--bogus").returncode == 2
    missing = run_engdiag("analyze", str(tmp_path / "missing.log"))
    assert missing.returncode == 3 and b"no such file" in missing.stderr
    handler = "import atexit, sys; atexit.register(lambda: print('handler ran')); "
    script = handler + "sys.argv = ['engdiag', '--version']; from engdiag.cli import main; main()"
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.endswith(b"handler ran\n")
