"""An engine-shaped tree whose workers run real torch.distributed collectives (gloo, loopback).

argv: READY_FILE SCENARIO WORKERS [vllm serve].  This process is the API server; it forks
``VLLM::EngineCore``, which forks ``VLLM::Worker_TP{n}`` (titles set with setproctitle, as vLLM
does).  The engine core registers a shared-memory segment, as vLLM's message queue does, so a
``multiprocessing.resource_tracker`` child runs beside it.  SCENARIO:

- never_joins: the last rank sleeps; the others wait in all_reduce for it;
- diverge: the last rank calls all_gather, the others all_reduce;
- orphan_recv: TP1 receives from TP0, which waits for work in its busy loop and never sends;
- slow: every rank loops matmuls + all_reduce (working, just slowly);
- idle_queue: the workers all wait on one multiprocessing.Queue, the engine core on its input queue;
- idle_loop: gloo set up, the workers wait for work in their busy loop, the core on its input queue.

In the hang scenarios the engine core waits for the workers' answer (``collective_rpc``).
"""

import multiprocessing
import os
import sys
import threading
import time

from _ready import ready
from setproctitle import setproctitle

FORK = multiprocessing.get_context("fork")


def wait_for(paths: list[str]) -> None:
    deadline = time.time() + 60
    while not all(os.path.exists(p) for p in paths) and time.time() < deadline:
        time.sleep(0.02)


def never_joins(dist, torch, rank: int, world: int, signal) -> None:
    if rank == world - 1:
        signal()
        time.sleep(3600)  # busy elsewhere: never reaches the all_reduce
    signal()
    dist.all_reduce(torch.ones(8))


def diverge(dist, torch, rank: int, world: int, signal) -> None:
    signal()
    if rank == world - 1:
        dist.all_gather([torch.zeros(8) for _ in range(world)], torch.ones(8))
    dist.all_reduce(torch.ones(8))


def orphan_recv(dist, torch, rank: int, world: int, signal) -> None:
    signal()
    if rank == 1:
        dist.recv(torch.zeros(8), src=0)
    from vllm.v1.executor import multiproc_executor

    read_fd, _write_fd = os.pipe()
    multiproc_executor.worker_busy_loop("idle", read_fd)  # waits for work; never sends


def slow(dist, torch, rank: int, world: int, signal) -> None:
    weights = torch.randn(640, 640)  # compute dominates each step, as in a real engine's forward pass
    total = torch.zeros(8)
    while True:
        for _ in range(6):
            weights = torch.tanh(weights @ weights)
        dist.all_reduce(total)
        signal()


def idle_loop(dist, torch, rank: int, world: int, signal) -> None:
    from vllm.v1.executor import multiproc_executor

    read_fd, _write_fd = os.pipe()
    signal()
    multiproc_executor.worker_busy_loop("idle", read_fd)


def worker(ready_file: str, scenario: str, rank: int, world: int, work_queue) -> None:
    setproctitle(f"VLLM::Worker_TP{rank}")
    flag = f"{ready_file}.w{rank}"

    def signal() -> None:
        if not os.path.exists(flag):
            ready(flag)

    if scenario == "idle_queue":
        signal()
        work_queue.get()  # several consumers of one queue: one reads, the others wait on its lock
        return
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{ready_file}.store", rank=rank, world_size=world,
                            timeout=timedelta(hours=1))
    globals()[scenario](dist, torch, rank, world, signal)


def engine_core(ready_file: str, scenario: str, world: int) -> None:
    setproctitle("VLLM::EngineCore")
    from multiprocessing import shared_memory

    segment = shared_memory.SharedMemory(create=True, size=4096)  # starts the resource_tracker child
    work_queue = FORK.Queue()
    if scenario != "idle_queue":
        import torch  # noqa: F401 - imported once here, inherited by the forked workers
    workers = [FORK.Process(target=worker, args=(ready_file, scenario, rank, world, work_queue)) for rank in range(world)]
    for process in workers:
        process.start()
    wait_for([f"{ready_file}.w{rank}" for rank in range(world)])
    time.sleep(0.5)  # let every rank reach its wait
    ready(f"{ready_file}.core")
    if scenario.startswith("idle"):
        import queue

        queue.Queue().get()  # waiting for requests
    else:
        from vllm.v1.engine import core

        read_fd, _write_fd = os.pipe()
        core.run_busy_loop(read_fd)  # waits for the workers' answer to the step
    segment.close()


def main() -> None:
    ready_file, scenario, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    FORK.Process(target=engine_core, args=(ready_file, scenario, world)).start()
    wait_for([f"{ready_file}.core"])
    ready(ready_file)
    threading.Event().wait()  # the API server's event loop, idle


if __name__ == "__main__":
    main()
