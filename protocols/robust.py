"""Robust mean estimation under Huber's epsilon-contamination: the trimmed mean of Definition 4.1.

Dubey & Pentland (2020), Definition 4.1 (after Lugosi & Mendelson 2019, Prasad et al. 2019):
from 2N samples X_1, Y_1, ..., X_N, Y_N of (1 - eps) P + eps Q, with confidence delta, let

    alpha = max(eps, ln(1/delta) / N),
    L     = N (1 - 2 alpha - sqrt(2 alpha ln(4/delta) / N) - ln(4/delta) / N),

let Z be the shortest interval containing L of the points Y_1..Y_N, and return the average of
the X_i that fall in Z (Eq. 8). Half of the samples choose the interval, the other half are
averaged.

Decisions where the text is garbled or silent (each pinned by a test):

* The square root in L covers only ``2 alpha ln(4/delta) / N``; ``ln(4/delta) / N`` is
  subtracted outside it (the usual sqrt(2 a x) + x deviation form).
* L is rounded up to an integer, ``ceil``. If L < 1 (too few samples for the requested
  confidence) or there are no Y samples, no trimming is done: Z is the whole real line.
* Samples are split in arrival order: the 1st, 3rd, 5th, ... sample is an X, the 2nd, 4th, ...
  a Y (so with an odd count the X half has one more sample; N is the number of Y samples).
* Z is the closed interval [Y*_i, Y*_{i+L-1}] of minimal length over i; ties go to the
  leftmost interval.
* If no X falls in Z, the average of the Y points in Z is returned.

Two implementations that agree exactly: :func:`trimmed_mean` on a sample array (reference), and
:func:`trimmed_mean_histogram` on per-row counts over a shared sorted set of distinct values
(vectorised over rows; the protocol uses it, since rewards of Bernoulli arms and draws of a
discrete Q take few distinct values).
"""

from __future__ import annotations

import math

import numpy as np


def trim_count(n: int | np.ndarray, epsilon: float, delta: float | np.ndarray) -> np.ndarray:
    """Number L of Y points the interval must contain, for N = ``n`` Y samples (see module docstring).

    Returns an integer array; values < 1 mean "no trimming".
    """
    n = np.asarray(n, dtype=float)
    delta = np.asarray(delta, dtype=float)
    if not 0.0 <= epsilon < 0.5:
        raise ValueError(f"epsilon = {epsilon!r}; accepted: a number in [0, 0.5)")
    if np.any((delta <= 0) | (delta >= 1)):
        raise ValueError("delta must lie in (0, 1)")
    with np.errstate(divide="ignore", invalid="ignore"):
        log4 = np.log(4.0 / delta)
        alpha = np.maximum(epsilon, np.log(1.0 / delta) / n)
        fraction = 1.0 - 2.0 * alpha - np.sqrt(2.0 * alpha * log4 / n) - log4 / n
        count = np.ceil(n * fraction - 1e-9)
    return np.where(n > 0, np.nan_to_num(count, nan=0.0, neginf=0.0), 0).astype(np.int64)


def trimmed_mean(samples: np.ndarray, epsilon: float, delta: float) -> float:
    """Definition 4.1 on one sample array in arrival order (reference implementation)."""
    samples = np.asarray(samples, dtype=float)
    if samples.size == 0:
        return math.nan
    x, y = samples[0::2], np.sort(samples[1::2])
    n = len(y)
    count = int(trim_count(n, epsilon, delta))
    if count < 1 or n == 0:
        return float(x.mean())
    count = min(count, n)
    lengths = y[count - 1:] - y[: n - count + 1]
    i = int(np.argmin(lengths))  # first minimum: leftmost interval
    low, high = y[i], y[i + count - 1]
    inside = (x >= low) & (x <= high)
    if not inside.any():
        return float(y[i: i + count].mean())
    return float(x[inside].mean())


