"""Links, message delivery and link accounting on top of a ``simpy.Environment``.

Delivery uses the engine's own scheduling: no SimPy process per message. A message sent at
``now`` over a link with sampled delay ``d`` is appended to the batch due at ``now + d``;
the first message of a batch schedules a single event at that instant, and every message
due then is delivered by that one event.

Order at one instant (deterministic, as SimPy orders events by time, priority, insertion):

1. message deliveries (priority ``DELIVERY``), in the order the messages were sent;
2. clock ticks and other protocol events (``NORMAL``), in the order they were scheduled;
3. zero-delay messages sent during step 2 are delivered right after the event that sent
   them (they are scheduled at ``now`` with the higher delivery priority).

Checkpoints of the time series run before everything else at their instant, so the value
recorded at time t counts exactly the pulls made at times < t.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import networkx as nx
import numpy as np
import simpy
from simpy.core import NORMAL, URGENT

from netsim.distributions import Distribution
from netsim.errors import ProtocolError
from netsim.metrics import Metrics

CHECKPOINT = URGENT - 1  # before deliveries at the same instant
DELIVERY = URGENT
TICK = NORMAL


class Message(NamedTuple):
    """One message in flight. ``due_at - sent_at`` is the sampled link delay.

    ``kind`` names the message type (handlers subscribe to it); ``src`` and ``dst`` are node ids;
    ``payload`` is whatever the sender passed (never copied: a receiver must not change it);
    ``sent_at`` and ``due_at`` are simulated times; ``size`` is the number of records it
    carries (``records`` in the counters, one by default).
    """

    kind: str
    src: int
    dst: int
    payload: object  # ``object`` rather than ``Any``: the generated __new__ cannot resolve the name ``Any``
    sent_at: float
    due_at: float
    size: int = 1


_new = tuple.__new__  # builds a Message from a 7-tuple without the NamedTuple __new__ frame

Handler = Callable[[Message], None]
BatchHandler = Callable[[list[Message]], None]


class Corruptor:
    """Protocol-supplied rule that rewrites a payload of one kind the way a liar would.

    ``__call__(payload, sender=, rng=, probability=, q=, relay=)`` returns
    ``(new_payload, records_corrupted)``; each record is corrupted independently with
    ``probability`` by replacing its reported value with a draw of ``q``. Records that
    ``sender`` only relays are left alone unless ``relay`` is true.
    """

    def __call__(self, payload: Any, *, sender: int, rng: np.random.Generator, probability: float,
                 q: Distribution, relay: bool) -> tuple[Any, int]:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Adversary:
    """Byzantine nodes (corrupt at the source) and in-transit link corruption."""

    byzantine: frozenset[int]
    probability: float
    q: Distribution
    relay: bool
    link_probability: float


class _Delivery(simpy.events.Event):
    """The single event that delivers every message due at one instant."""

    __slots__ = ("due",)

    def __init__(self, env: simpy.Environment, due: float, delay: float, callback: Callable[[Any], None]):
        self.env = env
        self.callbacks = [callback]
        self._ok = True
        self._value = None
        self.due = due
        env.schedule(self, DELIVERY, delay)


class Network:
    """The communication graph with its links, delays, losses and counters.

    Nodes ``0 .. num_agents-1`` are agents; the next ``len(servers)`` ids are servers,
    linked to every agent. ``components`` lists the agent ids of each component (one
    component unless the scenario splits the agents for a hybrid structure).
    """

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
    ):
        self.env = env
        self.graph = graph
        self.num_agents = num_agents
        self.num_nodes = graph.number_of_nodes()
        self.servers = list(range(num_agents, self.num_nodes))
        self.components = [list(c) for c in components]
        self.metrics = metrics
        self.rng = rng
        self.adversary = adversary
        self._adversary_rng = adversary_rng
        self._neighbors = [sorted(graph.neighbors(n)) for n in range(self.num_nodes)]
        self._adjacent = [set(ns) for ns in self._neighbors]
        self._delay = delay
        self._server_delay = server_delay
        self._loss = loss
        self._overrides = {(min(u, v), max(u, v)): law for (u, v), law in link_overrides.items()}
        self._uniform_links = not self._overrides and server_delay == delay
        self._pending: dict[float, list[Message]] = {}
        self._handlers: dict[str, Handler] = {}
        self._node_handlers: dict[tuple[int, str], Handler] = {}
        self._batch_handlers: dict[str, BatchHandler] = {}
        self._corruptors: dict[str, Corruptor] = {}
        self.tracer: Callable[[str, Message], None] | None = None
        # ``[faults]`` of the scenario (netsim.faults.Faults), set by the simulation; None: no faults,
        # and the send and delivery paths are exactly those of a fault-free network.
        self.faults: Any = None

    # ------------------------------------------------------------------ graph facts
    def neighbors(self, node: int) -> list[int]:
        """Sorted neighbour ids of ``node`` (agents and servers)."""
        return self._neighbors[node]

    def agent_neighbors(self, node: int) -> list[int]:
        return [n for n in self._neighbors[node] if n < self.num_agents]

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
        """Call ``handler(messages)`` once per instant with all delivered messages of ``kind``.

        One handler per kind, as for :meth:`subscribe`.
        """
        self._claim(kind, "subscribe_batch")
        self._batch_handlers[kind] = handler

    def _claim(self, kind: str, how: str) -> None:
        if kind in self._handlers or kind in self._batch_handlers:
            raise ProtocolError(f"{how}({kind!r}): message kind {kind!r} already has a handler; accepted: one "
                                "handler per kind (dispatch inside it, or use another kind)")

    def corruptible(self, kind: str, corruptor: Corruptor | Callable[..., tuple[Any, int]]) -> None:
        """Declare how messages of ``kind`` are corrupted by byzantine senders or links."""
        self._corruptors[kind] = corruptor

    # ------------------------------------------------------------------ sending
    def activate(self, u: int, v: int) -> bool:
        """Mark the link (u, v) built in the current slot (li2022 Eq. 2) without sending."""
        if v not in self._adjacent[u]:
            raise ProtocolError(f"no link between {u} and {v}")
        return self.metrics.link_used(u, v, self.env.now)

    def send(self, src: int, dst: int, kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send one message over the link (src, dst); it arrives after the link's sampled delay."""
        if dst not in self._adjacent[src]:
            raise ProtocolError(f"node {src} sent {kind!r} to {dst}, which is not a neighbour")
        self._send(src, (dst,), kind, payload, size)

    def send_many(self, src: int, dsts: Sequence[int], kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send the same ``payload`` from ``src`` to each of ``dsts`` (one message each)."""
        dsts = list(dsts)
        if not self._adjacent[src].issuperset(dsts):
            bad = next(d for d in dsts if d not in self._adjacent[src])
            raise ProtocolError(f"node {src} sent {kind!r} to {bad}, which is not a neighbour")
        self._send(src, dsts, kind, payload, size)

    def broadcast(self, src: int, kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send ``payload`` from ``src`` to every neighbour."""
        self._send(src, self._neighbors[src], kind, payload, size)

    def _send(self, src: int, dsts: Sequence[int], kind: str, payload: Any, size: int) -> None:
        """The one send path: counters, link accounting, loss, delay, corruption, batching."""
        count = len(dsts)
        if count == 0:
            return
        now = self.env.now
        metrics = self.metrics
        counts = metrics.kind(kind)
        counts.sent += count
        counts.records += count * size
        metrics.sent_by_node[src] += count
        metrics.links_used(src, dsts, now)
        faults = self.faults
        if faults is not None:
            dsts, dropped = faults.drop_at_send(src, dsts, now)
            if dropped:
                counts.dropped += len(dropped)
                if self.tracer:
                    for d in dropped:
                        self.tracer("drop", Message(kind, src, int(d), payload, now, now, size))
                count = len(dsts)
                if count == 0:
                    return
        if self._uniform_links or count == 1 or (src >= self.num_agents and not self._overrides):
            law, loss = self.link_law(src, dsts[0])
            laws = None
        else:
            laws = [self.link_law(src, d) for d in dsts]
            loss = max(lo for _, lo in laws)
        if loss > 0.0:
            if laws is None:
                lost = self.rng.random(count) < loss
            else:
                lost = self.rng.random(count) < np.array([lo for _, lo in laws])
            if lost.any():
                counts.dropped += int(lost.sum())
                if self.tracer:
                    for d in np.asarray(dsts)[lost]:
                        self.tracer("drop", Message(kind, src, int(d), payload, now, now, size))
                keep = ~lost
                dsts = [d for d, k in zip(dsts, keep, strict=False) if k]
                laws = None if laws is None else [law for law, k in zip(laws, keep, strict=False) if k]
                count = len(dsts)
                if count == 0:
                    return
        corrupt = self.adversary is not None and kind in self._corruptors
        if faults is not None and faults.perturbs:
            self._send_perturbed(src, dsts, kind, payload, size, laws or [(law, loss)] * count, counts, corrupt)
            return
        if laws is None and law.is_constant:
            delay = law.args["value"]
            due = now + delay
            if corrupt:
                messages = [self._corrupted(Message(kind, src, d, payload, now, due, size), counts) for d in dsts]
            else:  # tuple.__new__ skips the NamedTuple's Python-level __new__ (one frame per message)
                messages = [_new(Message, (kind, src, d, payload, now, due, size)) for d in dsts]
            self._enqueue_batch(due, delay, messages)
            return
        if laws is None:
            delays = law.sample(self.rng, count).tolist()
        else:
            delays = [float(lw.sample(self.rng)) for lw, _ in laws]
        if corrupt or self.tracer:
            for d, delay in zip(dsts, delays, strict=True):
                message = Message(kind, src, d, payload, now, now + delay, size)
                self._enqueue_batch(now + delay, delay, [self._corrupted(message, counts) if corrupt else message])
            return
        pending, env, deliver = self._pending, self.env, self._deliver
        for d, delay in zip(dsts, delays, strict=True):
            due = now + delay
            message = _new(Message, (kind, src, d, payload, now, due, size))
            batch = pending.get(due)
            if batch is None:
                pending[due] = [message]
                _Delivery(env, due, delay, deliver)
            else:
                batch.append(message)

    def _send_perturbed(self, src: int, dsts: Sequence[int], kind: str, payload: Any, size: int,
                        laws: Sequence[tuple[Distribution, float]], counts: Any, corrupt: bool) -> None:
        """Send with duplication and reordering faults (``netsim.faults``), one message at a time.

        The link delay comes from the network stream as on the plain path; whether a message is
        held back (and by how much) and whether it is duplicated (and the copy's delay) come from
        the faults stream. A copy counts as one more message sent of ``kind`` (not by ``src``).
        """
        faults = self.faults
        rng = faults.message_rng
        extras = faults.extras
        now = self.env.now
        for d, (law, _) in zip(dsts, laws, strict=True):
            delay = float(law.sample(self.rng)) if not law.is_constant else law.args["value"]
            copies = [delay]
            if faults.duplication > 0 and rng.random() < faults.duplication:
                copies.append(float(law.sample(rng)))
                extras["duplicated"] += 1
                counts.sent += 1
                counts.records += size
            message = Message(kind, src, d, payload, now, now, size)
            if corrupt:
                message = self._corrupted(message, counts)
            for delay in copies:
                if faults.reorder > 0 and rng.random() < faults.reorder:
                    delay += float(faults.reorder_delay.sample(rng))
                    extras["reordered"] += 1
                due = now + delay
                self._enqueue_batch(due, delay, [message._replace(due_at=due)])

    def _corrupted(self, message: Message, counts: Any) -> Message:
        """``message`` as the adversary lets it through (byzantine sender, corrupting link)."""
        adv = self.adversary
        src, payload = message.src, message.payload
        corrupted = 0
        corrupt = self._corruptors[message.kind]
        if src in adv.byzantine and adv.probability > 0.0:
            payload, n = corrupt(payload, sender=src, rng=self._adversary_rng, probability=adv.probability,
                                 q=adv.q, relay=adv.relay)
            corrupted += n
        if adv.link_probability > 0.0:
            payload, n = corrupt(payload, sender=src, rng=self._adversary_rng, probability=adv.link_probability,
                                 q=adv.q, relay=True)
            corrupted += n
        if not corrupted:
            return message
        counts.corrupted += 1
        message = message._replace(payload=payload)
        if self.tracer:
            self.tracer("corrupt", message)
        return message

    def _enqueue_batch(self, due: float, delay: float, messages: list[Message]) -> None:
        if self.tracer:
            for message in messages:
                self.tracer("send", message)
        batch = self._pending.get(due)
        if batch is None:
            self._pending[due] = messages
            _Delivery(self.env, due, delay, self._deliver)
        else:
            batch.extend(messages)

    # ------------------------------------------------------------------ delivery
    def _deliver(self, event: _Delivery) -> None:
        batch = self._pending.pop(event.due)
        received = self.metrics.received_by_node
        by_kind = self.metrics.messages
        tracer = self.tracer
        batch_handlers = self._batch_handlers
        node_handlers = self._node_handlers
        handlers = self._handlers
        grouped: dict[str, list[Message]] | None = None
        faults = self.faults
        if faults is not None and faults.has_crashes:
            kept = []
            for message in batch:  # a crashed destination receives nothing
                if faults.delivered(message):
                    kept.append(message)
                else:
                    by_kind[message.kind].dropped += 1
                    if tracer:
                        tracer("drop", message)
            batch = kept
        if not tracer and not node_handlers:
            self._deliver_plain(batch)
            return
        for message in batch:
            kind = message.kind
            by_kind[kind].delivered += 1
            received[message.dst] += 1
            if tracer:
                tracer("deliver", message)
            if batch_handlers and kind in batch_handlers:
                if grouped is None:
                    grouped = {}
                grouped.setdefault(kind, []).append(message)
                continue
            handler = (node_handlers and node_handlers.get((message.dst, kind))) or handlers.get(kind)
            if handler is None:
                raise ProtocolError(f"message {kind!r} delivered to node {message.dst}, nobody subscribed")
            handler(message)
        if grouped:
            for kind, messages in grouped.items():
                batch_handlers[kind](messages)

    def _deliver_plain(self, batch: list[Message]) -> None:
        """:meth:`_deliver` without tracer or per-node handlers: same order, fewer lookups per message.

        Per-message handlers run in send order inside the loop, batch handlers after it with
        their messages in send order, exactly as on the general path; the ``delivered``
        counters of batched kinds are added per kind before the batch handlers run.
        """
        received = self.metrics.received_by_node
        by_kind = self.metrics.messages
        batch_handlers = self._batch_handlers
        handlers = self._handlers
        grouped: dict[str, list[Message]] = {}
        for message in batch:
            kind = message.kind
            received[message.dst] += 1
            group = grouped.get(kind)
            if group is not None:
                group.append(message)
                continue
            if kind in batch_handlers:
                grouped[kind] = [message]
                continue
            by_kind[kind].delivered += 1
            handler = handlers.get(kind)
            if handler is None:
                raise ProtocolError(f"message {kind!r} delivered to node {message.dst}, nobody subscribed")
            handler(message)
        for kind, messages in grouped.items():
            by_kind[kind].delivered += len(messages)
        for kind, messages in grouped.items():
            batch_handlers[kind](messages)

    @property
    def in_flight(self) -> int:
        """Messages sent but neither delivered nor dropped yet."""
        return sum(len(b) for b in self._pending.values())
