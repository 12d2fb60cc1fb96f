"""Compiled hyperscan databases kept on disk between runs: a compile costs 7-12 ms per database and process
(~80 ms for the hyperscan backend's four), reading one back ~0.1 ms.

One file per database name in the user's cache folder (``ENGDIAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/engdiag``,
else ``~/.cache/engdiag``), holding everything the database was compiled from (engdiag's and hyperscan's
versions, mode, expressions, ids, flags), a checksum and the serialised database.  A file that is missing,
foreign, stale, cut short or corrupt, not a regular file of this user's, or writable by anyone else is
ignored: the database is compiled and the file written again, to a temporary file beside it that is then
renamed into place (a reader sees the old file or the new one, never half of one), readable by its owner
only.  Nothing here fails a run: without a home, on a read-only disk, the database is compiled as before.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

from engdiag import __version__

ENV = "ENGDIAG_CACHE_DIR"
_MAGIC = b"engdiag hyperscan database 1\n"
_SIZE = 8
"""Bytes of each length and of the checksum in the file's head."""


def cache_dir() -> Path | None:
    """Where the databases are kept: ``ENGDIAG_CACHE_DIR``, ``$XDG_CACHE_HOME/engdiag`` or ``~/.cache/engdiag``
    (a relative ``XDG_CACHE_HOME`` is ignored, as the XDG specification says); None without a home."""
    explicit = os.environ.get(ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "engdiag"
    home = os.path.expanduser("~")
    return Path(home) / ".cache" / "engdiag" if os.path.isabs(home) else None


def _key(mode: int, expressions: list[bytes], ids: list[int], flags: list[int]) -> bytes:
    import hyperscan

    return repr((__version__, hyperscan.__version__, mode, expressions, ids, flags)).encode()


def _number(value: int) -> bytes:
    return value.to_bytes(_SIZE, "little")


def _encode(key: bytes, blob: bytes) -> bytes:
    return b"".join((_MAGIC, _number(len(key)), key, _number(len(blob)), _number(zlib.crc32(blob)), blob))


def _decode(content: bytes, key: bytes) -> bytes | None:
    """The serialised database in ``content`` if it was written for ``key``, whole, else None."""
    head = len(_MAGIC) + _SIZE
    if not content.startswith(_MAGIC) or content[len(_MAGIC) : head] != _number(len(key)):
        return None
    at = head + len(key)
    if content[head:at] != key:
        return None
    size = int.from_bytes(content[at : at + _SIZE], "little")
    crc = int.from_bytes(content[at + _SIZE : at + 2 * _SIZE], "little")
    blob = content[at + 2 * _SIZE :]
    return blob if len(blob) == size and zlib.crc32(blob) == crc else None


def _read(path: Path) -> bytes | None:
    """The file's bytes if it is a regular file of this user's that no one else may write, else None."""
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(handle)
        own = not hasattr(os, "getuid") or info.st_uid == os.getuid()
        if not stat.S_ISREG(info.st_mode) or not own or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        with os.fdopen(handle, "rb", closefd=False) as stream:
            return stream.read()
    except OSError:
        return None
    finally:
        os.close(handle)


def _write(path: Path, content: bytes) -> None:
    """Write ``content`` to a temporary file beside ``path`` (owner-only, this process's own), then rename it into
    place.  (Not ``tempfile``: it imports ``random``, ~1 ms of every start-up.)"""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    made = False
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            temporary.unlink()  # left by a process of the same pid that was killed mid-write
        except FileNotFoundError:
            pass
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        made = True
        with os.fdopen(handle, "wb") as stream:
            stream.write(content)
        os.replace(temporary, path)
        made = False
    except OSError:
        pass  # a read-only or missing cache costs a compile, never the run
    finally:
        if made:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def compiled(name: str, expressions: list[bytes], ids: list[int], flags: list[int]):  # -> hyperscan.Database
    """A block-mode database of ``expressions``: read from the cache when one was kept for exactly these, else
    compiled (and kept).  Raises what hyperscan raises when it cannot compile or load at all."""
    import hyperscan

    mode = hyperscan.HS_MODE_BLOCK
    folder = cache_dir()
    path = folder / f"{name}.hsdb" if folder is not None else None
    key = _key(mode, expressions, ids, flags)
    content = _read(path) if path is not None else None
    blob = _decode(content, key) if content is not None else None
    if blob is not None:
        try:
            database = hyperscan.loadb(blob, mode)
            database.scratch = hyperscan.Scratch(database)
            database.scan(b"\n", match_event_handler=lambda *_: None)  # a database for another CPU fails here
            return database
        except Exception:  # noqa: BLE001 - whatever hyperscan says of a kept database, it is compiled again
            pass
    database = hyperscan.Database(mode=mode)
    database.compile(expressions=expressions, ids=ids, flags=flags)
    if path is not None:
        try:
            blob = hyperscan.dumpb(database)
        except Exception:  # noqa: BLE001 - a database that cannot be kept is still used
            return database
        _write(path, _encode(key, blob))
    return database
