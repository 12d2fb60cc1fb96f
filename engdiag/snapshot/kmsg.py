"""The only module that reads the kernel log: recent ``NVRM: Xid`` lines (GPU faults).

NVML cannot report Xids that happened before it was asked, so the kernel log is
the record.  Reading /dev/kmsg needs CAP_SYSLOG (or kernel.dmesg_restrict=0); an
unreadable log is a record with the reason, not an error.
"""

from __future__ import annotations

import errno
import os

from engdiag.snapshot.model import XidRecord

KMSG = "/dev/kmsg"
MAX_RECORDS = 20_000
KEEP = 20


def read_xid(path: str = KMSG) -> XidRecord:
    """The last ``NVRM: Xid`` lines in the kernel ring buffer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        return XidRecord(available=False, reason=f"cannot read {path}: {error.strerror} (needs CAP_SYSLOG or root)")
    found: list[str] = []
    try:
        for _ in range(MAX_RECORDS):
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno == errno.EPIPE:  # the ring buffer wrapped under us: skip ahead
                    continue
                return XidRecord(available=False, reason=f"reading {path} failed: {error.strerror}")
            if not record:
                break
            text = record.decode("utf-8", "replace")
            if "NVRM: Xid" in text:
                found.append(text.split(";", 1)[-1].strip())
    finally:
        os.close(fd)
    return XidRecord(available=True, lines=tuple(found[-KEEP:]))
