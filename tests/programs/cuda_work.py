"""A process whose main thread waits on its GPU: spin kernels (torch.cuda._sleep), each waited for.

argv: ready-file, GiB to hold on the GPU, ``loop`` (20 ms kernels, one after another, for ever),
``long`` (one kernel of about ten minutes: a GPU that never answers within a capture) or ``event``
(the same kernel, waited for through a CUDA event recorded after it, as vLLM's async output copy does).
"""

import sys
import time

import torch
from _ready import ready

held = torch.empty(int(float(sys.argv[2]) * 2**30), dtype=torch.uint8, device="cuda")
start = time.perf_counter()
torch.cuda._sleep(10**8)
torch.cuda.synchronize()
rate_hz = 10**8 / (time.perf_counter() - start)  # spin cycles per second, measured
ready(sys.argv[1])
if sys.argv[3] == "long":
    torch.cuda._sleep(int(rate_hz * 600))
    torch.cuda.synchronize()
elif sys.argv[3] == "event":
    torch.cuda._sleep(int(rate_hz * 600))
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
else:
    while True:
        torch.cuda._sleep(int(rate_hz * 0.02))
        torch.cuda.synchronize()
