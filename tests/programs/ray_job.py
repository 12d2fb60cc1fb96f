"""A Ray driver shaped like vLLM's Ray executor: ``RayWorkerWrapper`` actors on the cluster's nodes.

``python ray_job.py MODE ADDRESS READY_FILE NODE_ID[,NODE_ID…]`` connects to a
running cluster and starts one job, rank r on the r-th node given (cycling):

- ``deadlock``: three ranks join a real gloo process group; ranks 0 and 1 enter
  an all_reduce that rank 2 never joins (it stays idle, as a rank that hung
  elsewhere would);
- ``progress``: one rank runs a small torch model forward in a loop (moving stacks);
- ``idle``: one rank waits for work.

When the actors are in place the driver writes a JSON line per actor (rank,
pid, node_id, job_id) to READY_FILE and then waits idle until it is killed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=0)
class RayWorkerWrapper:
    """Named like vLLM's worker actor (vllm/v1/executor/ray_utils.py)."""

    def __init__(self, rank: int, world: int, port: int) -> None:
        self.rank, self.world, self.port = rank, world, port

    def where(self) -> dict:
        context = ray.get_runtime_context()
        return {"rank": self.rank, "pid": os.getpid(), "node_id": context.get_node_id(), "job_id": context.get_job_id()}

    def init_group(self) -> int:
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{self.port}", rank=self.rank,
                                world_size=self.world)
        return self.rank

    def all_reduce(self) -> None:
        import torch
        import torch.distributed as dist

        dist.all_reduce(torch.ones(4))  # rank 2 never joins: blocks for good

    def execute_model(self) -> None:
        import torch

        def nested(depth: int) -> torch.nn.Module:
            layers = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256))
            return layers if depth == 0 else torch.nn.Sequential(nested(depth - 1))

        models = [nested(depth) for depth in range(10)]  # the stack's depth changes from one forward to the next
        batch = torch.randn(64, 256)
        while True:
            for model in models:
                model(batch)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    mode, address, ready_file, placement = sys.argv[1:5]
    nodes = placement.split(",")
    ray.init(address=address, namespace=f"engdiag-{mode}", log_to_driver=False)
    world = 3 if mode == "deadlock" else 1
    port = _free_port()
    workers = [
        RayWorkerWrapper.options(
            name=f"{mode}-rank{rank}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[rank % len(nodes)], soft=False),
        ).remote(rank, world, port)
        for rank in range(world)
    ]
    places = ray.get([w.where.remote() for w in workers])
    keep = []
    if mode == "deadlock":
        ray.get([w.init_group.remote() for w in workers])
        keep = [w.all_reduce.remote() for w in workers[:2]]
    elif mode == "progress":
        keep = [workers[0].execute_model.remote()]
    tmp = f"{ready_file}.tmp"
    with open(tmp, "w") as handle:
        handle.writelines(json.dumps({"mode": mode, "driver_pid": os.getpid(), **place}) + "\n" for place in places)
    os.replace(tmp, ready_file)
    threading.Event().wait()  # hold the job (and its actors and calls) until killed
    del keep


if __name__ == "__main__":
    main()
