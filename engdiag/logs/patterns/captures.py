"""Stack dumps and captures: vLLM's 0.33+ watchdog (its configured limit and its dumps), a native segfault
dump, kernel JIT during inference (0.32+ ``jit_monitor.py``), and the frames of a capture (faulthandler,
py-spy, a call tracer) that sit inside a collective, a compiler or a kernel launch.

A frame counts only in a capture, not in an exception's traceback: a thread parked in a collective is a
wait; the same frame above an exception is only where the exception passed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engdiag.logs.events import Failure, Payload, Peer, Phase, Signal, Timeout
from engdiag.logs.patterns.base import Rule, _c, _const, last_exception


def _in_collective(match: re.Match[str], text: str) -> Iterable[Payload]:
    """A stack frame inside a collective, from a capture (not an exception's traceback)."""
    if last_exception(text) is None:
        yield Peer(detail=match["f"])


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier", "_gather_ipc_meta", "all_to_all")


COMPILERS = ("triton/backends/", "triton/compiler/", "torch/_inductor/", "flashinfer/jit/", "deep_gemm/")
"""Source folders whose frames are compilation (the snapshot's frame rules name the same ones)."""


def _compile_frame(folder: str) -> Rule:
    """py-spy's ``    f (…/folder/file.py:N)`` or faulthandler's ``File "…/folder/…", line N in f``.

    An exception's traceback (``line N, in f``, with the comma) is where a process failed, never a capture
    of work in progress (an OCR'd import-time traceback through torch/_inductor read as compiling, found
    running the tool over vLLM issue bodies it had never seen)."""
    where = re.escape(folder)
    return Rule(
        Signal.STACK_IN_COMPILE,
        folder,
        re.compile(rf"^\s+(?P<f>\w+) \([^()\n]*{where}[^()\n]*\)|File \"[^\"\n]*{where}[^\"\n]*\", line \d+ in (?P<g>\w+)",
                   re.MULTILINE),
        lambda m, t: [] if last_exception(t) else [Peer(detail=f"{m['f'] or m['g']} ({folder.rstrip('/')})")],
    )


_LAUNCH = re.compile(r"^\s+c(?:u|uda)LaunchKernel(?:Ex)? \(", re.MULTILINE)
_NAMED_NATIVE = re.compile(r"^\s+(?!0x)(?P<f>[^\s(][^(\n]*?) \(", re.MULTILINE)


def _in_launch(match: re.Match[str], text: str) -> Iterable[Payload]:
    """The first named frame above the launch: the kernel (or the op) that could not be queued."""
    if last_exception(text) is not None:
        return
    kernel = next((m["f"] for m in _NAMED_NATIVE.finditer(text, match.end())
                   if "LaunchKernel" not in m["f"] and not m["f"].startswith("0x")), "a kernel")
    yield Peer(detail=kernel.strip()[:160])


_DEVICE_WAIT = re.compile(
    r"^\s+(?P<f>(?:\w+\.)?(?:synchronize|wait|from_ipc_handle|query))\s+\((?P<file>[^()\n]*torch/(?:cuda|xpu)/streams\.py)"
    r"|File \"[^\"\n]*torch/(?:cuda|xpu)/streams\.py\", line \d+ in (?P<g>(?:\w+\.)?(?:synchronize|wait|from_ipc_handle|query))\b",
    re.MULTILINE,
)


def _in_device_wait(match: re.Match[str], text: str) -> Iterable[Payload]:
    """A thread waiting on a device event or stream: it returns only when the work that records the event does."""
    if last_exception(text) is None:
        yield Peer(peer="device event", detail=f"{match['f'] or match['g']} (torch {'xpu' if '/xpu/' in match[0] else 'cuda'} streams)")


def _collective_frame(name: str) -> Rule:
    """faulthandler's ``line N in f`` or py-spy's ``    f (file:line)``.

    The call tracer's ``Call to f in`` is no capture: a trace holds every call, returned or not, so only its
    last line says where the thread sat (``TRACE_CALL``, judged per trace)."""
    return Rule(
        Signal.STACK_IN_COLLECTIVE,
        name,
        re.compile(rf"(?:line \d+ in |^\s{{2,}})(?P<f>\w*{name}\w*)(?: in | \(|$)", re.MULTILINE),
        _in_collective,
    )


_TRACE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ (?P<k>Call to|Return from) (?P<f>[\w<>.]+) in (?P<file>\S+?):(?P<n>\d+)"
    r"(?: (?:from|to) (?P<by>[\w<>.]+) in (?P<byfile>\S+?):(?P<byn>\d+))?$",
    re.MULTILINE,
)
"""vllm/logger.py's ``_trace_calls`` (VLLM_TRACE_FUNCTION=1, one file per process and thread): ``{datetime.now()}
Call to f in file:N``, 0.6+ adding `` from g in file:N`` (`` to g …`` on a return)."""


