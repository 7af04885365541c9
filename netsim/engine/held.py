"""Held deliveries: the messages of deferred kinds as arrays, settled when read, taken at ``collect``.

Part of the delivery machinery of :class:`netsim.engine.network.Network` (see ``docs/engine.md``,
"Delivery and ordering"). A reader that acts only in its ticks (``subscribe_deferred`` /
``collect``, LOCAL flooding) needs no call per delivery instant, so the messages of such a kind
sent by :meth:`~netsim.engine.network.Network.broadcast_chunks` never become one queue entry per
message, even when every link draws its own delay: one call is one :class:`Flight`, its
per-message fields arrays sorted by ``(due, sequence)``.

The flights wait on a small heap keyed by the due time of their first unsettled message, and wake
nobody: they are *settled* when something can see them (``Network.settle``: ``collect``,
``in_flight``, a queue delivery of the same kind, the engine's crash and restart events before a
node's state changes, the end of the trial): everything due before now, and at now unless the
running event comes before the instant's deliveries, at once, with numpy, one slice per flight.
Between two such points no handler of a deferred kind runs and nobody reads its books, and a
receiver's state changes only at a crash or restart, which settles first; so settling late in one
step counts, drops (a message to a receiver down at its due time) and holds exactly what settling
at every due time would. Only the kind's counters in the network's metrics lag until the next
settlement (the readers above are its only readers during a trial).

Each settlement appends, per flight and in send order, one :class:`~netsim.engine.messages.Multicast`
to the kind's held list: the slice of messages it settled, with ``due_at`` an array (one due time
per message). ``collect`` returns that list. Delivery order is therefore the stable sort of the
list's messages by ``due_at``, taken in list order (settlements cover successive time ranges, and
a flight's slice is sorted by ``(due, sequence)``); where every record has one due time (constant
delays) the list itself is in delivery order.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from netsim.engine.messages import Multicast

_SCALAR_FROM = 64  # a slice this short counts its receivers one by one (bincount allocates num_nodes)


class Flight:
    """The messages of one send call of a deferred kind, sorted by ``(due, sequence)``."""

    __slots__ = ("kind", "due", "src", "dst", "start", "stop", "payload", "sent_at", "number", "order", "cursor")

    def __init__(self, kind: str, due: np.ndarray, src: np.ndarray, dst: np.ndarray, start: np.ndarray,
                 stop: np.ndarray, payload: Any, sent_at: float, first: int, constant: bool):
        """Messages ``i`` from ``src[i]`` to ``dst[i]`` carrying rows ``payload[start[i]:stop[i]]``, due at
        ``due[i]``, with send sequences ``first + i`` (``constant``: every due time is the same)."""
        self.kind, self.payload, self.sent_at, self.number = kind, payload, sent_at, first
        if constant:
            self.order = None
        else:
            order = stable_order(due)  # ties keep the link (send sequence) order
            due, src, dst, start, stop = due[order], src[order], dst[order], start[order], stop[order]
            self.order = order
        self.due, self.src, self.dst, self.start, self.stop = due, src, dst, start, stop
        self.cursor = 0

    def record(self, index: slice | np.ndarray) -> Multicast:
        """The messages ``index`` (a slice or positions) as one record, their due times as an array."""
        return Multicast(self.kind, self.src[index], self.dst[index], self.start[index], self.stop[index],
                         self.payload, self.sent_at, self.due[index])


class Holding:
    """The flights of deferred kinds in flight, and their settlement (owned by the network)."""

    __slots__ = ("network", "flights", "head")

    def __init__(self, network: Any):
        self.network = network
        self.flights: list[tuple[float, int, Flight]] = []
        self.head = math.inf  # due time of the first message not settled yet

    def add(self, flight: Flight) -> None:
        heapq.heappush(self.flights, (float(flight.due[0]), flight.number, flight))
        if self.flights[0][0] < self.head:
            self.head = self.flights[0][0]

    def settle(self, until: float, inclusive: bool) -> None:
        """Deliver (count, drop for receivers down now, hold) every message due before ``until`` (or at it)."""
        flights = self.flights
        taken = []
        while flights and (flights[0][0] < until or inclusive and flights[0][0] == until):
            taken.append(heapq.heappop(flights)[2])
        if len(taken) > 1:
            taken.sort(key=_number)  # one slice per flight, in send order
        side = "right" if inclusive else "left"
        for flight in taken:
            lo = flight.cursor
            hi = lo + int(np.searchsorted(flight.due[lo:], until, side))
            flight.cursor = hi
            self._deliver(flight, lo, hi)
            if hi < len(flight.due):
                heapq.heappush(flights, (float(flight.due[hi]), flight.number, flight))
        self.head = flights[0][0] if flights else math.inf

    def _deliver(self, flight: Flight, lo: int, hi: int) -> None:
        network = self.network
        metrics = network.metrics
        counts = metrics.messages[flight.kind]
        n = hi - lo
        network._in_flight -= n
        dst = flight.dst[lo:hi]
        record = None
        faults = network.faults
        if faults is not None and faults.has_crashes:
            alive = faults.up[dst]
            if not alive.all():
                kept = np.flatnonzero(alive)
                lost = n - len(kept)
                counts.dropped += lost
                faults.extras["dropped_crashed"] += lost
                if not len(kept):
                    return
                dst = dst[kept]
                record = flight.record(kept + lo)
                n = len(kept)
        counts.delivered += n
        if n < _SCALAR_FROM:
            received = metrics.received_by_node
            for d in dst.tolist():
                received[d] += 1
        else:
            metrics.received_bulk += np.bincount(dst, minlength=network.num_nodes)
        network._held[flight.kind].append(flight.record(slice(lo, hi)) if record is None else record)

    def drain(self) -> list[tuple]:
        """Every message not settled yet, as single-message queue entries (when a tracer is set)."""
        entries = []
        for _, _, flight in self.flights:
            lo = flight.cursor
            seq = np.arange(lo, len(flight.due)) if flight.order is None else flight.order[lo:]
            for due, s, src, dst, a, b in zip(flight.due[lo:].tolist(), (seq + flight.number).tolist(),
                                              flight.src[lo:].tolist(), flight.dst[lo:].tolist(),
                                              flight.start[lo:].tolist(), flight.stop[lo:].tolist(), strict=True):
                entries.append((due, s, flight.kind, src, dst, flight.payload[a:b], flight.sent_at, due, b - a, 1))
        self.flights.clear()
        self.head = math.inf
        return entries


def stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")``, faster: for non-negative integers, and for non-negative float64 (due
    times: their bit patterns, as integers, are in the same order), one sort of packed (value, position) keys
    where they fit in 63 bits; else an unstable sort, redone stably only if it met ties."""
    n = len(values)
    keys = None
    if n and values.dtype == np.float64:
        bits = values.view(np.int64)
        low = int(bits.min())
        if low >= 0:  # no negative number, no -0.0
            keys = bits - low
    elif n and values.dtype.kind in "iu" and int(values.min()) >= 0:
        keys = values
    if keys is not None and int(keys.max()).bit_length() + n.bit_length() <= 63:
        packed = keys.astype(np.int64, copy=False) << n.bit_length()
        packed |= np.arange(n)
        packed.sort()
        return packed & ((1 << n.bit_length()) - 1)
    order = np.argsort(values)
    ordered = values[order]
    if np.any(ordered[1:] == ordered[:-1]):
        return np.argsort(values, kind="stable")
    return order


def _number(flight: Flight) -> int:
    return flight.number
