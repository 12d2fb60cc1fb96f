"""The adaptive-timeout model and the liveness judge: examples and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engdiag.errors import UsageError
from engdiag.timeouts.model import (
    Liveness,
    Policy,
    adaptive_timeout,
    estimate_prefill_seconds,
    judge,
)

POLICY = Policy(base_s=120, factor=1.5, hard_cap_s=1800, heartbeat_s=5)
lengths = st.integers(0, 50_000_000)
rates = st.floats(1.0, 1e6, allow_nan=False, allow_infinity=False)
policies = st.builds(
    lambda base, extra, factor: Policy(base_s=base, factor=factor, hard_cap_s=base + extra, heartbeat_s=1),
    st.floats(2, 600),
    st.floats(0, 5000),
    st.floats(1, 5),
)


def test_the_numbers_the_issue_names():
    assert adaptive_timeout(32_000, 200, POLICY) == 240
    assert adaptive_timeout(10_000_000, 200, POLICY) == 1800
    assert adaptive_timeout(100, 200, POLICY) == 120


def test_estimate_has_a_floor_of_ten_seconds():
    assert estimate_prefill_seconds(1, 10_000) == 10
    assert estimate_prefill_seconds(50_000, 1000) == 50


@pytest.mark.parametrize(("length", "rate"), [(100, 0), (100, -5), (-1, 100)])
def test_impossible_inputs_are_refused(length, rate):
    with pytest.raises(UsageError):
        estimate_prefill_seconds(length, rate)


@pytest.mark.parametrize(
    "policy",
    [Policy(base_s=200, hard_cap_s=100), Policy(factor=0), Policy(base_s=-1), Policy(heartbeat_s=5000)],
)
def test_policies_that_cannot_work_are_refused(policy):
    with pytest.raises(UsageError):
        policy.validate()


@given(lengths, rates, policies)
def test_timeout_stays_between_base_and_hard_cap(length, rate, policy):
    assert policy.base_s <= adaptive_timeout(length, rate, policy) <= policy.hard_cap_s


@given(lengths, lengths, rates, policies)
def test_timeout_never_falls_as_the_prompt_grows(a, b, rate, policy):
    short, long = sorted((a, b))
    assert adaptive_timeout(short, rate, policy) <= adaptive_timeout(long, rate, policy)


@given(st.floats(0, 1e9), st.floats(0, 5), lengths, rates)
def test_recent_progress_is_never_dead_however_long_the_total(elapsed, since, length, rate):
    assert judge(elapsed, since, length, rate, POLICY) is not Liveness.DEAD


@given(lengths, rates, st.floats(0.001, 1e6))
def test_no_progress_past_the_adaptive_timeout_is_dead(length, rate, extra):
    quiet = adaptive_timeout(length, rate, POLICY) + extra
    assert judge(quiet + 10, quiet, length, rate, POLICY) is Liveness.DEAD


@given(lengths, rates, st.floats(0.0, 1.0))
def test_quiet_between_heartbeat_and_timeout_is_slow(length, rate, fraction):
    timeout = adaptive_timeout(length, rate, POLICY)
    quiet = POLICY.heartbeat_s + 0.001 + fraction * (timeout - POLICY.heartbeat_s - 0.002)
    assert judge(quiet, quiet, length, rate, POLICY) is Liveness.SLOW


def test_judge_states_in_order():
    assert judge(3, 1, 1000, 500, POLICY) is Liveness.ALIVE
    assert judge(60, 30, 1000, 500, POLICY) is Liveness.SLOW
    assert judge(600, 300, 1000, 500, POLICY) is Liveness.DEAD
    # a long prompt earns a longer wait before DEAD
    assert judge(600, 300, 400_000, 500, POLICY) is Liveness.SLOW
