"""Exit codes and the one exception family engdiag raises.

Every failure a user can cause or meet (a missing log, no py-spy, no ptrace
permission, a pid that is gone) is an ``EngdiagError`` subclass carrying its
exit code and a hint that says what to do.  The CLI turns these into one line
on stderr in a single place (``engdiag.cli``); nothing else picks exit codes.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented process exit codes (see docs/exit-codes.md)."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    INPUT = 3
    CAPTURE_UNAVAILABLE = 4
    PERMISSION = 5
    TARGET_GONE = 6
    OUTPUT = 7
    NETWORK = 8
    FINDING = 10
    WATCH_SLOW = 11
    WATCH_DEAD = 12
    INTERRUPTED = 130


class EngdiagError(Exception):
    """Base of every error engdiag reports to the user.

    ``hint`` is the next step for the user; ``exit_code`` is the code the
    process ends with.
    """

    exit_code: ExitCode = ExitCode.INTERNAL
    hint: str = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class UsageError(EngdiagError):
    """Options that cannot work together or values out of range."""

    exit_code = ExitCode.USAGE
    hint = "see --help for the accepted values"


class InputError(EngdiagError):
    """A log, metrics or prompt-length input is missing, unreadable or empty."""

    exit_code = ExitCode.INPUT
    hint = "check the path and that the file is readable"


class NoLogsFound(InputError):
    """A directory held no file engdiag reads (*.log, *.txt, *.out, *.gz)."""

    hint = "pass the log file itself, or a directory holding *.log, *.txt, *.out or *.gz files"


class NothingToRecommend(InputError):
    """recommend-timeout was given no prompt lengths and no throughput to work from."""

    hint = (
        "give --log with a vLLM log, --metrics with a /metrics scrape or URL, "
        "--prompt-lens FILE or --prompt-len N, and --tokens-per-sec if the log has no stats lines"
    )


class NetworkError(EngdiagError):
    """A metrics URL the user named could not be fetched."""

    exit_code = ExitCode.NETWORK
    hint = "check the URL (e.g. http://HOST:8000/metrics) and that the server is reachable"


class CaptureUnavailable(EngdiagError):
    """A capture tool (py-spy) is missing or broke."""

    exit_code = ExitCode.CAPTURE_UNAVAILABLE
    hint = "reinstall engdiag (py-spy ships with it) or put py-spy on PATH"


class PermissionDenied(EngdiagError):
    """The kernel refused ptrace access to the target processes."""

    exit_code = ExitCode.PERMISSION
    hint = (
        "run as root or as the process owner with ptrace allowed: `sudo engdiag snapshot PID`; "
        "in Docker add --cap-add=SYS_PTRACE; in Kubernetes add SYS_PTRACE to "
        "securityContext.capabilities or use `kubectl debug --profile=general`; "
        "with Yama, `sysctl kernel.yama.ptrace_scope=0` lets non-root users attach"
    )


class TargetGone(EngdiagError):
    """The pid does not exist, or every target exited before it could be sampled."""

    exit_code = ExitCode.TARGET_GONE
    hint = "check the pid with `ps -ef | grep vllm`; pass the API server's or EngineCore's pid"


class OutputError(EngdiagError):
    """A bundle or output file could not be written."""

    exit_code = ExitCode.OUTPUT
    hint = "choose a writable folder with --out; the capture above was still printed"
