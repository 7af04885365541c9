"""The shared epoch schedule of li2022 (Alg. 1 lines 3-16, Eq. 6, Sec. IV-B), without the engine."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.li2022 import epochs as R


def test_delta_tilde_doubling_and_round_cap():
    assert R.delta_tilde(1) == 0.5
    assert R.delta_tilde(3) == 0.125
    # Sec. IV-B: Delta_r = Delta^{r/R}; Delta_R = Delta
    assert R.delta_tilde(2, rounds_cap=4, min_gap=0.01) == pytest.approx(0.1)
    assert R.delta_tilde(4, rounds_cap=4, min_gap=0.01) == pytest.approx(0.01)


def test_exploration_target_hand_computed():
    # M = 50, K = 100, |I| = 100, r = 1, T = 1e5, eps = 1, Delta_1 = 1/2
    first = 8 * math.log(8 * 100 * 1 * 1e5) / (50 * 0.25)
    second = 8 * 1 * math.sqrt(2 * math.log(8 * 100 * 1 * 1e5)) / (50**1.5 * 1.0 * 0.5)
    assert first > second
    assert R.exploration_target(1, 100, 100, 1e5, 50, 1.0, 0.5) == pytest.approx(first)
    # small M and eps: the privacy term dominates
    first = 8 * math.log(8 * 10 * 4 * 1e4) / (2 * 0.25**2)
    second = 8 * 2 * math.sqrt(2 * math.log(8 * 10 * 4 * 1e4)) / (2**1.5 * 0.01 * 0.25)
    assert second > first
    assert R.exploration_target(2, 10, 10, 1e4, 2, 0.01, 0.25) == pytest.approx(second)
    # eps = inf: only the Hoeffding term
    assert R.exploration_target(2, 10, 10, 1e4, 2, math.inf, 0.25) == pytest.approx(first)


def test_confidence_radius_hand_computed():
    c = math.sqrt(math.log(8 * 7 * 9 * 1e4) / (2 * 5 * 40))
    h = 3 * math.sqrt(8 * math.log(8 * 20 * 9 * 1e4)) / (5**1.5 * 0.5 * 40)
    assert R.confidence_radius(3, 7, 20, 1e4, 5, 0.5, 40) == pytest.approx(c + h)
    assert R.confidence_radius(3, 7, 20, 1e4, 5, math.inf, 40) == pytest.approx(c)


def test_laplace_scale_is_alg1_line9():
    assert R.laplace_scale(50, 0.1, 12) == pytest.approx(1 / (50 * 0.1 * 12))
    assert R.laplace_scale(3, math.inf, 12) == 0.0


def test_plan_rounds_pulls_up_to_integers():
    schedule = R.EpochSchedule(arms=10, horizon=1e4, participants=4, epsilon=1.0)
    p1 = schedule.plan(1, 10, 0)
    assert p1.samples == math.ceil(p1.target) and p1.pulls == p1.samples
    p2 = schedule.plan(2, 6, p1.samples)
    assert p2.samples == math.ceil(R.exploration_target(2, 6, 10, 1e4, 4, 1.0, 0.25))
    assert p2.pulls == p2.samples - p1.samples
    assert p2.noise_scale == pytest.approx(1 / (4 * 1.0 * p2.pulls))
    assert p2.radius == pytest.approx(R.confidence_radius(2, 6, 10, 1e4, 4, 1.0, p2.samples))
    # S(r) never shrinks below S(r-1) + 1
    assert schedule.plan(1, 10, 10**6).pulls == 1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.floats(-2, 2)), min_size=1, max_size=8))
def test_historical_mean_is_sample_weighted_mean(epochs):
    """Eq. (6) unrolled (Eq. 12): ybar(r) = sum_j (S(j) - S(j-1)) / S(r) * yhat(j)."""
    ybar, s = np.zeros(1), 0
    total = 0.0
    for pulls, value in epochs:
        ybar = R.historical_mean(ybar, s, s + pulls, np.array([value]))
        s += pulls
        total += pulls * value
    assert ybar[0] == pytest.approx(total / s, abs=1e-9)


def test_eliminate_line14_exact():
    active = np.array([True, True, True, True, False])
    aggregate = np.array([0.9, 0.7, 0.69, 0.5, 5.0])  # the inactive arm must be ignored
    # max = 0.9; remove k with 0.9 - y_k >= 2 C = 0.2  -> arm 1 (gap 0.2, boundary) and arm 3
    out = R.eliminate(active, aggregate, 0.1)
    assert out.tolist() == [True, False, False, False, False]
    out = R.eliminate(active, aggregate, 0.105)
    assert out.tolist() == [True, True, False, False, False]


def test_private_means_update_and_local_best():
    state = R.PrivateMeans(2, 3)
    active = np.array([True, True, False])
    plan = R.EpochPlan(1, 0.5, 3.2, 4, 4, 0.1, 0.0)
    sums = np.array([[4.0, 2.0, 0.0], [1.0, 3.0, 0.0]])
    state.update(sums, active, plan, np.zeros((2, 3)))
    assert state.private.tolist() == [[1.0, 0.5, 0.0], [0.25, 0.75, 0.0]]
    assert state.local_best(active).tolist() == [0, 1]
    plan2 = R.EpochPlan(2, 0.25, 11.5, 12, 8, 0.1, 0.0)
    state.update(np.array([[0.0, 8.0, 0.0], [8.0, 0.0, 0.0]]), active, plan2, np.full((2, 3), 0.5))
    # Eq. (6): 4/12 * old + 8/12 * (xhat + 0.5)
    assert state.private[0].tolist() == pytest.approx([4 / 12 * 1.0 + 8 / 12 * 0.5, 4 / 12 * 0.5 + 8 / 12 * 1.5, 0.0])
    assert state.local_best(active).tolist() == [1, 0]
