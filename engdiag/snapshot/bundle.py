"""Write a bundle all or nothing: a temporary file beside the target, mode 0600, fsync, rename.

A full disk, a read-only folder or Ctrl-C half-way leave no partial bundle
behind; the rename is atomic on POSIX filesystems.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

from engdiag.errors import OutputError


def default_path(pid: int, when: datetime) -> Path:
    """``engdiag-snapshot-<pid>-<UTC time>.json`` in the current folder."""
    return Path(f"engdiag-snapshot-{pid}-{when.strftime('%Y%m%dT%H%M%SZ')}.json")


def write_atomically(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` readable by its owner only; the file appears whole or not at all."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise OutputError(f"cannot write in {folder}: {error.strerror}") from error
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise OutputError(f"cannot write {path}: {error.strerror}") from error
        raise
    return path
