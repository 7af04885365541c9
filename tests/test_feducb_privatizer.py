"""PRIVATIZER of FedUCB (dubey2020 Alg. 2) and the calibration of Sec. 4.3 / Props. 2 and 4."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.privacy.gaussian_tree import (
    FedUCBCalibration,
    GaussianTreePrivatizer,
    symmetric_noise,
    tree_depth,
)


def cal(**kw) -> FedUCBCalibration:
    args = {"epsilon": 1.0, "delta": 0.1, "alpha": 0.1, "dimension": 2, "agents": 3, "releases": 16, "L": 1.0,
            "S": 1.0, "sigma": 0.5}
    args.update(kw)
    return FedUCBCalibration(**args)


def test_calibration_formulas_by_hand():
    c = cal(epsilon=2.0, delta=0.1, alpha=0.05, dimension=4, agents=5, releases=100)
    m = 1 + 7  # ceil(log2 100) = 7
    assert c.m == m
    assert c.noise_variance == pytest.approx(16 * m * 2**2 * math.log(20) ** 2 / 4)
    scale = 32 * m * 2 * math.log(40) / 2
    log_term = 2 * math.log(2 * 100 * 5 / 0.05)
    lam = scale * (4 * 2 + log_term)
    assert c.Lambda == pytest.approx(lam)
    assert (c.rho_min, c.rho_max, c.shift) == pytest.approx((lam, 3 * lam, 2 * lam))
    assert c.kappa == pytest.approx(math.sqrt(scale) * (2 + log_term) / math.sqrt(8 + log_term))
    logdet = 4 * math.log(5 * lam) + 1.7
    expected = 0.5 * math.sqrt(2 * math.log(2 / 0.05) + 1.7) + math.sqrt(5 * 3 * lam) + 5 * c.kappa
    assert c.beta(logdet) == pytest.approx(expected)


def test_beta_reads_log_det_not_d_log_det():
    """Prop. 2 decision: the radicand is log det V - d log(M rho_min), zero at V = M rho_min I."""
    c = cal(epsilon=math.inf, lam=3.0, agents=4, dimension=5)
    at_prior = c.beta(5 * math.log(4 * 3.0))
    assert at_prior == pytest.approx(0.5 * math.sqrt(2 * math.log(20)) + math.sqrt(4 * 3.0))


def test_non_private_switch():
    c = cal(epsilon=math.inf, lam=2.0)
    assert (c.noise_variance, c.Lambda, c.kappa) == (0.0, 0.0, 0.0)
    assert (c.rho_min, c.rho_max, c.shift) == (2.0, 2.0, 2.0)
    tree = GaussianTreePrivatizer(c, [np.random.default_rng(0)])
    rng = np.random.default_rng(1)
    total = np.zeros((1, 3, 3))
    for _ in range(7):
        q = rng.normal(size=(1, 3, 3))
        total += q
        np.testing.assert_allclose(tree.release(q), total, rtol=1e-12, atol=1e-12)
    assert tree.noise_drawn[0] == 0


@pytest.mark.parametrize("bad", [{"epsilon": 0.0}, {"epsilon": -1.0}, {"delta": 1.0}, {"delta": 0.0},
                                 {"alpha": 0.0}, {"L": 0.0}, {"releases": 0}, {"epsilon": float("nan")},
                                 {"estimators": 0}])
def test_invalid_arguments(bad):
    with pytest.raises(ValueError, match="accepted"):
        cal(**bad)


def test_tree_depth():
    assert [tree_depth(n) for n in (1, 2, 3, 4, 5, 8, 9, 1024, 1025)] == [1, 2, 3, 3, 4, 4, 5, 11, 12]


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=64), st.integers(min_value=0, max_value=2**32))
def test_release_is_exact_prefix_plus_stored_noise(rounds, seed):
    c = cal(releases=64)
    tree = GaussianTreePrivatizer(c, [np.random.default_rng(seed), np.random.default_rng(seed + 1)])
    rng = np.random.default_rng(seed)
    prefix = np.zeros((2, 3, 3))
    for r in range(1, rounds + 1):
        q = rng.normal(size=(2, 3, 3))
        q = q + q.transpose(0, 2, 1)
        prefix += q
        out = tree.release(q)
        np.testing.assert_allclose(out - tree.noise_in_release(), prefix, atol=1e-9 * (1 + abs(out).max()))
        # the node totals kept per level give the plain sum of Alg. 2 bit for bit: 0 + (exact + noise) of every
        # node of the dyadic decomposition, level by level
        plain = np.zeros((2, 3, 3))
        for level in range(r.bit_length()):
            if r >> level & 1:
                plain += tree._exact[level] + tree._noise[level]
        np.testing.assert_array_equal(out, plain)
        noise = tree.noise_in_release()
        np.testing.assert_allclose(noise, noise.transpose(0, 2, 1))
        # least nodes: popcount(r) <= 1 + ceil(log2 r) = depth of a tree with r leaves
        assert tree.nodes_used(r) == r.bit_count() <= tree_depth(r)
    assert tree.noise_drawn.tolist() == [rounds, rounds]  # one new node per release


def test_node_noise_is_reused():
    c = cal()
    tree = GaussianTreePrivatizer(c, [np.random.default_rng(5)])
    zero = np.zeros((1, 3, 3))
    tree.release(zero)
    n1 = tree.noise_in_release().copy()  # node [1]
    tree.release(zero)
    n12 = tree.noise_in_release().copy()  # node [1, 2]
    tree.release(zero)
    n123 = tree.noise_in_release().copy()  # [1, 2] + [3]
    assert not np.allclose(n12, n1)
    np.testing.assert_allclose(n123 - n12, tree._noise[0][:1])  # node [1, 2] reused, [3] fresh
    tree.release(zero)
    n1234 = tree.noise_in_release().copy()  # node [1..4]
    tree.release(zero)
    np.testing.assert_allclose(tree.noise_in_release() - n1234, tree._noise[0][:1])  # [1..4] + [5]
    assert not np.allclose(n1234, n12)


def test_subset_release_keeps_separate_counters():
    c = cal()
    tree = GaussianTreePrivatizer(c, [np.random.default_rng(i) for i in range(3)])
    q = np.ones((1, 3, 3))
    tree.release(q, np.array([1]))
    tree.release(np.ones((2, 3, 3)), np.array([0, 1]))
    assert tree.rounds.tolist() == [1, 2, 0]
    exact = tree.release(np.ones((1, 3, 3)), np.array([1])) - tree.noise_in_release(np.array([1]))
    np.testing.assert_allclose(exact, 3 * np.ones((1, 3, 3)))


@pytest.mark.parametrize("r", [1, 2, 3, 5, 7, 8])
def test_release_noise_variance(r):
    """Statistical: release r carries popcount(r) symmetric node noises; off-diagonal entries have
    variance popcount(r) sigma_N^2, diagonal ones 2 popcount(r) sigma_N^2 (2000 streams, 10 % tolerance:
    the relative s.e. of a variance from 2000 normals is sqrt(2/2000) = 3.2 %). Error rates: 10 % is 3.1
    standard errors, a false alarm of at most 0.002 per entry (0.02 over the 9 entries, fixed seeds); a node
    noise missing or doubled changes a variance by 1 / popcount(r) >= 33 % (when r has at most 3 bits), 7
    standard errors beyond the tolerance: power 1."""
    c = cal(epsilon=4.0, releases=8)
    streams = 2000
    tree = GaussianTreePrivatizer(c, [np.random.default_rng([r, j]) for j in range(streams)])
    for _ in range(r):
        tree.release(np.zeros((streams, 3, 3)))
    noise = tree.noise_in_release()
    np.testing.assert_allclose(noise, noise.transpose(0, 2, 1))
    k = r.bit_count()
    var = noise.var(axis=0)
    expected = k * tree.entry_variance
    np.testing.assert_allclose(var, expected, rtol=0.10)
    assert abs(noise.mean(axis=0)).max() < 4 * math.sqrt(2 * k * c.noise_variance / streams)


def test_symmetric_noise_law():
    rng = np.random.default_rng(0)
    draws = np.stack([symmetric_noise(rng, 3, 2.0) for _ in range(4000)])
    np.testing.assert_allclose(draws, draws.transpose(0, 2, 1))
    np.testing.assert_allclose(draws[:, 0, 1].var(), 4.0, rtol=0.08)
    np.testing.assert_allclose(draws[:, 1, 1].var(), 8.0, rtol=0.08)


def test_split_applies_shift():
    c = cal()
    tree = GaussianTreePrivatizer(c, [np.random.default_rng(0)])
    m = np.arange(9.0).reshape(1, 3, 3)
    gram, vec = tree.split(m)
    np.testing.assert_allclose(gram[0], m[0, :2, :2] + c.shift * np.eye(2))
    np.testing.assert_allclose(vec[0], m[0, :2, 2])


def test_noise_read_ahead_is_one_normal_call_per_node():
    """read_ahead=True (blocks of 32 nodes per stream) releases exactly what one rng.normal call per node
    releases, for all streams, subsets, unsorted subsets and past a block's end (d = 3: 16 values a node)."""
    c = cal(dimension=3, releases=128)
    plain, ahead = (GaussianTreePrivatizer(c, [np.random.default_rng(40 + i) for i in range(4)], read_ahead=flag)
                    for flag in (False, True))
    rng = np.random.default_rng(9)
    for step in range(90):
        streams = [np.arange(4), np.array([2, 0]), np.array([3])][step % 3]
        q = rng.normal(size=(len(streams), 4, 4))
        assert np.array_equal(plain.release(q, streams), ahead.release(q, streams))
    assert plain.noise_drawn.tolist() == ahead.noise_drawn.tolist() and max(ahead.noise_drawn) > 32


@pytest.mark.parametrize("read_ahead", [False, True])
@pytest.mark.parametrize("epsilon", [1.0, math.inf])
def test_a_release_of_every_stream_is_the_release_of_each_alone(read_ahead, epsilon):
    """Every stream at once in order (built in place in the levels' arrays) releases, bit for bit, what each stream
    released on its own (the gathered-rows path) does, over two blocks of read-ahead noise; so do the node totals
    of the levels each release reads."""
    c = cal(dimension=3, releases=128, epsilon=epsilon)
    whole, alone = (GaussianTreePrivatizer(c, [np.random.default_rng(70 + i) for i in range(3)], read_ahead=read_ahead)
                    for _ in range(2))
    rng = np.random.default_rng(5)
    for r in range(1, 70):
        q = rng.normal(size=(3, 4, 4))
        together = whole.release(q)
        one_by_one = np.concatenate([alone.release(q[j:j + 1], np.array([j])) for j in range(3)])
        assert together.tobytes() == one_by_one.tobytes()
        for level in range(r.bit_length()):
            if r >> level & 1:
                assert whole._node[level].tobytes() == alone._node[level].tobytes()
    assert whole.noise_drawn.tolist() == alone.noise_drawn.tolist()
