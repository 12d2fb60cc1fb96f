"""py-spy's *text* dump (what Ray's dashboard serves) → the same thread samples as a local dump (pure).

The format, from py-spy's ``src/dump.rs`` (0.3 – 0.4)::

    Process 4242: ray::RayWorkerWrapper.execute_method
    Python v3.11.7 (/usr/bin/python3.11)

    Thread 4242 (idle): "MainThread"
        all_reduce (torch/distributed/distributed_c10d.py:3252)
        wrapper (torch/distributed/c10d_logger.py:83)
    Thread 0x7F3A2C1FF640 (active+gil)
        ncclKernel_AllReduce (libnccl.so.2)

The thread id is the OS thread id when py-spy knows it, else the hex Python
thread id; the status is ``idle``, ``active`` or ``active+gil``; a frame is
``name (file:line)`` or ``name (file)``.  With ``--subprocesses`` several
``Process`` blocks follow each other.  Text has no ``module`` field, so a frame
whose file is not Python source (a shared library, a C/C++ file) is native.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engdiag.redact import redact
from engdiag.snapshot.model import Frame, ThreadSample

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROCESS = re.compile(r"^Process (\d+): ?(.*)$")
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([a-z+]+)\)(?:: "(.*)")?\s*$')
_FRAME = re.compile(r"^ {4}(\S.*?) \((.*?)(?::(\d+))?\)\s*$")


@dataclass(frozen=True)
class TextDump:
    """One process block of a text dump."""

    pid: int
    title: str
    """The command line py-spy printed (``ray::RayWorkerWrapper.all_reduce``), redacted."""
    threads: tuple[ThreadSample, ...]


def _native(filename: str) -> bool:
    return not (filename.endswith((".py", ".pyx", ".pyw")) or filename.startswith("<"))


def _frame(name: str, filename: str, line: str | None) -> Frame:
    native = _native(filename)
    return Frame(
        name=name,
        filename="" if native and ".so" in filename else filename,
        line=int(line) if line else 0,
        native=native,
        module=filename if native and ".so" in filename else None,
    )


def _thread_id(text: str) -> tuple[int, int | None]:
    """(thread id, OS thread id): decimal ids are OS ids, hex ones Python thread ids."""
    if text.lower().startswith("0x"):
        return int(text, 16), None
    return int(text), int(text)


def parse_text_dump(text: str) -> list[TextDump]:
    """Every ``Process`` block of the text; lines it does not know (locals, blanks) are skipped."""
    dumps: list[TextDump] = []
    pid: int | None = None
    title = ""
    threads: list[ThreadSample] = []
    current: dict | None = None

    def close_thread() -> None:
        nonlocal current
        if current is not None:
            threads.append(ThreadSample(frames=tuple(current.pop("frames")), **current))
            current = None

    def close_process() -> None:
        close_thread()
        if pid is not None:
            dumps.append(TextDump(pid, title, tuple(threads)))

    for raw in _ANSI.sub("", text).splitlines():
        line = raw.rstrip("\r")
        if match := _PROCESS.match(line):
            close_process()
            pid, title, threads = int(match[1]), redact(match[2].strip()), []
        elif match := _THREAD.match(line):
            close_thread()
            thread_id, os_tid = _thread_id(match[1])
            current = {"thread_id": thread_id, "os_tid": os_tid, "name": match[3], "active": match[2] != "idle",
                       "gil": "gil" in match[2], "frames": []}
        elif current is not None and (match := _FRAME.match(line)):
            current["frames"].append(_frame(match[1], match[2], match[3]))
    close_process()
    return dumps
