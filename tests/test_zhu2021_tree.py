"""Binary-tree continual counter (zhu2021 Alg. 2 + 3): exact sums, noise count and law, eps accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.privacy.tree import BinaryTreeCounter, popcount


def dyadic_decomposition(t: int) -> list[tuple[int, int]]:
    """Alg. 2 written out independently: intervals (q(t'), t'] while clearing the lowest set bit."""
    out, cur = [], t
    while cur:
        low = cur & -cur
        out.append((cur - low, cur))
        cur -= low
    return out


class _CountingRng:
    """A Generator stand-in that records every Laplace draw (delegating to a real one)."""

    def __init__(self, seed: int):
        self.inner = np.random.default_rng(seed)
        self.draws: list[float] = []

    def laplace(self, loc, scale, size):
        values = self.inner.laplace(loc, scale, size)
        self.draws.extend(np.atleast_1d(values).tolist())
        return values


def make(epsilon=1.0, horizon=64, shape=(), seed=0):
    return BinaryTreeCounter(epsilon=epsilon, horizon=horizon, shape=shape, rng=np.random.default_rng(seed))


@given(st.integers(min_value=1, max_value=10**6))
def test_popcount_matches_python(t):
    assert popcount(np.array([t]))[0] == t.bit_count() == len(dyadic_decomposition(t))


def test_infinite_epsilon_releases_exact_prefix_sums_and_draws_nothing():
    c = make(epsilon=math.inf, horizon=20)
    xs = np.random.default_rng(3).random(20)
    out = [c.release((), t, xs[t - 1]) for t in range(1, 21)]
    np.testing.assert_array_equal(np.array(out, dtype=float), np.cumsum(xs))
    assert c.noise_terms == 0 and c.scale == 0.0 and math.isinf(c.epsilon_spent)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=30, unique=True))
def test_release_is_prefix_sum_plus_exactly_popcount_noise_terms(times):
    """Each release = exact prefix sum + the noises of the popcount(t) dyadic nodes of t, each
    node drawn once on first use (reference: explicit dictionary of nodes, independent code)."""
    times = sorted(times)
    rng = _CountingRng(7)
    c = BinaryTreeCounter(epsilon=2.0, horizon=200, rng=rng)  # type: ignore[arg-type]
    values = {t: float(t % 5) for t in times}
    node_noise: dict[tuple[int, int], float] = {}
    prefix = 0.0
    for t in times:
        prefix += values[t]
        before = len(rng.draws)
        out = c.release((), t, values[t])
        fresh = [iv for iv in dyadic_decomposition(t) if iv not in node_noise]
        assert len(rng.draws) - before == len(fresh)
        for iv, draw in zip(sorted(fresh, key=lambda iv: iv[1] - iv[0]), rng.draws[before:]):
            node_noise[iv] = draw
        expected = prefix + sum(node_noise[iv] for iv in dyadic_decomposition(t))
        assert out == pytest.approx(expected, abs=1e-9)
    assert c.noise_terms == len(rng.draws) == len(node_noise)


@pytest.mark.parametrize("t, bits", [(8, 1), (11, 3), (15, 4)])
def test_noise_variance_matches_closed_form(t, bits):
    """A release at t over 20000 independent counters: the noise has mean 0 and variance
    popcount(t) * 2 b^2 with b = levels / eps. Tolerance 5% on the variance (std error ~1.7%): false alarm
    0.003; a node noise missing or extra changes the variance by 1 / popcount(t) >= 33 % (t < 8): power 1."""
    c = make(epsilon=1.0, horizon=100, shape=(20000,), seed=11 + t)
    out = c.release(slice(None), t, np.zeros(20000))
    assert c.levels == 7 and c.scale == pytest.approx(7.0)
    assert c.variance(t) == pytest.approx(bits * 2 * 49.0)
    assert out.var() == pytest.approx(c.variance(t), rel=0.05)
    assert abs(out.mean()) < 4 * math.sqrt(c.variance(t) / 20000)
    assert c.noise_terms == bits * 20000


def test_levels_use_base_two_and_cover_powers_of_two():
    """eps' = eps / levels with levels = H.bit_length(): ceil(log2 H) unless H is a power of 2."""
    for horizon in (3, 5, 6, 7, 100, 1000, 12345):
        assert make(horizon=horizon).levels == math.ceil(math.log2(horizon))
    for horizon in (1, 2, 8, 1024):
        assert make(horizon=horizon).levels == int(math.log2(horizon)) + 1


@pytest.mark.parametrize("horizon", [7, 8, 13, 16])
def test_epsilon_spent_never_exceeds_epsilon_and_reaches_it_when_dense(horizon):
    c = make(epsilon=3.0, horizon=horizon)
    for t in range(1, horizon + 1):
        c.release((), t, 1.0)
        assert c.epsilon_spent <= 3.0 + 1e-12
    assert c.epsilon_spent == pytest.approx(3.0)  # every level used once t reaches 2^(levels-1)


def test_epsilon_spent_counts_levels_actually_noised():
    c = make(epsilon=4.0, horizon=15)  # 4 levels, eps' = 1
    c.release((), 1, 1.0)
    assert c.epsilon_spent == pytest.approx(1.0)
    c.release((), 3, 1.0)  # nodes (2,3] level 0 and (0,2] level 1
    assert c.epsilon_spent == pytest.approx(2.0)


def test_vectorised_counters_are_independent_streams():
    c = make(epsilon=math.inf, horizon=10, shape=(2, 3))
    c.release((np.array([0, 1]), np.array([2, 0])), 1, np.array([1.0, 2.0]))
    c.release((np.array([0, 1]), np.array([2, 1])), 4, np.array([0.5, 3.0]))
    expected = np.zeros((2, 3))
    expected[0, 2], expected[1, 0], expected[1, 1] = 1.5, 2.0, 3.0
    np.testing.assert_array_equal(c.sums, expected)


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0.0}, {"epsilon": -1.0}, {"epsilon": float("nan")}, {"horizon": 0}, {"horizon": 2.5},
    {"sensitivity": 0.0}, {"rng": None},
])
def test_bad_arguments_are_rejected(kwargs):
    args = {"epsilon": 1.0, "horizon": 8, "rng": np.random.default_rng(0), **kwargs}
    with pytest.raises((ValueError, TypeError), match="accepted|Generator"):
        BinaryTreeCounter(**args)


