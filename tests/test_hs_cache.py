"""The hyperscan databases kept on disk (engdiag.logs.hscache): a kept one is used only when it is exactly the
one asked for and safe to read; anything else is compiled and written again, whole; nothing fails a run."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from engdiag.logs import hscache
from tests.conftest import run_engdiag, write_log

hyperscan = pytest.importorskip("hyperscan")

EXPRESSIONS = [b"CUDA out of memory", b"Watchdog caught", b"timed out"]
IDS = [3, 5, 8]
FLAGS = [0, 0, 0]
TEXT = b"x Watchdog caught y\nCUDA out of memory\nit timed out\n"


def _matches(database) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    database.scan(TEXT, match_event_handler=lambda number, _start, end, _flags, _context: found.append((number, end)))
    return found


def _expected() -> list[tuple[int, int]]:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=EXPRESSIONS, ids=IDS, flags=FLAGS)
    return _matches(database)


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(hscache.ENV, str(where))
    return where


def _no_compile(monkeypatch) -> None:
    def refuse(*_args, **_kwargs):
        raise AssertionError("compiled although a kept database was there")

    monkeypatch.setattr(hyperscan, "Database", refuse)


def test_a_kept_database_is_read_back_without_a_compile(folder, monkeypatch):
    expected = _expected()
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == expected
    assert (folder / "t.hsdb").is_file()
    _no_compile(monkeypatch)
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == expected


def test_owner_only_and_no_temporary_file_left(folder):
    hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)
    assert stat.S_IMODE((folder / "t.hsdb").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [path.name for path in folder.iterdir()] == ["t.hsdb"]


def _mutations(content: bytes) -> dict[str, bytes]:
    middle = len(content) // 2
    return {
        "empty": b"",
        "garbage": b"not a database at all\n" * 40,
        "cut short": content[: len(content) - 100],
        "one byte of the database flipped": content[:middle] + bytes([content[middle] ^ 0xFF]) + content[middle + 1 :],
        "last byte flipped": content[:-1] + bytes([content[-1] ^ 0xFF]),
        "another format": b"engdiag hyperscan database 0\n" + content[len(b"engdiag hyperscan database 1\n") :],
        "longer": content + b"\0",
    }


@pytest.mark.parametrize("kind", list(_mutations(b"x" * 400)))
def test_a_broken_kept_database_is_ignored_and_written_again(folder, kind):
    hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)
    kept = folder / "t.hsdb"
    good = kept.read_bytes()
    kept.write_bytes(_mutations(good)[kind])
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    assert kept.read_bytes() == good


def test_a_stale_database_is_never_used(folder, monkeypatch):
    """Other expressions, ids, flags or versions under the same name: compiled for what is asked now."""
    hscache.compiled("t", [b"something else"], [1], [0])
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    hscache.compiled("t", EXPRESSIONS, [4, 5, 8], FLAGS)
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    monkeypatch.setattr(hscache, "__version__", "0.0.0-other")
    before = (folder / "t.hsdb").read_bytes()
    hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)
    assert (folder / "t.hsdb").read_bytes() != before


def test_a_database_hyperscan_refuses_is_compiled_again(folder, monkeypatch):
    """A kept database for another CPU (a home shared between machines) fails hyperscan's own checks."""
    hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)

    def refuse(*_args):
        raise hyperscan.error("database for another platform")

    monkeypatch.setattr(hyperscan, "loadb", refuse)
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()


def test_a_file_others_may_write_or_a_link_is_not_read(folder, monkeypatch, tmp_path):
    hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)
    kept = folder / "t.hsdb"
    kept.chmod(0o666)
    reads: list[int] = []
    real = hyperscan.loadb
    monkeypatch.setattr(hyperscan, "loadb", lambda *args: reads.append(1) or real(*args))
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    assert not reads and stat.S_IMODE(kept.stat().st_mode) == 0o600  # replaced by an owner-only one
    elsewhere = tmp_path / "elsewhere.hsdb"
    kept.rename(elsewhere)
    kept.symlink_to(elsewhere)
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    assert not reads and not kept.is_symlink()


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(folder, monkeypatch):
    hscache.compiled("t", [b"old"], [1], [0])
    old = (folder / "t.hsdb").read_bytes()

    def fail(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    assert (folder / "t.hsdb").read_bytes() == old
    assert [path.name for path in folder.iterdir()] == ["t.hsdb"]


def test_a_database_that_cannot_be_kept_is_still_used(folder, monkeypatch):
    def refuse(*_args):
        raise hyperscan.error("cannot serialise")

    monkeypatch.setattr(hyperscan, "dumpb", refuse)
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    assert not folder.exists() or not any(folder.iterdir())


def test_where_the_cache_is(monkeypatch, tmp_path):
    monkeypatch.setenv(hscache.ENV, str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hscache.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv(hscache.ENV)
    assert hscache.cache_dir() == tmp_path / "xdg" / "engdiag"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hscache.cache_dir() == tmp_path / "home" / ".cache" / "engdiag"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert hscache.cache_dir() == tmp_path / "home" / ".cache" / "engdiag"


def test_xdg_cache_home_is_used(monkeypatch, tmp_path):
    monkeypatch.delenv(hscache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)
    assert (tmp_path / "xdg" / "engdiag" / "t.hsdb").is_file()


def test_an_unusable_cache_folder_only_costs_the_compile(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(hscache.ENV, str(blocker / "cache"))
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()
    monkeypatch.delenv(hscache.ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "relative-home")  # no usable home
    assert hscache.cache_dir() is None
    assert _matches(hscache.compiled("t", EXPRESSIONS, IDS, FLAGS)) == _expected()


@pytest.mark.parametrize("backend", ["native", "hyperscan"])
def test_a_run_without_a_usable_home_or_cache_gives_the_same_result(tmp_path, backend):
    from engdiag.logs.engines import available_backends

    if backend not in available_backends():
        pytest.skip(f"{backend} is not built here")
    log = write_log(tmp_path / "serve.log", _serving_with_oom())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    results = []
    for env in ({hscache.ENV: str(tmp_path / "cache")}, {hscache.ENV: str(tmp_path / "cache")},
                {hscache.ENV: "", "XDG_CACHE_HOME": "", "HOME": str(blocker)}):
        done = run_engdiag("analyze", "--json", str(log), env={"ENGDIAG_SCANNER": backend, **env})
        assert done.returncode == 0, done.stderr.decode()
        document = json.loads(done.stdout)
        document.pop("generated_at", None)
        results.append(document)
    assert results[0] == results[1] == results[2]
    assert (tmp_path / "cache" / "rare.hsdb").is_file()


def _serving_with_oom() -> list[str]:
    return [
        "(APIServer pid=41) INFO 10-20 06:00:00 [api_server.py:1000] vLLM API server version 0.11.0",
        *[f"(APIServer pid=41) INFO 10-20 06:00:{i:02d} [logger.py:41] Received request cmpl-{i}: prompt: 'hi', "
          f"params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3], lora_request: None." for i in range(1, 40)],
        "(EngineCore_DP0 pid=52) ERROR 10-20 06:00:45 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB.",
    ]
