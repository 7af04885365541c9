"""Gossip link activation: one uniform edge per tick, and Poisson edge clocks."""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy import stats

from netsim.engine.activation import poisson_edge_clocks, uniform_edge_clock
from tests.conftest import make_network


def test_uniform_clock_one_edge_per_tick_uniformly():
    graph = nx.cycle_graph(6)
    network = make_network(graph)
    seen = []
    uniform_edge_clock(network.env, network, np.random.default_rng(3),
                       lambda u, v: seen.append((network.env.now, u, v)))
    network.env.run(until=6000)
    assert [t for t, _, _ in seen] == [float(t) for t in range(6000)]
    assert all(graph.has_edge(u, v) for _, u, v in seen)
    counts = np.array([sum(1 for _, u, v in seen if (u, v) == e) for e in sorted(graph.edges())])
    # chi-square against uniform over the 6 edges (fixed seed)
    assert stats.chisquare(counts).pvalue > 0.001
    # each activation builds that link in its slot: one link per tick
    assert network.metrics.links_agent_agent == 6000


def test_uniform_clock_draws_the_edges_one_draw_per_tick_would():
    """The clock draws its edges in blocks; the sequence is the one of one rng.integers(|E|) call per tick
    (an independent generator with the same seed), across several blocks."""
    graph = nx.path_graph(10)  # 9 edges
    network = make_network(graph)
    seen = []
    uniform_edge_clock(network.env, network, np.random.default_rng(11), lambda u, v: seen.append((u, v)))
    network.env.run(until=3000)
    edges = sorted(graph.edges())
    reference = np.random.default_rng(11)
    assert seen == [edges[int(reference.integers(len(edges)))] for _ in range(3000)]


def test_poisson_clocks_rate():
    graph = nx.path_graph(5)  # 4 edges
    network = make_network(graph)
    times = []
    poisson_edge_clocks(network.env, network, np.random.default_rng(8), lambda u, v: times.append(network.env.now),
                        rate=0.5)
    network.env.run(until=2000)
    # superposition of 4 clocks of rate 0.5: Poisson(2000 * 2) activations; 4 sd tolerance (false alarm 6e-5;
    # power 0.987 against a rate 10 % off); the gaps: KS test at alpha = 0.001
    assert abs(len(times) - 4000) < 4 * np.sqrt(4000)
    gaps = np.diff(times)
    assert stats.kstest(gaps, stats.expon(scale=0.5).cdf).pvalue > 0.001
