"""Counters the engine keeps for every trial: links built, messages by kind and fate.

Link accounting follows li2022 Eq. (2): C(T) = sum over rounds r, slots t and links l built
in that slot of c_{r,t,l}. A two-way link between a pair of nodes counts once per slot in
which it carries at least one message (or is explicitly activated); a server-agent link costs
c1 (``server_agent``) and an agent-agent link c2 (``agent_agent``).

Two ways to feed it, which must not be mixed within one trial:

* :meth:`Metrics.edges_used` / :meth:`Metrics.edge_used` and the deferred lists (what the network
  uses once it has called :meth:`Metrics.set_edges`): the graph's edges are numbered, and the ids
  of the edges built in the current slot are kept in a set (a new slot starts a new set; an array
  that opens a slot is kept as a sorted array until a later use in that slot needs the set). A send
  only appends its edge ids to :attr:`Metrics.pending_edges`, a broadcast only its sender to
  :attr:`Metrics.pending_sources` (all noted at the instant :attr:`Metrics.pending_at`); they are
  marked as a whole before anything else reads or marks links or the sent counts (and when the
  network moves on to another instant): the ids with set operations, the senders with numpy when
  many share the instant (:data:`Metrics.ARRAY_FROM`), else through the slot's set. A newly built
  edge is only noted (its id appended to a list); the per-kind link totals and per-node link
  counts are summed from those ids with numpy when read (the ``links_*`` properties,
  :attr:`comm_cost`, :attr:`node_links`) or when the list grows long.
* :meth:`Metrics.links_used` with node pairs (standalone use, without a graph): a set of pairs per
  slot. After :meth:`set_edges` it maps the pairs to edge ids and takes the first way.

Per-node counters are plain lists for the single-message paths (an element increment is much
cheaper on a list than on a numpy array) plus numpy arrays for the multicast paths; the
``node_*`` properties add the two. The network's delivery loop, which delivers long stretches of
single messages, only notes their receivers (:meth:`Metrics.note_received`: an array per stretch);
those are counted with ``np.bincount`` when :attr:`node_received` is read or when many are waiting
(:data:`Metrics.SUM_FROM` ids or :data:`Metrics.PARTS` arrays).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np


def _nothing() -> None:
    pass


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
    rounds: int = 0
    messages: dict[str, MessageCounts] = field(default_factory=dict)
    extras: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Plain lists: incrementing one element is much cheaper than on a numpy array.
        self.sent_by_node = [0] * self.num_nodes
        self.received_by_node = [0] * self.num_nodes
        #: receivers of delivered messages not counted in received_by_node / received_bulk yet (arrays of ids)
        self.received_ids: list[np.ndarray] = []
        self._received_waiting = 0  # ids in received_ids
        self.links_by_node = [0] * self.num_nodes
        #: called first by every read or mark of the sent counts and links: the network makes the broadcasts it
        #: has only noted so far (``Network.broadcast``)
        self.send_noted: Callable[[], None] = _nothing
        self._agent_agent = self._server_agent = 0  # links built, less those in _built
        self._built: list[int] = []  # ids of edges newly built in their slot, not yet summed
        #: edge id collections used at :attr:`pending_at`, not marked yet (see the module docstring)
        self.pending_edges: list[Sequence[int]] = []
        #: nodes that sent one message over each of their links at :attr:`pending_at` (broadcasts), neither
        #: counted in the sent counters nor marked yet; a node appears once per such send
        self.pending_sources: list[int] = []
        self.pending_at = -math.inf
        self._edge_slot = -math.inf  # the slot of _slot_edges
        self._slot_edges: set[int] = set()  # ids of the edges built in that slot
        #: distinct edge ids an array call built in this slot, not yet in _slot_edges (added when needed)
        self._slot_array: np.ndarray | None = None
        self._built_arrays: list[np.ndarray] = []  # like _built, as arrays of distinct ids
        self._built_waiting = 0  # ids in _built_arrays
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

    def set_edges(self, u: np.ndarray, v: np.ndarray, *, incident: Sequence[Sequence[int]] | None = None) -> None:
        """Number the graph's edges: edge ``e`` joins ``u[e]`` and ``v[e]`` (the network calls this once).

        ``incident``: the edge ids at each node, if the caller has them (else made from ``u`` and ``v`` when
        a noted broadcast first needs them).
        """
        self._edge_u = np.asarray(u, dtype=np.int64)
        self._edge_v = np.asarray(v, dtype=np.int64)
        self._edge_server = (self._edge_u >= self.num_agents) | (self._edge_v >= self.num_agents)
        self._edge_ids = {(a, b) if a < b else (b, a): e
                          for e, (a, b) in enumerate(zip(self._edge_u.tolist(), self._edge_v.tolist(), strict=True))}
        self._degree = (np.bincount(self._edge_u, minlength=self.num_nodes)
                        + np.bincount(self._edge_v, minlength=self.num_nodes))
        self._degrees = self._degree.tolist()
        self._incident = incident  # edge ids at each node (made when first needed if not given)

    def defer_from(self, now: float) -> None:
        """Mark the pending edges, then note later ones as used at ``now`` (the network calls this)."""
        self._mark_pending()
        self.pending_at = now

    def edge_used(self, edge: int, now: float) -> bool:
        """Record that edge ``edge`` carries traffic at ``now``; True if newly built in this slot."""
        self._mark_pending()
        slot = now // self.slot
        if slot != self._edge_slot:
            self._new_slot(slot)
        elif self._slot_array is not None:
            self._merge_slot_array()
        if edge in self._slot_edges:
            return False
        self._slot_edges.add(edge)
        self._built.append(edge)
        if len(self._built) >= self.SUM_FROM:
            self._sum_built()
        return True

    #: noted edge ids are summed into the link counters when this many are waiting (bounds the list)
    SUM_FROM = 1 << 16

    def edges_used(self, edges: Sequence[int] | np.ndarray, now: float) -> None:
        """Record that every edge in ``edges`` (ids, repeats allowed) carries traffic at ``now``.

        An array that is the first use of a slot (every link of a synchronous step, e.g. LOCAL
        flooding's one broadcast per period) is kept as a sorted array of distinct ids, with no
        Python set; a later use in the same slot merges it into the slot's set first.
        """
        self._mark_pending()
        if isinstance(edges, np.ndarray):
            slot = now // self.slot
            if slot != self._edge_slot:
                self._new_slot(slot)
            if not self._slot_edges and self._slot_array is None:
                seen = np.zeros(len(self._edge_server), dtype=bool)
                seen[edges] = True
                self._keep_slot_array(np.flatnonzero(seen))
                return
            edges = edges.tolist()
        self._mark(set(edges), now)

    def _keep_slot_array(self, fresh: np.ndarray) -> None:
        """Keep ``fresh`` (sorted distinct ids, the first use of the current slot) as the slot's built edges."""
        self._slot_array = fresh
        self._built_arrays.append(fresh)
        self._built_waiting += len(fresh)
        if self._built_waiting >= self.SUM_FROM:
            self._sum_built()

    def _new_slot(self, slot: float) -> None:
        self._edge_slot, self._slot_edges, self._slot_array = slot, set(), None

    def _merge_slot_array(self) -> None:
        self._slot_edges.update(self._slot_array.tolist())
        self._slot_array = None

    def edges_built(self, edges: np.ndarray, slots: int) -> None:
        """Count the distinct edge ids ``edges`` as built once in each of ``slots`` slots that no other
        mark touches (what :meth:`edges_used` in ``slots`` successive such slots adds; lockstep drivers)."""
        self._sum_links()
        self._count_edges(np.asarray(edges, dtype=np.int64), times=slots)

    def _mark_pending(self) -> None:
        self.send_noted()
        if self.pending_sources:
            self._mark_sources()
        pending = self.pending_edges
        if pending:
            edges = set(chain.from_iterable(pending))
            pending.clear()
            self._mark(edges, self.pending_at)

    #: noted broadcasts are counted and marked with numpy (O(nodes + edges)) when at least this many, and at
    #: least one per 16 nodes, share an instant; fewer go through the slot's set of edge ids
    ARRAY_FROM = 32

    def _mark_sources(self) -> None:
        """Count and mark the noted broadcasts (:attr:`pending_sources`): each sent one message over every link
        of its node, so the links built are the edges with a noted end."""
        sources = self.pending_sources
        now = self.pending_at
        if len(sources) >= self.ARRAY_FROM and len(sources) * 16 >= self.num_nodes:
            times = np.bincount(np.fromiter(sources, dtype=np.int64, count=len(sources)), minlength=self.num_nodes)
            sources.clear()
            self.sent_bulk += times * self._degree
            sent = times > 0
            used = np.flatnonzero(sent[self._edge_u] | sent[self._edge_v])
            slot = now // self.slot
            if slot != self._edge_slot:
                self._new_slot(slot)
            if not self._slot_edges and self._slot_array is None:
                self._keep_slot_array(used)
            else:
                self._mark(set(used.tolist()), now)
            return
        by_node, degrees = self.sent_by_node, self._degrees
        for node in sources:
            by_node[node] += degrees[node]
        if self._incident is None:
            incident: list[list[int]] = [[] for _ in range(self.num_nodes)]
            for e, (u, v) in enumerate(zip(self._edge_u.tolist(), self._edge_v.tolist(), strict=True)):
                incident[u].append(e)
                incident[v].append(e)
            self._incident = incident
        edges = set(chain.from_iterable(map(self._incident.__getitem__, sources)))
        sources.clear()
        self._mark(edges, now)

    def _mark(self, edges: set[int], now: float) -> None:
        """Mark the distinct edge ids ``edges`` (a set this method may change) as used at ``now``."""
        slot = now // self.slot
        if slot != self._edge_slot:
            self._new_slot(slot)
        elif self._slot_array is not None:
            self._merge_slot_array()
        edges -= self._slot_edges
        if edges:
            self._slot_edges |= edges
            self._built.extend(edges)
            if len(self._built) >= self.SUM_FROM:
                self._sum_built()

    def _sum_links(self) -> None:
        """Bring the link counters up to date (mark the pending edges, add the noted ones)."""
        self._mark_pending()
        if self._built or self._built_arrays:
            self._sum_built()

    def _sum_built(self) -> None:
        """Add the noted newly built edges to the link counters."""
        built, self._built = self._built, []
        arrays, self._built_arrays, self._built_waiting = self._built_arrays, [], 0
        # fromiter: np.array discovers the dtype of every element of a list of ints (~10x slower)
        self._count_edges(np.concatenate([np.fromiter(built, dtype=np.int64, count=len(built)), *arrays]))

    def _count_edges(self, new: np.ndarray, times: int = 1) -> None:
        """Count the edges ``new`` (distinct ids) as built ``times`` times each."""
        if not len(new) or times <= 0:
            return
        servers = int(np.count_nonzero(self._edge_server[new]))
        self._server_agent += times * servers
        self._agent_agent += times * (len(new) - servers)
        count = len(self.links_bulk)
        self.links_bulk += times * np.bincount(self._edge_u[new], minlength=count)
        self.links_bulk += times * np.bincount(self._edge_v[new], minlength=count)

    @property
    def links_agent_agent(self) -> int:
        """Agent-agent links built so far (li2022 Eq. 2: a pair counts once per slot it is used in)."""
        self._sum_links()
        return self._agent_agent

    @property
    def links_server_agent(self) -> int:
        """Server-agent links built so far."""
        self._sum_links()
        return self._server_agent

    @property
    def node_sent(self) -> np.ndarray:
        self._mark_pending()  # noted broadcasts are counted when marked
        return np.array(self.sent_by_node, dtype=np.int64) + self.sent_bulk

    @property
    def node_received(self) -> np.ndarray:
        self.count_received()
        return np.array(self.received_by_node, dtype=np.int64) + self.received_bulk

    def note_received(self, ids: np.ndarray) -> None:
        """Note the receivers ``ids`` of delivered messages (counted with numpy when read, or when
        :data:`SUM_FROM` ids or :data:`PARTS` arrays are waiting)."""
        self.received_ids.append(ids)
        self._received_waiting += len(ids)
        if self._received_waiting >= self.SUM_FROM or len(self.received_ids) >= self.PARTS:
            self.count_received()

    #: noted receiver arrays are counted when this many are waiting (they may be views of larger arrays)
    PARTS = 256

    def count_received(self) -> None:
        """Add the noted receivers (:attr:`received_ids`) to the per-node received counts."""
        ids = self.received_ids
        if ids:
            self.received_bulk += np.bincount(np.concatenate(ids), minlength=self.num_nodes)
            ids.clear()
            self._received_waiting = 0

    @property
    def node_links(self) -> np.ndarray:
        self._sum_links()
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
                    self._server_agent += 1
                else:
                    self._agent_agent += 1
                links[a] += 1
                links[b] += 1
            return
        for v in others:
            pair = (u, v) if u < v else (v, u)
            if pair in pairs:
                continue
            pairs.add(pair)
            if u >= agents or v >= agents:
                self._server_agent += 1
            else:
                self._agent_agent += 1
            links[u] += 1
            links[v] += 1

    def kind(self, kind: str) -> MessageCounts:
        counts = self.messages.get(kind)
        if counts is None:
            counts = self.messages[kind] = MessageCounts()
        return counts

    def total(self, fate: str) -> int:
        self.send_noted()
        return sum(getattr(c, fate) for c in self.messages.values())
