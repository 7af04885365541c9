"""The network's delivery heap: one heap of entries, one SimPy wake-up, a tight delivery loop.

Part of :class:`netsim.network.Network` (its base class); see ``docs/engine.md``, "Delivery and
ordering", and the module docstring of :mod:`netsim.network`. Entries are the tuples of
:mod:`netsim.messages`; the loop delivers every entry due before the next SimPy event (or at the
same instant when that event is a clock tick), advancing the simulated clock itself, and hands
each instant's messages to per-message handlers, batch, record and deferred readers.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy
from simpy.core import URGENT

from netsim.errors import ProtocolError
from netsim.messages import Message, _entry, _fanout, _first_dst, _messages, _new, _record, _subset

DELIVERY = URGENT


class _WakeUp(simpy.events.Event):
    """The one SimPy event that wakes the network up for the head of its delivery heap."""

    __slots__ = ()

    def __init__(self, env: simpy.Environment, delay: float, callback: Callable[[Any], None]):
        self.env = env
        self.callbacks = [callback]
        self._ok = True
        self._value = None
        env.schedule(self, DELIVERY, delay)


class DeliveryHeap:
    """The heap, the wake-up and the delivery of :class:`netsim.network.Network` (which sets the state)."""

    _heap: list[tuple]
    _in_flight: int
    _alarm: _WakeUp | None
    _alarm_at: float

# ------------------------------------------------------------------ the delivery heap
    def _push(self, entry: tuple) -> None:
        """Add one heap entry (``entry[8]`` messages); arm the wake-up if it is the new head."""
        if self.tracer:
            for message in _messages(entry):
                self.tracer("send", message)
        heapq.heappush(self._heap, entry)
        self._in_flight += entry[8]
        if entry[0] < self._alarm_at:
            self._arm(entry[0])

    def _push_all(self, entries: list[tuple]) -> None:
        if self.tracer:
            for entry in entries:
                for message in _messages(entry):
                    self.tracer("send", message)
        heap = self._heap
        if len(entries) > 8 and len(entries) * 4 > len(heap):
            heap.extend(entries)
            heapq.heapify(heap)
        else:
            push = heapq.heappush
            for entry in entries:
                push(heap, entry)
        self._in_flight += len(entries)
        head = heap[0][0]
        if head < self._alarm_at:
            self._arm(head)

    def _arm(self, due: float) -> None:
        self._alarm_at = due
        self._alarm = _WakeUp(self.env, due - self.env.now, self._wake)

    def _wake(self, event: _WakeUp) -> None:
        """Deliver every heap entry due before the next SimPy event (see the module docstring)."""
        if event is not self._alarm:
            return  # superseded by an earlier wake-up
        self._alarm, self._alarm_at = None, -math.inf  # sends during the loop do not arm
        heap, env = self._heap, self.env
        queue = env._queue
        pop = heapq.heappop
        # fast path: a lone single message to a per-message handler, no tracer, crashes or node handlers
        plain = not self.tracer and not self._node_handlers and (self.faults is None or not self.faults.has_crashes)
        by_kind = self.metrics.messages
        # (a kind first sent during this loop takes the general path once: no counter is created here)
        fast = {kind: (handler, by_kind[kind]) for kind, handler in self._handlers.items() if kind in by_kind}
        received = self.metrics.received_by_node
        inf = math.inf
        size = -1
        limit = limit_priority = inf
        delivered = 0
        due = heap[0][0] if heap else inf
        try:
            while due < inf:
                if len(queue) != size:  # the SimPy queue only grows while we run: re-read its head
                    size = len(queue)
                    limit, limit_priority = queue[0][:2] if size else (inf, inf)
                if due >= limit and (due > limit or limit_priority <= DELIVERY):
                    break
                env._now = due
                entry = pop(heap)
                following = heap[0][0] if heap else inf
                if following != due and plain and entry[8] == 1 and type(entry[4]) is int:
                    target = fast.get(entry[2])
                    if target is not None:
                        delivered += 1
                        target[1].delivered += 1
                        dst = entry[4]
                        received[dst] += 1
                        target[0](_new(Message, (entry[2], entry[3], dst, entry[5], entry[6], due, entry[7])))
                        due = heap[0][0] if heap else inf
                        continue
                batch = [entry]
                while following == due:
                    batch.append(pop(heap))
                    following = heap[0][0] if heap else inf
                self._deliver(batch)
                due = heap[0][0] if heap else inf
        finally:
            self._in_flight -= delivered
            self._alarm_at = math.inf
            if heap:
                self._arm(heap[0][0])

    # ------------------------------------------------------------------ delivery
    def _deliver(self, batch: list[tuple]) -> None:
        """Deliver the entries of one instant, in send order."""
        metrics = self.metrics
        by_kind = metrics.messages
        self._in_flight -= sum(entry[8] for entry in batch)
        faults = self.faults
        if faults is not None and faults.has_crashes:
            batch = self._drop_crashed(batch)
        if self.tracer or self._node_handlers:
            self._deliver_general(batch)
            return
        received = metrics.received_by_node
        handlers = self._handlers
        grouped: dict[str, list[tuple]] = {}
        for entry in batch:
            kind, dst = entry[2], entry[4]
            by_kind[kind].delivered += entry[8]
            if type(dst) is list:
                for d in dst:
                    received[d] += 1
            elif isinstance(dst, tuple):
                metrics.received_bulk += np.bincount(dst.dst, minlength=self.num_nodes)
            else:
                received[dst] += 1
            group = grouped.get(kind)
            if group is not None:
                group.append(entry)
            elif kind in handlers:
                handler = handlers[kind]
                for message in _messages(entry):
                    handler(message)
            elif kind in self._record_handlers or kind in self._held or kind in self._batch_handlers:
                grouped[kind] = [entry]
            else:
                raise ProtocolError(f"message {kind!r} delivered to node {_first_dst(entry)}, nobody subscribed")
        for kind, entries in grouped.items():
            self._hand_over(kind, entries)

    def _hand_over(self, kind: str, entries: list[tuple]) -> None:
        """Give the entries of one kind delivered at one instant to its batch, record or deferred reader."""
        if kind in self._batch_handlers:
            messages: list[Message] = []
            for entry in entries:
                messages.extend(_messages(entry))
            self._batch_handlers[kind](messages)
            return
        records = [_record(entry) for entry in entries]
        if kind in self._record_handlers:
            self._record_handlers[kind](records)
        else:
            self._held[kind].extend(records)

    def _deliver_general(self, batch: list[tuple]) -> None:
        """Delivery with a tracer or per-node handlers: one message at a time, same order and counts."""
        metrics = self.metrics
        by_kind = metrics.messages
        received = metrics.received_by_node
        tracer = self.tracer
        grouped: dict[str, list[tuple]] = {}
        for entry in batch:
            for message in _messages(entry):
                kind = message.kind
                by_kind[kind].delivered += 1
                received[message.dst] += 1
                if tracer:
                    tracer("deliver", message)
                if kind in self._record_handlers or kind in self._held or kind in self._batch_handlers:
                    grouped.setdefault(kind, []).append(_entry(message))
                    continue
                handler = self._node_handlers.get((message.dst, kind)) or self._handlers.get(kind)
                if handler is None:
                    raise ProtocolError(f"message {kind!r} delivered to node {message.dst}, nobody subscribed")
                handler(message)
        for kind, entries in grouped.items():
            self._hand_over(kind, entries)

    def _drop_crashed(self, batch: list[tuple]) -> list[tuple]:
        """The entries of ``batch`` with the messages to crashed receivers removed (and counted)."""
        up = self.faults.up
        by_kind = self.metrics.messages
        extras = self.faults.extras
        kept = []
        for entry in batch:
            dst = entry[4]
            if isinstance(dst, tuple) or type(dst) is list:
                record = dst if isinstance(dst, tuple) else _fanout(entry)
                alive = up[record.dst]
                if alive.all():
                    kept.append(entry)
                    continue
                lost = int(len(alive) - alive.sum())
                by_kind[entry[2]].dropped += lost
                extras["dropped_crashed"] += lost
                if self.tracer:
                    for message in _subset(record, ~alive).messages():
                        self.tracer("drop", message)
                if alive.any():
                    kept.append(entry[:4] + (_subset(record, alive),) + entry[5:8] + (len(alive) - lost,))
            elif up[dst]:
                kept.append(entry)
            else:
                by_kind[entry[2]].dropped += 1
                extras["dropped_crashed"] += 1
                if self.tracer:
                    self.tracer("drop", _messages(entry)[0])
        return kept

    @property
    def in_flight(self) -> int:
        """Messages sent but neither delivered nor dropped yet."""
        return self._in_flight
