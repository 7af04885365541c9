"""Counters the engine keeps for every trial: links built, messages by kind and fate.

Link accounting follows li2022 Eq. (2): C(T) = sum over rounds r, slots t and links l built
in that slot of c_{r,t,l}. A two-way link between a pair of nodes counts once per slot in
which it carries at least one message (or is explicitly activated); a server-agent link costs
c1 (``server_agent``) and an agent-agent link c2 (``agent_agent``).

Two ways to feed it, which must not be mixed within one trial:

* :meth:`Metrics.edges_used` / :meth:`Metrics.edge_used` (what the network uses once it has called
  :meth:`Metrics.set_edges`): the graph's edges are numbered, and each edge keeps the index of the
  last slot in which it was counted (a per-slot boolean array over edge ids, stored as slot
  stamps so that a new slot needs no reset). A whole broadcast is one numpy step.
* :meth:`Metrics.links_used` with node pairs (standalone use, without a graph): a set of pairs per
  slot. After :meth:`set_edges` it maps the pairs to edge ids and takes the first way.

Per-node counters are plain lists for the single-message paths (an element increment is much
cheaper on a list than on a numpy array) plus numpy arrays for the multicast paths; the
``node_*`` properties add the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

FATES = ("sent", "delivered", "dropped", "corrupted")


class MessageCounts:
    """Counts for one message kind. ``records`` is the summed ``size`` of sent messages."""

    __slots__ = FATES + ("records",)

    def __init__(self) -> None:
        self.sent = self.delivered = self.dropped = self.corrupted = self.records = 0

    def __repr__(self) -> str:
        return "MessageCounts(" + ", ".join(f"{f}={getattr(self, f)}" for f in self.__slots__) + ")"

    @property
    def in_flight(self) -> int:
        return self.sent - self.delivered - self.dropped


@dataclass
class Metrics:
    """Engine-side counters for one trial (protocols may only increment ``rounds`` and set ``extras``)."""

    num_nodes: int
    num_agents: int
    cost_agent_agent: float
    cost_server_agent: float
    slot: float = 1.0
    links_agent_agent: int = 0
    links_server_agent: int = 0
    rounds: int = 0
    messages: dict[str, MessageCounts] = field(default_factory=dict)
    extras: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Plain lists: incrementing one element is much cheaper than on a numpy array.
        self.sent_by_node = [0] * self.num_nodes
        self.received_by_node = [0] * self.num_nodes
        self.links_by_node = [0] * self.num_nodes
        self._slot_index = -math.inf
        self._slot_pairs: set[tuple[int, int]] = set()
        # (u, destinations) -> frozenset of the pairs, for long destination lists (broadcasts):
        # the same neighbour list is sent to at every step, so its pairs are built once.
        self._pair_cache: dict[tuple[int, tuple[int, ...]], frozenset[tuple[int, int]]] = {}
        self.sent_bulk = np.zeros(self.num_nodes, dtype=np.int64)
        self.received_bulk = np.zeros(self.num_nodes, dtype=np.int64)
        self.links_bulk = np.zeros(self.num_nodes, dtype=np.int64)
        self._edge_u: np.ndarray | None = None
        self._edge_ids: dict[tuple[int, int], int] = {}

    def set_edges(self, u: np.ndarray, v: np.ndarray) -> None:
        """Number the graph's edges: edge ``e`` joins ``u[e]`` and ``v[e]`` (the network calls this once)."""
        self._edge_u = np.asarray(u, dtype=np.int64)
        self._edge_v = np.asarray(v, dtype=np.int64)
        self._edge_server = (self._edge_u >= self.num_agents) | (self._edge_v >= self.num_agents)
        # slot index in which each edge was last counted (a Python list: cheap scalar reads and writes)
        self._stamps: list[float] = [-math.inf] * len(self._edge_u)
        self._edge_ends = list(zip(self._edge_u.tolist(), self._edge_v.tolist(), self._edge_server.tolist(),
                                   strict=True))
        self._edge_ids = {(a, b) if a < b else (b, a): e for e, (a, b, _) in enumerate(self._edge_ends)}

    def edge_used(self, edge: int, now: float) -> bool:
        """Record that edge ``edge`` carries traffic at ``now``; True if newly built in this slot."""
        slot = now // self.slot
        stamps = self._stamps
        if stamps[edge] == slot:
            return False
        stamps[edge] = slot
        a, b, server = self._edge_ends[edge]
        if server:
            self.links_server_agent += 1
        else:
            self.links_agent_agent += 1
        self.links_by_node[a] += 1
        self.links_by_node[b] += 1
        return True

    #: from this many edges on, :meth:`edges_used` counts with numpy (below, a Python loop is cheaper)
    VECTOR_FROM = 64

    def edges_used(self, edges: Sequence[int] | np.ndarray, now: float) -> None:
        """Record that every edge in ``edges`` (ids, repeats allowed) carries traffic at ``now``."""
        slot = now // self.slot
        stamps = self._stamps
        if len(edges) < self.VECTOR_FROM:
            ends, links = self._edge_ends, self.links_by_node
            for e in edges:
                if stamps[e] != slot:
                    stamps[e] = slot
                    a, b, server = ends[e]
                    if server:
                        self.links_server_agent += 1
                    else:
                        self.links_agent_agent += 1
                    links[a] += 1
                    links[b] += 1
            return
        edges = np.asarray(edges, dtype=np.int64)
        if 4 * len(edges) >= len(stamps):  # much of the graph (a broadcast): one numpy pass over all stamps
            every = np.array(stamps)
            seen = np.zeros(len(every), dtype=bool)
            seen[edges[every[edges] != slot]] = True
            new = np.flatnonzero(seen)
            if not len(new):
                return
            every[new] = slot
            self._stamps = every.tolist()
        else:
            new = [e for e in np.unique(edges).tolist() if stamps[e] != slot]
            if not new:
                return
            for e in new:
                stamps[e] = slot
            new = np.array(new, dtype=np.int64)
        servers = int(np.count_nonzero(self._edge_server[new]))
        self.links_server_agent += servers
        self.links_agent_agent += len(new) - servers
        count = len(self.links_bulk)
        self.links_bulk += np.bincount(self._edge_u[new], minlength=count)
        self.links_bulk += np.bincount(self._edge_v[new], minlength=count)

    @property
    def node_sent(self) -> np.ndarray:
        return np.array(self.sent_by_node, dtype=np.int64) + self.sent_bulk

    @property
    def node_received(self) -> np.ndarray:
        return np.array(self.received_by_node, dtype=np.int64) + self.received_bulk

    @property
    def node_links(self) -> np.ndarray:
        return np.array(self.links_by_node, dtype=np.int64) + self.links_bulk

    @property
    def comm_cost(self) -> float:
        """C(T) of li2022 Eq. (2)."""
        return self.links_agent_agent * self.cost_agent_agent + self.links_server_agent * self.cost_server_agent

    def link_used(self, u: int, v: int, now: float) -> bool:
        """Record that the pair (u, v) carries traffic at time ``now``; True if newly built this slot."""
        before = self.links_agent_agent + self.links_server_agent
        self.links_used(u, (v,), now)
        return self.links_agent_agent + self.links_server_agent > before

    #: destination lists at least this long go through the pair cache; the cache is cleared when
    #: it holds CACHE_SIZE lists (protocols that send to ever-new subsets).
    CACHE_FROM = 4
    CACHE_SIZE = 65536

    def links_used(self, u: int, others: Sequence[int], now: float) -> None:
        """Record the pairs (u, v) for v in ``others`` as used in the slot of ``now``.

        Counters are order-independent (a set of pairs per slot), so long destination lists are
        handled as a set difference against the pairs already built in the slot. After
        :meth:`set_edges` the pairs are mapped to edge ids and counted by :meth:`edge_used`.
        """
        if self._edge_u is not None:
            ids = self._edge_ids
            for v in others:
                self.edge_used(ids[(u, v) if u < v else (v, u)], now)
            return
        slot = now // self.slot
        if slot != self._slot_index:
            self._slot_index = slot
            self._slot_pairs = set()
        pairs = self._slot_pairs
        agents = self.num_agents
        links = self.links_by_node
        if len(others) >= self.CACHE_FROM:
            key = (u, tuple(others))
            candidates = self._pair_cache.get(key)
            if candidates is None:
                if len(self._pair_cache) >= self.CACHE_SIZE:
                    self._pair_cache.clear()
                candidates = self._pair_cache[key] = frozenset((u, v) if u < v else (v, u) for v in others)
            new = candidates - pairs
            if not new:
                return
            pairs |= new
            for a, b in new:
                if b >= agents:  # a < b: b is the server if either is
                    self.links_server_agent += 1
                else:
                    self.links_agent_agent += 1
                links[a] += 1
                links[b] += 1
            return
        for v in others:
            pair = (u, v) if u < v else (v, u)
            if pair in pairs:
                continue
            pairs.add(pair)
            if u >= agents or v >= agents:
                self.links_server_agent += 1
            else:
                self.links_agent_agent += 1
            links[u] += 1
            links[v] += 1

    def kind(self, kind: str) -> MessageCounts:
        counts = self.messages.get(kind)
        if counts is None:
            counts = self.messages[kind] = MessageCounts()
        return counts

    def total(self, fate: str) -> int:
        return sum(getattr(c, fate) for c in self.messages.values())