def test_misuse_is_rejected():
    c = make(horizon=8, shape=(3,))
    with pytest.raises(ValueError, match="outside"):
        c.release(np.array([0]), 9, 1.0)
    c.release(np.array([0]), 5, 1.0)
    with pytest.raises(ValueError, match="decrease"):
        c.release(np.array([0]), 4, 1.0)
    with pytest.raises(ValueError, match="once"):
        c.release(np.array([1, 1]), 6, 1.0)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=30),
       st.integers(min_value=0, max_value=2**31))
def test_a_batch_release_is_each_counters_own_stream(schedule, seed):
    """One vectorised release for several counters at a time (Fed_UCB's per-tick step) against the plain
    model of the single-counter test, counter by counter: every counter's release is its exact prefix sum
    plus the noises of the popcount(t) dyadic nodes of t, each node's noise drawn on its first use, draws
    taken counter by counter (in index order) and, within a counter, from the lowest level up. A scalar t
    and the same t given per counter release the very same values."""
    rng, twin = _CountingRng(seed), _CountingRng(seed)
    scalar = BinaryTreeCounter(epsilon=1.0, horizon=64, shape=(4,), rng=rng)  # type: ignore[arg-type]
    per_counter = BinaryTreeCounter(epsilon=1.0, horizon=64, shape=(4,), rng=twin)  # type: ignore[arg-type]
    nodes: list[dict[tuple[int, int], float]] = [{} for _ in range(4)]
    prefix = np.zeros(4)
    for t, chosen in enumerate(schedule, start=1):
        index = np.flatnonzero(chosen)
        if not len(index):
            continue
        values = (index + 1.0) * t
        before = len(rng.draws)
        out = scalar.release(index, t, values)
        np.testing.assert_array_equal(out, per_counter.release(index, np.full(len(index), t), values))
        draws = iter(rng.draws[before:])
        for i, value in zip(index.tolist(), values.tolist(), strict=True):
            prefix[i] += value
            for iv in sorted(dyadic_decomposition(t), key=lambda iv: iv[1] - iv[0]):
                if iv not in nodes[i]:
                    nodes[i][iv] = next(draws)
        assert next(draws, None) is None
        expected = [prefix[i] + sum(nodes[i][iv] for iv in dyadic_decomposition(t)) for i in index.tolist()]
        np.testing.assert_allclose(out, expected, atol=1e-9)
    assert rng.draws == twin.draws
