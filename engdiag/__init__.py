"""engdiag: say why a vLLM engine died — slow, deadlocked or out of GPU memory."""

__version__ = "0.1.0"
