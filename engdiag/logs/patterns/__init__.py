"""What vLLM, PyTorch and NCCL print, as data: one ``Rule`` per signal and wording.

Each rule names a *literal* that any line it matches must contain.  The literals
drive both the cheap relevance test (a record with none of them yields no event)
and the bulk scanner's candidate search, so a rule without a literal cannot
exist.  Strings were read in vLLM's and PyTorch's source; docs/log-formats.md
lists them per version.

The rules live in one module per family of evidence; ``RULES`` joins them in the order below, and the
order matters: the rules of one literal run in this order, and the first to give a record a signal
wins it (later rules of that signal skip the record unless they are ``every``); ``LITERALS`` keeps it too.
"""

from __future__ import annotations

import re

from engdiag.logs.patterns.base import Rule, last_exception
from engdiag.logs.patterns.captures import CAPTURES
from engdiag.logs.patterns.fatals import STALLS_TIMEOUTS_FATALS
from engdiag.logs.patterns.guards import GUARDS, SHUTDOWN
from engdiag.logs.patterns.kernel import KERNEL
from engdiag.logs.patterns.kv_transfer import KV_TRANSFER
from engdiag.logs.patterns.lmcache import LMCACHE
from engdiag.logs.patterns.memory import MEMORY, size_bytes
from engdiag.logs.patterns.progress import PROGRESS
from engdiag.logs.patterns.sites import ALLOCATING, FORWARD
from engdiag.logs.patterns.startup import STARTUP
from engdiag.logs.patterns.waits import WAITS

__all__ = [
    "ALLOCATING",
    "BAR_LITERALS",
    "FORWARD",
    "HTTP_ERROR_LITERAL",
    "LITERALS",
    "LITERAL_PATTERN",
    "RULES",
    "RULES_BY_LITERAL",
    "Rule",
    "last_exception",
    "size_bytes",
]

RULES: tuple[Rule, ...] = (
    *PROGRESS,
    *STARTUP,
    *MEMORY,
    *KERNEL,
    *STALLS_TIMEOUTS_FATALS,
    *WAITS,
    *KV_TRANSFER,
    *LMCACHE,
    *GUARDS,
    *CAPTURES,
    *SHUTDOWN,
)

BAR_LITERALS = (
    "Processed prompts",
    "checkpoint shards",
    "Capturing CUDA graph",
    "Adding requests",
    "Compiling FSM index",
    "DeepGemm(",
    "DeepGEMM warmup",
    "[AutoTuner]: Tuning",
)
"""tqdm bars worth following: offline progress, weight loading, CUDA-graph capture, and outlines'
guided-decoding compile (``Compiling FSM index for all state transitions``), which runs inside a step."""
HTTP_ERROR_LITERAL = '" 50'
"""uvicorn access lines with a 5xx status (``HTTP/1.1" 503``)."""

LITERALS: tuple[str, ...] = tuple(
    dict.fromkeys([rule.literal for rule in RULES] + list(BAR_LITERALS) + [HTTP_ERROR_LITERAL])
)
"""Every string a relevant line must contain one of, in rule order, without repeats."""

LITERAL_PATTERN = re.compile("|".join(re.escape(literal) for literal in LITERALS))


def _by_literal() -> dict[str, tuple[Rule, ...]]:
    """The rules of each literal, in rule order: one pass (a search of ``RULES`` per literal took ~3 ms of every
    start-up)."""
    found: dict[str, list[Rule]] = {literal: [] for literal in LITERALS}
    for rule in RULES:
        found[rule.literal].append(rule)
    return {literal: tuple(rules) for literal, rules in found.items()}


RULES_BY_LITERAL: dict[str, tuple[Rule, ...]] = _by_literal()
