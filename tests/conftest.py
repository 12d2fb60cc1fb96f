"""Shared helpers: run the real CLI, write logs, build synthetic incidents."""

from __future__ import annotations

import os
import subprocess
import sys
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


def write_log(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
