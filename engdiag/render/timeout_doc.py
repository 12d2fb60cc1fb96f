"""Recommendation → the ``engdiag.timeout-recommendation`` JSON document (docs/json-schema.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engdiag.render.common import envelope
from engdiag.timeouts.recommend import Recommendation


def _version(version: tuple[int, int, int] | None) -> str | None:
    return ".".join(map(str, version)) if version else None


def timeout_doc(rec: Recommendation, generated_at: datetime | None = None) -> dict[str, Any]:
    """The whole JSON document."""
    obs = rec.observations
    gap = obs.longest_gap
    doc = envelope("engdiag.timeout-recommendation", generated_at)
    doc |= {
        "model": {
            "base_s": rec.policy.base_s,
            "factor": rec.policy.factor,
            "hard_cap_s": rec.policy.hard_cap_s,
            "heartbeat_s": rec.policy.heartbeat_s,
            "formula": "min(hard_cap, max(base, max(10, prompt_len / tokens_per_sec) * factor))",
        },
        "timeout_s": rec.timeout_s,
        "percentile": rec.percentile,
        "prompt_len": rec.prompt_len,
        "tokens_per_sec": None if rec.tokens_per_sec is None
        else {"value": rec.tokens_per_sec.value, "source": rec.tokens_per_sec.source},
        "step": {
            "tokens": rec.step_tokens,
            "timeout_s": rec.step_timeout_s,
            "sized_from": [{"seconds": round(b.seconds, 1), "why": b.why} for b in rec.step_bounds],
        },
        "capture_timeout_s": rec.capture_s,
        "buckets": [
            {"prompt_len": b.prompt_len, "prefill_s": b.prefill_s, "timeout_s": b.timeout_s} for b in rec.buckets
        ],
        "recommendations": [
            {
                "name": s.knob.name,
                "kind": s.knob.kind.value,
                "value": s.value,
                "unit": s.knob.unit,
                "default": s.knob.default,
                "applies": s.applies,
                "versions": s.knob.versions(),
                "engine": s.knob.engine.value if s.knob.engine else None,
                "platform": s.knob.platform.value if s.knob.platform else None,
                "guards_nothing_from": _version(s.knob.inert_from),
                "guards": s.knob.guards,
                "why": s.why,
            }
            for s in rec.settings
        ],
        "what_if": [
            {
                "name": w.knob,
                "default_s": w.default_s,
                "observed_s": w.observed_s,
                "would_fire": w.would_fire,
                "note": w.note,
            }
            for w in rec.what_if
        ],
        "clears": rec.clears,
        "notes": list(rec.notes),
        "observed": {
            "vllm_version": _version(obs.version),
            "engine": obs.engine.value if obs.engine else None,
            "tensor_parallel": obs.tp,
            "pipeline_parallel": obs.pp,
            "chunked_prefill": obs.chunked_prefill,
            "max_num_batched_tokens": obs.max_num_batched_tokens,
            "prompt_count": obs.prompt_count,
            "prompt_sources": list(obs.prompt_sources),
            "prompt_lengths_lower_bound": obs.lower_bound,
            "decode_tps_per_request": obs.decode_tps.value if obs.decode_tps else None,
            "startup_s": obs.startup_s.value if obs.startup_s else None,
            "verdict": obs.verdict,
            "platforms": sorted(p.value for p in obs.platforms),
            "platform_evidence": list(obs.platform_proof),
            "killed": None if obs.killed is None else {
                "name": obs.killed.knob.name, "limit_s": obs.killed.limit_s, "limit_source": obs.killed.limit_source,
                "stall_s": obs.killed.stall_s, "where": obs.killed.where, "progressing": obs.killed.progressing,
            },
            "longest_healthy_gap": None
            if gap is None
            else {"seconds": gap.seconds, "source": gap.source, "start_line": gap.start_line,
                  "end_line": gap.end_line, "start_time": gap.start_time},
        },
    }
    return doc
