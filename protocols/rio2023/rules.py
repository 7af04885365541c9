"""Pure decision rules of Rio et al. (2023), "Multi-Agent Best Arm Identification with Private
Communications" (ICML 2023): thresholds, epoch lengths and local elimination steps.

Nothing here touches the engine; :mod:`protocols.rio2023` wires these rules to it.

Formulas (numbers are the paper's):

* Voting threshold of DP-MASE, Prop. 4.2: ``M = ceil(log delta / log beta)``.
* Local failure probability of CORRUPTED ELIMINATION, Prop. 5.1 / Eq. (13):
  ``eta_xi = max(0, 1 - (1 - eta) / (1 - xi)^(K - 1))``, and its voting threshold
  ``M = ceil(log delta / log eta_xi)`` (Sec. 5.3 / Prop. 5.3 / Sec. 6.3 "threshold effect";
  Alg. 3's header writes ``log eta``, the text and Prop. 5.3 use ``eta_xi``: we use ``eta_xi``,
  which is ``eta`` when ``xi = 0``, i.e. Feraud et al. 2019).
* DP-MASE epoch length, Sec. 4.2 (from Sajed & Sheffet 2019):
  ``R(e) = ceil(max(32 log(8 |K^n| e^2 / beta) / 2^(-2e), 8 log(4 |K^n| e^2 / beta) / (eps 2^(-e))))``.
* DP-MASE local elimination, appendix Alg. 4 (DP-MASE Local Elimination):
  ``h(e) = sqrt(log(8 |K^n| e^2 / beta) / (2 R(e)))``, ``c(e) = log(4 |K^n| e^2 / beta) / (eps R(e))``,
  perturbed means ``mu~ = mu^ + Lap(1 / (eps R(e)))``; arm k is eliminated when
  ``max_l mu~_l - mu~_k > 2 (h(e) + c(e))``.
* CORRUPTED ELIMINATION local elimination, appendix Alg. 4 (CORRUPTED ELIMINATION Local
  Elimination): arm k is eliminated at local step t when
  ``max_l mu^_l - mu^_k >= 2 sqrt(log(K t^2 / eta_xi) / t)``.

Decisions where the text is garbled (each pinned by a test in ``tests/test_rio2023.py``):

1. Epochs are numbered from 1. Alg. 2 initialises ``e^n = 0`` but every formula of R, h and c
   contains ``log(... e^2 ...)``, which is ``-inf`` at ``e = 0``; Sajed & Sheffet (2019), whose
   schedule the paper copies, start at ``e = 1`` (``Delta_1 = 1/2``). So the first epoch is e = 1.
2. R(e) is rounded up to an integer (it counts rounds).
3. The garbled radius ``log(K t^{n/2} / eta_xi)`` of the CE subroutine is read as
   ``log(K (t^n)^2 / eta_xi)``: the successive-elimination radius ``sqrt(log(c K t^2 / beta) / t)``
   of Sec. 4.1 with ``c = 1``, ``K`` the total number of arms and ``t = t^n`` the agent's local step.
   The same radius (with ``delta`` in place of ``eta_xi``) is used by the CENTRAL and INDEPENDENT
   baselines, which Sec. 6 describes as plain SUCCESSIVE ELIMINATION.
"""

from __future__ import annotations

import math

import numpy as np


