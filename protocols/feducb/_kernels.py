"""Compiled loops of the FedUCB step (numba; imported on first use by :mod:`protocols.feducb.linucb`, issue 25).

Each loop does, element by element, the arithmetic that the NumPy expression in its docstring does
(the same products, sums in the same order, no fused multiply-add: numba compiles without fast-math),
so its results are bit for bit those of that expression (``tests/test_feducb.py`` compares them). What
they save is the temporaries and passes of the expressions: an (A, d, K) product and its sum over d
for the UCB widths, an (A, d, d) outer product for the rank-one and the statistic updates. The matrix
products (BLAS) stay NumPy's.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def ucb_argmax(projected, xd, beta, mean, widths, arms):  # noqa: PLR0913  # pragma: no cover (compiled)
    """``widths = sqrt(maximum((projected * xt).sum(axis=1), 0)) * beta[:, None] + mean`` and
    ``arms = argmax(widths, axis=1)`` (the first maximum; the first NaN if any) for ``projected`` (A, d, K),
    V^-1 x of every context, and ``xt = xd.transpose(1, 0, 2)``, ``beta`` (A,), ``mean`` (A, K). ``xd`` (d, C, K)
    holds the contexts coordinate by coordinate (C-ordered: every row a contiguous run of K values, which the
    loops below read as such); C may divide A (B trials that observe the same contexts, stacked), learner a
    then reading the contexts of a mod C."""
    learners, d, contexts = projected.shape
    shared = xd.shape[1]
    s = np.empty(contexts)
    for a in range(learners):
        c = a % shared
        for k in range(contexts):  # the sum over d, term after term, every context at once (contiguous rows)
            s[k] = projected[a, 0, k] * xd[0, c, k]
        for i in range(1, d):
            for k in range(contexts):
                s[k] = s[k] + projected[a, i, k] * xd[i, c, k]
        best, arm, nan = -np.inf, 0, False
        for k in range(contexts):
            v = s[k]
            if v < 0.0:  # NumPy's maximum(v, 0): a NaN stays NaN
                v = 0.0
            w = np.sqrt(v) * beta[a] + mean[a, k]
            widths[a, k] = w
            if nan:
                continue
            if w > best:
                best, arm = w, k
            elif np.isnan(w):
                arm, nan = k, True
        arms[a] = arm


@njit(cache=True)
def rank_one(inv, ax, q):  # pragma: no cover (compiled)
    """``inv -= ax * (ax^T / (1 + q))`` in place: ``inv`` (L, n, d, d), ``ax`` (L, n, d) = A^-1 x, ``q`` (L, n)."""
    layers, n, d = ax.shape
    for layer in range(layers):
        for a in range(n):
            den = 1.0 + q[layer, a]
            for i in range(d):
                left = ax[layer, a, i]
                for j in range(d):
                    inv[layer, a, i, j] -= left * (ax[layer, a, j] / den)


@njit(cache=True)
def add_outer(Q, z):  # pragma: no cover (compiled)
    """``Q += z[:, :, None] * z[:, None, :]`` in place: ``Q`` (n, m, m), ``z`` (n, m)."""
    n, m = z.shape
    for a in range(n):
        for i in range(m):
            left = z[a, i]
            for j in range(m):
                Q[a, i, j] += left * z[a, j]
