"""Link-activation clocks: which agent-agent link is active when (zhu2021 Sec. 2.2).

* ``uniform``: paper mode, one edge of the agent graph chosen uniformly at random per tick.
* ``poisson``: each edge carries an independent Poisson clock of rate ``rate``; the
  superposition rings after an exponential time of mean 1 / (rate |E|) and picks an edge
  uniformly, which is the same law.

An activation marks the link built for the current slot (li2022 Eq. 2) and calls the
protocol's callback with the two endpoints. One SimPy process per clock, never per edge.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from netsim.engine.network import Network

ActivationCallback = Callable[[int, int], None]
DRAWS = 1024  # edges drawn at once by the uniform clock


def _edges(network: Network) -> np.ndarray:
    edges = np.array(sorted(network.agent_graph.edges()), dtype=np.int64).reshape(-1, 2)
    if len(edges) == 0:
        raise ValueError("gossip activation needs at least one agent-agent link")
    return edges


def uniform_edge_clock(
    env: simpy.Environment, network: Network, rng: np.random.Generator, callback: ActivationCallback,
    *, period: float = 1.0, start: float = 0.0,
) -> simpy.Process:
    """Activate one uniformly random edge at times ``start, start + period, ...``.

    The edges are drawn ``DRAWS`` at a time: ``rng.integers(E, size=k)`` gives the very numbers of k
    calls ``rng.integers(E)`` (tested), so only the generator's state after the run differs.
    """
    pairs = _edges(network).tolist()

    def run():
        if start > env.now:
            yield env.timeout(start - env.now)
        while True:
            for edge in rng.integers(len(pairs), size=DRAWS).tolist():
                u, v = pairs[edge]
                network.activate(u, v)
                callback(u, v)
                yield env.timeout(period)

    return env.process(run())


def poisson_edge_clocks(
    env: simpy.Environment, network: Network, rng: np.random.Generator, callback: ActivationCallback,
    *, rate: float = 1.0,
) -> simpy.Process:
    """Activate edges at the rings of independent Poisson(rate) clocks, one per edge."""
    edges = _edges(network)
    mean_gap = 1.0 / (rate * len(edges))

    def run():
        while True:
            yield env.timeout(rng.exponential(mean_gap))
            u, v = edges[rng.integers(len(edges))]
            network.activate(int(u), int(v))
            callback(int(u), int(v))

    return env.process(run())

