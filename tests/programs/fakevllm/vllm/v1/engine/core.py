"""Like vllm/v1/engine/core.py: the engine core's busy loop stepping through its executor."""

from vllm.v1.executor import multiproc_executor


def run_busy_loop(pipe_fd: int) -> None:
    multiproc_executor.collective_rpc(pipe_fd)