# ---------------------------------------------------------------------- thresholds
def voting_threshold(delta: float, local_failure: float) -> int:
    """``M = ceil(log delta / log p)`` for local failure probability ``p`` (Prop. 4.2, Sec. 5.1).

    A global elimination needs ``lambda_k > M`` votes (Alg. 1-3). ``p = 0`` gives M = 0.
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta = {delta!r}; accepted: 0 < delta < 1")
    if not 0.0 <= local_failure < 1.0:
        raise ValueError(f"local failure probability = {local_failure!r}; accepted: 0 <= p < 1")
    if local_failure == 0.0:
        return 0
    return math.ceil(math.log(delta) / math.log(local_failure))


def eta_xi(eta: float, xi: float, num_arms: int) -> float:
    """Local failure probability of CORRUPTED ELIMINATION, Prop. 5.1 Eq. (13)."""
    return max(0.0, 1.0 - (1.0 - eta) / (1.0 - xi) ** (num_arms - 1))


# ---------------------------------------------------------------------- DP-MASE (Alg. 2 and 4)
def epoch_length(epoch: int, num_active: int, epsilon: float, beta: float) -> int:
    """R(e) of Sec. 4.2 (Sajed & Sheffet 2019), rounded up; ``epsilon = inf`` drops the DP term."""
    if epoch < 1:
        raise ValueError("epochs are numbered from 1 (see module docstring, decision 1)")
    e2 = float(epoch) ** 2
    sampling = 32.0 * math.log(8.0 * num_active * e2 / beta) / 2.0 ** (-2 * epoch)
    privacy = 0.0 if math.isinf(epsilon) else 8.0 * math.log(4.0 * num_active * e2 / beta) / (epsilon * 2.0 ** (-epoch))
    return math.ceil(max(sampling, privacy))


def dp_radii(epoch: int, num_active: int, length: int, epsilon: float, beta: float) -> tuple[float, float]:
    """``(h(e), c(e))`` of appendix Alg. 4 (DP-MASE Local Elimination), lines 4-5."""
    e2 = float(epoch) ** 2
    h = math.sqrt(math.log(8.0 * num_active * e2 / beta) / (2.0 * length))
    c = 0.0 if math.isinf(epsilon) else math.log(4.0 * num_active * e2 / beta) / (epsilon * length)
    return h, c


def dp_local_elimination(noisy_means: np.ndarray, active: np.ndarray, h: float, c: float) -> np.ndarray:
    """Alg. 4 (DP-MASE) line 8: active arms k with ``max_l mu~_l - mu~_k > 2 (h + c)``.

    ``noisy_means`` are the Laplace-perturbed epoch means (line 6); returns a boolean mask.
    """
    best = np.max(np.where(active, noisy_means, -np.inf))
    return active & (best - noisy_means > 2.0 * (h + c))


# ---------------------------------------------------------------------- successive elimination
def se_radius(t: np.ndarray | float, num_arms: int, failure: float) -> np.ndarray | float:
    """``alpha(t) = sqrt(log(K t^2 / p) / t)`` (Sec. 4.1 with c = 1; CE Alg. 4 line 5, decision 3)."""
    t = np.asarray(t, dtype=float)
    return np.sqrt(np.log(num_arms * t * t / failure) / t)


def se_bound(t: np.ndarray | float, num_arms: int, failure: float) -> np.ndarray | float:
    """The elimination threshold on *sums*: ``2 t alpha(t) = 2 sqrt(t log(K t^2 / p))``, increasing in t."""
    t = np.asarray(t, dtype=float)
    return 2.0 * np.sqrt(t * np.log(num_arms * t * t / failure))


def se_bound_at(t: float, num_arms: int, failure: float) -> float:
    """:func:`se_bound` at one step ``t`` (a Python float: no array is made)."""
    return 2.0 * math.sqrt(t * math.log(num_arms * t * t / failure))


def se_local_elimination(sums: np.ndarray, active: np.ndarray, t: np.ndarray, num_arms: int,
                         failure: float) -> np.ndarray:
    """CE Alg. 4 line 5, vectorised over agents (rows): active arms k with
    ``max_l mu^_l - mu^_k >= 2 alpha(t)`` where every active arm has ``t`` samples.

    Compared on sums (``max_l S_l - S_k >= 2 t alpha(t)``), which is the same inequality.
    """
    sums = np.atleast_2d(sums)
    active = np.atleast_2d(active)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    best = np.max(np.where(active, sums, -np.inf), axis=1)
    return active & ((best[:, None] - sums) >= se_bound(t, num_arms, failure)[:, None])


def se_eliminated(sums: np.ndarray, arms: np.ndarray, t: int, num_arms: int, failure: float) -> np.ndarray:
    """:func:`se_local_elimination` for one agent: the arms of ``arms`` (its active set) it
    eliminates at local step ``t`` (same inequality, scalar threshold; the engine's hot path)."""
    values = sums[arms]
    return arms[np.maximum.reduce(values) - values >= se_bound_at(t, num_arms, failure)]


# ---------------------------------------------------------------------- agent distribution P_N
def agent_weights(num_agents: int, law: str, exponent: float = 0.8, offset: float = 0.0) -> np.ndarray:
    """P_N (Assumption 3.3): ``"uniform"`` or ``"zipf"``, ``P(n) ∝ (n + offset)^(-exponent)`` for
    n = 1..N (appendix C.4). Returns probabilities summing to 1, agent 0 the most likely."""
    if law == "uniform":
        return np.full(num_agents, 1.0 / num_agents)
    if law == "zipf":
        w = (np.arange(1, num_agents + 1) + offset) ** (-exponent)
        return w / w.sum()
    raise ValueError(f"agent distribution {law!r}; accepted: 'uniform', 'zipf'")