def _trace_point(match: re.Match[str], text: str) -> Iterable[Payload]:
    """Where the traced thread went: into ``f`` (a call) or back out of it to its caller (a return)."""
    if match["k"] == "Call to":
        caller = f", called from {match['by']} ({match['byfile']}:{match['byn']})" if match["by"] else ""
        yield Peer(peer="call", detail=f"{match['f']} ({match['file']}:{match['n']}){caller}")
    else:
        where = f"{match['by']} ({match['byfile']}:{match['byn']})" if match["by"] else "its caller"
        yield Peer(peer="return", detail=f"{where}, back from {match['f']} ({match['file']}:{match['n']})")


CAPTURES: tuple[Rule, ...] = (
    Rule(Signal.FATAL_SIGNAL, "Segfault encountered", _c(r"Segfault encountered"), _const(Failure(exception="Segmentation fault"))),
    Rule(
        Signal.COMPILE,
        "during inference: ",
        _c(r"(?P<b>[\w-]+) (?P<e>kernel JIT compilation|[\w ]{0,40}?) during inference: (?P<fn>[^\s.]+)"),
        lambda m, t: [Phase(f"{m['b']} {m['e']} during inference")],
    ),
    Rule(
        Signal.STARTUP_PHASE,
        "[Watchdog]Start with timeout=",
        # 0.33/0.34 vllm/utils/watch_dog.py:165 "[Watchdog]Start with timeout=%s check_interval=%s dump_dir=%s":
        # the feed timeout a later "due to feed timeout" dump waited (--watchdog-config, 300 s default)
        _c(r"\[Watchdog\]Start with timeout=(?P<s>\d+)"),
        lambda m, t: [Phase(f"watchdog_configured {m['s']}")],
    ),
    Rule(
        Signal.STACK_DUMP,
        "[Watchdog]Dumped stack",
        _c(r"\[Watchdog\]Dumped stack to (?P<p>\S+) due to (?P<r>[^\n]+)"),
        lambda m, t: [Timeout(call=m["r"].strip(), guard="watchdog")],
    ),
    Rule(
        Signal.STACK_DUMP,
        "[Watchdog]Failed to dump stack trace",
        _c(r"\[Watchdog\]Failed to dump stack trace"),
        _const(Timeout(call="feed timeout", guard="watchdog")),
    ),
    *(_collective_frame(name) for name in COLLECTIVES),
    Rule(Signal.TRACE_CALL, "Call to ", _TRACE, _trace_point),
    Rule(Signal.TRACE_CALL, "Return from ", _TRACE, _trace_point),
    *(_compile_frame(folder) for folder in COMPILERS),
    # a thread inside cu/cudaLaunchKernel in a capture (gb10-flashinfer-radix-topk-multicta-wedge-pyspy-quoted:
    # under CUDA_LAUNCH_BLOCKING=1 the launch returns only when the kernel does)
    Rule(Signal.STACK_IN_LAUNCH, "LaunchKernel", _LAUNCH, _in_launch),
    # a thread in a device event's or stream's wait in a capture: Event.synchronize / Stream.synchronize, or
    # importing another process's event (lmcache-rocm-from-ipc-handle-deadlock: the engine core's main thread in
    # Event.from_ipc_handle on ROCm, holding the GIL, for good)
    Rule(Signal.STACK_IN_LAUNCH, "torch/cuda/streams.py", _DEVICE_WAIT, _in_device_wait),
    Rule(Signal.STACK_IN_LAUNCH, "torch/xpu/streams.py", _DEVICE_WAIT, _in_device_wait),
)
