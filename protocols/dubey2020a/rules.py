"""Pure pieces of dubey2020a: the message life gamma, the protocols' shared keys, the group
estimates of Alg. 1 and the arm choices of Alg. 2 and Alg. 3.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from netsim.comm import params as P
from protocols.ucb import ucb_index

GAMMA_WORDS = ("half-diameter", "diameter")


#: the trials columns of the family's protocols (each protocol picks its own)
COLUMNS = {
    "gamma": P.column("message life γ", "hops", doc="life of the messages in hops (resolved on the graph)"),
    "epsilon_spent": P.column("privacy loss spent ε", doc="the ε an agent's releases spent"),
    "releases": P.column("releases", doc="private releases made (interval mechanism)"),
    "records_forwarded": P.column("records forwarded", doc="records relayed to neighbours"),
    "records_duplicate": P.column("duplicate records", doc="records received again and ignored"),
    "records_corrupted": P.column("records corrupted", doc="records a byzantine agent or link changed"),
}
#: largest explicit message life: the flooding's hop tables hold one entry per hop (a life of 2^31 never ended
#: building them); a longer path than this is asked for with 'diameter'
MAX_GAMMA = 10_000


def gamma_field() -> P.Field:
    return P.either(P.integer(low=0, high=MAX_GAMMA), P.choice(GAMMA_WORDS), default="half-diameter",
                    doc="message life in hops: an integer >= 0, 'diameter', or 'half-diameter' = max(1, floor(D/2))",
                    label="message life γ", unit="hops")


def resolve_gamma(value: int | str, graph: nx.Graph) -> int:
    """The integer life of messages for ``value`` on ``graph`` (see module docstring)."""
    if isinstance(value, int):
        return value
    from scipy.sparse import csgraph  # imported on first use (start-up time)

    distances = csgraph.shortest_path(nx.to_scipy_sparse_array(graph, nodelist=sorted(graph)), unweighted=True)
    finite = distances[np.isfinite(distances)]
    diameter = int(finite.max(initial=0))  # largest eccentricity within a component
    if value == "diameter":
        return diameter
    return max(1, diameter // 2)


def epsilon_field() -> P.Field:
    return P.real(0.1, low=0.0, low_open=True, high=1.0, allow_inf=True,
                  doc="privacy parameter of the interval mechanism, in (0, 1]; inf = no privacy",
                  label="privacy level ε", unit="")


def v_field() -> P.Field:
    return P.real(1.1, low=1.0, high=1.5, low_open=True, high_open=True,
                  doc="privacy rate v in (1, 1.5): Laplace scale n^(v/2-1) (Alg. 1 line 7)",
                  label="privacy rate v", unit="")


RECORD_COUNTS = ("current", "released")


def record_counts_field() -> P.Field:
    return P.choice(RECORD_COUNTS, default="current",
                    doc="count paired with each released mean: 'current' (the pull count now, Eq. 6 as "
                        "written) or 'released' (the pull count at the mean's release)",
                    label="count paired with a released mean")


def private_group_estimates(own_sums: np.ndarray, own_counts: np.ndarray, table_means: np.ndarray,
                            table_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Alg. 1 lines 22-33: N_k = n_k + sum_{m'} a'_k and mu_k = (s_k + sum_{m'} a'_k x'_k) / N_k.

    ``own_*`` are (agents, K); ``table_*`` (agents, origins, K) hold the latest message of each
    origin (zero counts where none arrived).
    """
    counts = own_counts + table_counts.sum(axis=1)
    sums = own_sums + np.einsum("mok,mok->mk", table_counts, table_means)
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums / counts, counts


def ucb_choice(means: np.ndarray, counts: np.ndarray, t: int, round_robin: int) -> np.ndarray:
    """Alg. 2: arm t mod K while t <= K ceil(1/eps), then argmax mu_k + sqrt(2 ln t / N_k)."""
    agents, k = means.shape
    if t <= round_robin:
        return np.full(agents, t % k, dtype=np.int64)
    return np.argmax(ucb_index(means, counts, t), axis=1)


def byzantine_choice(means: np.ndarray, sizes: np.ndarray, t: int, *, epsilon: float, sigma: float) -> np.ndarray:
    """Alg. 3 lines 4-11: arm t for t <= K (0-based t - 1), then argmax of
    mu_R + sigma sqrt(eps) + sqrt(sigma ln(1/delta) / |S|) with delta = 1/t^2, i.e. the UCB index with
    scale 2 sigma (ln(1/delta) = 2 ln t)."""
    agents, k = means.shape
    if t <= k:
        return np.full(agents, t - 1, dtype=np.int64)
    return np.argmax(ucb_index(means + sigma * math.sqrt(epsilon), sizes, t, scale=2.0 * sigma), axis=1)
