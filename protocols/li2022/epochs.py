"""The epoch schedule shared by CDP-MAB, DDP-MAB and HDP-MAB (Li & Song 2022).

Pure functions and one small state class, no engine: every formula here is the paper's,
with its algorithm line or equation in the comment, so each can be tested by hand.

References
----------
T. Li, L. Song, "Privacy-Preserving Communication-Efficient Federated Multi-Armed Bandits",
IEEE JSAC 2022: Alg. 1 (lines 3-16), Eq. (6), Sec. IV-B (S^p, C^p, Delta_r = Delta^{r/R}),
Alg. 3 (lines 3-10), Alg. 5 (lines 3-5, 14-15).

Decisions where the text leaves room (pinned by ``tests/test_li2022_rounds.py``):

* Pull counts are integers: an agent pulls every active arm ``ceil(S(r)) - ceil(S(r-1))`` times
  in epoch r (at least once). ``S(r)`` below means that integer ``ceil(S(r))`` wherever it counts
  samples: in C(r) (line 5), in the Laplace scale (line 9) and in Eq. (6).
* ``N`` (the number of participants) replaces ``M`` in lines 4, 5 and 9 exactly as S^p, C^p and
  Lap(1/(N eps [S^p(r) - S^p(r-1)])) of Sec. IV-B; without partial participation N = M.
* ``log`` is the natural logarithm (the Hoeffding step Eq. (14) needs e^{-log x} = 1/x).
* ``epsilon = inf`` means no privacy: the privacy terms of S(r) and C(r) vanish and no noise
  is drawn.
* With a round cap R, ``Delta`` in Delta_r = Delta^{r/R} is the true minimal non-zero gap of the
  instance (the paper's analysis assumes it is known); it is clipped to [1e-12, 1).

Missing records (crashes, ``docs/faults.md``). The paper assumes that every round aggregates the
N records of agents that each hold S(r) samples per active arm. When a crash leaves a record out
or an agent behind, the same formulas are applied to what was actually aggregated:

* agent i keeps its own count n_i of samples per active arm in ybar_i, and Eq. (6) becomes
  ybar_i <- n_i / (n_i + s) ybar_i + s / (n_i + s) yhat_i for an epoch of s new pulls (the paper's
  Eq. (6) when n_i = S(r-1));
* the aggregate is the pooled mean sum_j n_j ybar_j / sum_j n_j over the records j aggregated
  (line 12 when all n_j are equal; computed with weights n_j / max n so that this case is
  bit-for-bit the plain mean) (:func:`pooled_mean`);
* the confidence radius uses the totals: with n records holding n_tot samples per arm,
  C = sqrt(log(8|I|r^2 T) / (2 n_tot)) + r sqrt(8 log(8 K r^2 T)) sqrt(n) / (N eps n_tot)
  (:func:`pooled_radius`), which is line 5 when n = N and n_tot = N S(r) (then the paper's value
  is used as is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def delta_tilde(r: int, *, rounds_cap: int | None = None, min_gap: float | None = None) -> float:
    """Alg. 1 line 3: Delta_r = 2^{-r}; with a round cap R (Sec. IV-B), Delta_r = Delta^{r/R}."""
    if rounds_cap is None:
        return 2.0 ** (-r)
    gap = min(max(float(min_gap), 1e-12), 1.0 - 1e-12)
    return gap ** (r / rounds_cap)


def exploration_target(r: int, active: int, arms: int, horizon: float, participants: int, epsilon: float,
                       delta: float) -> float:
    """Alg. 1 line 4 (S^p of Sec. IV-B with N participants):

    S(r) = max{ 8 log(8 |I| r^2 T) / (N Delta_r^2),  8 r sqrt(2 log(8 K r^2 T)) / (N^1.5 eps Delta_r) }.
    """
    first = 8.0 * math.log(8.0 * active * r * r * horizon) / (participants * delta**2)
    if math.isinf(epsilon):
        return first
    second = 8.0 * r * math.sqrt(2.0 * math.log(8.0 * arms * r * r * horizon)) / (participants**1.5 * epsilon * delta)
    return max(first, second)


def confidence_radius(r: int, active: int, arms: int, horizon: float, participants: int, epsilon: float,
                      samples: float) -> float:
    """Alg. 1 line 5 (C^p of Sec. IV-B):

    C(r) = sqrt(log(8 |I| r^2 T) / (2 N S(r))) + r sqrt(8 log(8 K r^2 T)) / (N^1.5 eps S(r)).
    """
    c = math.sqrt(math.log(8.0 * active * r * r * horizon) / (2.0 * participants * samples))
    if math.isinf(epsilon):
        return c
    h = r * math.sqrt(8.0 * math.log(8.0 * arms * r * r * horizon)) / (participants**1.5 * epsilon * samples)
    return c + h


def pooled_radius(r: int, active: int, arms: int, horizon: float, participants: int, epsilon: float, *,
                  total: int, records: int) -> float:
    """C(r) of line 5 recomputed for ``records`` records holding ``total`` samples per active arm.

    C = sqrt(log(8 |I| r^2 T) / (2 n_tot)) + r sqrt(8 log(8 K r^2 T)) sqrt(n) / (N eps n_tot): the
    Hoeffding term of n_tot pooled samples, and the paper's privacy term for the sum of the n
    records' Laplace draws of scale 1/(N eps) per epoch (equal to line 5 when n = N, n_tot = N S(r)).
    """
    c = math.sqrt(math.log(8.0 * active * r * r * horizon) / (2.0 * total))
    if math.isinf(epsilon):
        return c
    return c + r * math.sqrt(8.0 * math.log(8.0 * arms * r * r * horizon)) * math.sqrt(records) / (
        participants * epsilon * total)


def pooled_mean(records: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pooled mean sum_j n_j ybar_j / sum_j n_j of the rows of ``records`` (counts n_j > 0).

    The weights are n_j / max n: with equal counts they are exactly 1.0 and the result is the
    plain mean of line 12 bit for bit.
    """
    weights = np.asarray(counts, dtype=float)
    weights = weights / weights.max()
    return (weights[:, None] * records).sum(axis=0) / weights.sum()


