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

from collections.abc import Callable, Iterable, Mapping, Sequence
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
    """One message in flight. ``due_at - sent_at`` is the sampled link delay."""

    kind: str
    src: int
    dst: int
    payload: Any
    sent_at: float
    due_at: float
    size: int = 1


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
        self._pending: dict[float, list[Message]] = {}
        self._handlers: dict[str, Handler] = {}
        self._node_handlers: dict[tuple[int, str], Handler] = {}
        self._batch_handlers: dict[str, BatchHandler] = {}
        self._corruptors: dict[str, Corruptor] = {}
        self.tracer: Callable[[str, Message], None] | None = None

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
        """Call ``handler(message)`` for every delivered message of ``kind`` (to ``node`` if given)."""
        if node is None:
            self._handlers[kind] = handler
        else:
            self._node_handlers[(node, kind)] = handler

    def subscribe_batch(self, kind: str, handler: BatchHandler) -> None:
        """Call ``handler(messages)`` once per instant with all delivered messages of ``kind``."""
        self._batch_handlers[kind] = handler

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
        now = self.env.now
        metrics = self.metrics
        metrics.link_used(src, dst, now)
        counts = metrics.kind(kind)
        counts.sent += 1
        counts.records += size
        metrics.node_sent[src] += 1
        delay_law, loss = self.link_law(src, dst)
        if loss > 0.0 and self.rng.random() < loss:
            counts.dropped += 1
            if self.tracer:
                self.tracer("drop", Message(kind, src, dst, payload, now, now, size))
            return
        delay = delay_law.args["value"] if delay_law.is_constant else float(delay_law.sample(self.rng))
        payload = self._maybe_corrupt(src, kind, payload, counts)
        self._enqueue(Message(kind, src, dst, payload, now, now + delay, size), delay)

    def send_many(self, src: int, dsts: Iterable[int], kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send the same ``payload`` from ``src`` to each of ``dsts`` (one message each).

        Exactly ``for dst in dsts: send(src, dst, ...)`` (same counters, same draws in the same
        order), with the per-call lookups hoisted out of the loop: flooding protocols send
        thousands of messages per tick this way.
        """
        adjacent = self._adjacent[src]
        now = self.env.now
        metrics = self.metrics
        link_used = metrics.link_used
        counts = metrics.kind(kind)
        link_law = self.link_law
        corrupt = self._maybe_corrupt if self.adversary is not None and kind in self._corruptors else None
        tracer = self.tracer
        rng = self.rng
        # without per-link overrides every agent-agent link has the default law
        default = (self._delay, self._loss) if not self._overrides and src < self.num_agents else None
        pending = self._pending
        sent = 0
        for dst in dsts:
            if dst not in adjacent:
                raise ProtocolError(f"node {src} sent {kind!r} to {dst}, which is not a neighbour")
            link_used(src, dst, now)
            counts.sent += 1
            counts.records += size
            sent += 1
            delay_law, loss = default if default is not None and dst < self.num_agents else link_law(src, dst)
            if loss > 0.0 and rng.random() < loss:
                counts.dropped += 1
                if tracer:
                    tracer("drop", Message(kind, src, dst, payload, now, now, size))
                continue
            delay = delay_law.args["value"] if delay_law.is_constant else float(delay_law.sample(rng))
            out = payload if corrupt is None else corrupt(src, kind, payload, counts)
            message = Message(kind, src, dst, out, now, now + delay, size)
            batch = pending.get(now + delay)
            if batch is None or tracer:
                self._enqueue(message, delay)
            else:
                batch.append(message)
        metrics.node_sent[src] += sent

    def broadcast(self, src: int, kind: str, payload: Any = None, *, size: int = 1) -> None:
        """Send ``payload`` from ``src`` to every neighbour."""
        self.send_many(src, self._neighbors[src], kind, payload, size=size)

    def _maybe_corrupt(self, src: int, kind: str, payload: Any, counts: Any) -> Any:
        adv = self.adversary
        if adv is None or kind not in self._corruptors:
            return payload
        corrupted = 0
        corrupt = self._corruptors[kind]
        if src in adv.byzantine and adv.probability > 0.0:
            payload, n = corrupt(payload, sender=src, rng=self._adversary_rng, probability=adv.probability,
                                 q=adv.q, relay=adv.relay)
            corrupted += n
        if adv.link_probability > 0.0:
            payload, n = corrupt(payload, sender=src, rng=self._adversary_rng, probability=adv.link_probability,
                                 q=adv.q, relay=True)
            corrupted += n
        if corrupted:
            counts.corrupted += 1
        return payload

    def _enqueue(self, message: Message, delay: float) -> None:
        if self.tracer:
            self.tracer("send", message)
        batch = self._pending.get(message.due_at)
        if batch is None:
            self._pending[message.due_at] = [message]
            _Delivery(self.env, message.due_at, delay, self._deliver)
        else:
            batch.append(message)

    # ------------------------------------------------------------------ delivery
    def _deliver(self, event: _Delivery) -> None:
        batch = self._pending.pop(event.due)
        metrics = self.metrics
        grouped: dict[str, list[Message]] | None = None
        for message in batch:
            counts = metrics.kind(message.kind)
            counts.delivered += 1
            metrics.node_received[message.dst] += 1
            if self.tracer:
                self.tracer("deliver", message)
            if message.kind in self._batch_handlers:
                if grouped is None:
                    grouped = {}
                grouped.setdefault(message.kind, []).append(message)
                continue
            handler = self._node_handlers.get((message.dst, message.kind)) or self._handlers.get(message.kind)
            if handler is None:
                raise ProtocolError(f"message {message.kind!r} delivered to node {message.dst}, nobody subscribed")
            handler(message)
        if grouped:
            for kind, messages in grouped.items():
                self._batch_handlers[kind](messages)

    @property
    def in_flight(self) -> int:
        """Messages sent but neither delivered nor dropped yet."""
        return sum(len(b) for b in self._pending.values())
