"""The decision rule of Gossip_UCB / Fed_UCB (zhu2021 Alg. 1 and Alg. 4) as pure functions:
confidence bounds Eq. (11) and (12), the max-count estimate Eq. (1), the consistency set
(line 6) and the arm choice (lines 7-13).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from protocols.ucb import ucb_bonus


def alpha1(num_agents: int) -> float:
    """alpha_1 = 64 / N^17 (Sec. 3.5, Theorem 1)."""
    return 64.0 / float(num_agents) ** 17


def confidence_bound(n: np.ndarray, t: int, num_agents: int, *, horizon: int = 1,
                     epsilon: float = math.inf, out: np.ndarray | None = None) -> np.ndarray:
    """C_{i,k}(t) of Eq. (11) when eps = inf, C~_{i,k}(t) of Eq. (12) otherwise.

    Eq. (11): sqrt(2 N log t / n) + alpha_1.
    Eq. (12): alpha_1 + sqrt(2 N (128 N log^2 T log t log n / (n^2 eps^2) + 1 / n) log t).

    In Eq. (12) ``log n`` is read as ``log max(n, 2)``: literally, log 1 = 0 removes the privacy
    term at n = 1, so an arm pulled once has a far *smaller* bonus than arms pulled thousands
    of times (~14 against ~30 at fig2b settings) and is never pulled again. Lemma 6's bound
    (P <= n^-2) is vacuous at n = 1 anyway; with this reading the bonus is non-increasing in n
    for every n >= 1, and it equals Eq. (12) for n >= 2.

    ``out``: an array of n's shape and dtype float to write the bound into (one per tick saves the
    allocations; the floating-point operations are the same, in the same order).
    """
    n = np.asarray(n, dtype=float)
    log_t = math.log(t)
    big_n = float(num_agents)
    if math.isinf(epsilon):
        bonus = ucb_bonus(n, t, scale=2.0 * big_n)                                          # Eq. (11)
        return np.add(bonus, alpha1(num_agents), out=bonus if out is None else out)
    # Eq. (12), evaluated as alpha_1 + sqrt(2 N (c log max(n, 2) / (n^2 eps^2) + 1 / n) log t) with
    # c = 128 N log^2 T log t, one operation at a time in place
    out = np.empty_like(n) if out is None else out
    scratch = n * n
    scratch *= epsilon**2
    np.maximum(n, 2.0, out=out)
    np.log(out, out=out)
    out *= 128.0 * big_n * math.log(horizon) ** 2 * log_t
    out /= scratch                                  # the privacy term
    out += np.divide(1.0, n, out=scratch)
    out *= 2.0 * big_n
    out *= log_t
    np.sqrt(out, out=out)
    out += alpha1(num_agents)
    return out


def neighbourhoods(graph: nx.Graph, num_agents: int) -> np.ndarray:
    """Index matrix (N x (1 + max degree)): row i lists i and its neighbours, padded with i."""
    rows = [[i] + sorted(graph.neighbors(i)) for i in range(num_agents)]
    width = max(len(r) for r in rows)
    return np.array([r + [r[0]] * (width - len(r)) for r in rows], dtype=np.int64)


def propagate_max_counts(n: np.ndarray, ntilde: np.ndarray, heard: np.ndarray) -> np.ndarray:
    """Eq. (1): ñ(t+1) = max{n(t), ñ(t), heard}, with ``heard`` the neighbours' ñ_j(t) max."""
    return np.maximum(np.maximum(n, ntilde), heard)


def neighbour_max(ntilde: np.ndarray, hood: np.ndarray) -> np.ndarray:
    """max_{j in N_i ∪ {i}} ñ_{j,k}, for every agent i and arm k (instantaneous reads); ``ntilde`` is
    N x M, or B x N x M for B trials in lockstep."""
    return ntilde[..., hood, :].max(axis=-2)


def consistency_set(n: np.ndarray, ntilde: np.ndarray, num_agents: int) -> np.ndarray:
    """A_i as a boolean N x M mask: k in A_i iff n_{i,k}(t) < ñ_{i,k}(t) - N (line 6)."""
    return n < ntilde - num_agents


def select_arms(theta: np.ndarray, bonus: np.ndarray, lagging: np.ndarray | None,
                rng: np.random.Generator | Callable[[np.ndarray], np.ndarray], *,
                forced: np.ndarray | None = None) -> np.ndarray:
    """Lines 7-13: argmax_k theta + C if A_i is empty, else a uniform arm of A_i.

    ``theta``, ``bonus``, ``lagging``: N x M (or B x N x M, B trials in lockstep). Draws M uniforms
    for each agent with a non-empty A_i (in agent order) and nothing otherwise: from ``rng``, or
    ``rng(rows)`` (the flat agent rows, B * N of them, of the forced agents, in order) gives them as a
    len(rows) x M array. ``forced``: ``lagging.any(axis=-1)`` if the caller has it already;
    ``lagging = None``: every A_i is empty.
    """
    arms = (theta + bonus).argmax(axis=-1)
    if lagging is None:
        return arms
    m = theta.shape[-1]
    forced = np.flatnonzero(lagging.any(axis=-1) if forced is None else forced)
    if len(forced):
        u = rng(forced) if callable(rng) else rng.random((len(forced), m))
        arms.reshape(-1)[forced] = np.argmax(np.where(lagging.reshape(-1, m)[forced], u, -1.0), axis=1)
    return arms


def update_means(n: np.ndarray, initial: np.ndarray, xbar: np.ndarray, counter: Any, pulled: np.ndarray, t: int,
                 rewards: np.ndarray) -> np.ndarray:
    """Lines 15-16 in place at the flat entries ``pulled`` (agent * M + arm, distinct; arrays N x M or
    B x N x M): n += 1, the pulled reward joins the sum ``counter`` releases (Alg. 3, private for
    Fed_UCB), X̃ = (X(0) + released sum of X(1..t)) / n (Eq. (2)); returns X̃(t) - X̃(t-1) there."""
    count = n.reshape(-1)[pulled]
    count += 1.0
    n.reshape(-1)[pulled] = count                                          # line 15
    released = counter.release(pulled, t, rewards, distinct=True)         # Alg. 3, X(1..t)
    new_mean = initial.reshape(-1)[pulled]
    new_mean += released
    new_mean /= count                                                      # Eq. (2)
    means = xbar.reshape(-1)
    change = new_mean - means[pulled]                                      # X̃(t) - X̃(t-1)
    means[pulled] = new_mean
    return change
