"""The interval mechanism of DP-UCB-INT (Tossou & Dimitrakakis, AAAI 2016, Algorithm 3).

The private mean of an arm is released only when the arm's pull count n reaches an interval
point, with Laplace noise of scale n^(v/2 - 1) added to the empirical mean s/n
(Dubey & Pentland 2020, Alg. 1 line 7; Lemma 3.5).

Interval points (decision). Lemma 3.4 of Dubey & Pentland states a series W(i) whose formula
is garbled in the text (it refers to W_{n+1} inside its own definition and to an undefined y').
We take the series of DP-UCB-INT itself, which the lemma cites: a constant interval
f = ceil(1/epsilon), so releases happen at n in {f, 2f, 3f, ...}, i.e. W(i) = i f for
i = 1, 2, ...  This is consistent with the rest of the paper: Alg. 2 plays round-robin for the
first K ceil(1/epsilon) trials (so every arm reaches its first release point f exactly when
round-robin ends), and the proof of Lemma 3.6 says a new mean is released t/f times.
``epsilon = inf`` (no privacy) gives f = 1 and no noise: every pull is released exactly.

Accounting. With sensitivity 1/n of the empirical mean of n rewards in [0, 1], a release at
count n with scale b = n^(v/2-1) is (1/n)/b = n^(-v/2) differentially private (Lemma 3.5).
:meth:`IntervalMechanism.spent` composes the releases made up to count n by basic composition,
sum_{i: i f <= n} (i f)^(-v/2); :meth:`IntervalMechanism.lemma_3_6_bound` is the bound of
Dubey & Pentland's Lemma 3.6 after t trials (t - d(m, m') for a receiver at distance d).
"""

from __future__ import annotations

import math

import numpy as np

from protocols.privacy.mechanisms import laplace_noise


class IntervalMechanism:
    """Releases noisy means at the interval points W(i) = i * ceil(1/epsilon) (see module docstring).

    Parameters
    ----------
    epsilon:
        Privacy parameter in (0, 1] of DP-UCB-INT (``inf``: no privacy, release every pull exactly).
    v:
        Privacy rate in (1, 1.5): the noise scale at count n is n^(v/2 - 1).
    """

    def __init__(self, *, epsilon: float, v: float = 1.1):
        epsilon = float(epsilon)
        if math.isnan(epsilon) or epsilon <= 0 or (epsilon > 1 and not math.isinf(epsilon)):
            raise ValueError(f"epsilon = {epsilon!r}; accepted: a number in (0, 1] or inf")
        v = float(v)
        if not 1.0 < v < 1.5:
            raise ValueError(f"v = {v!r}; accepted: a number in (1, 1.5)")
        self.epsilon = epsilon
        self.v = v
        self.private = not math.isinf(epsilon)
        self.interval = math.ceil(1.0 / epsilon) if self.private else 1  # f of DP-UCB-INT

    # ------------------------------------------------------------------ schedule
    def point(self, i: int | np.ndarray) -> int | np.ndarray:
        """W(i) = i f, the count at which the i-th release (i >= 1) happens."""
        return np.asarray(i) * self.interval if isinstance(i, np.ndarray) else int(i) * self.interval

    def is_release(self, n: int | np.ndarray) -> bool | np.ndarray:
        """True where the pull count ``n`` (>= 1) is an interval point."""
        n = np.asarray(n)
        out = (n >= 1) & (n % self.interval == 0)
        return bool(out) if out.ndim == 0 else out

    # ------------------------------------------------------------------ noise
    def scale(self, n: float | np.ndarray) -> float | np.ndarray:
        """Laplace scale n^(v/2 - 1) at count n (0 when not private)."""
        n = np.asarray(n, dtype=float)
        out = n ** (self.v / 2.0 - 1.0) if self.private else np.zeros_like(n)
        return float(out) if out.ndim == 0 else out

    def variance(self, n: float | np.ndarray) -> float | np.ndarray:
        """Variance of the released mean's noise at count n: 2 b^2 = 2 n^(v - 2)."""
        return 2.0 * np.square(self.scale(n))

    def release(self, sums: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy means s/n + Laplace(n^(v/2-1)), one independent draw per element (counts >= 1)."""
        sums = np.asarray(sums, dtype=float)
        counts = np.asarray(counts, dtype=float)
        means = sums / counts
        if not self.private or means.size == 0:
            return means
        return means + laplace_noise(rng, 1.0, means.shape) * self.scale(counts)

    # ------------------------------------------------------------------ accounting
    def epsilon_per_release(self, n: float | np.ndarray) -> float | np.ndarray:
        """Privacy of one release at count n: sensitivity 1/n over scale n^(v/2-1) = n^(-v/2) (Lemma 3.5)."""
        if not self.private:
            return np.inf if np.ndim(n) == 0 else np.full(np.shape(n), np.inf)
        n = np.asarray(n, dtype=float)
        out = n ** (-self.v / 2.0)
        return float(out) if out.ndim == 0 else out

    def spent(self, n: int | np.ndarray) -> float | np.ndarray:
        """Basic composition of the releases made up to count n: sum_{i f <= n} (i f)^(-v/2)."""
        n = np.asarray(n, dtype=np.int64)
        if not self.private:
            return np.where(n >= 1, np.inf, 0.0) if n.ndim else (math.inf if n >= 1 else 0.0)
        releases = n // self.interval
        top = int(releases.max(initial=0))
        cumulative = np.concatenate(([0.0], np.cumsum((np.arange(1, top + 1) * self.interval) ** (-self.v / 2.0))))
        out = cumulative[releases]
        return float(out) if out.ndim == 0 else out

    def lemma_3_6_bound(self, t: float, delta: float) -> float:
        """Dubey & Pentland Lemma 3.6: min(eps t^(1-v/2)/(1-v/2), 2 eps zeta(v) + sqrt(2 eps zeta(v) ln(1/delta)))."""
        if not self.private:
            return math.inf
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta = {delta!r}; accepted: a number in (0, 1)")
        eps, v = self.epsilon, self.v
        from scipy import special  # imported on first use (start-up time)

        zeta = float(special.zeta(v, 1))
        first = eps * max(t, 0.0) ** (1.0 - v / 2.0) / (1.0 - v / 2.0)
        second = 2.0 * eps * zeta + math.sqrt(2.0 * eps * zeta * math.log(1.0 / delta))
        return min(first, second)
