"""The UCB1 index (Auer, Cesa-Bianchi & Fischer 2002), the one implementation every family uses.

``ucb_bonus(n, t, scale=c)`` is sqrt(c ln t / n) and ``ucb_index(means, n, t, scale=c)`` is
mean + sqrt(c ln t / n); an arm never pulled (n = 0) gets +inf, so it goes first (ties to the
lowest index under ``argmax``). With c = 2 this is UCB1; the families pass their own constant:
zhu2021 Eq. (11) uses c = 2N, dubey2020a Alg. 3 uses c = 2 sigma (sigma ln(1/delta) with
delta = 1/t^2).

``t`` may be a number or an array broadcast against ``n`` (e.g. one pull count per agent);
ln t is taken of max(t, 1). A Python number goes through :func:`math.log`, numpy values through
:func:`numpy.log`: the two differ in the last bit for a few arguments, and the protocols'
bundled results were pinned with exactly these paths.
"""

from __future__ import annotations

import math

import numpy as np


def _log(t: np.ndarray | float) -> np.ndarray | float:
    if type(t) in (int, float):  # a Python number (numpy scalars go through numpy)
        return math.log(max(t, 1.0))
    return np.log(np.maximum(t, 1.0))


def ucb_bonus(counts: np.ndarray, t: np.ndarray | float, *, scale: float = 2.0) -> np.ndarray:
    """sqrt(scale ln t / n), elementwise; +inf where n = 0 (divided only where n > 0, so no warning to silence)."""
    counts = np.asarray(counts, dtype=float)
    numerator = scale * _log(t)
    shape = counts.shape if type(numerator) is float else np.broadcast_shapes(np.shape(numerator), counts.shape)
    bonus = np.full(shape, np.inf)
    np.divide(numerator, counts, out=bonus, where=counts > 0)
    return np.sqrt(bonus, out=bonus)


def ucb_index(means: np.ndarray, counts: np.ndarray, t: np.ndarray | float, *, scale: float = 2.0) -> np.ndarray:
    """mean + sqrt(scale ln t / n), elementwise; +inf where n = 0 (whatever the mean, even NaN)."""
    counts = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        index = means + np.sqrt(scale * _log(t) / counts)
    return np.where(counts > 0, index, np.inf)
