"""Generated full incidents: start-up, healthy serving, then each failure mode, in every log shape."""

from __future__ import annotations

import gzip

import pytest

from engdiag import synth
from engdiag.analysis.analyze import analyze

V1 = sorted(synth.INCIDENTS) + ["slow-startup", "not-vllm"]
V0 = sorted(synth.V0_INCIDENTS)
SHAPES = {
    "plain-0.11": synth.Style(),
    "kubectl-esc-0.20": synth.Style(version="0.20.0", kubectl=True, color="esc"),
    "compose-lost-esc-crlf-0.9": synth.Style(version="0.9.2", compose="vllm-1", color="lost", crlf=True),
    "caret-wrapped-0.8": synth.Style(version="0.8.5", color="caret", wrap=150),
    "ray-glued-bars-0.10": synth.Style(version="0.10.2", ray=True, glue=True, color="esc"),
}


def _write(tmp_path, name, style, minutes=8, compress=False, load=None):
    path = tmp_path / (f"{name}.log.gz" if compress else f"{name}.log")
    text = "".join(line + "\n" for line in synth.incident(name, style, minutes=minutes, load=load))
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("name", V1)
def test_v1_incident_in_every_shape(tmp_path, name, shape):
    style = SHAPES[shape]
    verdict = analyze([str(_write(tmp_path, name, style))]).verdict
    assert verdict.kind.value == synth.expected_kind(name, style), verdict.headline


@pytest.mark.parametrize("name", V0)
def test_v0_incident(tmp_path, name):
    style = synth.Style(version="0.6.3", tp=2)
    verdict = analyze([str(_write(tmp_path, name, style))]).verdict
    assert verdict.kind.value == synth.expected_kind(name, style), verdict.headline


def test_hours_of_serving_then_a_hang_gzipped(tmp_path):
    path = _write(tmp_path, "deadlock", synth.Style(), minutes=180, compress=True, load=synth.Load(prompt_len=300))
    analysis = analyze([str(path)])
    assert analysis.verdict.kind.value == "deadlocked"
    assert analysis.incident.no_progress_seconds is not None
    assert 300 <= analysis.incident.no_progress_seconds <= 330
    assert analysis.timeline.prompt_lengths.count > 1000


def test_sub_kinds_of_generated_memory_incidents(tmp_path):
    frag = analyze([str(_write(tmp_path, "oom-fragmentation", synth.Style()))]).verdict
    kv = analyze([str(_write(tmp_path, "kv-pressure", synth.Style()))]).verdict
    oom = analyze([str(_write(tmp_path, "oom-exhaustion", synth.Style(version="0.6.3")))]).verdict
    assert (frag.sub_kind.value, kv.sub_kind.value, oom.sub_kind.value) == ("fragmentation", "kv-pressure", "exhaustion")


def test_decode_step_timeout_is_not_slowness_but_a_huge_prefill_can_be(tmp_path):
    stuck = analyze([str(_write(tmp_path, "deadlock", synth.Style()))]).verdict
    slow = analyze([str(_write(tmp_path, "slow-prefill", synth.Style()))]).verdict
    assert stuck.kind.value == "deadlocked" and "decode step" in stuck.headline
    assert slow.kind.value == "slow" and "160000" in slow.headline


def test_a_clean_operator_shutdown_is_healthy_whatever_follows_it(tmp_path):
    verdict = analyze([str(_write(tmp_path, "operator-shutdown", synth.Style()))]).verdict
    assert verdict.kind.value == "healthy" and "operator stopped" in verdict.headline
    root = [e for e in verdict.evidence if e.role.value == "root cause"]
    assert root and ("SIGTERM" in root[0].text or "shutdown triggered" in root[0].text)
    assert any(e.role.value == "consequence" and "died unexpectedly" in e.text for e in verdict.evidence)


def test_an_illegal_memory_access_keeps_its_last_progress_in_the_timeline(tmp_path):
    analysis = analyze([str(_write(tmp_path, "crash-ima", synth.Style()))])
    assert analysis.verdict.kind.value == "crashed"
    last = analysis.incident.last_progress
    fatal = analysis.incident.fatal
    assert last is not None and fatal is not None and last.signal.value == "stats"
    assert last.stamp is not None and fatal.stamp is not None and last.stamp.key <= fatal.stamp.key
    assert any(e.role.value == "context" and e.line == last.line for e in analysis.verdict.evidence)
    serving = next(a for a in analysis.model.activities if a.name == "serving")
    assert serving.advancing  # it was producing tokens right up to the fault


def test_the_model_shows_phases_waits_and_the_guard(tmp_path):
    slow = analyze([str(_write(tmp_path, "slow-startup", synth.Style()))])
    loading = next(a for a in slow.model.activities if a.name == "weight loading")
    assert loading.advancing and loading.detail.startswith("105/163")
    assert slow.model.guard is not None and slow.model.guard.knob == "VLLM_ENGINE_READY_TIMEOUT_S"
    assert slow.model.guard.limit_s == 600
    stuck = analyze([str(_write(tmp_path, "deadlock", synth.Style()))])
    assert any(w.on == "workers" and w.via == "shared-memory queue" for w in stuck.model.waits)
    assert stuck.model.guard is not None and stuck.model.guard.knob == "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"
