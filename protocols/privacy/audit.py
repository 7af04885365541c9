"""Empirical privacy audit: a lower confidence bound on the privacy loss of a randomised function.

A mechanism M claims (eps, delta)-DP: for neighbouring inputs D, D' and every output event S,
P[M(D) in S] <= e^eps P[M(D') in S] + delta. The audit runs M many times on D and on D' with
seeded, independent streams and looks for an event S that breaks this with confidence.

Method (the one-shot test of Jagielski et al. 2020 / Nasr et al. 2021, with a held-out sample):

1. An :class:`AuditTarget` maps (parameters, trials, rng) to one real *statistic* per trial of
   the mechanism's output on D and on D' (the output itself when it is a number, otherwise a
   likelihood-ratio statistic of the output, or a count such as a synchronisation time). Events
   are the one-sided sets {T >= c} and {T <= c}; for a statistic that is monotone in the
   likelihood ratio these are the Neyman-Pearson optimal events, so nothing is lost by not
   searching over all histogram unions.
2. *Selection.* ``trials`` runs on D and on D' (streams 0 and 1 of ``SeedSequence(seed)``): for
   every candidate threshold (the distinct values, or 256 quantiles of the pooled sample) and
   both directions (D over D' and D' over D), the lower bound of step 3 is computed on this
   sample; the event with the largest bound is kept.
3. *Estimation.* ``trials`` fresh runs on D and on D' (streams 2 and 3). With k, k' the counts
   of the chosen event, Clopper-Pearson one-sided bounds at level 1 - a/2 each (a = 1 -
   confidence; the union bound gives joint level 1 - a) give p_lo <= P[M(D) in S] and
   p'_hi >= P[M(D') in S], and

       eps_lo = log((p_lo - delta) / p'_hi)   (0 when p_lo <= delta),
       eps_hat = log((k/n - delta) / (k'/n))  (the point estimate for the same event).

   If the mechanism is (eps, delta)-DP then P[eps_lo > eps] <= a: the selected event is fixed
   before the estimation sample is drawn, so no correction for the search is needed.

The verdict is ``VIOLATED`` when eps_lo exceeds the claimed eps. A target may also give ``exact``:
the true privacy loss of the audited pair under the claimed calibration, when it has a closed form;
an eps_lo above it (but below the claim) is ``MISCALIBRATED``: a mechanism far below its claim
(FedUCB's privatizer) could otherwise lose most of its noise and still pass. Otherwise ``ok``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.comm import audit_targets

Sampler = Callable[[Mapping[str, Any], int, np.random.Generator, bool], np.ndarray]


@dataclass(frozen=True)
class AuditTarget:
    """One mechanism to audit.

    ``sample(params, trials, rng, neighbour)`` returns ``trials`` statistics of the mechanism's
    output on D (``neighbour=False``) or on D' (``True``), drawing only from ``rng``.
    ``claim(params)`` returns the claimed (eps, delta) for that pair of inputs. ``epsilon`` is
    the default of ``params["epsilon"]`` (the mechanism's privacy parameter, which the claim
    derives from); ``defaults`` holds any other parameter. ``neighbours`` states D and D' and
    ``source`` the paper's privacy statement.
    """

    name: str
    description: str
    neighbours: str
    source: str
    sample: Sampler
    claim: Callable[[Mapping[str, Any]], tuple[float, float]]
    epsilon: float = 1.0
    epsilon_range: tuple[float, float] = (0.0, math.inf)   # accepted eps: low < eps <= high
    defaults: Mapping[str, Any] = field(default_factory=dict)
    exact: Callable[[Mapping[str, Any]], float] | None = None
    #: at most this many trials per input and phase (targets that run a whole protocol per trial are slow);
    #: the result's ``trials`` says how many were run
    max_trials: int | None = None

    def run(self, *, epsilon: float | None = None, trials: int = 100_000, seed: int = 0,
            confidence: float = 0.95) -> AuditResult:
        """:func:`run_audit` of this target (the entry point ``netsim audit`` calls through the registry)."""
        return run_audit(self, epsilon=epsilon, trials=trials, seed=seed, confidence=confidence)

    def params(self, epsilon: float | None = None) -> dict[str, Any]:
        eps = self.epsilon if epsilon is None else float(epsilon)
        low, high = self.epsilon_range
        if not (low < eps <= high) or math.isnan(eps):
            raise ValueError(f"epsilon = {eps!r}; accepted for {self.name}: a number in ({low:g}, {high:g}]")
        return {**self.defaults, "epsilon": eps}


@dataclass(frozen=True)
class AuditResult:
    name: str
    claimed_epsilon: float
    delta: float
    epsilon_hat: float
    epsilon_lo: float
    confidence: float
    trials: int
    event: str
    counts: tuple[int, int]
    exact: float | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    @property
    def verdict(self) -> str:
        """``VIOLATED`` when eps_lo exceeds the claimed eps; ``MISCALIBRATED`` when it stays below the claim
        but exceeds the exact loss of the audited pair (the code releases more than the mechanism it claims
        to be: less noise, more releases); else ``ok``. Each flag is wrong with probability at most
        1 - confidence when the code is what it claims."""
        if self.epsilon_lo > self.claimed_epsilon:
            return "VIOLATED"
        if self.exact is not None and self.epsilon_lo > self.exact:
            return "MISCALIBRATED"
        return "ok"

    def row(self) -> dict[str, Any]:
        return {"mechanism": self.name, "claimed_epsilon": self.claimed_epsilon, "delta": self.delta,
                "epsilon_hat": self.epsilon_hat, "epsilon_lo": self.epsilon_lo, "exact": self.exact,
                "confidence": self.confidence, "trials": self.trials, "event": self.event,
                "counts": list(self.counts), "verdict": self.verdict}


# ---------------------------------------------------------------------- Clopper-Pearson
def cp_lower(k: np.ndarray | int, n: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound on p from k successes in n trials (P[p >= bound] >= level)."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        from scipy import stats  # imported on first use (start-up time)

        out = stats.beta.ppf(1.0 - level, k, n - k + 1.0)
    return np.where(k <= 0, 0.0, out)


def cp_upper(k: np.ndarray | int, n: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound on p from k successes in n trials."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        from scipy import stats

        out = stats.beta.ppf(level, k + 1.0, n - k)
    return np.where(k >= n, 1.0, out)


def epsilon_lower(k: np.ndarray, k_other: np.ndarray, n: int, delta: float, level: float) -> np.ndarray:
    """log((p_lo - delta) / p'_hi) from counts on the two sides (0 where p_lo <= delta)."""
    lo = cp_lower(k, n, level) - delta
    hi = cp_upper(k_other, n, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.where(lo > 0, lo, 1.0) / hi)
    return np.where(lo > 0, np.maximum(out, 0.0), 0.0)


def epsilon_point(k: int, k_other: int, n: int, delta: float) -> float:
    """log((k/n - delta) / (k'/n)); inf when k' = 0 < k/n - delta, 0 when k/n <= delta."""
    top = k / n - delta
    if top <= 0:
        return 0.0
    if k_other == 0:
        return math.inf
    return max(math.log(top / (k_other / n)), 0.0)


# ---------------------------------------------------------------------- events
def _thresholds(a: np.ndarray, b: np.ndarray, grid: int = 256) -> np.ndarray:
    pooled = np.concatenate([a, b])
    values = np.unique(pooled)
    if len(values) <= 2 * grid:
        return values
    return np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, grid + 1)))


