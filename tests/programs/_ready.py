"""Readiness handshake for test programs: write the pid to the file named in argv[1]."""

import os
import sys

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakevllm")
sys.path.insert(0, FAKE)


def ready(path: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(tmp, path)
