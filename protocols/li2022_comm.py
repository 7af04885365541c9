"""Communication pieces of li2022: the GIS flood (Alg. 2), sink agents (Alg. 4), SAC along a
shortest-path tree, and uploads to the server.

Everything here moves real messages through the engine; the bandit logic lives in
:mod:`protocols.li2022_rounds` and the algorithms in :mod:`protocols.li2022`.

Slot rule (paper mode and realistic mode alike). Agents act only at slot boundaries (the
owner calls :meth:`Flood.tick` once per slot): a record received during slot s is advertised
at the start of slot s + 1, so with per-stage link delays of at most a third of a slot one
ADV -> REQ -> DATA exchange fits in one slot and records travel one hop per slot, exactly like
flooding one hop per slot. With random delays an exchange may span several slots; with loss the
handshake runs in reliable mode (see :mod:`netsim.handshake`) and repeats unanswered stages
after ``timeout``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import networkx as nx
import numpy as np

from netsim.handshake import Handshake
from netsim.network import Message


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


class Flood:
    """GIS dissemination (Alg. 2) of one record per agent, on top of :class:`~netsim.handshake.Handshake`.

    ``begin(records, groups, sinks)`` starts an exchange epoch in which agent j's record is
    ``records[j]`` (a vector). Within each group (a list of agent ids whose induced graph is
    connected) records spread by ADV/REQ/DATA between neighbours. A group is *complete* when
    every member holds every member's record (GIS, ``sinks=None``), or when its sink holds them
    all (the flooding variant of SAC); ``on_group(q)`` fires then, ``on_complete()`` once every
    group is complete. ``received[i, j]`` is the copy of record j that agent i
    got (its own record at j = i), so aggregation at an agent uses only what reached it.
    """

    def __init__(self, network, prefix: str, *, reliable: bool, timeout: float,
                 on_complete: Callable[[], None] | None = None, on_group: Callable[[int], None] | None = None):
        self.network = network
        self.num_agents = network.num_agents
        self.handshake = Handshake(network, prefix, missing=self._missing, fetch=self._fetch,
                                   on_data=self._on_data, reliable=reliable, timeout=timeout)
        self._neighbors = [network.agent_neighbors(i) for i in range(self.num_agents)]
        self.on_complete = on_complete
        self.on_group = on_group
        self.active = False
        self.complete_at: float | None = None
        self.have = np.zeros((0, 0), dtype=bool)
        self.received = np.zeros((0, 0, 0))

    # ------------------------------------------------------------------ epoch
    def begin(self, records: np.ndarray, groups: Sequence[Sequence[int]], sinks: Sequence[int] | None = None) -> None:
        m = self.num_agents
        self.handshake.reset()
        self.have = np.eye(m, dtype=bool)
        self.received = np.zeros((m, m, records.shape[1]))
        self.received[np.arange(m), np.arange(m)] = records
        self._group_of = np.full(m, -1)
        self._size = np.array([len(g) for g in groups])
        for q, members in enumerate(groups):
            self._group_of[list(members)] = q
        self._sinks = None if sinks is None else list(sinks)
        self._count = np.ones(m, dtype=np.int64)
        # per group: members (GIS) or sinks (SAC) still missing a record
        self._group_waiting = [0 if len(g) == 1 else (len(g) if sinks is None else 1) for g in groups]
        self._waiting = sum(1 for w in self._group_waiting if w > 0)
        self._done = [w == 0 for w in self._group_waiting]
        self._groups = [list(g) for g in groups]
        self._new: dict[int, list[int]] = {i: [i] for g in groups if len(g) > 1 for i in g}
        self.active = True
        self.complete_at = None
        for q, waiting in enumerate(self._group_waiting):
            if waiting == 0 and self.on_group is not None:
                self.on_group(q)
        if self._waiting == 0:
            self._finish()

    def tick(self, now: float) -> None:
        """Start of a slot: every agent advertises the records it got since the last slot; retries."""
        if not self.active:
            return
        new, self._new = self._new, {}
        for node in sorted(new):
            if not self._done[self._group_of[node]]:
                self.handshake.advertise(node, self._neighbors[node], new[node])
        self.handshake.retry(now)

    # ------------------------------------------------------------------ handshake callbacks
    def _missing(self, node: int, keys: Sequence[int]) -> list[int]:
        if self._done[self._group_of[node]]:
            return []
        return [k for k in keys if not self.have[node, k]]

    def _fetch(self, node: int, keys: Sequence[int]) -> np.ndarray:
        return self.received[node, list(keys)].copy()

    def _on_data(self, node: int, src: int, keys: Sequence[int], records: np.ndarray) -> None:
        fresh = [idx for idx, k in enumerate(keys) if not self.have[node, k]]
        if not fresh or not self.active or self._done[self._group_of[node]]:
            return
        got = [keys[idx] for idx in fresh]
        self.have[node, got] = True
        self.received[node, got] = records[fresh]
        self._new.setdefault(node, []).extend(got)
        before = self._count[node]
        self._count[node] += len(got)
        q = self._group_of[node]
        target = self._sinks is None or self._sinks[q] == node
        if target and before < self._size[q] <= self._count[node]:
            self._group_waiting[q] -= 1
            if self._group_waiting[q] == 0:
                # the group's communication ends: its members stop advertising and retrying
                self._done[q] = True
                self.handshake.forget(self._groups[q])
                if self.on_group is not None:
                    self.on_group(q)
                self._waiting -= 1
                if self._waiting == 0:
                    self._finish()

    def _finish(self) -> None:
        self.complete_at = self.network.env.now
        self.active = False
        if self.on_complete is not None:
            self.on_complete()


class Uploads:
    """Agent -> server uploads of one record each, acknowledged and repeated on loss.

    ``begin(senders, server)`` opens a collection epoch; ``send(agent, record)`` uploads. With
    ``reliable`` the server acknowledges each upload and :meth:`tick` repeats uploads not
    acknowledged within ``timeout``. ``on_complete(records)`` fires when the server holds a
    record from every sender (``records``: sender -> vector).
    """

    def __init__(self, network, prefix: str, *, reliable: bool, timeout: float,
                 on_complete: Callable[[dict[int, np.ndarray]], None]):
        self.network = network
        self.kind, self.ack = f"{prefix}-upload", f"{prefix}-ack"
        self.reliable = reliable
        self.timeout = timeout
        self.on_complete = on_complete
        self.tag = 0
        self.retries = 0
        self.active = False
        network.subscribe(self.kind, self._on_upload)
        network.subscribe(self.ack, self._on_ack)

    def begin(self, senders: Sequence[int], server: int) -> None:
        self.tag += 1
        self.server = server
        self.expected = {int(s) for s in senders}
        self.got: dict[int, np.ndarray] = {}
        self._open: dict[int, list] = {}
        self.active = True
        self.complete_at: float | None = None
        if not self.expected:
            self._finish()

    def send(self, agent: int, record: np.ndarray) -> None:
        self.network.send(agent, self.server, self.kind, (self.tag, record))
        if self.reliable:
            self._open[agent] = [record, self.network.env.now]

    def tick(self, now: float) -> None:
        if not (self.active and self.reliable):
            return
        for agent, entry in list(self._open.items()):
            if now - entry[1] >= self.timeout:
                self.network.send(agent, self.server, self.kind, (self.tag, entry[0]))
                entry[1] = now
                self.retries += 1

    def _on_upload(self, message: Message) -> None:
        tag, record = message.payload
        if tag != self.tag:
            return
        if self.reliable:
            self.network.send(message.dst, message.src, self.ack, tag)
        if not self.active or message.src in self.got:
            return
        self.got[message.src] = record
        if len(self.got) == len(self.expected):
            self._finish()

    def _on_ack(self, message: Message) -> None:
        if message.payload == self.tag:
            self._open.pop(message.dst, None)

    def _finish(self) -> None:
        self.active = False
        self.complete_at = self.network.env.now
        self._open.clear()
        self.on_complete(dict(self.got))


class SinkTree:
    """SAC along shortest paths: every record travels up a BFS tree rooted at its component's sink.

    Each agent sends its own record to its parent at the first slot boundary of the round; a
    relay forwards what it received at the next slot boundary (each record once), so a record
    reaches the sink after sd(i, SA_q) slots. ``on_group(q)`` fires when the sink of component
    q holds all M_q records. With ``reliable`` every hop is acknowledged and repeated after
    ``timeout`` until acknowledged.
    """

    def __init__(self, network, prefix: str, *, graph: nx.Graph, groups: Sequence[Sequence[int]],
                 sinks: Sequence[int], reliable: bool, timeout: float, on_group: Callable[[int], None]):
        self.network = network
        self.kind, self.ack = f"{prefix}-hop", f"{prefix}-ack"
        self.groups = [list(g) for g in groups]
        self.sinks = list(sinks)
        self.reliable = reliable
        self.timeout = timeout
        self.on_group = on_group
        self.tag = 0
        self.parent = np.full(network.num_agents, -1)
        self.group_of = np.zeros(network.num_agents, dtype=np.int64)
        for q, (sink, members) in enumerate(zip(self.sinks, self.groups)):
            self.group_of[members] = q
            if len(members) > 1:
                for child, par in nx.bfs_predecessors(graph.subgraph(members), sink):
                    self.parent[child] = par
        network.subscribe(self.kind, self._on_hop)
        network.subscribe(self.ack, self._on_ack)

    def begin(self, records: np.ndarray) -> None:
        self.tag += 1
        self.held = {s: {s: records[s]} for s in self.sinks}
        self._outbox = {i: {i: records[i]} for i in range(len(records)) if i not in self.held}
        self._forwarded: dict[int, set[int]] = {}
        self._unacked: dict[int, dict[int, list]] = {}
        for q, members in enumerate(self.groups):
            if len(members) == 1:
                self.on_group(q)

    def records_at_sink(self, q: int) -> np.ndarray:
        held = self.held[self.sinks[q]]
        return np.array([held[j] for j in self.groups[q]])

    def tick(self, now: float) -> None:
        outbox, self._outbox = self._outbox, {}
        for node in sorted(outbox):
            self._send(node, outbox[node])
            if self.reliable:
                self._unacked.setdefault(node, {}).update({k: [v, now] for k, v in outbox[node].items()})
        if self.reliable:
            for node, pending in self._unacked.items():
                late = {k: v for k, v in pending.items() if now - v[1] >= self.timeout}
                if late:
                    self._send(node, {k: v[0] for k, v in late.items()})
                    for k in late:
                        pending[k][1] = now

    def _send(self, node: int, batch: dict[int, np.ndarray]) -> None:
        keys = tuple(sorted(batch))
        self.network.send(node, int(self.parent[node]), self.kind, (self.tag, keys, np.array([batch[k] for k in keys])),
                          size=len(keys))

    def _on_hop(self, message: Message) -> None:
        tag, keys, values = message.payload
        if tag != self.tag:
            return
        node = message.dst
        if self.reliable:
            self.network.send(node, message.src, self.ack, (tag, keys))
        if node in self.held:
            held = self.held[node]
            q = int(self.group_of[node])
            complete = len(held) == len(self.groups[q])
            for k, v in zip(keys, values):
                held.setdefault(k, v)
            if not complete and len(held) == len(self.groups[q]):
                self.on_group(q)
            return
        forwarded = self._forwarded.setdefault(node, set())  # relay: forward at the next slot boundary, once
        box = self._outbox.setdefault(node, {})
        for k, v in zip(keys, values):
            if k not in forwarded:
                forwarded.add(k)
                box[k] = v

    def _on_ack(self, message: Message) -> None:
        tag, keys = message.payload
        pending = self._unacked.get(message.dst)
        if tag == self.tag and pending:
            for k in keys:
                pending.pop(k, None)
