"""The only module that runs py-spy: find it, dump one process as JSON, map the JSON to frames.

Each dump runs with a hard timeout in its own session; if it is cut short (or
py-spy dies), the target is checked and sent SIGCONT when py-spy left it
stopped.  Failures come back as ``DumpResult.error`` with a kind, never raised:
one process that cannot be read must not lose the others.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engdiag.errors import CaptureUnavailable
from engdiag.redact import mask_value
from engdiag.snapshot.model import DumpResult, Frame, SnapshotOptions, ThreadSample
from engdiag.snapshot.tree import alive, resume_if_stopped

_MAX_SOURCE_BYTES = 4 << 20


def locate() -> str:
    """The py-spy installed with engdiag first, then the one on PATH."""
    own = Path(sys.executable).parent / "py-spy"
    if own.is_file() and os.access(own, os.X_OK):
        return str(own)
    found = shutil.which("py-spy")
    if found:
        return found
    raise CaptureUnavailable(
        "py-spy not found (neither beside this Python nor on PATH)",
        hint="reinstall engdiag (`pip install engdiag` brings py-spy), or `pip install py-spy`",
    )


def version(binary: str) -> str | None:
    """``0.4.3``, or None if the binary does not answer."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.decode(errors="replace").strip()
    return text.split()[-1] if text else None


def _kind(stderr: str, pid: int) -> tuple[str, str]:
    lowered = stderr.lower()
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "py-spy failed")
    if not alive(pid):
        return "gone", "the process exited during the capture"
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return "permission", "ptrace permission denied (see the hint for how to allow it)"
    if "failed to find python version" in lowered or "python interpreter" in lowered or "unsupported version" in lowered:
        return "not_python", f"not a Python process py-spy can read ({last})"
    if "no such file" in lowered or "executable name" in lowered or "no such process" in lowered:
        return "gone", "the process exited during the capture"
    return "failed", last[:300]


class _Sources:
    """Source lines for frames, read as the target sees its files (``/proc/PID/root``)."""

    def __init__(self) -> None:
        self._files: dict[tuple[int, str], list[str] | None] = {}

    def line(self, pid: int, filename: str, number: int) -> str | None:
        if not filename or number <= 0:
            return None
        key = (pid, filename)
        if key not in self._files:
            self._files[key] = self._read(pid, filename)
        lines = self._files[key]
        return lines[number - 1].strip()[:200] if lines and number <= len(lines) else None

    @staticmethod
    def _read(pid: int, filename: str) -> list[str] | None:
        for path in (Path(f"/proc/{pid}/root{filename}"), Path(filename)):
            try:
                if path.stat().st_size > _MAX_SOURCE_BYTES:
                    return None
                return path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
        return None


def _frame(raw: dict[str, Any], pid: int, sources: _Sources, with_locals: bool) -> Frame:
    native = raw.get("module") is not None
    filename = raw.get("filename") or ""
    line = int(raw.get("line") or 0)
    local_values = None
    if with_locals and raw.get("locals"):
        local_values = tuple((str(v.get("name")), mask_value(str(v.get("repr")))) for v in raw["locals"])
    return Frame(
        name=str(raw.get("name") or "?"),
        filename=filename,
        line=line,
        native=native,
        module=raw.get("module"),
        code=None if native else sources.line(pid, filename, line),
        locals=local_values,
    )


def parse_dump(text: str, pid: int, sources: _Sources | None = None, with_locals: bool = False) -> tuple[ThreadSample, ...]:
    """py-spy's ``dump --json`` array → thread samples."""
    sources = sources or _Sources()
    threads = []
    for raw in json.loads(text):
        frames = tuple(_frame(f, pid, sources, with_locals) for f in raw.get("frames") or [])
        threads.append(
            ThreadSample(
                thread_id=int(raw.get("thread_id") or 0),
                os_tid=raw.get("os_thread_id"),
                name=raw.get("thread_name"),
                active=bool(raw.get("active")),
                gil=bool(raw.get("owns_gil")),
                frames=frames,
            )
        )
    return tuple(threads)


class Dumper:
    """Runs ``py-spy dump`` against one pid at a time (thread-safe; one instance per capture)."""

    def __init__(self, binary: str, options: SnapshotOptions) -> None:
        self.binary = binary
        self.options = options
        self._sources = _Sources()

    def _args(self, pid: int) -> list[str]:
        args = [self.binary, "dump", "--pid", str(pid), "--json"]
        if self.options.native:
            args.append("--native")
        if self.options.nonblocking:
            args.append("--nonblocking")
        if self.options.locals:
            args.append("--locals")
        return args

    def dump(self, pid: int) -> DumpResult:
        """One dump of one process, within the per-dump timeout."""
        started = time.monotonic()
        try:
            child = subprocess.Popen(
                self._args(pid), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        except OSError as error:
            return DumpResult(error=f"cannot run py-spy: {error}", kind="missing")
        try:
            out, err = child.communicate(timeout=self.options.dump_timeout_s)
        except subprocess.TimeoutExpired:
            self._kill(child)
            return DumpResult(
                error=f"py-spy did not finish within {self.options.dump_timeout_s:g} s",
                kind="timeout",
                seconds=time.monotonic() - started,
                resumed=resume_if_stopped(pid),
            )
        except BaseException:
            self._kill(child)
            resume_if_stopped(pid)
            raise
        seconds = time.monotonic() - started
        if child.returncode != 0:
            resumed = resume_if_stopped(pid)
            if child.returncode < 0:
                name = signal.Signals(-child.returncode).name
                return DumpResult(error=f"py-spy was killed by {name}", kind="failed", seconds=seconds, resumed=resumed)
            kind, message = _kind(err.decode(errors="replace"), pid)
            return DumpResult(error=message, kind=kind, seconds=seconds, resumed=resumed)
        try:
            threads = parse_dump(out.decode(errors="replace"), pid, self._sources, self.options.locals)
        except (ValueError, TypeError, KeyError) as error:
            return DumpResult(error=f"unreadable py-spy output ({error})", kind="failed", seconds=seconds)
        return DumpResult(threads=threads, seconds=seconds)

    @staticmethod
    def _kill(child: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        child.communicate()
