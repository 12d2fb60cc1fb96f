"""Shared helpers: run the real CLI, write logs, build synthetic incidents."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

from engdiag.cli import app

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus"

settings.register_profile(
    "ci",
    max_examples=int(os.environ.get("ENGDIAG_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("ci")

_CACHE = tempfile.mkdtemp(prefix="engdiag-test-cache-")
os.environ["ENGDIAG_CACHE_DIR"] = _CACHE  # hyperscan databases kept here (engdiag.logs.hscache), not in a home
atexit.register(shutil.rmtree, _CACHE, True)


@pytest.fixture(autouse=True)
def _hyperscan_twins_on_small_windows(monkeypatch):
    """The hyperscan backend reads windows under ``hotbulk.MIN_BYTES`` with the Python twins (the python
    backend's); test logs are small, so here every window of the hyperscan backend takes its hyperscan twins."""
    from engdiag.logs import cuebulk, hotbulk

    monkeypatch.setattr(hotbulk, "MIN_BYTES", 0)
    monkeypatch.setattr(cuebulk, "MIN_BYTES", 0)


@pytest.fixture
def cli():
    """Invoke the CLI in-process: ``cli(*args, input=...)`` → result with exit_code/stdout/stderr."""
    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None):
        return runner.invoke(app, list(args), input=input, env=env)

    return invoke


def run_engdiag(*args: str, input: bytes | None = None, timeout: float = 60, env: dict | None = None,
                cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the installed ``engdiag`` entry point as a user would (``python -m engdiag``)."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "engdiag", *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd or ROOT,
    )


def analysis_of(tmp_path: Path, text: str):
    """What `analyze` makes of a log fragment: the boundary tests' one way in."""
    from engdiag.analysis.analyze import analyze

    path = tmp_path / "fragment.log"
    path.write_text(text)
    return analyze([str(path)])


def verdict_of(tmp_path: Path, text: str):
    return analysis_of(tmp_path, text).verdict


def steps_of(verdict) -> str:
    """A verdict's next steps as one text, each step's words then its command."""
    return " ".join(f"{step.text} {step.command or ''}" for step in verdict.next_steps)


