"""Decompress gzip on a second thread while the first one parses (zlib releases the GIL).

``zcat | grep`` runs decompression and search on two cores; so does this.  A
bounded queue keeps memory flat; a truncated or corrupt stream raises in the
reader, as ``gzip`` does.
"""

from __future__ import annotations

import io
import queue
import threading
import zlib
from typing import BinaryIO

CHUNK = 1 << 20
DEPTH = 8
"""Decompressed chunks waiting at most (bounded memory: about 8 MiB plus a compressed chunk)."""


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class ThreadedGzipReader(io.RawIOBase):
    """A raw stream of the decompressed bytes of a (possibly multi-member) gzip file."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self._queue: queue.Queue[bytes | _Failed | None] = queue.Queue(maxsize=DEPTH)
        self._pending = memoryview(b"")
        self._done = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engdiag-gunzip", daemon=True)
        self._thread.start()

    def _put(self, item: bytes | _Failed | None) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        decompressor = zlib.decompressobj(wbits=31)
        between_members = False
        try:
            while not self._stop.is_set():
                compressed = self._source.read(CHUNK)
                if not compressed:
                    if not between_members:
                        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                    break
                while compressed:
                    if between_members:
                        compressed = compressed.lstrip(b"\x00")  # padding between members
                        if not compressed:
                            break
                        decompressor, between_members = zlib.decompressobj(wbits=31), False
                    data = decompressor.decompress(compressed, CHUNK)  # bounded: logs compress 10x
                    if data and not self._put(data):
                        return
                    if decompressor.eof:
                        compressed, between_members = decompressor.unused_data, True
                    else:
                        compressed = decompressor.unconsumed_tail
            self._put(None)
        except (OSError, EOFError, zlib.error) as error:
            self._put(_Failed(error))

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._done:
            item = self._queue.get()
            if item is None:
                self._done = True
            elif isinstance(item, _Failed):
                self._done = True
                raise item.error
            else:
                self._pending = memoryview(item)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self._stop.set()
        super().close()


def open_gzip(source: BinaryIO) -> io.BufferedReader:
    """A buffered reader over the decompressed bytes, decompressed on another thread."""
    return io.BufferedReader(ThreadedGzipReader(source), buffer_size=CHUNK)
