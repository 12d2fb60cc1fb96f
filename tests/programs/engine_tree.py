"""An engine-shaped tree: API server → EngineCore → N workers, titled as vLLM titles them.

argv: READY_FILE MODE WORKERS [non-python].  MODE "collective": workers block in a collective-shaped
call while the engine core waits for their answer (a deadlock).  MODE "idle": workers wait for work
and the engine core waits for requests (healthy).  With "non-python" the API server also runs `sleep`.
"""

import os
import subprocess
import sys

from _ready import ready

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.setdefault("FAKE_PYTHON", sys.executable)  # children titled VLLM::… have no sys.executable


def spawn(title: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([title, os.path.join(HERE, "engine_tree.py"), *args], executable=PYTHON)


def wait_for(paths: list[str]) -> None:
    import time

    deadline = time.time() + 20
    while not all(os.path.exists(p) for p in paths) and time.time() < deadline:
        time.sleep(0.02)


def main() -> None:
    role = os.environ.get("FAKE_ROLE", "api")
    ready_file, mode, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    read_fd, _write_fd = os.pipe()  # nobody ever writes: every read blocks
    if role == "worker":
        from vllm.v1.executor import multiproc_executor

        ready(ready_file)
        multiproc_executor.worker_busy_loop(mode, read_fd)
    elif role == "core":
        children = []
        for rank in range(workers):
            os.environ["FAKE_ROLE"] = "worker"
            children.append(spawn(f"VLLM::Worker_TP{rank}", f"{ready_file}.w{rank}", mode, "0"))
        wait_for([f"{ready_file}.w{rank}" for rank in range(workers)])
        ready(ready_file)
        if mode == "collective":
            from vllm.v1.engine import core

            core.run_busy_loop(read_fd)
        else:
            import queue

            queue.Queue().get()  # waiting for requests
    else:
        os.environ["FAKE_ROLE"] = "core"
        spawn("VLLM::EngineCore", f"{ready_file}.core", mode, str(workers))
        if "non-python" in sys.argv[4:]:
            subprocess.Popen(["sleep", "600"])
        wait_for([f"{ready_file}.core"])
        ready(ready_file)
        import threading

        threading.Event().wait()  # the API server's event loop, idle


main()
