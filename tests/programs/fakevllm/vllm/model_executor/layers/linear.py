"""Like vllm/model_executor/layers/linear.py: work whose stack keeps changing."""


def forward(depth: int) -> int:
    if depth <= 0:
        return sum(i * i for i in range(2000))
    return forward(depth - 1) + 1