def laplace_scale(participants: int, epsilon: float, new_pulls: int) -> float:
    """Alg. 1 line 9: the Laplace scale 1 / (N eps [S(r) - S(r-1)]) (0 when eps = inf)."""
    if math.isinf(epsilon):
        return 0.0
    return 1.0 / (participants * epsilon * new_pulls)


def historical_mean(previous: np.ndarray, s_prev: int, s_now: int, fresh: np.ndarray) -> np.ndarray:
    """Eq. (6) / Alg. 1 line 10: ybar(r) = S(r-1)/S(r) ybar(r-1) + (S(r)-S(r-1))/S(r) yhat(r)."""
    return (s_prev / s_now) * previous + ((s_now - s_prev) / s_now) * fresh


def eliminate(active: np.ndarray, aggregate: np.ndarray, radius: float) -> np.ndarray:
    """Alg. 1 lines 13-15: keep arm k unless ybar_max(r) - ybar_k(r) >= 2 C(r).

    ``active`` is a boolean mask over all K arms; ``aggregate`` holds ybar_k(r) (only active
    entries are read). Returns the new mask I^(r).
    """
    values = np.where(active, aggregate, -np.inf)
    best = values.max()
    return active & ~(best - values >= 2.0 * radius)


@dataclass(frozen=True)
class EpochPlan:
    """What epoch r asks of every agent: pull each active arm ``pulls`` times, then communicate."""

    r: int
    delta: float          # Delta_r (line 3)
    target: float         # S(r) as a real number (line 4)
    samples: int          # ceil(S(r)): samples per active arm after epoch r
    pulls: int            # samples - S(r-1): new pulls per active arm in epoch r (line 7)
    radius: float         # C(r) (line 5)
    noise_scale: float    # Laplace scale of line 9


