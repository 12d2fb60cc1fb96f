"""Inputs as people pass them, through the real CLI: pipes, FIFOs, ``<(...)``, compressed files, UTF-16, devices.

Each case must give the same verdict as the plain file, or one precise line and
exit code 3 — never a hang, a traceback or "not a vLLM log".
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
import threading

import pytest

from tests.conftest import run_engdiag
from tests.test_cli_analyze import EXAMPLE


@pytest.fixture(scope="module")
def expected() -> dict:
    result = run_engdiag("analyze", "--json", str(EXAMPLE))
    return json.loads(result.stdout)


def _sourceless(value):
    """The document without input names (a pipe is /dev/fd/63, a FIFO its own path)."""
    if isinstance(value, dict):
        return {k: _sourceless(v) for k, v in value.items() if k not in ("source", "path")}
    if isinstance(value, list):
        return [_sourceless(v) for v in value]
    return value


def _same_as_plain(result: subprocess.CompletedProcess[bytes], expected: dict) -> None:
    assert result.returncode in (0, 10), result.stderr.decode()
    doc = json.loads(result.stdout)
    for key in ("verdict", "requests", "prompt_lengths", "signals", "memory"):
        assert _sourceless(doc[key]) == _sourceless(expected[key]), key
    assert doc["inputs"][0]["lines"] == expected["inputs"][0]["lines"]


def test_process_substitution_streams_like_stdin(expected):
    script = f'"{sys.executable}" -m engdiag analyze --json <(cat "{EXAMPLE}")'
    result = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60, check=False,
                            env={**os.environ, "NO_COLOR": "1"})
    _same_as_plain(result, expected)


def test_a_fifo_streams_like_stdin(tmp_path, expected):
    fifo = tmp_path / "engine.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as writer:
            writer.writelines(EXAMPLE.read_bytes().splitlines(keepends=True))

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    result = run_engdiag("analyze", "--json", str(fifo))
    writer.join(timeout=10)
    _same_as_plain(result, expected)


def test_tail_on_a_pipe_says_it_reads_all(expected):
    script = f'"{sys.executable}" -m engdiag analyze --json --tail 100000 <(cat "{EXAMPLE}")'
    result = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60, check=False,
                            env={**os.environ, "NO_COLOR": "1"})
    _same_as_plain(result, expected)
    assert b"cannot seek; --tail reads all of it" in result.stderr


@pytest.mark.parametrize(
    "suffix, pack",
    [
        (".gz.gz", lambda data: gzip.compress(gzip.compress(data))),
        (".bz2", bz2.compress),
        (".xz", lzma.compress),
        (".log", lambda data: data.decode().encode("utf-16")),
        (".log", lambda data: data.decode().encode("utf-32")),
        (".log", lambda data: b"\xef\xbb\xbf" + data),
    ],
    ids=["gzip-in-gzip", "bzip2", "xz", "utf-16", "utf-32", "utf-8-bom"],
)
def test_wrapped_files_give_the_plain_verdict(tmp_path, expected, suffix, pack):
    path = tmp_path / f"server{suffix}"
    path.write_bytes(pack(EXAMPLE.read_bytes()))
    _same_as_plain(run_engdiag("analyze", "--json", str(path)), expected)
    # the same bytes on stdin, where nothing can be peeked twice
    _same_as_plain(run_engdiag("analyze", "--json", "-", input=path.read_bytes()), expected)


@pytest.mark.parametrize("tool, suffix", [("bzip2", ".bz2"), ("xz", ".xz"), ("zstd", ".zst"), ("gzip", ".gz")])
def test_files_made_by_the_real_tools(tmp_path, expected, tool, suffix):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    if tool == "zstd":
        pytest.importorskip("zstandard", reason="reading .zst needs the zstandard package")
    plain = tmp_path / "server.log"
    plain.write_bytes(EXAMPLE.read_bytes())
    subprocess.run([tool, "-q", str(plain)], check=True, timeout=60)
    packed = tmp_path / f"server.log{suffix}"
    assert packed.exists()
    plain.unlink(missing_ok=True)  # zstd keeps the original; the directory must hold only the packed log
    _same_as_plain(run_engdiag("analyze", "--json", str(packed)), expected)
    # a directory is searched for compressed logs too
    _same_as_plain(run_engdiag("analyze", "--json", str(tmp_path)), expected)


def test_zstd_without_the_library_says_how_to_decompress(tmp_path):
    path = tmp_path / "server.log.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 32)
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "zstandard.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": f"{hide}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = run_engdiag("analyze", str(path), env=env)
    assert result.returncode == 3
    err = result.stderr.decode()
    assert "zstd-compressed" in err and "zstd -dc" in err and "Traceback" not in err


@pytest.mark.parametrize("name, pack", [("cut.bz2", bz2.compress), ("cut.xz", lzma.compress), ("cut.gz", gzip.compress)])
def test_truncated_compressed_files_are_one_line(tmp_path, name, pack):
    data = pack(EXAMPLE.read_bytes() * 20)
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    result = run_engdiag("analyze", str(path))
    assert result.returncode == 3
    err = result.stderr.decode()
    assert "truncated" in err and "Traceback" not in err


def test_dev_zero_is_refused_up_front():
    result = run_engdiag("analyze", "/dev/zero", timeout=20)
    assert result.returncode == 3
    assert b"character device" in result.stderr


def test_a_symlink_loop_is_named_as_such(tmp_path):
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    result = run_engdiag("analyze", str(loop))
    assert result.returncode == 3
    assert b"symbolic link loop" in result.stderr and b"no such file" not in result.stderr


def test_a_broken_symlink_says_where_it_points(tmp_path):
    link = tmp_path / "server.log"
    link.symlink_to(tmp_path / "rotated-away.log")
    result = run_engdiag("analyze", str(link))
    assert result.returncode == 3
    assert b"broken symbolic link" in result.stderr and b"rotated-away.log" in result.stderr
