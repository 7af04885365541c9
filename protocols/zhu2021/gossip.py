"""Gossip averaging of zhu2021: the expected gossip matrix W and lambda_2 (Sec. 3.1), and the
gossip update of Alg. 1 lines 17-22.
"""

from __future__ import annotations

import networkx as nx
import numpy as np


def expected_gossip_matrix(graph: nx.Graph) -> np.ndarray:
    """W = (1/|E|) sum_{(i,j) in E} (I - (e_i - e_j)(e_i - e_j)^T / 2), Sec. 3.1."""
    nodes = sorted(graph.nodes())
    where = {v: k for k, v in enumerate(nodes)}
    size = len(nodes)
    edges = list(graph.edges())
    if not edges:
        raise ValueError("the expected gossip matrix needs at least one edge")
    w = np.zeros((size, size))
    for u, v in edges:
        d = np.zeros(size)
        d[where[u]], d[where[v]] = 1.0, -1.0
        w += np.eye(size) - 0.5 * np.outer(d, d)
    return w / len(edges)


def second_eigenvalue(w: np.ndarray) -> float:
    """lambda_2(W): the second largest eigenvalue of the symmetric matrix W."""
    values = np.sort(np.linalg.eigvalsh(w))[::-1]
    return float(values[1]) if len(values) > 1 else 0.0


def gossip_update(theta: np.ndarray, delta: np.ndarray, edge: tuple[int, int] | None) -> np.ndarray:
    """Lines 17-22 for all agents: normal update, and the gossip average on ``edge``."""
    new = theta + delta                                                    # line 22
    if edge is not None:
        u, v = edge
        mean = 0.5 * (theta[u] + theta[v])
        new[u] = mean + delta[u]                                           # line 20
        new[v] = mean + delta[v]
    return new
