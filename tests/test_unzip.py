"""The threaded gzip reader: same bytes as gzip, members concatenated, errors raised in the reader."""

from __future__ import annotations

import gzip
import io
import os
import zlib

import pytest

from engdiag.logs.unzip import open_gzip


def test_same_bytes_as_gzip_for_a_large_and_a_multi_member_file():
    data = os.urandom(3 << 20).hex().encode()[: 5 << 20] + b"\n"
    single = gzip.compress(data)
    assert open_gzip(io.BytesIO(single)).read() == data
    members = gzip.compress(b"first\n") + b"\x00" * 7 + gzip.compress(b"") + gzip.compress(b"second\n")
    assert open_gzip(io.BytesIO(members)).read() == b"first\nsecond\n"


def test_truncated_and_corrupt_streams_raise_in_the_reader():
    packed = gzip.compress(b"x" * 100_000 + os.urandom(100_000))
    with pytest.raises(EOFError):
        open_gzip(io.BytesIO(packed[: len(packed) // 2])).read()
    corrupt = packed[:20] + bytes(b ^ 0xFF for b in packed[20:60]) + packed[60:]
    with pytest.raises((zlib.error, EOFError)):
        open_gzip(io.BytesIO(corrupt)).read()


def test_readline_sees_lines_split_across_chunks():
    lines = [f"line {i} ".encode() * (i % 50 + 1) + b"\n" for i in range(20_000)]
    reader = open_gzip(io.BytesIO(gzip.compress(b"".join(lines))))
    assert list(iter(reader.readline, b"")) == lines
