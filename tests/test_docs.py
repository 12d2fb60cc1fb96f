"""The README's two set-up commands stay true, and CI runs the same test command."""

from __future__ import annotations

import re

from engdiag.cli import app

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def _sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.S)


def test_ci_runs_the_readme_test_command():
    test_command = next(block.strip() for block in _sh_blocks() if "pytest" in block)
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


def test_readme_first_command_runs_analyze_on_a_shipped_example():
    first = _sh_blocks()[0].strip()
    assert "engdiag analyze examples/" in first
    example = first.split("engdiag analyze ", 1)[1].split()[0]
    assert (ROOT / example).is_file()


def test_every_command_is_in_the_readme_and_has_help():
    for command in app.registered_commands:
        assert f"engdiag {command.name}" in README
        assert command.help


def test_documentation_pages_exist():
    for page in ("verdicts.md", "log-formats.md", "json-schema.md", "exit-codes.md", "timeouts.md", "snapshot.md", "security.md", "performance.md", "watch.md"):
        assert (ROOT / "docs" / page).read_text().strip()
