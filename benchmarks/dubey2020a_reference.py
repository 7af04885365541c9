"""An independent plain-numpy reference of dubey2020a's Private Multi-Agent UCB (Alg. 1 + Alg. 2).

No netsim code: a loop over trials, the LOCAL protocol reduced to what it delivers (agent m
reads, at trial t, the record agent m' created at trial t - lag[m, m'], its latest one) and a
ring buffer of the records of the last ``lag.max()`` trials. It is the yardstick for
``dubey2020a-private`` (tests/test_dubey2020a_reference.py) and the laboratory of the delay study
(benchmarks/dubey2020a_delay.py), where the lag matrix is changed to take the LOCAL protocol's
timing apart.

Model, written from the paper (Dubey & Pentland, AAMAS 2020, /work/shared/seeds):

* Trial t = 1 .. T. Alg. 2: arm t mod K while t <= K f (f = ceil(1/epsilon)), then
  argmax_k mu_k + sqrt(2 ln t / N_k) (an arm with N_k = 0 first, ties to the lowest index).
* Alg. 1 l. 22-33: N_k = n_k + sum_{m'} a'_k, mu_k = (s_k + sum_{m'} a'_k x'_k) / N_k over the
  latest record x', a' of every agent m' it hears (its own exact s, n; its own record not again).
* Alg. 1 l. 3-12: after the pull, the own sums; when n_k reaches a multiple of f the released
  mean of k becomes s_k / n_k + Laplace(n_k^(v/2 - 1)) (no noise with epsilon = inf, f = 1).
* Eq. 6: the record of trial t is the released means with, per arm, the count now
  (``"current"``) or the count at the release (``"released"``); an arm never released has count 0.
* LOCAL messages of life gamma with a constant per-hop delay of ``delay`` trials: the record m'
  creates at trial s is read by m from trial s + delay d(m, m') on, if 1 <= d(m, m') <= gamma
  (:func:`hop_lags`). Any other integer lag matrix may be given (0: never heard).

Random numbers: ``uniforms[m, j]`` is the uniform of agent m's j-th pull (reward = u < mu_k), and
the Laplace draws of a trial are ``noise.laplace(0, 1, r)`` for its r releases in increasing agent
order, scaled by n^(v/2 - 1). Fed netsim's streams (``("rewards", m)`` plus 2^-54, ``"privacy"``),
it makes netsim's draws; fed its own, it is an independent sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def hop_distances(adjacency: np.ndarray) -> np.ndarray:
    """Shortest-path hop counts by breadth-first search on a boolean adjacency matrix (inf: unreachable)."""
    m = len(adjacency)
    adjacency = np.asarray(adjacency, dtype=bool)
    dist = np.full((m, m), np.inf)
    np.fill_diagonal(dist, 0)
    frontier = np.eye(m, dtype=bool)
    seen = frontier.copy()
    d = 0
    while frontier.any():
        d += 1
        frontier = (frontier.astype(np.int64) @ adjacency.astype(np.int64) > 0) & ~seen
        dist[frontier] = d
        seen |= frontier
    return dist


def hop_lags(adjacency: np.ndarray, gamma: int, delay: int) -> np.ndarray:
    """lag[m, m'] = delay d(m, m') for 1 <= d <= gamma, else 0 (not heard): LOCAL with a constant hop delay."""
    dist = hop_distances(adjacency)
    heard = (dist >= 1) & (dist <= gamma)
    return np.where(heard, delay * np.where(heard, dist, 0), 0).astype(np.int64)


@dataclass
class Run:
    """What a reference run leaves: per-agent pseudo-regret, the arms (T x M), the releases."""

    regret: np.ndarray
    arms: np.ndarray
    releases: list[tuple[int, int, int, float]]  # (trial, agent, arm, noise added)

    @property
    def group_regret(self) -> float:
        return float(self.regret.sum())


def simulate(lags: np.ndarray, means: np.ndarray, horizon: int, *, epsilon: float, v: float, record_counts: str,
             uniforms: np.ndarray, noise: np.random.Generator | None,
             later: tuple[int, np.ndarray] | None = None, refresh: str = "pulls") -> Run:
    """Run Private Multi-Agent UCB for ``horizon`` trials; see the module docstring for the model.

    ``noise = None`` releases exact means at the same interval points (the privacy noise removed,
    the schedule kept). ``later = (t0, lags2)`` reads with the lag matrix ``lags2`` from trial t0 on
    (a change of timing in the middle of a run, to locate when a timing effect accrues).
    ``refresh = "clock"`` is a laboratory variant, not the paper: instead of releasing an arm when its
    count reaches a multiple of f (``"pulls"``, Alg. 1 l. 6), every agent releases every arm it has
    pulled at every f-th trial, so how long a released draw stays an agent's latest (f trials) no
    longer depends on the agents' choices (its Laplace draws: ``noise.laplace(0, 1, (M, K))`` per
    such trial, unpulled arms' draws unused).
    """
    lags = np.asarray(lags, dtype=np.int64)
    m, k = len(lags), len(means)
    means = np.asarray(means, dtype=float)
    gaps = means.max() - means
    private = not math.isinf(epsilon)
    f = math.ceil(1.0 / epsilon) if private else 1
    switch, lags2 = (horizon + 1, lags) if later is None else (later[0], np.asarray(later[1], dtype=np.int64))
    depth = int(max(lags.max(initial=0), lags2.max(initial=0))) + 1
    # ring buffer of records: slot s % depth holds [counts | counts * means] (M x 2K) published at trial s
    past = np.zeros((depth, m, 2 * k))

    def split(matrix: np.ndarray) -> list[tuple[int, np.ndarray]]:  # one 0/1 reading matrix per distinct lag
        return [(int(lag), (matrix == lag).astype(float)) for lag in np.unique(matrix[matrix > 0])]

    ways, ways2 = split(lags), split(lags2)
    n = np.zeros((m, k))
    s = np.zeros((m, k))
    released = np.zeros((m, k))
    at_release = np.zeros((m, k))
    regret = np.zeros(m)
    arms_log = np.zeros((horizon, m), dtype=np.int8)
    releases = []
    everyone = np.arange(m)
    for t in range(1, horizon + 1):
        if t <= k * f:
            arms = np.full(m, t % k)
        else:
            heard = np.zeros((m, 2 * k))
            for lag, who in (ways if t < switch else ways2):
                if t - lag >= 1:
                    heard += who @ past[(t - lag) % depth]
            total = n + heard[:, :k]
            with np.errstate(divide="ignore", invalid="ignore"):
                index = (s + heard[:, k:]) / total + np.sqrt(2.0 * math.log(t) / total)
            arms = np.argmax(np.where(total > 0, index, np.inf), axis=1)
        arms_log[t - 1] = arms
        rewards = (uniforms[everyone, n.sum(axis=1).astype(np.int64)] < means[arms]).astype(float)
        regret += gaps[arms]
        n[everyone, arms] += 1
        s[everyone, arms] += rewards
        if refresh == "clock":
            z = noise.laplace(0.0, 1.0, (m, k)) if t % f == 0 and private and noise is not None else np.zeros((m, k))
            who, arm = np.nonzero(n > 0) if t % f == 0 else (everyone[:0], everyone[:0])
            z = z[who, arm]
        else:
            hit = n[everyone, arms] % f == 0
            who, arm = everyone[hit], arms[hit]
            z = noise.laplace(0.0, 1.0, len(who)) if private and noise is not None else np.zeros(len(who))
        released[who, arm] = s[who, arm] / n[who, arm] + z * n[who, arm] ** (v / 2.0 - 1.0)
        at_release[who, arm] = n[who, arm]
        releases.extend(zip([t] * len(who), who.tolist(), arm.tolist(), z.tolist()))
        paired = at_release if record_counts == "released" else np.where(at_release > 0, n, 0.0)
        past[t % depth, :, :k] = paired
        past[t % depth, :, k:] = paired * released
    return Run(regret, arms_log, releases)


def half_diameter(adjacency: np.ndarray) -> int:
    """max(1, floor(D / 2)) of a connected graph (the paper's gamma = diameter / 2)."""
    return max(1, int(hop_distances(adjacency).max()) // 2)


def draw_instance(rng: np.random.Generator, agents: int, p: float, arms: int, horizon: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.random.Generator]:
    """An independent draw of the Fig. 1(a) setting: G(agents, p) conditioned on being connected (by
    rejection), arm means U[0, 1], the reward uniforms and a Laplace stream. Returns
    (adjacency, means, uniforms, noise)."""
    while True:
        upper = np.triu(rng.random((agents, agents)) < p, 1)
        adjacency = upper | upper.T
        if np.isfinite(hop_distances(adjacency)).all():
            break
    means = rng.uniform(0.0, 1.0, arms)
    return adjacency, means, rng.random((agents, horizon)), np.random.default_rng(rng.integers(2**63))