def _counts(sample: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(#{T >= c}, #{T <= c}) for every cut c."""
    s = np.sort(sample)
    n = len(s)
    ge = n - np.searchsorted(s, cuts, side="left")
    le = np.searchsorted(s, cuts, side="right")
    return ge, le


def select_event(a: np.ndarray, b: np.ndarray, delta: float, level: float) -> tuple[float, str, bool]:
    """The event (cut, ">=" or "<=", swapped) with the largest eps lower bound on the selection sample.

    ``swapped`` means the event favours D' (the ratio P[M(D') in S] / P[M(D) in S] is bounded).
    """
    n = len(a)
    cuts = _thresholds(a, b)
    a_ge, a_le = _counts(a, cuts)
    b_ge, b_le = _counts(b, cuts)
    best = (-1.0, float(cuts[0]), ">=", False)
    for side, ka, kb in ((">=", a_ge, b_ge), ("<=", a_le, b_le)):
        for swapped, k, k_other in ((False, ka, kb), (True, kb, ka)):
            bounds = epsilon_lower(k, k_other, n, delta, level)
            i = int(np.argmax(bounds))
            if bounds[i] > best[0]:
                best = (float(bounds[i]), float(cuts[i]), side, swapped)
    return best[1], best[2], best[3]


def _in_event(sample: np.ndarray, cut: float, side: str) -> int:
    return int(np.count_nonzero(sample >= cut if side == ">=" else sample <= cut))


def streams(seed: int) -> list[np.random.Generator]:
    """Four independent generators: selection on D, D'; estimation on D, D'."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]


def run_audit(target: AuditTarget, *, epsilon: float | None = None, trials: int = 100_000, seed: int = 0,
              confidence: float = 0.95) -> AuditResult:
    """Audit ``target`` with ``trials`` runs per input and phase (see the module docstring)."""
    if trials < 10:
        raise ValueError(f"trials = {trials}; accepted: an integer >= 10")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence = {confidence}; accepted: a number in (0, 1)")
    params = target.params(epsilon)
    if target.max_trials is not None:
        trials = min(trials, target.max_trials)
    claimed, delta = target.claim(params)
    level = 1.0 - (1.0 - confidence) / 2.0
    sel_d, sel_n, est_d, est_n = streams(seed)
    a = np.asarray(target.sample(params, trials, sel_d, False), dtype=float).ravel()
    b = np.asarray(target.sample(params, trials, sel_n, True), dtype=float).ravel()
    cut, side, swapped = select_event(a, b, delta, level)
    a = np.asarray(target.sample(params, trials, est_d, False), dtype=float).ravel()
    b = np.asarray(target.sample(params, trials, est_n, True), dtype=float).ravel()
    k, k_other = _in_event(a, cut, side), _in_event(b, cut, side)
    if swapped:
        k, k_other = k_other, k
    lo = float(epsilon_lower(np.array([k]), np.array([k_other]), trials, delta, level)[0])
    hat = epsilon_point(k, k_other, trials, delta)
    first, second = ("D'", "D") if swapped else ("D", "D'")
    event = f"T {side} {cut:.4g}, {first} over {second}"
    exact = target.exact(params) if target.exact is not None else None
    return AuditResult(name=target.name, claimed_epsilon=claimed, delta=delta, epsilon_hat=hat, epsilon_lo=lo,
                       confidence=confidence, trials=trials, event=event, counts=(k, k_other), exact=exact)


# ---------------------------------------------------------------------- report
def format_table(results: list[AuditResult]) -> str:
    """A fixed-width table: mechanism, claimed eps (delta), eps_hat, eps_lo, exact, verdict."""
    head = f"{'mechanism':<22} {'claimed eps':>11} {'delta':>7} {'eps_hat':>8} {'eps_lo':>8} {'exact':>7}  verdict"
    lines = [head, "-" * len(head)]
    for r in results:
        exact = "-" if r.exact is None else f"{r.exact:.3f}"
        lines.append(f"{r.name:<22} {r.claimed_epsilon:>11.4g} {r.delta:>7.3g} {r.epsilon_hat:>8.3f} "
                     f"{r.epsilon_lo:>8.3f} {exact:>7}  {r.verdict}")
    if results:
        lines.append(f"eps_lo: lower bound at {results[0].confidence:.0%} confidence, "
                     f"{results[0].trials} trials per input and phase; VIOLATED: eps_lo > claimed eps; "
                     "MISCALIBRATED: eps_lo > exact")
    return "\n".join(lines)


# ---------------------------------------------------------------------- helpers for targets
def register(target: AuditTarget) -> AuditTarget:
    audit_targets.register(target.name)(target)
    return target


def laplace_loss(y: np.ndarray, mean_d: np.ndarray | float, mean_n: np.ndarray | float,
                 scale: np.ndarray | float) -> np.ndarray:
    """Privacy loss log p_D(y) / p_D'(y) of Laplace outputs, summed over the last axis.

    Rounded to 9 decimals: the loss takes its extreme values on whole intervals of y, where
    floating-point rounding would otherwise split ties at random and bias threshold events.
    """
    loss = (np.abs(y - mean_n) - np.abs(y - mean_d)) / scale
    return np.round(loss.sum(axis=-1) if np.ndim(loss) > 1 else loss, 9)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact eps(delta) of a Gaussian mechanism whose privacy loss is N(mu^2/2, mu^2) (Balle & Wang 2018)."""
    from scipy import optimize, stats  # imported on first use (start-up time)

    def excess(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    if excess(0.0) <= 0:
        return 0.0
    high = 1.0
    while excess(high) > 0:
        high *= 2.0
    return float(optimize.brentq(excess, 0.0, high))