def write_log(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


class LoopbackServer:
    """A real HTTP server on 127.0.0.1 whose answers the test decides (``answer``), on its own thread."""

    def __init__(self) -> None:
        import http.server
        import threading

        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answered = server.answer(self.path, dict(self.headers))
                if answered is None:
                    return  # no answer at all: a server that hung
                status, content_type, body = answered
                payload = body.encode()
                self.send_response(status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, address: None  # a client that gave up (timeout tests)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, str | None, str] | None:
        """Status, content type and body for a GET of ``path`` (None: never answer)."""
        raise NotImplementedError

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class MetricsServer(LoopbackServer):
    """``/metrics`` text that a test can change, fail or hang."""

    def __init__(self) -> None:
        self.body: object = ""
        """Text served at /metrics, or a function called for every request."""
        self.status = 200
        self.hang = False
        self.hits = 0
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, str | None, str] | None:
        self.hits += 1
        if self.hang:
            import time

            time.sleep(30)
            return None
        body = self.body() if callable(self.body) else self.body
        return self.status, "text/plain; version=0.0.4", str(body)


@pytest.fixture
def metrics_server():
    server = MetricsServer()
    try:
        yield server
    finally:
        server.close()


def closed_port_url() -> str:
    """A loopback URL nobody listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


def vllm_metrics(prompt_buckets: dict[float, int], prompt_tokens: float = 0, generation_tokens: float = 0,
                 prefill_seconds: float = 0, decode_seconds: float = 0, running: int = 0, waiting: int = 0,
                 kv: float = 0.0) -> str:
    """A vLLM-shaped /metrics scrape (V1 names, cumulative histogram buckets)."""
    label = 'engine="0",model_name="m"'
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{label}}} {running}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{label}}} {waiting}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{label}}} {kv}",
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{label}}} {prompt_tokens}",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{label}}} {generation_tokens}",
        "# HELP vllm:request_prompt_tokens Number of prefill tokens processed.",
        "# TYPE vllm:request_prompt_tokens histogram",
    ]
    cumulative = 0
    for bound in sorted(prompt_buckets):
        cumulative += prompt_buckets[bound]
        le = "+Inf" if bound == float("inf") else f"{bound:.1f}"
        lines.append(f'vllm:request_prompt_tokens_bucket{{{label},le="{le}"}} {cumulative}')
    if float("inf") not in prompt_buckets:
        lines.append(f'vllm:request_prompt_tokens_bucket{{{label},le="+Inf"}} {cumulative}')
    lines += [
        f"vllm:request_prompt_tokens_count{{{label}}} {cumulative}",
        f"vllm:request_prompt_tokens_sum{{{label}}} {prompt_tokens}",
        "# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.",
        "# TYPE vllm:request_prefill_time_seconds histogram",
        f'vllm:request_prefill_time_seconds_bucket{{{label},le="+Inf"}} {cumulative}',
        f"vllm:request_prefill_time_seconds_count{{{label}}} {cumulative}",
        f"vllm:request_prefill_time_seconds_sum{{{label}}} {prefill_seconds}",
        "# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.",
        "# TYPE vllm:request_decode_time_seconds histogram",
        f'vllm:request_decode_time_seconds_bucket{{{label},le="+Inf"}} {cumulative}',
        f"vllm:request_decode_time_seconds_count{{{label}}} {cumulative}",
        f"vllm:request_decode_time_seconds_sum{{{label}}} {decode_seconds}",
    ]
    return "\n".join(lines) + "\n"


PROGRAMS = Path(__file__).resolve().parent / "programs"


class Spawned:
    """A test program running in its own session, killed with all its children at the end."""

    def __init__(self, tmp_path: Path, script: str, *args: str, argv0: str | None = None,
                 env: dict[str, str] | None = None, timeout: float = 20.0) -> None:
        import time

        self.ready_file = tmp_path / f"{script}.{len(list(tmp_path.iterdir()))}.ready"
        argv = [argv0 or sys.executable, str(PROGRAMS / script), str(self.ready_file), *args]
        self.proc = subprocess.Popen(
            argv, executable=sys.executable, start_new_session=True, cwd=PROGRAMS,
            env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + timeout
        while not self.ready_file.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError(f"{script} did not become ready")
            time.sleep(0.02)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def close(self) -> None:
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait(timeout=10)


@pytest.fixture
def spawn(tmp_path):
    """``spawn(script, *args, argv0=..., env=...)`` → a running test program, always cleaned up."""
    started: list[Spawned] = []

    def start(script: str, *args: str, **kwargs: object) -> Spawned:
        program = Spawned(tmp_path, script, *args, **kwargs)  # type: ignore[arg-type]
        started.append(program)
        return program

    yield start
    for program in started:
        program.close()


def _has_cap_sys_ptrace() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 19))
    return False


def ptrace_possible() -> str | None:
    """Why real py-spy tests cannot run here (None when they can).

    py-spy attaches to sibling processes, so it needs CAP_SYS_PTRACE (root has it
    unless a container dropped it) or Yama's ptrace_scope=0.
    """
    if _has_cap_sys_ptrace():
        return None
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    if scope.exists() and scope.read_text().strip() != "0":
        return f"no CAP_SYS_PTRACE and kernel.yama.ptrace_scope={scope.read_text().strip()}: py-spy cannot attach"
    return None


needs_ptrace = pytest.mark.skipif(ptrace_possible() is not None, reason=str(ptrace_possible()))


def pytest_report_header(config):
    budget = settings().max_examples
    return [f"engdiag fuzz budget: {budget} examples per property (ENGDIAG_FUZZ_EXAMPLES); ptrace: "
            f"{ptrace_possible() or 'available'}"]
