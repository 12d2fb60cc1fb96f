"""Like vllm/v1/executor/multiproc_executor.py: the engine core's RPC to its workers and the workers' loop."""

from vllm.distributed import parallel_state
from vllm.distributed.device_communicators import shm_broadcast


def get_response(pipe_fd: int) -> bytes:
    return shm_broadcast.dequeue(pipe_fd)


def collective_rpc(pipe_fd: int) -> bytes:
    return get_response(pipe_fd)


def worker_busy_loop(mode: str, pipe_fd: int) -> None:
    if mode == "collective":
        parallel_state.all_reduce(pipe_fd)
    else:
        shm_broadcast.dequeue(pipe_fd)
