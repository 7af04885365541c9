"""Links, message delivery and link accounting on top of a ``simpy.Environment``.

Delivery (see ``docs/engine.md``, "Delivery and ordering")
    The network owns one delivery queue of entries ``(due, sequence, ...)``; ``sequence`` is a
    per-network send counter, so entries due at the same instant leave in send order. A single
    SimPy *wake-up* event is armed for the head of the queue. When it fires, the network delivers
    entries in a tight loop, advancing the simulated clock itself, for as long as the next entry
    is due before the next SimPy event (or at the same instant, when that event is a clock tick:
    deliveries come before ticks). No SimPy event, process or Python object exists per message in
    flight: a send of one payload to several neighbours over constant-delay links is one entry
    carrying its destinations as an array (a *multicast*), and a
    :meth:`Network.broadcast_chunks` call (many senders, each its own rows of one array) is one
    entry too with constant delays, and one *flight* of arrays whatever the delays when its kind
    has a deferred reader (:mod:`netsim.engine.held`); a :meth:`Network.broadcast_each` call (many
    senders, a payload each) builds every sender's messages in one pass (with sampled delays on plain
    links, one array per field: :class:`netsim.engine.messages._Columns`), and on plain links the
    :meth:`Network.broadcast` calls of one instant are noted and made together that way before anything
    can see them (:meth:`Network._send_noted`). Single messages sent between two wake-ups are
    sorted into a *run* of columns when the wake-up fires; multicasts and what handlers send wait on a
    heap (:mod:`netsim.engine.delivery`).

Order at one instant (deterministic)
    1. checkpoints of the time series, then crash and restart events (they run before anything
       else due at that instant);
    2. message deliveries, in send order: held flights' messages due then are counted and held
       first, then per-message handlers are called in send order, batch and record subscribers
       once per instant after them;
    3. clock ticks and other protocol events, in the order they were scheduled.
    A zero-delay message sent during step 2 or 3 is delivered right after the handler or
    event that sent it.

Random delays are drawn in blocks per delay law from the ``delays`` stream (:mod:`netsim.engine.delays`).
Link accounting is deferred: a send notes its edge ids, which :class:`netsim.engine.metrics.Metrics`
marks as a whole before anything reads or marks links (see its module docstring).
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import simpy
from simpy.core import NORMAL, URGENT

from netsim.engine.chunks import ChunkSends
from netsim.engine.delays import Delays
from netsim.engine.delivery import DELIVERY, DeliveryHeap
from netsim.engine.distributions import Distribution
from netsim.engine.errors import ProtocolError
from netsim.engine.faulty import FaultySends
from netsim.engine.held import Holding
from netsim.engine.messages import (  # re-exported: the engine API names live here for protocols
    _NO_COLUMNS,
    Adversary,
    BatchHandler,
    Corruptor,
    Handler,
    Message,
    Multicast,
    RecordHandler,
    _Columns,
    _gather,
    _objects,
)
from netsim.engine.metrics import Metrics

__all__ = ["Adversary", "BatchHandler", "CHECKPOINT", "Corruptor", "DELIVERY", "FAULT", "Handler", "Message",
           "Multicast", "Network", "RecordHandler", "TICK"]

_INT = {int}
_kind_and_size = operator.itemgetter(1, 3)  # of a noted broadcast (src, kind, payload, size)
CHECKPOINT = URGENT - 2  # before everything else at the same instant
FAULT = URGENT - 1       # crashes and restarts: after checkpoints, before deliveries
TICK = NORMAL


class Network(DeliveryHeap, ChunkSends, FaultySends):
    """The communication graph with its links, delays, losses and counters.

    Nodes ``0 .. num_agents-1`` are agents; the next ``len(servers)`` ids are servers,
    linked to every agent. ``components`` lists the agent ids of each component (one
    component unless the scenario splits the agents for a hybrid structure).
    """

    # slots: the send and delivery paths read a dozen attributes per call (a dict of ~50 keys is slower)
    __slots__ = ("_adversary_rng", "_agent_links", "_agent_neighbors", "_alarm", "_alarm_at", "_alone",
                 "_batch_handlers", "_corruptors", "_cursor", "_delay", "_delay_rng", "_delays", "_delivering",
                 "_early", "_edge_of", "_faults", "_fresh", "_fresh_kinds", "_handlers", "_heap", "_held", "_holding",
                 "_kind_codes", "_kind_names", "_in_flight", "_loss", "_neighbor_edges", "_neighbor_flat",
                 "_neighbor_ptr", "_neighbors", "_node_handlers", "_noted", "_overrides", "_plain",
                 "_record_handlers", "_run", "_run_kinds", "_sampled", "_sequence", "_server_delay", "_simple",
                 "_tracer", "_uniform_links", "adversary", "agent_dst", "agent_edge", "agent_ptr", "components",
                 "env", "graph", "metrics", "num_agents", "num_nodes", "rng", "servers")

    def __init__(
        self,
        env: simpy.Environment,
        graph: nx.Graph,
        *,
        num_agents: int,
        components: Sequence[Sequence[int]],
        delay: Distribution,
        server_delay: Distribution,
        loss: float,
        link_overrides: Mapping[tuple[int, int], tuple[Distribution, float]],
        rng: np.random.Generator,
        metrics: Metrics,
        adversary: Adversary | None = None,
        adversary_rng: np.random.Generator | None = None,
        delay_rng: np.random.Generator | None = None,
    ):
        self.env = env
        self.graph = graph
        self.num_agents = num_agents
        self.num_nodes = graph.number_of_nodes()
        self.servers = list(range(num_agents, self.num_nodes))
        self.components = [list(c) for c in components]
        self.metrics = metrics
        self.rng = rng
        self._delay_rng = rng if delay_rng is None else delay_rng
        self.adversary = adversary
        self._adversary_rng = adversary_rng
        self._build_adjacency()
        self._delay = delay
        self._server_delay = server_delay
        self._loss = loss
        self._overrides = {(min(u, v), max(u, v)): law for (u, v), law in link_overrides.items()}
        self._uniform_links = not self._overrides and server_delay == delay
        self._simple = self._uniform_links and loss == 0.0  # one delay law, no loss
        self._delays: dict[int, Delays] = {}
        # the fault-free send path's sampled delays (None: constant links, one multicast entry per send)
        self._sampled = None if delay.is_constant else self._law(delay)
        self._fresh: list[tuple] = []   # the delivery queue (netsim.engine.delivery)
        self._fresh_kinds: set[str] = set()
        self._run = _NO_COLUMNS
        self._kind_names: list[str] = []
        self._kind_codes: dict[str, int] = {}
        self._cursor = 0
        self._run_kinds: set[str] = set()
        self._heap: list[tuple] = []
        self._delivering = False
        self._sequence = itertools.count()
        self._in_flight = 0
        self._alarm = None  # the armed wake-up (netsim.engine.delivery)
        self._alarm_at = math.inf
        self._handlers: dict[str, Handler] = {}
        self._node_handlers: dict[tuple[int, str], Handler] = {}
        self._batch_handlers: dict[str, BatchHandler] = {}
        self._alone: dict[str, Handler] = {}
        self._record_handlers: dict[str, RecordHandler] = {}
        self._held: dict[str, list] = {}
        self._corruptors: dict[str, Corruptor] = {}
        self._tracer: Callable[[str, Message], None] | None = None
        self._faults: Any = None
        self._holding = Holding(self)  # flights of deferred kinds (netsim.engine.held)
        self._early = False
        self._plain = self._simple  # no tracer, no faults, one delay law, no loss: the send fast path
        self._noted: list[tuple] | None = None  # broadcasts noted, not sent yet (a list only on plain links)
        self._note_broadcasts()
        metrics.send_noted = self._send_noted

    def _build_adjacency(self) -> None:
        """Sorted neighbour lists, a CSR copy of them, and edge ids for link accounting."""
        n = self.num_nodes
        self._neighbors = [sorted(self.graph.neighbors(v)) for v in range(n)]
        self._agent_neighbors = [[u for u in ns if u < self.num_agents] for ns in self._neighbors]
        #: the neighbour lists as a CSR (neighbours of v: _neighbor_flat[_neighbor_ptr[v]:_neighbor_ptr[v + 1]])
        self._neighbor_ptr = np.zeros(n + 1, dtype=np.int64)
        self._neighbor_ptr[1:] = np.cumsum([len(ns) for ns in self._neighbors])
        self._neighbor_flat = np.array([v for ns in self._neighbors for v in ns], dtype=np.int64)
        edge_u, edge_v = [], []
        self._edge_of: list[dict[int, int]] = [{} for _ in range(n)]
        for u in range(n):
            for v in self._neighbors[u]:
                if u < v:
                    e = len(edge_u)
                    edge_u.append(u)
                    edge_v.append(v)
                    self._edge_of[u][v] = e
                    self._edge_of[v][u] = e
        self._neighbor_edges = [[self._edge_of[u][v] for v in self._neighbors[u]] for u in range(n)]
        self.metrics.set_edges(np.array(edge_u, dtype=np.int64), np.array(edge_v, dtype=np.int64),
                               incident=self._neighbor_edges)
        #: agent-agent adjacency in CSR form: neighbours of agent a are agent_dst[agent_ptr[a]:agent_ptr[a+1]]
        self.agent_ptr = np.zeros(self.num_agents + 1, dtype=np.int64)
        self.agent_ptr[1:] = np.cumsum([len(ns) for ns in self._agent_neighbors[: self.num_agents]])
        self.agent_dst = np.array([v for ns in self._agent_neighbors[: self.num_agents] for v in ns], dtype=np.int64)
        self.agent_edge = np.array([self._edge_of[u][v] for u in range(self.num_agents)
                                    for v in self._agent_neighbors[u]], dtype=np.int64)
        self._agent_links: list[int] | None = None   # every agent-agent edge id once (activate_agent_links)

    @property
    def tracer(self) -> Callable[[str, Message], None] | None:
        """Called as ``tracer(event, message)`` for every send, delivery, drop and corruption when set."""
        return self._tracer

    @tracer.setter
    def tracer(self, tracer: Callable[[str, Message], None] | None) -> None:
        self._send_noted()
        self._tracer = tracer
        self._plain = self._simple and not tracer and self._faults is None
        self._note_broadcasts()
        if tracer and self._holding.flights:  # from now on every message goes through the queue, in order
            self.settle()
            self._heap.extend(self._holding.drain())
            heapq.heapify(self._heap)
            if self._heap and self._heap[0][0] < self._alarm_at and not self._delivering:
                self._arm(self._heap[0][0])

    @property
    def faults(self) -> Any:
        """``[faults]`` of the scenario (:class:`netsim.engine.faults.Faults`), set by the simulation.

        None: no faults, and the send and delivery paths are exactly those of a fault-free network.
        """
        return self._faults

    @faults.setter
    def faults(self, faults: Any) -> None:
        self._send_noted()
        self._faults = faults
        if faults is not None:
            faults.before_change = self._before_deliveries  # held flights meet a crash with the state before it
        self._plain = self._simple and not self._tracer and faults is None
        self._note_broadcasts()

    @property
    def instant(self) -> bool:
        """Whether every message arrives at the instant it is sent: one constant zero delay on every link,
        no loss and no faults (paper mode's server links). A protocol may then know that nothing reaches a
        node between the engine's arrival at an instant and the events it scheduled there."""
        return self._simple and self._delay.is_constant and self._delay.mean == 0.0 and self._faults is None

    # ------------------------------------------------------------------ graph facts
    def neighbors(self, node: int) -> list[int]:
        """Sorted neighbour ids of ``node`` (agents and servers)."""
        return self._neighbors[node]

    def agent_neighbors(self, node: int) -> list[int]:
        """Sorted agent neighbour ids of ``node``."""
        return self._agent_neighbors[node]

    def is_server(self, node: int) -> bool:
        return node >= self.num_agents

    @property
    def agent_graph(self) -> nx.Graph:
        """The graph among agents only (servers removed)."""
        return self.graph.subgraph(range(self.num_agents))

    def link_law(self, u: int, v: int) -> tuple[Distribution, float]:
        """The (delay distribution, loss probability) of the link between ``u`` and ``v``."""
        law = self._overrides.get((u, v) if u < v else (v, u))
        if law is not None:
            return law
        if u >= self.num_agents or v >= self.num_agents:
            return self._server_delay, self._loss
        return self._delay, self._loss

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, kind: str, handler: Handler, *, node: int | None = None) -> None:
        """Call ``handler(message)`` for every delivered message of ``kind`` (to ``node`` if given).

        One handler per kind (and node): a second subscription raises :class:`ProtocolError`
        rather than silently replacing the first.
        """
        if node is None:
            self._claim(kind, "subscribe")
            self._handlers[kind] = handler
        else:
            if (node, kind) in self._node_handlers:
                raise ProtocolError(f"message kind {kind!r} at node {node} already has a handler; accepted: one "
                                    "handler per kind and node (dispatch inside it)")
            self._node_handlers[(node, kind)] = handler

    def subscribe_batch(self, kind: str, handler: BatchHandler) -> None:
        """Call ``handler(messages)`` once per instant with all delivered messages of ``kind`` (send order).

        One handler per kind, as for :meth:`subscribe`.
        """
        self._claim(kind, "subscribe_batch")
        self._batch_handlers[kind] = handler
        # a message alone at its instant (netsim.engine.delivery)
        self._alone[kind] = lambda message: handler([message])

    def subscribe_records(self, kind: str, handler: RecordHandler) -> None:
        """Call ``handler(records)`` once per instant with the delivered messages of ``kind`` as
        :class:`Multicast` arrays (send order), without building one Python object per message."""
        self._claim(kind, "subscribe_records")
        self._record_handlers[kind] = handler

    def subscribe_deferred(self, kind: str) -> None:
        """Hold the delivered messages of ``kind`` for a reader that acts only in its ticks.

        Messages are delivered (counted, dropped if their receiver is down) at their due time,
        as for any kind, and kept by the engine; :meth:`collect` hands over everything delivered
        since the previous call. A :meth:`broadcast_chunks` call of such a kind is one *flight*
        (``netsim.engine.held``): its messages stay arrays, per-link due times included, with sampled
        delays too; they are counted, with numpy, when something can see them (:meth:`settle`).
        """
        self._claim(kind, "subscribe_deferred")
        self._held[kind] = []

    def collect(self, kind: str) -> list[Multicast | Message]:
        """The messages of a deferred ``kind`` delivered since the last call (see :meth:`subscribe_deferred`).

        A list of :class:`Multicast` records (a record's ``due_at`` is one time, or an array with
        one due time per message) and single :class:`Message` objects. The delivery order is the
        stable sort by due time of their messages taken in list order (each record's messages are
        in ``(due, sequence)`` order); where every item has one due time, the list itself is in
        delivery order.
        """
        self.settle()
        held = self._held[kind]
        if not held:
            return held
        self._held[kind] = []
        return held

    def _claim(self, kind: str, how: str) -> None:
        if kind in self._handlers or kind in self._batch_handlers or kind in self._record_handlers or \
                kind in self._held:
            raise ProtocolError(f"{how}({kind!r}): message kind {kind!r} already has a handler; accepted: one "
                                "handler per kind (dispatch inside it, or use another kind)")

    def corruptible(self, kind: str, corruptor: Corruptor | Callable[..., tuple[Any, int]]) -> None:
        """Declare how messages of ``kind`` are corrupted by byzantine senders or links."""
        self._send_noted()  # broadcasts made before are not corrupted
        self._corruptors[kind] = corruptor

    # ------------------------------------------------------------------ sending
    def activate(self, u: int, v: int) -> bool:
        """Mark the link (u, v) built in the current slot (li2022 Eq. 2) without sending."""
        edge = self._edge_of[u].get(v)
        if edge is None:
            raise ProtocolError(f"no link between {u} and {v}")
        return self.metrics.edge_used(edge, self.env.now)

    def activate_agent_links(self) -> None:
        """Mark every agent-agent link built in the current slot (li2022 Eq. 2) without sending."""
        if self._agent_links is None:
            self._agent_links = np.unique(self.agent_edge).tolist()
        self.metrics.edges_used(self._agent_links, self.env.now)

    def send(self, src: int, dst: int, kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send one message over the link (src, dst); it arrives after the link's sampled delay."""
        edge = self._edge_of[src].get(dst)
        if edge is None:
            raise ProtocolError(f"node {src} sent {kind!r} to {dst}, which is not a neighbour")
        self._send(src, (dst,), (edge,), kind, payload, size)

    def send_many(self, src: int, dsts: Sequence[int], kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send the same ``payload`` from ``src`` to each of ``dsts`` (one message each)."""
        dsts = list(dsts)
        edge_of = self._edge_of[src]
        edges = [edge_of.get(d) for d in dsts]
        for d, edge in zip(dsts, edges, strict=True):
            if edge is None:
                raise ProtocolError(f"node {src} sent {kind!r} to {d}, which is not a neighbour")
        self._send(src, dsts, edges, kind, payload, size)

    def send_each(self, srcs: Sequence[int], dst: int, kind: str, payloads: Sequence[Any], *, size: int = 1) -> None:
        """Send ``payloads[j]`` from ``srcs[j]`` to ``dst``, one message each: exactly :meth:`send` in a loop (the
        same messages, counters, draws and delivery order).

        On plain links with a constant delay (no loss, faults, tracer or corruptor; many agents answering one
        server within an instant) the messages are one queue entry, a *gather* record (:class:`Multicast` of one
        payload object per message, ``src`` the senders in order): they are due at one instant and leave in
        send order, as the loop's messages would, taking one sequence number instead of one each (what
        :meth:`send_many` does for one payload to many). A batch or per-message reader gets the same Messages;
        a record reader (:meth:`subscribe_records`) gets the record itself, whose ``payloads()`` are the
        payload objects. A deferred kind's messages stay single entries.
        """
        self._send_noted()
        edges = list(map(self._edge_of[dst].get, srcs))  # links are undirected: the edge ids seen from dst
        if None in edges:
            src = srcs[edges.index(None)]
            raise ProtocolError(f"node {src} sent {kind!r} to {dst}, which is not a neighbour")
        count = len(edges)
        if len(payloads) != count:
            raise ProtocolError(f"send_each({kind!r}): {count} senders but {len(payloads)} payloads; "
                                "accepted: one payload per sender")
        if not (self._plain and self._sampled is None and kind not in self._corruptors and kind not in self._held) \
                or count < 2:
            for src, edge, payload in zip(srcs, edges, payloads, strict=True):
                self._send(src, (dst,), (edge,), kind, payload, size)
            return
        now = self.env._now  # _send's plain constant-delay path, once for every message
        metrics = self.metrics
        counts = metrics.messages.get(kind) or metrics.kind(kind)
        counts.sent += count
        counts.records += count * size
        by_node = metrics.sent_by_node
        for src in srcs:
            by_node[src] += 1
        if now != metrics.pending_at:
            metrics.defer_from(now)
        metrics.pending_edges.append(edges)
        due = now + self._delay.args["value"]
        payloads = list(payloads)
        self._push((due, next(self._sequence), kind, -1, _gather(kind, srcs, dst, payloads, size, now, due), payloads,
                    now, due, size, count))

    def broadcast(self, src: int, kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send ``payload`` from ``src`` to every neighbour.

        On plain links (one delay law, no loss, faults or tracer) outside the delivery loop the call is only
        noted: the broadcasts noted at one instant are made together (:meth:`_send_noted`) before anything can
        see them, exactly as the calls would have made them one by one.
        """
        noted = self._noted
        if noted is None:
            self._send(src, self._neighbors[src], None, kind, payload, size)
            return
        if not noted and self.env._now < self._alarm_at:
            self._arm(self.env._now)  # the wake-up makes them before anything else can see them
        noted.append((src, kind, payload, size))

    def _note_broadcasts(self) -> None:
        """Let :meth:`broadcast` note its calls when the links are plain and no delivery loop runs."""
        self._noted = [] if self._plain and not self._delivering else None

    def _send_noted(self) -> None:
        """Make the broadcasts noted so far, in call order: one :meth:`broadcast_each` per run of calls of one kind
        and size (the same messages, sequence numbers, delay draws, counters and links as the calls one by one).

        Called before anything can see them: by the wake-up (armed at the instant of the first noted call, so
        before time moves on), by every other send, :meth:`settle` (hence :attr:`in_flight`, :meth:`collect`
        and the end of the trial), reads and marks of the sent counts and links in :attr:`metrics`, and before
        the tracer, the faults or a corruptor change.
        """
        noted = self._noted
        if noted:
            self._noted = []
            for (kind, size), calls in itertools.groupby(noted, _kind_and_size):
                srcs, _, payloads, _ = zip(*calls, strict=True)
                self.broadcast_each(srcs, kind, payloads, size=size)

    def broadcast_each(self, srcs: Sequence[int], kind: str, payloads: Sequence[Any], *, size: int = 1) -> None:
        """:meth:`broadcast` of ``payloads[j]`` from ``srcs[j]`` for every j, in that order (many senders at one
        instant, e.g. every agent's message of a round).

        Exactly the loop of broadcasts: the same messages, sequence numbers, delay draws, counters, link
        accounting, tracer calls and delivery order. On plain links (one delay law, no loss, faults, tracer
        or corruptor) the messages of all senders are built in one pass (with sampled delays one array per
        field, one element per link; with a constant delay one multicast entry per sender); otherwise it is
        that loop.
        """
        self._send_noted()
        if len(srcs) != len(payloads):
            raise ProtocolError(f"broadcast_each({kind!r}): {len(srcs)} senders but {len(payloads)} payloads; "
                                "accepted: one payload per sender")
        if not self._plain or kind in self._corruptors:
            for src, payload in zip(srcs, payloads, strict=True):
                self._send(src, self._neighbors[src], None, kind, payload, size)
            return
        neighbors = self._neighbors
        fanout = list(map(neighbors.__getitem__, srcs))
        total = sum(map(len, fanout))
        if total == 0:
            return
        now = self.env._now  # _send's plain path, once for every sender
        metrics = self.metrics
        counts = metrics.messages.get(kind) or metrics.kind(kind)
        counts.sent += total
        counts.records += total * size
        if now != metrics.pending_at:
            metrics.defer_from(now)
        metrics.pending_sources += srcs  # counted by sender and marked as links when read (Metrics)
        sampled = self._sampled
        if sampled is None:  # constant delay: one entry per sender, a multicast unless it has one neighbour
            self._in_flight += total
            due = now + self._delay.args["value"]
            sequence = self._sequence
            entries = [(due, next(sequence), kind, src, dsts[0] if len(dsts) == 1 else list(dsts), payload, now, due,
                        size, len(dsts)) for src, payload, dsts in zip(srcs, payloads, fanout, strict=True) if dsts]
            push, heap = heapq.heappush, self._heap
            if self._delivering:
                for entry in entries:
                    push(heap, entry)
                return
            for entry in entries:
                if type(entry[4]) is int:
                    self._fresh.append(entry)
                    self._fresh_kinds.add(kind)
                else:
                    push(heap, entry)
            if due < self._alarm_at:
                self._arm(due)
            return
        delays = sampled.take_array(total)  # the draws of one _send per sender
        first = self._take_sequences(total)
        head = now + float(delays.min())
        if type(now) is float and type(size) is int and _INT.issuperset(map(type, srcs)):
            # one array per field, one message per link in sender order (float64 sums: the values of now + delay)
            senders = np.fromiter(srcs, dtype=np.int64, count=len(srcs))
            first_link = self._neighbor_ptr[senders]
            counts = self._neighbor_ptr[senders + 1] - first_link
            # link j of the output is neighbour (j - the sender's first link in the output) of its sender
            shift = np.repeat(first_link - (np.cumsum(counts) - counts), counts)
            self._push_columns(_Columns(now + delays, np.arange(first, first + total), np.full(total, self._code(kind)),
                                        np.repeat(senders, counts), self._neighbor_flat[shift + np.arange(total)],
                                        np.repeat(_objects(payloads), counts), np.full(total, now),
                                        np.full(total, size)), kind, head)
            return
        # an int time (at time 0) or numpy node ids: entries, which keep them as they are
        degrees = list(map(len, fanout))
        dues = (now + delays).tolist()
        senders = itertools.chain.from_iterable(map(itertools.repeat, srcs, degrees))
        carried = itertools.chain.from_iterable(map(itertools.repeat, payloads, degrees))
        self._push_all(list(zip(dues, range(first, first + total), itertools.repeat(kind), senders,
                                itertools.chain.from_iterable(fanout), carried, itertools.repeat(now), dues,
                                itertools.repeat(size), itertools.repeat(1))), kind, head)

    def _law(self, law: Distribution) -> Delays:
        """The delay stream of ``law`` (keyed by identity: laws live as long as the network)."""
        delays = self._delays.get(id(law))
        if delays is None:
            delays = self._delays[id(law)] = Delays(law, self._delay_rng)
        return delays

    def _send(self, src: int, dsts: Sequence[int], edges: Sequence[int] | None, kind: str, payload: Any,
              size: int) -> None:
        """The one send path of single-payload sends: counters, link accounting, then the plain links' queueing
        here or :meth:`_send_faulty`.

        ``edges`` are the edge ids of the links to ``dsts``, in the same order, or None when ``dsts`` are all
        the neighbours of ``src`` (a broadcast: its sender is noted once, for the sent counts and the links).
        No comprehension here: one would make the locals it reads closure cells, created at every call.
        """
        if self._noted:
            self._send_noted()
        count = len(dsts)
        if count == 0:
            return
        now = self.env._now
        metrics = self.metrics
        counts = metrics.messages.get(kind) or metrics.kind(kind)
        counts.sent += count
        counts.records += count * size
        if now != metrics.pending_at:  # link accounting: edge ids noted now, marked later as a whole
            metrics.defer_from(now)
        if edges is None:
            metrics.pending_sources.append(src)
        else:
            metrics.sent_by_node[src] += count
            metrics.pending_edges.append(edges)
        if self._plain and kind not in self._corruptors:
            # fault-free links with one law and no loss: the common case, queued here (as _push_all does)
            sampled = self._sampled
            if sampled is None:
                dst = dsts[0] if count == 1 else list(dsts)
                due = now + self._delay.args["value"]
                self._push((due, next(self._sequence), kind, src, dst, payload, now, due, size, count))
                return
            start = sampled.at
            stop = start + count
            if stop <= len(sampled.block):
                sampled.at = stop
                delays = sampled.block[start:stop]
                head = now + sampled.low  # a lower bound of the head: the wake-up may come early, never late
            else:
                delays = sampled.take(count)
                head = now + min(delays)
            self._in_flight += count
            delivering = self._delivering  # then the entries go to the heap, else straight to the fresh ones
            entries = [] if delivering else self._fresh
            append = entries.append
            for d, delay, sequence in zip(dsts, delays, self._sequence):  # a sequence number per destination taken
                due = now + delay
                append((due, sequence, kind, src, d, payload, now, due, size, 1))
            if delivering:
                self._push_during_delivery(entries)
                return
            self._fresh_kinds.add(kind)
            if head < self._alarm_at:
                self._arm(head)
            return
        self._send_faulty(src, dsts, kind, payload, size, counts, now)  # netsim.engine.faulty