@dataclass(frozen=True)
class EpochSchedule:
    """The epoch schedule of Alg. 1/3/5 for one instance (frozen parameters).

    Parameters
    ----------
    arms: K.  horizon: T.  participants: N = ceil(pM) (M without partial participation).
    epsilon: privacy level.  rounds_cap: R (None: Delta_r = 2^{-r}).  min_gap: Delta (only with R).
    """

    arms: int
    horizon: float
    participants: int
    epsilon: float
    rounds_cap: int | None = None
    min_gap: float | None = None

    def plan(self, r: int, active: int, samples_before: int) -> EpochPlan:
        """The plan of epoch ``r`` with ``active`` = |I^(r-1)| arms and S(r-1) = ``samples_before``."""
        delta = delta_tilde(r, rounds_cap=self.rounds_cap, min_gap=self.min_gap)
        target = exploration_target(r, active, self.arms, self.horizon, self.participants, self.epsilon, delta)
        samples = max(math.ceil(target), samples_before + 1)
        pulls = samples - samples_before
        radius = confidence_radius(r, active, self.arms, self.horizon, self.participants, self.epsilon, samples)
        scale = laplace_scale(self.participants, self.epsilon, pulls)
        return EpochPlan(r, delta, target, samples, pulls, radius, scale)


class PrivateMeans:
    """Per-agent learning state of the elimination algorithms, vectorised over M agents.

    ``own_sums`` (M x K) are an agent's own reward sums (non-private, never sent; they choose
    the local empirical best arm during communication rounds) and ``own_counts`` their numbers of
    pulls. ``private`` (M x K) is the historical private mean ybar_{i,k}(r) of Eq. (6), the only
    thing an agent ever sends, and ``counts`` (M,) the number n_i of samples per active arm it
    holds (S(r-1) for every agent unless crashes left some behind; see the module docstring).
    ``samples`` is S(r-1) of the epoch schedule.
    """

    def __init__(self, num_agents: int, num_arms: int):
        self.own_sums = np.zeros((num_agents, num_arms))
        self.own_counts = np.zeros((num_agents, num_arms))
        self.private = np.zeros((num_agents, num_arms))
        self.counts = np.zeros(num_agents, dtype=np.int64)
        self.samples = 0  # S(r-1): exploration samples per active arm so far (the schedule's)

    def update(self, sums: np.ndarray, active: np.ndarray, plan: EpochPlan, noise: np.ndarray, *,
               rows: np.ndarray | None = None, pulled: np.ndarray | None = None) -> None:
        """Close epoch r: ``sums`` (M x K) are this epoch's reward sums of ``plan.pulls`` pulls per active arm.

        xhat = sums / pulls (line 8); yhat = xhat + noise (line 9, ``noise`` drawn by the caller
        with scale ``plan.noise_scale``); ybar by Eq. (6) with each agent's own count n_i (line 10).
        Only the agents of the boolean mask ``rows`` (default: all) privatise; the others keep
        ybar and n_i. Every agent's own statistics grow by what it pulled: ``pulled`` (M x K,
        default ``plan.pulls`` on the active arms). Inactive arms are left alone.
        """
        xhat = sums / plan.pulls
        yhat = xhat + noise
        n = self.counts[:, None]
        updated = historical_mean(self.private, n, n + plan.pulls, yhat)
        self.private = np.where(active if rows is None else active & rows[:, None], updated, self.private)
        if rows is None:
            self.counts += plan.pulls
        else:
            self.counts[rows] += plan.pulls
        self.own_sums += np.where(active, sums, 0.0)
        self.own_counts += np.where(active, plan.pulls, 0) if pulled is None else pulled
        self.samples = plan.samples

    def forget(self, agent: int) -> None:
        """``agent`` lost its state (crash with ``state = "lost"``): it starts again with no sample."""
        self.own_sums[agent] = 0.0
        self.own_counts[agent] = 0.0
        self.private[agent] = 0.0
        self.counts[agent] = 0

    def local_best(self, active: np.ndarray) -> np.ndarray:
        """Each agent's local empirical best active arm (own rewards only; ties to the lowest index).

        ``active``: the active set (K,) of every agent, or one row per agent (M, K). An agent with
        no own sample of any active arm (a fresh learner after a crash) pulls its first active arm.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self.own_counts > 0, self.own_sums / np.maximum(self.own_counts, 1), -np.inf)
        means = np.where(active, means, -np.inf)
        best = np.argmax(means, axis=1)
        blank = np.isneginf(means[np.arange(len(best)), best])
        if blank.any():
            best[blank] = np.argmax(active[blank], axis=1) if active.ndim == 2 else int(np.argmax(active))
        return best
