"""Communication graphs among agents: the named topologies a scenario can ask for.

Each topology declares its own keys (read from the ``[network]`` section) and builds an
undirected ``networkx.Graph`` on nodes ``0 .. n-1`` from a generator it is given.
Random topologies draw their networkx ``seed`` from that generator, never from global state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from netsim.engine import files
from netsim.engine import params as P
from netsim.engine.errors import InputError
from netsim.engine.registry import PLUGIN_HINT, Registry

#: the topologies, by name (``[network] topology``): the bundled ones below, a plug-in's
#: with ``@topologies.register(name)``
topologies = Registry("topology", hint=PLUGIN_HINT)

Builder = Callable[[int, Mapping[str, Any], np.random.Generator], nx.Graph]


@dataclass(frozen=True)
class Topology:
    """A named graph family: its keys in ``[network]`` and how to build it."""

    name: str
    description: str
    fields: Mapping[str, P.Field]
    build: Builder
    random: bool = False
    #: a random topology that may draw a disconnected graph (others are connected by construction)
    may_disconnect: bool = False


def _register(name: str, description: str, fields: Mapping[str, P.Field] | None = None, random: bool = False,
              may_disconnect: bool = False):
    def decorate(build: Builder) -> Builder:
        topologies.register(name)(Topology(name, description, fields or {}, build, random, may_disconnect))
        return build

    return decorate


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**32))


@_register("complete", "every pair of agents linked")
def _complete(n, p, rng):
    return nx.complete_graph(n)


@_register("star", "agent 0 linked to every other agent")
def _star(n, p, rng):
    return nx.star_graph(n - 1) if n > 1 else nx.empty_graph(n)


@_register("ring", "cycle 0-1-...-(n-1)-0")
def _ring(n, p, rng):
    return nx.cycle_graph(n) if n > 2 else nx.path_graph(n)


@_register("path", "line 0-1-...-(n-1)")
def _path(n, p, rng):
    return nx.path_graph(n)


@_register(
    "grid",
    "rows x cols lattice (cols = agents / rows)",
    {"rows": P.integer(0, low=0, doc="rows of the grid; 0 picks the most square factorisation", label="grid rows")},
)
def _grid(n, p, rng):
    rows = p["rows"] or max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
    if n % rows:
        raise InputError(f"grid with {rows} rows cannot hold {n} agents; accepted: a divisor of {n}",
                         key="network.rows")
    graph = nx.grid_2d_graph(rows, n // rows)
    return nx.convert_node_labels_to_integers(graph, ordering="sorted")


@_register(
    "erdos_renyi",
    "G(n, p), resampled until connected",
    {
        "p": P.probability(0.1, doc="edge probability", label="edge probability p"),
        "tries": P.integer(1000, low=1, doc="resampling attempts before giving up", label="resampling attempts"),
        "sampler": P.choice(("pairs", "skip"), "pairs",
                            doc="pairs: test every pair (networkx gnp_random_graph, O(n^2)); skip: jump from edge "
                                "to edge with geometric gaps (fast_gnp_random_graph, O(n + m), for large sparse "
                                "graphs); same law, different draws", label="sampler"),
    },
    random=True,
)
def _erdos_renyi(n, p, rng):
    sample = nx.gnp_random_graph if p["sampler"] == "pairs" else nx.fast_gnp_random_graph
    for _ in range(p["tries"]):
        graph = sample(n, p["p"], seed=_seed(rng))
        if n <= 1 or nx.is_connected(graph):
            return graph
    raise InputError(
        f"no connected G({n}, {p['p']:g}) in {p['tries']} tries; accepted: a larger p "
        f"(connectivity threshold ~ ln(n)/n = {math.log(max(n, 2)) / max(n, 2):.3g}) or more tries",
        key="network.p",
    )


@_register(
    "random_regular",
    "random d-regular graph",
    {"degree": P.integer(3, low=1, doc="degree of every agent", label="degree")},
    random=True, may_disconnect=True,
)
def _random_regular(n, p, rng):
    d = p["degree"]
    if d >= n or (n * d) % 2:
        raise InputError(f"no {d}-regular graph on {n} agents; accepted: degree < agents with agents*degree even",
                         key="network.degree")
    return nx.random_regular_graph(d, n, seed=_seed(rng))


@_register(
    "barabasi_albert",
    "preferential attachment with m edges per new agent",
    {"m": P.integer(2, low=1, doc="edges attached from each new agent", label="edges per new agent m")},
    random=True,
)
def _barabasi_albert(n, p, rng):
    if p["m"] >= n:
        raise InputError(f"m = {p['m']} needs more than {p['m']} agents; accepted: m < agents", key="network.m")
    return nx.barabasi_albert_graph(n, p["m"], seed=_seed(rng))


@_register(
    "watts_strogatz",
    "small world: ring lattice with k neighbours, rewired with probability p",
    {"k": P.integer(4, low=2, doc="nearest neighbours in the ring", label="ring neighbours k"),
     "p": P.probability(0.1, doc="rewiring probability", label="rewiring probability p")},
    random=True, may_disconnect=True,
)
def _watts_strogatz(n, p, rng):
    if p["k"] >= n:
        raise InputError(f"k = {p['k']} needs more than {p['k']} agents; accepted: k < agents", key="network.k")
    return nx.watts_strogatz_graph(n, p["k"], p["p"], seed=_seed(rng))


@_register(
    "edgelist",
    "edges read from a file: one 'u v' pair of agent ids per line",
    {"file": P.text(doc="path of the edge-list file, relative to the scenario file", label="edge-list file")},
)
def _edgelist(n, p, rng):
    path = Path(p["file"])
    graph = nx.empty_graph(n)
    text = files.read_text(path, what="edge-list file", key="network.file")
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        # ASCII digits only: str.isdigit() also takes superscripts such as '²', which int() refuses
        if len(parts) < 2 or not all(x.isascii() and x.isdigit() for x in parts[:2]) or max(map(int, parts[:2])) >= n:
            raise InputError(  # the line itself is not echoed: the file may be anything readable
                f"line {lineno} of {P.bounded_repr(path.name)} is not an edge; accepted: two agent ids in 0..{n - 1}",
                key="network.file")
        graph.add_edge(int(parts[0]), int(parts[1]))
    return graph


#: Largest graph a scenario may ask for: networkx keeps about 0.5 kB per link, so 10 million links take
#: about 5 GB before the engine's own arrays; a dense G(n, p) sampler tests n (n - 1) / 2 pairs.
MAX_LINKS = 10_000_000
MAX_PAIR_TESTS = 500_000_000


def expected_links(topology: str, n: int, params: Mapping[str, Any]) -> float:
    """Expected number of links of one component of ``n`` agents (for the size bound, before building)."""
    pairs = n * (n - 1) / 2
    per_family = {"complete": pairs, "erdos_renyi": params.get("p", 0.0) * pairs,
                  "random_regular": n * params.get("degree", 0) / 2, "barabasi_albert": n * params.get("m", 0),
                  "watts_strogatz": n * params.get("k", 0) / 2, "grid": 2 * n}
    return float(per_family.get(topology, n))


def check_size(topology: str, sizes: Sequence[int], params: Mapping[str, Any], source: str | None = None) -> None:
    """Refuse, before anything is built, a graph this machine cannot hold or sample in reasonable time."""
    links = sum(expected_links(topology, n, params) for n in sizes)
    if links > MAX_LINKS:
        raise InputError(f"topology {topology!r} with {sum(sizes):,} agents has about {links:,.0f} links; accepted: "
                         f"at most {MAX_LINKS:,} (fewer agents or a sparser topology)", source=source,
                         key="network.agents")
    if topology == "erdos_renyi" and params.get("sampler") == "pairs":
        tests = sum(n * (n - 1) / 2 for n in sizes)
        if tests > MAX_PAIR_TESTS:
            raise InputError(f"sampler 'pairs' would test {tests:,.0f} agent pairs; accepted: at most "
                             f"{MAX_PAIR_TESTS:,}, or sampler = 'skip' (linear in the links)", source=source,
                             key="network.sampler")


def build_components(
    topology: Topology, sizes: tuple[int, ...], options: Mapping[str, Any], rng: np.random.Generator
) -> tuple[nx.Graph, list[list[int]]]:
    """The agent graph: one ``topology`` graph per component, agents numbered consecutively.

    Returns the graph and the agent ids of each component.
    """
    graph = nx.Graph()
    members: list[list[int]] = []
    start = 0
    for size in sizes:
        part = topology.build(size, options, rng)
        graph.add_nodes_from(range(start, start + size))
        graph.add_edges_from((u + start, v + start) for u, v in part.edges())
        members.append(list(range(start, start + size)))
        start += size
    return graph, members
