"""Sink agents (li2022 Alg. 4) and SAC along a shortest-path tree to each sink (Theorem 4's proof).

On lossy links (reliable mode) every hop goes through a :class:`netsim.comm.transport.Transport`:
numbered per (child, parent) pair, acknowledged, retransmitted on the pair's RFC 6298 timer and
handed to the parent exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
import numpy as np

from netsim.comm import Lie, Message, RetransmitTimer, Transport


def sink_agents(graph: nx.Graph, components: Sequence[Sequence[int]]) -> tuple[list[int], list[int], int]:
    """Alg. 4 (Find Sink Agents): the sink of each component and its local delay.

    For each component q and agent i, delay_i = max_j sd(i, j) - 1 (line 4); the sink is
    SA_q = argmin_i delay_i (line 5), i.e. a node of minimum eccentricity (a graph center; ties
    go to the lowest id), and t_delay^q = max_i sd(i, SA_q), the sink's eccentricity (line 5).
    Returns (sinks, [t_delay^q], t_delay = max_q t_delay^q) (line 6).
    """
    sinks: list[int] = []
    delays: list[int] = []
    for members in components:
        members = list(members)
        if len(members) == 1:
            sinks.append(members[0])
            delays.append(0)
            continue
        distances = dict(nx.all_pairs_shortest_path_length(graph.subgraph(members)))
        delay = {i: max(distances[i][j] for j in members) - 1 for i in members}  # line 4
        sink = min(members, key=lambda i: (delay[i], i))  # line 5
        sinks.append(sink)
        delays.append(max(distances[sink][j] for j in members))
    return sinks, delays, max(delays, default=0)


class SinkTree:
    """SAC along shortest paths: every record travels up a BFS tree rooted at its component's sink.

    Each agent sends its own record to its parent at the first slot boundary of the round; a
    relay forwards what it received at the next slot boundary (each record once), so a record
    reaches the sink after sd(i, SA_q) slots. ``on_group(q)`` fires when the sink of component
    q holds all M_q records. With a ``timer`` (reliable mode) every hop travels on a
    :class:`~netsim.comm.transport.Transport` (acknowledged, repeated on RFC 6298 timers, delivered once).

    Crashes (``docs/faults.md``): the participants are the agents up at the round's start. The
    sink waits for the record of every participant whose whole path to the sink is up at the
    start and does not crash during the round: when an agent crashes, the records of its subtree
    may be stuck (or lost with it), so the sink stops waiting for them (records that still arrive
    are used). A component whose sink is down at the start or crashes takes no part in the round
    (no ``on_group``). A down agent neither sends nor retries; one that restarts with ``lost``
    forgets what it was relaying.
    """

    def __init__(self, sim: Any, prefix: str, *, graph: nx.Graph, groups: Sequence[Sequence[int]],
                 sinks: Sequence[int], timer: RetransmitTimer | None, up: np.ndarray,
                 on_group: Callable[[int], None]):
        self.network = network = sim.network
        self.kind = f"{prefix}-hop"
        self.groups = [list(g) for g in groups]
        self.sinks = list(sinks)
        self._sink_set = set(self.sinks)
        self.up = up
        self.on_group = on_group
        self.tag = 0
        self.active = False
        self._outbox: dict[int, dict[int, np.ndarray]] = {}
        self._forwarded: dict[int, set[int]] = {}
        # plain messages when nothing can be lost (paper mode), acknowledged ones otherwise
        self.transport = Transport(sim, self.kind, self._on_hops, timer=timer, up=up, reliable=timer is not None)
        self.parent = np.full(network.num_agents, -1)
        self.children: list[list[int]] = [[] for _ in range(network.num_agents)]
        self.group_of = np.zeros(network.num_agents, dtype=np.int64)
        for q, (sink, members) in enumerate(zip(self.sinks, self.groups)):
            self.group_of[members] = q
            if len(members) > 1:
                for child, par in nx.bfs_predecessors(graph.subgraph(members), sink):
                    self.parent[child] = par
                    self.children[par].append(child)

    @property
    def retries(self) -> int:
        """Hops sent again because their acknowledgement was overdue."""
        return self.transport.counts["retransmitted"]

    def corruptible(self, corrupt: Callable[..., tuple[Any, int]]) -> None:
        """Give the engine the corruption rule of the hop payloads (through the transport's wire format)."""
        self.transport.corruptible(corrupt)

    @staticmethod
    def rewrite_hop(payload: tuple, lie: Lie) -> tuple:
        """The corruption rule of a hop (``netsim.comm.corruption.rewriting``): the lie applies to the private
        means it carries; a byzantine sender lies about its own record only unless ``lie.relay``."""
        tag, keys, values = payload
        if lie.relay:
            return tag, keys, lie(values)
        own = np.asarray(keys) == lie.sender
        if not own.any():
            return payload
        lied = np.array(values, dtype=float)
        lied[own] = lie(values[own])
        return tag, keys, lied

    def begin(self, records: np.ndarray, participants: np.ndarray) -> None:
        self.tag += 1
        self.active = True
        up = np.asarray(participants, dtype=bool)
        self.held = {s: {s: records[s]} for s in self.sinks if up[s]}
        self._outbox = {i: {i: records[i]} for i in range(len(records)) if up[i] and i not in self.sinks}
        self._forwarded = {}
        for node in range(len(records)):  # hops of the previous round still unacknowledged are dropped
            self.transport.cancel(node)
        self.waiting: list[set[int]] = []
        self._done = [False] * len(self.groups)
        for sink in self.sinks:
            reach: set[int] = set()
            if up[sink]:
                stack = [sink]
                while stack:  # the participants whose whole path to the sink is up
                    node = stack.pop()
                    reach.add(node)
                    stack.extend(c for c in self.children[node] if up[c])
            self.waiting.append(reach)
        for q in range(len(self.groups)):
            self._check(q)

    def records_at_sink(self, q: int) -> tuple[list[int], np.ndarray]:
        """(keys, values) of the records the sink of group q holds, in member order."""
        held = self.held[self.sinks[q]]
        keys = [j for j in self.groups[q] if j in held]
        return keys, np.array([held[j] for j in keys])

    def crashed(self, node: int) -> None:
        """Agent ``node`` crashed: its group stops waiting for its subtree (or, for a sink, ends)."""
        if not self.active:
            return
        q = int(self.group_of[node])
        if node == self.sinks[q]:
            self._done[q] = True
            return
        stack, cut = [node], set()
        while stack:
            n = stack.pop()
            cut.add(n)
            stack.extend(self.children[n])
        self.waiting[q] -= cut
        self._check(q)

    def restarted(self, node: int, state: str) -> None:
        """``lost``: ``node`` forgets the records it was relaying."""
        if state == "lost":
            self._outbox.pop(node, None)
            self._forwarded.pop(node, None)
            self.transport.forget(node)

    def _check(self, q: int) -> None:
        sink = self.sinks[q]
        if not self._done[q] and sink in self.held and self.waiting[q] <= self.held[sink].keys():
            self._done[q] = True
            self.on_group(q)

    def tick(self, now: float) -> None:
        up = self.up
        outbox, self._outbox = self._outbox, {}
        for node in sorted(outbox):
            if not up[node]:  # sends when it is back
                self._outbox[node] = outbox[node]
                continue
            self._send(node, outbox[node])

    def _send(self, node: int, batch: dict[int, np.ndarray]) -> None:
        keys = tuple(sorted(batch))
        payload = (self.tag, keys, np.array([batch[k] for k in keys]))
        self.transport.send(node, int(self.parent[node]), payload, size=len(keys))

    def _on_hops(self, messages: list[Message]) -> None:
        for message in messages:
            self._on_hop(message)

    def _on_hop(self, message: Message) -> None:
        tag, keys, values = message.payload
        if tag != self.tag:
            return
        node = message.dst
        if node in self._sink_set:  # a sink that is out of this round (it was down) keeps nothing
            if node not in self.held:
                return
            held = self.held[node]
            for k, v in zip(keys, values):
                held.setdefault(k, v)
            self._check(int(self.group_of[node]))
            return
        forwarded = self._forwarded.setdefault(node, set())  # relay: forward at the next slot boundary, once
        box = self._outbox.setdefault(node, {})
        for k, v in zip(keys, values):
            if k not in forwarded:
                forwarded.add(k)
                box[k] = v
