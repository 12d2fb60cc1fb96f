"""Everything that wraps a log: gzip (on a second thread), bzip2, xz, zstd, UTF-16/32 with a BOM.

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
        except ValueError as error:  # the reader closed the source under us: it no longer listens
            if not self._stop.is_set():
                self._put(_Failed(OSError(str(error))))

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


# ---- every format a log arrives in: recognised by its first bytes, never by its name ------------

GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_UTF8_BOM = b"\xef\xbb\xbf"
MAX_LAYERS = 4
"""Compression layers unwrapped at most (a .gz inside a .gz is common; deeper is a zip bomb)."""
HEAD_BYTES = 6


class Unsupported(Exception):
    """A format engdiag recognises but cannot read here; the message says how to convert it."""


def codec_of(head: bytes) -> str | None:
    """``gzip``, ``bzip2``, ``xz`` or ``zstd`` from a stream's first bytes; None for text."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(_BZIP2_MAGIC) and head[3:4].isdigit() and head[3:4] != b"0":
        return "bzip2"
    if head.startswith(_XZ_MAGIC):
        return "xz"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    return None


def text_encoding(head: bytes) -> str | None:
    """``utf-16`` / ``utf-32`` when the stream starts with their byte-order mark."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return None


class Prepended(io.RawIOBase):
    """The bytes already read from a stream, then the rest of it (to look at a pipe's head)."""

    def __init__(self, head: bytes, source: BinaryIO) -> None:
        self._head = memoryview(head)
        self._source = source

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        data = self._source.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Converted(io.RawIOBase):
    """Another stream's bytes, converted block by block as they stream (``convert`` says how)."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self._pending = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def convert(self, raw: bytes, last: bool) -> bytes:
        """The bytes to hand out for the next ``CHUNK`` read (``last``: the source has ended; ``raw`` is empty)."""
        raise NotImplementedError

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._done:
            raw = self._source.read(CHUNK)
            self._done = not raw
            self._pending = memoryview(self.convert(raw, self._done))
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


class _Reencoded(Converted):
    """A UTF-16/32 text stream (with its BOM) as UTF-8 bytes, decoded as it streams."""

    def __init__(self, source: BinaryIO, encoding: str) -> None:
        import codecs

        super().__init__(source)
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")

    def convert(self, raw: bytes, last: bool) -> bytes:
        return self._decoder.decode(raw, final=last).encode("utf-8", "surrogatepass")


def read_head(stream: BinaryIO, size: int = HEAD_BYTES) -> bytes:
    """Up to ``size`` bytes from the stream's start (a pipe may hand them over a few at a time)."""
    head = b""
    while len(head) < size:
        more = stream.read(size - len(head))
        if not more:
            break
        head += more
    return head


def _decompressed(stream: BinaryIO, codec: str, name: str) -> BinaryIO:
    if codec == "gzip":
        return open_gzip(stream)
    if codec == "bzip2":
        import bz2

        return bz2.BZ2File(stream)  # type: ignore[return-value]
    if codec == "xz":
        import lzma

        return lzma.LZMAFile(stream)  # type: ignore[return-value]
    try:
        import zstandard
    except ImportError:
        raise Unsupported(
            f"{name}: zstd-compressed, and the zstandard package is not installed; "
            f"pip install zstandard, or: zstd -dc {name} | engdiag analyze -"
        ) from None
    reader = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)
    return io.BufferedReader(reader, buffer_size=CHUNK)  # type: ignore[arg-type]


def unwrap(stream: BinaryIO, name: str) -> tuple[BinaryIO, list[str]]:
    """The log's text as UTF-8 bytes, whatever wraps it, and the layers removed (outermost first).

    Reads only the first bytes of each layer; the stream itself is never rewound,
    so pipes work.  An empty list means ``stream`` came back untouched apart from
    its first bytes being re-prepended.
    """
    layers: list[str] = []
    while True:
        head = read_head(stream)
        stream = io.BufferedReader(Prepended(head, stream), buffer_size=CHUNK)  # type: ignore[assignment]
        codec = codec_of(head)
        if codec is None:
            break
        if len(layers) == MAX_LAYERS:
            raise Unsupported(f"{name}: more than {MAX_LAYERS} layers of compression; decompress it first")
        layers.append(codec)
        stream = _decompressed(stream, codec, name)
    encoding = text_encoding(head)
    if encoding is not None:
        layers.append(encoding)
        return io.BufferedReader(_Reencoded(stream, encoding), buffer_size=CHUNK), layers  # type: ignore[return-value]
    if head.startswith(_UTF8_BOM):
        stream.read(len(_UTF8_BOM))
        layers.append("utf-8-sig")
    return stream, layers


def read_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a damaged compressed stream raises while it is read."""
    import lzma

    errors: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, lzma.LZMAError)
    try:
        import zstandard
    except ImportError:
        return errors
    return (*errors, zstandard.ZstdError)