def trimmed_mean_histogram(values: np.ndarray, x_counts: np.ndarray, y_counts: np.ndarray,
                           epsilon: float, delta: float | np.ndarray) -> np.ndarray:
    """Definition 4.1 for many sample sets given as counts over shared distinct values.

    ``values`` (V,) strictly increasing; ``x_counts`` and ``y_counts`` (R, V) how many X and Y
    samples of row r equal each value; ``delta`` scalar or (R,). Returns (R,) estimates (nan
    for rows without samples).
    """
    values = np.asarray(values, dtype=float)
    xc = np.asarray(x_counts, dtype=np.int64)
    yc = np.asarray(y_counts, dtype=np.int64)
    rows, v = yc.shape
    n = yc.sum(axis=1)
    count = np.minimum(np.broadcast_to(trim_count(n, epsilon, delta), (rows,)), n)
    trim = (count >= 1) & (n > 0)

    cy = np.cumsum(yc, axis=1)
    before = cy - yc                                     # Y points strictly below each value
    gap = int((n + np.maximum(count, 0)).max(initial=0)) + 1
    offset = (np.arange(rows, dtype=np.int64) * gap)[:, None]
    flat = (cy + offset).ravel()
    target = before + np.maximum(count, 1)[:, None] + offset
    end = np.searchsorted(flat, target.ravel(), side="left").reshape(rows, v) - np.arange(rows)[:, None] * v
    valid = (end < v) & (yc > 0)
    end_c = np.minimum(end, v - 1)
    lengths = np.where(valid, values[end_c] - values[None, :], np.inf)
    start = np.argmin(lengths, axis=1)                   # first minimum: leftmost interval
    stop = end_c[np.arange(rows), start]
    trim &= np.isfinite(lengths[np.arange(rows), start])

    cx = np.concatenate((np.zeros((rows, 1), dtype=np.int64), np.cumsum(xc, axis=1)), axis=1)
    sx = np.concatenate((np.zeros((rows, 1)), np.cumsum(xc * values, axis=1)), axis=1)
    r = np.arange(rows)
    lo = np.where(trim, start, 0)
    hi = np.where(trim, stop, v - 1)
    inside = cx[r, hi + 1] - cx[r, lo]
    total = sx[r, hi + 1] - sx[r, lo]
    cyz = np.concatenate((np.zeros((rows, 1), dtype=np.int64), cy), axis=1)
    sy = np.concatenate((np.zeros((rows, 1)), np.cumsum(yc * values, axis=1)), axis=1)
    y_inside = cyz[r, hi + 1] - cyz[r, lo]
    y_total = sy[r, hi + 1] - sy[r, lo]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(inside > 0, total / inside, y_total / y_inside)
    return out


class SampleHistogram:
    """Sample sets of many rows (e.g. agent x arm) kept as counts over a growing dictionary of values.

    Each row's samples are split in arrival order into the X half (1st, 3rd, ...) and the Y half
    (2nd, 4th, ...) of Definition 4.1. Memory and time grow with the number of distinct values,
    which stays small for Bernoulli rewards and discrete corruption laws.
    """

    def __init__(self, rows: int, capacity: int = 8):
        self.rows = rows
        self.sizes = np.zeros(rows, dtype=np.int64)
        self._values = np.empty(0)
        self._index: dict[float, int] = {}
        self._counts = np.zeros((2, rows, capacity), dtype=np.int64)

    @property
    def num_values(self) -> int:
        return len(self._values)

    def add(self, rows: np.ndarray, samples: np.ndarray) -> None:
        """Append ``samples[i]`` to row ``rows[i]``, in array order."""
        rows = np.asarray(rows, dtype=np.int64)
        samples = np.asarray(samples, dtype=float)
        if rows.size == 0:
            return
        distinct, inverse = np.unique(samples, return_inverse=True)
        codes = np.empty(len(distinct), dtype=np.int64)
        for j, value in enumerate(distinct.tolist()):
            code = self._index.get(value)
            if code is None:
                code = self._index[value] = len(self._values)
                self._values = np.append(self._values, value)
                if code >= self._counts.shape[2]:
                    grown = np.zeros((2, self.rows, 2 * self._counts.shape[2]), dtype=np.int64)
                    grown[:, :, : self._counts.shape[2]] = self._counts
                    self._counts = grown
            codes[j] = code
        order = np.argsort(rows, kind="stable")
        sorted_rows = rows[order]
        rank = np.empty_like(rows)
        rank[order] = np.arange(len(rows)) - np.searchsorted(sorted_rows, sorted_rows, side="left")
        half = (self.sizes[rows] + rank) % 2                   # 0: X, 1: Y
        np.add.at(self._counts, (half, rows, codes[inverse]), 1)
        self.sizes += np.bincount(rows, minlength=self.rows)

    def clear(self, rows: np.ndarray) -> None:
        """Forget every sample of ``rows`` (a learner that lost its state)."""
        self._counts[:, rows, :] = 0
        self.sizes[rows] = 0

    def histogram(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sorted values, X counts (rows, V), Y counts (rows, V))."""
        order = np.argsort(self._values)
        v = len(order)
        return self._values[order], self._counts[0, :, :v][:, order], self._counts[1, :, :v][:, order]

    def trimmed_means(self, epsilon: float, delta: float | np.ndarray) -> np.ndarray:
        """Definition 4.1 for every row (nan for empty rows)."""
        values, x, y = self.histogram()
        return trimmed_mean_histogram(values, x, y, epsilon, delta)
