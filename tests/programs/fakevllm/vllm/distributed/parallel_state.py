"""Like vllm/distributed/parallel_state.py: a group collective that never completes (its peer never comes)."""

import os


def all_reduce(pipe_fd: int) -> None:
    os.read(pipe_fd, 1)  # blocks like an NCCL all-reduce waiting for a rank that never arrives
