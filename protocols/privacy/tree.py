"""Binary-tree continual counter: private prefix sums of an observation stream.

zhu2021 Alg. 2 + Alg. 3 (after Chan, Shi & Song 2011, "Private and continual release of
statistics"). The stream x(1), x(2), ..., x(H) of one counter is cut into dyadic partial sums:
the prefix sum up to t is the sum of ``popcount(t)`` partial sums, one per set bit j of t,
namely the node (j, m = t >> j) covering the times ((m - 1) 2^j, m 2^j] (Alg. 2: clear the
lowest set bit of t, sum the interval, repeat). Each node receives one Laplace(1/eps') draw the
first time it is used and keeps it afterwards (Alg. 3, the map P), so

    release(t) = x(1) + ... + x(t) + sum of popcount(t) noise terms.

Decisions where the paper is loose (pinned by ``tests/test_zhu2021_tree.py``):

* **Log base.** Partial sums are binary, so the number of levels is a base-2 quantity. The
  paper sets eps' = eps / ceil(log T). A single x(tau) lies in at most one node per level and
  there are ``floor(log2 H) + 1 = H.bit_length()`` levels; this equals ceil(log2 H) except when
  H is a power of two (and H = 1, where ceil(log2 1) = 0). We use
  ``levels = H.bit_length()`` so that eps-DP holds for every H; for H not a power of two this
  is exactly the paper's ceil(log2 H).
* **Empty partial sums.** Sec. 4.1's prose adds noise only "if there exist observations in
  that partial sum"; Alg. 3 adds it to every partial sum on first use. We follow Alg. 3 (the
  standard mechanism), so a release carries exactly popcount(t) noise terms.

The counter is vectorised over a batch of independent counters of shape ``shape`` (Fed_UCB
keeps one per (agent, arm)); it keeps the exact prefix sums, each counter's last release time,
the OR of its release times (the levels it has noised), and per counter and level the noise of
the node in use there (which node that is follows from the last release time; 0 once a release
time with that bit clear has passed: the node is then never used again). ``epsilon = inf`` means
no privacy: nothing is drawn. :meth:`BinaryTreeCounter.lockstep` stacks the counters of several
trials run in lockstep (each drawing from its own stream, in blocks, the values of one call per
release; :meth:`BinaryTreeCounter.split` gives them back).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netsim.comm import GroupedDraws
from protocols.privacy.mechanisms import laplace_noise


def _epsilon(value: Any) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value) or value <= 0:
        raise ValueError(f"epsilon = {value!r}; accepted: a number > 0 or inf")
    return value


class BinaryTreeCounter:
    """Private continual prefix sums for a batch of counters (zhu2021 Alg. 2 + 3).

    Parameters
    ----------
    epsilon:
        Total privacy level eps of each counter's whole stream (> 0, ``inf`` = no noise).
    horizon:
        Last time H a counter may be released at (times are 1 .. H).
    shape:
        Shape of the batch of counters (``()`` for a single counter).
    sensitivity:
        Largest change of one observation (1 for rewards in [0, 1], zhu2021 Sec. 2).
    rng:
        Generator of the Laplace draws (required; the caller owns it); or, for B streams in lockstep
        (B trials), a :class:`netsim.comm.GroupedDraws` of Laplace(b) draws with one generator per
        index of the leading axis of ``shape`` (see :meth:`lockstep`).

    Attributes
    ----------
    levels:
        Number of tree levels, ``horizon.bit_length()`` (see module docstring).
    node_epsilon:
        eps' = eps / levels, the budget of one partial sum.
    scale:
        Laplace scale b = sensitivity / eps' of each noise term (0 when eps is infinite).
    noise_terms:
        Laplace draws made so far (each is one noised partial sum).
    """

    def __init__(self, *, epsilon: float, horizon: int, shape: tuple[int, ...] = (), sensitivity: float = 1.0,
                 rng: np.random.Generator):
        self.epsilon = _epsilon(epsilon)
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
            raise ValueError(f"horizon = {horizon!r}; accepted: an integer >= 1")
        sensitivity = float(sensitivity)
        if not (sensitivity > 0 and math.isfinite(sensitivity)):
            raise ValueError(f"sensitivity = {sensitivity!r}; accepted: a finite number > 0")
        self._grouped = callable(getattr(rng, "take", None))
        if not (self._grouped or callable(getattr(rng, "laplace", None))):
            raise TypeError("rng must be a numpy.random.Generator (an object with .laplace) or a GroupedDraws")
        self.horizon = int(horizon)
        self.shape = tuple(int(s) for s in shape)
        self.sensitivity = sensitivity
        self.rng = rng
        self.levels = self.horizon.bit_length()
        self.node_epsilon = self.epsilon / self.levels
        self.scale = 0.0 if math.isinf(self.epsilon) else sensitivity / self.node_epsilon
        self._pow2 = np.int64(1) << np.arange(self.levels, dtype=np.int64)   # 2^j at level j
        size = int(np.prod(self.shape, dtype=np.int64))
        self._ids = np.arange(size).reshape(self.shape)        # flat id of every counter
        self._sums = np.zeros(size)
        self._last = np.zeros(size, dtype=np.int64)
        self._noise = np.zeros((size, self.levels))
        self._levels_used = np.zeros(size, dtype=np.int64)  # per counter, the OR of its release times
        self.noise_terms = 0
        self._latest = 0  # the latest time any counter was released at
        self._group_size = size // len(rng.generators) if self._grouped else size  # counters per stream

    @classmethod
    def lockstep(cls, counters: list[BinaryTreeCounter]) -> BinaryTreeCounter:
        """One counter for the counters of B trials in lockstep (equal epsilon, horizon, sensitivity and
        shape S, fresh): flat shape (B prod(S),), counters b prod(S) .. (b + 1) prod(S) - 1 being those of
        trial b, which draw from ``counters[b].rng`` in blocks. Its releases are, trial by trial, those of
        the B counters (a release must list the trials in order; same draws, same floats); :meth:`split`
        writes the B counters back."""
        first = counters[0]
        size = int(np.prod(first.shape, dtype=np.int64))
        draws = GroupedDraws([c.rng for c in counters], lambda g, k: laplace_noise(g, first.scale, k))
        return cls(epsilon=first.epsilon, horizon=first.horizon, shape=(len(counters) * size,),
                   sensitivity=first.sensitivity, rng=draws)

    def split(self, counters: list[BinaryTreeCounter]) -> None:
        """Write row b of this lockstep counter back into ``counters[b]`` (state and noise count)."""
        for b, counter in enumerate(counters):
            rows = slice(b * self._group_size, (b + 1) * self._group_size)
            counter._sums[:] = self._sums[rows]
            counter._last[:] = self._last[rows]
            counter._noise[:] = self._noise[rows]
            counter._levels_used[:] = self._levels_used[rows]
            counter._latest = int(self._last[rows].max(initial=0))
            counter.noise_terms = int(self.rng.taken[b]) if self._grouped else self.noise_terms

    # ------------------------------------------------------------------ closed forms
    def variance(self, t: int | np.ndarray) -> float | np.ndarray:
        """Variance of the noise in a release at time t: popcount(t) * 2 b^2."""
        t = np.asarray(t, dtype=np.int64)
        return popcount(t) * 2.0 * self.scale**2

    @property
    def epsilon_spent(self) -> float:
        """Privacy loss bound so far: eps' times the most levels any counter has noised.

        One observation lies in at most one noised node per level, each noised with
        Laplace(sensitivity / eps'), so its loss is at most eps' x (levels used) <= eps.
        Infinite when eps is (no noise is added).
        """
        if self.scale == 0.0:
            return math.inf
        if self._levels_used.size == 0:
            return 0.0
        # a counter has noised level j iff one of its release times had bit j set (the first such
        # release drew that level's node), so its levels are the bits of the OR of its times
        return float(self.node_epsilon * popcount(self._levels_used).max())

    # ------------------------------------------------------------------ streaming
    def release(self, index: Any, t: int | np.ndarray, value: float | np.ndarray = 0.0, *,
                distinct: bool = False) -> np.ndarray:
        """Append x(t) = ``value`` to the counters at ``index`` and return their noisy prefix sums.

        ``index`` selects distinct counters (any numpy index into ``shape``; ``()`` for a single
        counter); ``t`` (scalar or one per counter) must lie in 1 .. horizon and be at least
        the counter's previous time (skipped times are x = 0). The release is the exact
        prefix sum plus the popcount(t) node noises of Alg. 3. ``distinct=True``: the caller
        guarantees that ``index`` lists distinct counters (the check is skipped).

        One vectorised step for the whole batch: the nodes used for the first time are found from
        each counter's previous release time alone, their noises drawn in counter-major,
        level-minor order, and each counter's noise is summed over its full row of levels (zeros
        off the set bits of t), so that a scalar t and a per-counter t give the same releases.
        """
        picked = self._ids[index]
        out_shape = np.shape(picked)
        flat = picked.ravel() if out_shape else np.array([picked])
        if not distinct and flat.size > 1 and len(set(flat.tolist())) < flat.size:
            raise ValueError("each counter may appear once per release")
        last = self._last[flat]
        scalar = isinstance(t, (int, np.integer))
        if scalar:
            t = low = high = int(t)
            late = t < self._latest and last.max(initial=0) > t   # no counter is later than the latest time
        else:
            t = np.broadcast_to(np.asarray(t, dtype=np.int64), out_shape).ravel()
            low, high = int(t.min()), int(t.max())
            late = (last > t).any()
        if low < 1 or high > self.horizon:
            raise ValueError(f"time outside 1..{self.horizon}")
        if late:
            raise ValueError("a counter's times must not decrease")
        self._latest = max(self._latest, high)
        if type(value) is not float:
            value = np.asarray(value, dtype=float)
            value = value.reshape(flat.shape) if value.ndim else value
        sums = self._sums[flat] + value
        self._sums[flat] = sums
        self._last[flat] = t
        if self.scale == 0.0:  # eps = inf: no noise, no node bookkeeping needed
            return sums.reshape(out_shape)
        # Node (j, m = t >> j) of a counter was used before iff its previous release time `last` had
        # last >> j == m (bit j of last is then set too, m being odd): releases come in time order,
        # so earlier ones lie in lower nodes. Hence Alg. 3's map P needs no other state than `last`;
        # last >> j != t >> j is (last ^ t) >= 2^j. A level whose bit of t is clear has left its node
        # for good (later times have other m at that level), so its noise is dropped (zeroed) here.
        active = (self._pow2 & (t if scalar else t[:, None])) != 0       # bit j of t set: node used (Alg. 2)
        noise = self._noise[flat]
        noise *= active
        if scalar:
            # the fresh nodes of a counter (Alg. 3) are the levels j of t with 2^j <= last ^ t: the first k of
            # t's levels in ascending order, k found by one search per counter
            levels = np.flatnonzero(active)
            k = np.searchsorted(self._pow2[levels], last ^ t, side="right")
            drawn = int(k.sum())
            if drawn:
                row = np.repeat(np.arange(len(flat)), k)
                fresh = row * self.levels + levels[np.arange(drawn) - (np.cumsum(k) - k)[row]]
        else:
            fresh = np.flatnonzero(active & np.greater_equal.outer(last ^ t, self._pow2))   # first use (Alg. 3)
            drawn = len(fresh)
            row = fresh // self.levels
        if drawn:   # drawn counter-major, level-minor
            if self._grouped:  # each trial's draws from its own stream, in the same order
                values = self.rng.take(flat[row] // self._group_size)
            else:
                values = laplace_noise(self.rng, self.scale, drawn)
            noise.reshape(-1)[fresh] = values
            self.noise_terms += drawn
            self._levels_used[flat] |= t
        self._noise[flat] = noise
        return (sums + noise.sum(axis=-1)).reshape(out_shape)

    def restart(self, index: Any) -> None:
        """The counters at ``index`` start a new stream (their owner lost its state): zero sums, no nodes.

        A fresh stream is a new data set, so its budget eps starts afresh; its times continue
        from the caller's clock (times skipped since are x = 0).
        """
        flat = np.atleast_1d(self._ids[index]).ravel()
        self._sums[flat] = 0.0
        self._last[flat] = 0
        self._noise[flat] = 0.0
        self._levels_used[flat] = 0

    @property
    def sums(self) -> np.ndarray:
        """Exact prefix sums (for tests and bookkeeping; never released)."""
        return self._sums.reshape(self.shape).copy()


def popcount(t: np.ndarray) -> np.ndarray:
    """Number of set bits of each entry of a non-negative integer array."""
    t = np.asarray(t, dtype=np.int64).copy()
    count = np.zeros_like(t)
    while np.any(t):
        count += t & 1
        t >>= 1
    return count
