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

Two implementations: :func:`trimmed_mean` sorts one sample array (the reference), and
:class:`SampleSets` keeps the sample sets of many rows (agent x arm) incrementally and evaluates
Definition 4.1 for all of them at once (the protocol uses it). They choose the same interval Z
and differ only in the order in which the X (or Y) points in Z are summed (see
:class:`SampleSets`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    if not inside.any():  # every Y point in the closed Z, ties beyond the window's L points included
        return float(y[(y >= low) & (y <= high)].mean())
    return float(x[inside].mean())


class SampleSets:
    """The sample sets of many rows (e.g. agent x arm), kept incrementally for Definition 4.1.

    Each row's samples are split in arrival order into the X half (1st, 3rd, ...) and the Y half
    (2nd, 4th, ...). Each half of each row keeps how many of its samples equal each of the
    ``common`` values (by default 0 and 1, the rewards of a Bernoulli arm) and its other values in
    a sorted pool, one segment per (half, row), with prefix sums within the segment and how many of
    them lie below each common value. Sorted, a half is then: others below the first common value,
    the run of that value, others between it and the next one, ..., so the value at any rank is
    found in O(1) (:meth:`_value_at`) and the X points in an interval in O(log s) (s: other values
    of the row), whatever the number of samples.

    Definition 4.1 needs the shortest interval holding L of the N Y points: only windows starting
    at the first point of a run of equal values can be shortest-and-leftmost, and only among the
    N - L + 1 lowest ranks; with Bernoulli rewards these are one or two runs plus the few
    corrupted values among the lowest ranks. :meth:`trimmed_means` costs O(rows + such
    candidates + rows log s) per call, whatever the number of samples; :meth:`add` one stable
    sort of the rows of its n samples (radix), plus an insertion into the pool when some are not
    common values.

    Floating point: the sum of the X points in Z = [lo, hi] is (P(hi) + sum_j c_j v_j) - P(lo),
    P(x) being the sum of the row's other X values up to x (<= hi, < lo) in ascending order and
    c_j the count of common value v_j in Z; the mean of the reference :func:`trimmed_mean` adds
    the same points in another order, so the two agree up to floating-point summation order.
    With the common values 0 and 1 and other values between them (Bernoulli rewards, Q on
    [0, 1]) this is the ascending sum of the points in Z computed as a difference of prefix sums.
    Samples must be finite.
    """

    def __init__(self, rows: int, common: Sequence[float] = (0.0, 1.0)):
        self.rows = rows
        self.common = np.unique(np.asarray(common, dtype=float))
        if not len(self.common):
            raise ValueError("common = (); accepted: one or more values")
        self._ids = np.arange(rows, dtype=np.int64)
        self._key = np.min_scalar_type(max(rows - 1, 0))          # dtype of the sort key (radix sort when small)
        self._alternating = np.zeros(0, dtype=np.uint8)
        shape = (2, len(self.common), rows)
        self.sizes = np.zeros(rows, dtype=np.int64)            # samples per row (both halves)
        self._counts = np.zeros(shape, dtype=np.int64)         # [half, j, row]: samples equal to common[j]
        self._below = np.zeros(shape, dtype=np.int64)          # [half, j, row]: other values below common[j]
        self._ptr = np.zeros(2 * rows + 1, dtype=np.int64)     # segment half * rows + row: pool[ptr[s]:ptr[s + 1]]
        self._pool = np.empty(0)                               # other values, ascending within a segment
        self._prefix = np.empty(0)                             # inclusive prefix sums within a segment

    def add(self, rows: np.ndarray, samples: np.ndarray) -> None:
        """Append ``samples[i]`` to row ``rows[i]``, in array order."""
        rows = np.asarray(rows, dtype=np.int64)
        samples = np.asarray(samples, dtype=float)
        if rows.size == 0:
            return
        c = len(self.common)
        code = np.full(len(samples), c, dtype=np.uint16)    # index of the common value, c for any other value
        for j, common in enumerate(self.common):
            code -= (samples == common) * np.uint16(c - j)
        # the samples grouped by row, each row's in arrival order (a stable sort: radix on the smallest key)
        order = np.argsort(rows.astype(self._key), kind="stable")
        added = np.bincount(rows, minlength=self.rows)
        # position in the row's whole sequence, from 0: even = X, odd = Y
        first = ((np.cumsum(added) - added - self.sizes) & 1).astype(np.uint8)
        half = self._parity(len(rows)) ^ np.repeat(first, added)
        self.sizes += added
        cell = np.repeat(self._ids * (2 * (c + 1)), added)  # (row, half, code) cells, small dtypes above
        cell += half * np.uint16(c + 1) + code[order]
        counts = np.bincount(cell, minlength=self.rows * 2 * (c + 1)).reshape(self.rows, 2, c + 1)
        self._counts += counts[:, :, :c].transpose(1, 2, 0)
        if counts[:, :, c].any():
            other = np.flatnonzero(code[order] == c)
            row = np.repeat(self._ids, added)[other]
            self._insert(half[other].astype(np.int64) * self.rows + row, samples[order[other]])

    def _parity(self, n: int) -> np.ndarray:
        """0, 1, 0, 1, ... (n values, uint8)."""
        if len(self._alternating) < n:
            self._alternating = (np.arange(2 * n) & 1).astype(np.uint8)
        return self._alternating[:n]

    def _insert(self, segment: np.ndarray, values: np.ndarray) -> None:
        order = np.lexsort((values, segment))
        segment, values = segment[order], values[order]
        at = self._find(segment, values, "right")
        self._pool = np.insert(self._pool, at, values)
        self._prefix = np.insert(self._prefix, at, 0.0)
        self._ptr[1:] += np.cumsum(np.bincount(segment, minlength=2 * self.rows))
        for j, common in enumerate(self.common):
            below = np.bincount(segment[values < common], minlength=2 * self.rows)
            self._below[:, j, :] += below.reshape(2, self.rows)
        self._sum_segments(np.unique(segment))

    def _sum_segments(self, segments: np.ndarray) -> None:
        """Recompute the prefix sums of ``segments`` (each summed in ascending order)."""
        start = self._ptr[segments]
        length = self._ptr[segments + 1] - start
        columns = np.arange(int(length.max()))
        inside = columns < length[:, None]
        where = start[:, None] + np.minimum(columns, length[:, None] - 1)
        block = np.where(inside, self._pool[where], 0.0)
        self._prefix[where[inside]] = np.cumsum(block, axis=1)[inside]

    def _find(self, segment: np.ndarray, x: np.ndarray, side: str) -> np.ndarray:
        """Pool position where ``x[i]`` would be inserted in ``segment[i]`` (``side`` as np.searchsorted)."""
        lo, hi = self._ptr[segment].copy(), self._ptr[segment + 1].copy()
        pool = self._pool
        while True:
            open_ = lo < hi
            if not open_.any():
                return lo
            mid = (lo + hi) >> 1
            probe = pool[np.minimum(mid, len(pool) - 1)]
            right = open_ & ((probe <= x) if side == "right" else (probe < x))
            lo = np.where(right, mid + 1, lo)
            hi = np.where(open_ & ~right, mid, hi)

    def _value_at(self, half: int, rows: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """The value at 0-based ``rank`` of the sorted samples of ``half`` in each of ``rows``."""
        out = np.empty(len(rows))
        todo = np.ones(len(rows), dtype=bool)
        start = self._ptr[half * self.rows + rows]
        shift = np.zeros(len(rows), dtype=np.int64)                    # common samples below
        for j, common in enumerate(self.common):
            run = self._below[half, j, rows] + shift                   # rank of the first sample == common
            here = todo & (rank < run)
            out[here] = self._pool[(start + rank - shift)[here]]
            shift = shift + self._counts[half, j, rows]
            todo &= ~here
            here = todo & (rank < self._below[half, j, rows] + shift)
            out[here] = common
            todo &= ~here
        out[todo] = self._pool[(start + rank - shift)[todo]]
        return out

    def _interval(self, rows: np.ndarray, n: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The leftmost shortest interval [lo, hi] holding ``count`` of the ``n`` Y points of each of ``rows``.

        Candidate windows start at the first point of a run of equal values with rank <= n - count.
        """
        spare = n - count
        others = self._ptr[self.rows + rows + 1] - self._ptr[self.rows + rows]
        below, counts = self._below[1][:, rows], self._counts[1][:, rows]
        shift = np.zeros(len(rows), dtype=np.int64)
        taken = np.zeros(len(rows), dtype=np.int64)                    # other values with rank <= spare
        c_rows, c_rank, c_value = [], [], []
        for j, common in enumerate(self.common):
            first = below[j - 1] if j else 0                           # block j: others first .. below[j] - 1
            taken += np.clip(spare - shift + 1 - first, 0, below[j] - first)
            run = below[j] + shift
            ok = (counts[j] > 0) & (run <= spare)
            c_rows.append(np.flatnonzero(ok))
            c_rank.append(run[ok])
            c_value.append(np.full(int(ok.sum()), common))
            shift = shift + counts[j]
        first = below[-1]
        taken += np.clip(spare - shift + 1 - first, 0, others - first)
        local = np.repeat(np.arange(len(rows)), taken)
        j = np.arange(len(local)) - np.repeat(np.cumsum(taken) - taken, taken)
        rank = j + (counts[:, local] * (j >= below[:, local])).sum(axis=0)
        c_rows.append(local)
        c_rank.append(rank)
        c_value.append(self._pool[self._ptr[self.rows + rows[local]] + j])
        local, rank, start = np.concatenate(c_rows), np.concatenate(c_rank), np.concatenate(c_value)
        order = np.lexsort((rank, local))
        local, rank, start = local[order], rank[order], start[order]
        end = self._value_at(1, rows[local], rank + count[local] - 1)
        length = end - start
        heads = np.flatnonzero(np.append(True, local[1:] != local[:-1]))   # every row has a window at rank 0
        shortest = np.minimum.reduceat(length, heads)
        best = np.flatnonzero(length == shortest[local])
        best = best[np.append(True, local[best][1:] != local[best][:-1])]  # leftmost of each row
        return start[best], end[best]

    def _in_interval(self, half: int, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
        """Count and sum of the samples of ``half`` of each of ``rows`` that lie in [lo, hi]."""
        segment = half * self.rows + rows
        a, b = self._ptr[segment], self._ptr[segment + 1]
        if len(self._pool):  # the other values: all of the segment unless the interval cuts it
            last = len(self._pool) - 1
            cut = np.flatnonzero((b > a) & (self._pool[np.minimum(a, last)] < lo))
            a = a.copy()
            a[cut] = self._find(segment[cut], lo[cut], "left")
            cut = np.flatnonzero((b > a) & (self._pool[b - 1] > hi))
            b = b.copy()
            b[cut] = self._find(segment[cut], hi[cut], "right")
        inside = b - a
        total = self._prefix_to(segment, b)
        for j, common in enumerate(self.common):
            hits = self._counts[half, j, rows] * ((lo <= common) & (common <= hi))
            inside = inside + hits
            total = total + hits * common
        return inside, total - self._prefix_to(segment, a)

    def _prefix_to(self, segment: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Sum of the pool values of ``segment`` before ``position`` (ascending order)."""
        if not len(self._pool):
            return np.zeros(len(segment))
        return np.where(position > self._ptr[segment], self._prefix[np.maximum(position - 1, 0)], 0.0)

    def clear(self, rows: np.ndarray) -> None:
        """Forget every sample of ``rows`` (a learner that lost its state)."""
        rows = np.asarray(rows, dtype=np.int64)
        length = np.diff(self._ptr)
        gone = np.zeros(2 * self.rows, dtype=bool)
        gone[rows] = gone[rows + self.rows] = True
        keep = np.repeat(~gone, length)
        self._pool, self._prefix = self._pool[keep], self._prefix[keep]
        length[gone] = 0
        self._ptr[1:] = np.cumsum(length)
        self._counts[:, :, rows] = 0
        self._below[:, :, rows] = 0
        self.sizes[rows] = 0

    def trimmed_means(self, epsilon: float, delta: float | np.ndarray) -> np.ndarray:
        """Definition 4.1 for every row (``delta`` scalar or per row); nan for rows without samples."""
        others = np.diff(self._ptr)
        n = others[self.rows:] + self._counts[1].sum(axis=0)
        count = np.minimum(np.broadcast_to(trim_count(n, epsilon, delta), n.shape), n)
        lo, hi = np.full(self.rows, -np.inf), np.full(self.rows, np.inf)   # no trimming: Z = the real line
        rows = np.flatnonzero(count >= 1)
        if len(rows):
            lo[rows], hi[rows] = self._interval(rows, n[rows], count[rows])
        inside, total = self._in_interval(0, self._ids, lo, hi)
        rows = np.flatnonzero(inside == 0)              # no X in Z: the mean of the Y points in Z
        if len(rows):
            inside[rows], total[rows] = self._in_interval(1, rows, lo[rows], hi[rows])
        with np.errstate(divide="ignore", invalid="ignore"):
            return total / inside
