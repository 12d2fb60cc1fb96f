"""A busy loop in a model-layer-shaped function whose stack moves (changing depth and line)."""

import sys
import time

from _ready import ready
from vllm.model_executor.layers import linear

ready(sys.argv[1])
deadline = time.time() + float(sys.argv[2]) if len(sys.argv) > 2 else None
step = 0
while deadline is None or time.time() < deadline:
    linear.forward(step % 7)
    step += 1
