"""protocols.feducb._kernels: the compiled loops give the floats of the NumPy expressions they replace (issue 25)."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.feducb import _kernels as kernels
from protocols.feducb.linucb import LinUCBState, _rank_one


def spd(rng, *lead, d):
    B = rng.normal(size=(*lead, d, d))
    return B @ np.swapaxes(B, -1, -2) + np.eye(d)


@pytest.mark.parametrize(("A", "d", "K"), [(1, 1, 2), (7, 3, 5), (20, 10, 100), (3, 40, 64)])
def test_ucb_widths_and_argmax_are_numpys(A, d, K):
    rng = np.random.default_rng(A * d * K)
    xt = rng.normal(size=(d, A, K)).transpose(1, 0, 2)  # strided as LinUCBState.choose reads gapped contexts
    projected = np.linalg.inv(spd(rng, A, d=d)) @ xt
    projected[0, :, 0] = -projected[0, :, 0] * np.abs(xt[0, :, 0]) / xt[0, :, 0]  # a negative sum: width 0
    beta, mean = rng.random(A) * 50, rng.normal(size=(A, K))
    want = np.sqrt(np.maximum((projected * xt).sum(axis=1), 0.0)) * beta[:, None] + mean
    widths, arms = np.empty((A, K)), np.empty(A, dtype=np.int64)
    kernels.ucb_argmax(projected, xt.transpose(1, 0, 2), beta, mean, widths, arms)
    assert np.array_equal(widths, want)  # bit for bit: same products, same order of the sum, no FMA
    assert np.array_equal(arms, np.argmax(want, axis=1))
    # B = 3 stacked trials on these contexts: learner b A + a reads the contexts of a
    inv = np.linalg.inv(spd(rng, 3 * A, d=d))
    projected = (inv.reshape(3, A, d, d) @ xt).reshape(3 * A, d, K)
    beta, mean = rng.random(3 * A) * 50, rng.normal(size=(3 * A, K))
    want = np.sqrt(np.maximum((projected * np.tile(xt, (3, 1, 1))).sum(axis=1), 0.0)) * beta[:, None] + mean
    widths, arms = np.empty((3 * A, K)), np.empty(3 * A, dtype=np.int64)
    kernels.ucb_argmax(projected, xt.transpose(1, 0, 2), beta, mean, widths, arms)
    assert np.array_equal(widths, want)
    assert np.array_equal(arms, np.argmax(want, axis=1))


def test_ucb_argmax_ties_and_nan_as_numpy():
    xt = np.zeros((3, 1, 4))
    mean = np.array([[1.0, 2.0, 2.0, 0.0], [1.0, np.nan, 3.0, np.nan], [np.nan, 1.0, 1.0, 1.0]])
    arms = np.empty(3, dtype=np.int64)
    kernels.ucb_argmax(xt.copy(), xt.transpose(1, 0, 2), np.ones(3), mean, np.empty((3, 4)), arms)
    assert arms.tolist() == np.argmax(mean, axis=1).tolist() == [1, 1, 0]


@pytest.mark.parametrize("lead", [(), (2,)])
def test_rank_one_is_the_numpy_expression(lead):
    rng = np.random.default_rng(5)
    inv = np.linalg.inv(spd(rng, *lead, 6, d=4))
    logdet = np.zeros((*lead, 6))
    x = rng.normal(size=(6, 4))
    ax = np.matmul(inv, x[:, :, None])
    q = np.matmul(x[:, None, :], ax)[..., 0, 0]
    want = inv - ax * (np.swapaxes(ax, -1, -2) / (1.0 + q)[..., None, None])
    _rank_one(inv, logdet, x)
    assert np.array_equal(inv, want)
    assert np.array_equal(logdet, np.log1p(q))


def test_update_adds_the_outer_product_as_numpy():
    rng = np.random.default_rng(6)
    state = LinUCBState(5, 3, s0=2.0, shift_w=1.0)
    state.Q[:] = rng.normal(size=state.Q.shape)
    before = state.Q.copy()
    x, y = rng.normal(size=(5, 3)), rng.random(5)
    state.update(x, y)
    z = np.concatenate([x, y[:, None]], axis=1)
    assert np.array_equal(state.Q, before + z[:, :, None] * z[:, None, :])
    rows = np.array([4, 1])
    state.update(x[:2], y[:2], rows)
    assert np.array_equal(state.Q[rows], (before + z[:, :, None] * z[:, None, :])[rows]
                          + z[:2, :, None] * z[:2, None, :])
