"""Like vllm/distributed/device_communicators/shm_broadcast.py: the engine core <-> worker queue."""

import os


def acquire_read(pipe_fd: int) -> bytes:
    return os.read(pipe_fd, 1)  # blocks until a block is written


def dequeue(pipe_fd: int) -> bytes:
    return acquire_read(pipe_fd)
