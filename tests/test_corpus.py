"""Every real incident in tests/corpus (copied from ../shared/corpus, sources in each case.json)
gets the verdict its public thread established."""

from __future__ import annotations

import json

import pytest

from engdiag.analysis.analyze import analyze

from tests.conftest import CORPUS

CASES = sorted(p for p in CORPUS.iterdir() if (p / "case.json").exists())
OTHER = {"crashed", "healthy", "unknown"}


def test_corpus_is_complete():
    assert len(CASES) == 20
    for case in CASES:
        meta = json.loads((case / "case.json").read_text())
        assert meta["source"].startswith("https://github.com/")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case_gets_its_label(case):
    meta = json.loads((case / "case.json").read_text())
    verdict = analyze([str(case / "log.txt")]).verdict
    if meta["label"] == "other":
        assert verdict.kind.value in OTHER, verdict.headline
    else:
        assert verdict.kind.value == meta["label"], verdict.headline
    assert 0 < verdict.confidence <= 0.95
    assert verdict.evidence, "a verdict must cite at least one line"
    assert all(item.line is not None and item.line >= 1 for item in verdict.evidence)


@pytest.mark.parametrize(
    ("case", "kind", "sub_kind"),
    [
        ("kaito-oom-736mib-reserved-unallocated", "fragmented", "fragmentation"),
        ("v1-oom-small-gpu-fatal-signal", "fragmented", "exhaustion"),
        ("gpt-oss-120b-h100-sampler-warmup-oom-startup", "fragmented", "exhaustion"),
        ("chunked-prefill-n8-swap-preemption-storm", "fragmented", "kv-pressure"),
        ("v1-long-prefill-fills-kv-97pct-preemption-loop", "fragmented", "kv-pressure"),
        ("illegal-memory-access-nccl-watchdog-frames", "crashed", None),
        ("shm-broadcast-then-custom-allreduce-ima-startup", "crashed", None),
        ("benign-enginecore-died-at-script-exit", "healthy", None),
        ("idle-worker-shm-broadcast-info-benign", "healthy", None),
    ],
)
def test_memory_sub_kinds_and_other_cases(case, kind, sub_kind):
    verdict = analyze([str(CORPUS / case / "log.txt")]).verdict
    assert verdict.kind.value == kind
    assert (verdict.sub_kind.value if verdict.sub_kind else None) == sub_kind


def test_root_cause_is_the_first_fault_not_its_consequences():
    # the shared-memory wait comes first in time, but the illegal memory access decides
    verdict = analyze([str(CORPUS / "shm-broadcast-then-custom-allreduce-ima-startup" / "log.txt")]).verdict
    root = [e for e in verdict.evidence if e.role.value == "root cause"]
    assert len(root) == 1 and "illegal memory access" in root[0].text
    assert any(e.role.value == "consequence" and "EngineCore failed to start" in e.text for e in verdict.evidence)


def test_collective_watchdog_names_the_stuck_collective():
    verdict = analyze([str(CORPUS / "llama405b-fp8-gather-watchdog" / "log.txt")]).verdict
    assert "GATHER" in verdict.headline and "4554" in verdict.headline
    assert verdict.confidence >= 0.85  # two ranks agree on the same SeqNum


def test_runtime_compilation_explains_a_step_timeout():
    verdict = analyze([str(CORPUS / "cutedsl-jit-during-inference-sample-tokens-300s" / "log.txt")]).verdict
    assert verdict.kind.value == "slow"
    assert "compil" in verdict.headline
    assert any("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in (s.command or "") for s in verdict.next_steps)
