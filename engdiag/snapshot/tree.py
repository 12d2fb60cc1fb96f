"""The only module that reads processes (psutil): the target's tree, who is Python, who is who.

psutil is how this is done well (it reads /proc and survives processes that
vanish mid-read); a process that exits or cannot be read becomes a record with
a reason, never an exception.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from engdiag.errors import TargetGone
from engdiag.roles import Role, role_of
from engdiag.snapshot.model import CpuTimes, ProcessInfo

_API_MARKERS = ("vllm serve", "vllm.entrypoints", "api_server", " serve ")


def _is_python(proc: psutil.Process, cmdline: list[str]) -> bool | None:
    try:
        exe = proc.exe()
    except (psutil.AccessDenied, psutil.ZombieProcess):
        exe = ""
    except psutil.NoSuchProcess:
        return None
    names = [Path(exe).name] if exe else []
    names += [Path(cmdline[0]).name] if cmdline else []
    if any(name.startswith("python") or name.startswith("pypy") for name in names):
        return True
    try:
        maps = Path(f"/proc/{proc.pid}/maps").read_text(errors="replace")
    except OSError:
        return None if not exe else False
    return "libpython" in maps or "/python3" in maps


def _title_role(name: str, cmdline: list[str]) -> Role:
    title = cmdline[0] if cmdline else name
    role = role_of(title) if title.startswith("VLLM::") else Role.OTHER
    if role is Role.OTHER:
        joined = " ".join(cmdline)
        if any(marker in joined for marker in _API_MARKERS) and "vllm" in joined:
            role = Role.API_SERVER
    return role


def _info(proc: psutil.Process) -> ProcessInfo:
    try:
        with proc.oneshot():
            name = proc.name()
            cmdline = proc.cmdline()
            ppid = proc.ppid()
            state = proc.status()
            started = proc.create_time()
    except psutil.NoSuchProcess:
        return ProcessInfo(proc.pid, None, "?", (), None, None, None, "exited while the tree was read")
    except psutil.AccessDenied:
        return ProcessInfo(proc.pid, None, "?", (), None, None, None, "not allowed to read this process")
    python = _is_python(proc, cmdline)
    skip = None
    if python is False:
        skip = f"not a Python process ({name})"
    elif state == psutil.STATUS_ZOMBIE:
        skip = "a zombie (exited, not yet reaped)"
    return ProcessInfo(
        pid=proc.pid,
        ppid=ppid,
        name=name,
        cmdline=tuple(cmdline),
        state=state,
        started=started,
        python=python,
        skip_reason=skip,
        title_role=_title_role(name, cmdline),
    )


def _is_kernel_thread(proc: psutil.Process) -> bool:
    try:
        return not proc.cmdline() and proc.ppid() in (0, 2) and proc.pid != 1
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def walk(pid: int) -> list[ProcessInfo]:
    """The process and all its descendants, parents before children (never engdiag itself)."""
    if pid <= 0:
        raise TargetGone(f"{pid} is not a process id", hint="pass a positive pid, e.g. from `pgrep -f 'vllm serve'`")
    if pid == os.getpid():
        raise TargetGone(f"pid {pid} is engdiag itself", hint="pass the pid of the vLLM API server or EngineCore")
    try:
        root = psutil.Process(pid)
        if _is_kernel_thread(root):
            raise TargetGone(f"pid {pid} ({root.name()}) is a kernel thread, not a vLLM process")
        children = root.children(recursive=True)
    except psutil.NoSuchProcess:
        raise TargetGone(f"no process with pid {pid}") from None
    except psutil.AccessDenied as error:
        raise TargetGone(f"pid {pid} cannot be read ({error})") from None
    infos = [_info(root)] + [_info(child) for child in children if child.pid != os.getpid()]
    if pid == 1 and infos[0].python is not True:
        raise TargetGone(
            f"pid 1 is the init process ({infos[0].name}), not a vLLM server",
            hint="pass the API server's or EngineCore's pid (`pgrep -f 'vllm serve'`); inside a container pid 1 may be vLLM itself",
        )
    return infos


def state_of(pid: int) -> str | None:
    """The kernel's one-letter state (``R``, ``S``, ``T``…), or None if the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else None


def alive(pid: int) -> bool:
    """Does the process still exist (and is not a zombie)?"""
    return state_of(pid) not in (None, "Z", "X")


def resume_if_stopped(pid: int) -> bool:
    """Send SIGCONT if the process is stopped (``T``/``t``); True if it was.

    py-spy pauses its target with ptrace while it reads; a py-spy killed or
    timed out at the wrong moment can leave the target stopped (py-spy#390).
    """
    if state_of(pid) not in ("T", "t"):
        return False
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        return False
    return True


def cpu_times(pid: int) -> CpuTimes | None:
    """The process's and each thread's CPU seconds now (None if it cannot be read).

    Read next to every dump: CPU advancing between samples is work even when
    the Python frame does not change (a matmul, a kernel launch, a spin).
    """
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            times = proc.cpu_times()
            threads = proc.threads()
    except (psutil.Error, OSError):
        return None
    return CpuTimes(
        at=time.monotonic(),
        process=times.user + times.system,
        threads=tuple((t.id, t.user_time + t.system_time) for t in threads),
    )
