"""The network's delivery queue: fresh messages, a sorted run of columns, a heap, one SimPy wake-up, a tight loop.

Part of :class:`netsim.engine.network.Network` (its base class); see ``docs/engine.md``, "Delivery and
ordering", and the module docstring of :mod:`netsim.engine.network`. Messages are entries (the tuples of
:mod:`netsim.engine.messages`) or rows of :class:`~netsim.engine.messages._Columns`, delivered in
``(due, sequence)`` order; they wait in one of three places:

* ``_fresh``: what was sent outside the delivery loop since the wake-up last fired, in send
  (sequence) order: single-message entries, and one ``_Columns`` block per ``broadcast_each`` call
  with sampled delays on plain links (one array per field). Such a send only appends, and arms an
  earlier wake-up if it holds the new head.
* ``_run``: ``_Columns`` sorted by ``(due, sequence)``, read from ``_cursor`` on. When the wake-up
  fires, the fresh messages (entries turned into columns) and the unread rest of the run are
  sorted together by due time alone (one stable numpy argsort, then one gather per field): the
  rest holds smaller sequences than any fresh message and the fresh ones are in sequence order, so
  ties keep send order. A tick's worth of sampled-delay broadcasts thus costs array work, a sort
  and then an index step per message, instead of a heap push and a heap pop each. Entries the
  arrays would not give back as they are (an int time, a numpy node id) stay entries, on the heap.
* ``_heap``: a binary heap of entries for multicasts, for what is sent while the loop delivers (a
  zero-delay message sent by a handler must be seen right after that handler), and for fresh
  messages too few to be worth re-sorting a long run (fewer than a quarter of its unread ones:
  a re-sort then costs a bounded multiple of what it files, so asynchronous senders do not make
  it quadratic).

The loop delivers every message due before the next SimPy event (or at the same instant when that
event is a clock tick), advancing the simulated clock itself. Each turn first delivers a
*stretch* of the run: the messages due strictly before the heap's head and the next SimPy event,
as long as each is the only one of its instant and has a per-message handler, or, when every
message in the run is of one kind with a per-message handler and the heap is empty, all of them
(same-instant ones too: with no batch reader among them, one at a time in send order is what the
instant's batch would do; each Message is built in C from the zipped columns when taken). The
stretch stops early when a handler sends or schedules something, since the bounds may have moved.
Then one general step takes the next message in ``(due, sequence)`` order from the run or the
heap, alone or with the rest of its instant, for per-message handlers, batch, record and deferred
readers, the tracer, per-node handlers and crash drops. Steps other than a uniform stretch read
the run as entries, made from the columns the first time one of them takes a message of the run
in a wake-up, of the messages due by the next SimPy event only (a step that only looks at the
run's head reads its due time and sequence).

The counters of a stretch (per-kind ``delivered``, per-node received, the network's
``in_flight``) are brought up to date together when it ends, before any other delivery, event or
read outside the loop; its receivers are only noted (``Metrics.note_received``, a slice of the run's
destination column) and counted with ``np.bincount`` when read (see :mod:`netsim.engine.metrics`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from itertools import groupby
from operator import itemgetter, length_hint
from typing import Any

import numpy as np
import simpy
from simpy.core import URGENT

from netsim.engine.errors import ProtocolError
from netsim.engine.held import Holding
from netsim.engine.messages import (
    _NO_COLUMNS,
    Message,
    _columnar,
    _Columns,
    _columns,
    _concat,
    _entry,
    _fanout,
    _first_dst,
    _messages,
    _new,
    _record,
    _subset,
)

DELIVERY = URGENT
_sequence = itemgetter(1)
_kind = itemgetter(2)
_END = (math.inf, math.inf)  # after the run's entries (``_rows``): reads past the last entry need no bounds check


class _WakeUp(simpy.events.Event):
    """The one SimPy event that wakes the network up for the head of its delivery queue."""

    __slots__ = ()

    def __init__(self, env: simpy.Environment, delay: float, callback: Callable[[Any], None]):
        self.env = env
        self.callbacks = [callback]
        self._ok = True
        self._value = None
        env.schedule(self, DELIVERY, delay)


class DeliveryHeap:
    """The delivery queue, the wake-up and the delivery of :class:`netsim.engine.network.Network` (which sets the
    state)."""

    __slots__ = ()

    _fresh: list[tuple | _Columns]
    _fresh_kinds: set[str]  # the kinds among them
    _run: _Columns
    _kind_names: list[str]  # the kinds of _Columns.kind codes
    _kind_codes: dict[str, int]
    _cursor: int
    _run_kinds: set[str]
    _heap: list[tuple]
    _delivering: bool
    _in_flight: int
    _alarm: _WakeUp | None
    _alarm_at: float
    _alone: dict[str, Callable[[Message], None]]  # batch readers, for a message alone at its instant
    _holding: Holding
    _early: bool  # the running event comes before the deliveries of its instant (see _before_deliveries)
    _noted: list[tuple] | None  # broadcasts noted, not sent yet (netsim.engine.network.Network.broadcast)

    # ------------------------------------------------------------------ queueing
    def _push(self, entry: tuple) -> None:
        """Queue one entry (``entry[9]`` messages, sequence taken just now)."""
        if self.tracer:
            for message in _messages(entry):
                self.tracer("send", message)
        self._in_flight += entry[9]
        if self._delivering:
            heapq.heappush(self._heap, entry)
            return
        if type(entry[4]) is int:
            self._fresh.append(entry)
            self._fresh_kinds.add(entry[2])
        else:  # a multicast: the run holds single messages only
            heapq.heappush(self._heap, entry)
        if entry[0] < self._alarm_at:
            self._arm(entry[0])

    def _push_all(self, entries: list[tuple], kind: str | None = None, head: float | None = None) -> None:
        """Queue single-message entries, in the order of their sequences (taken just now).

        ``kind``: the kind of every entry, if they share one; ``head``: their least due time, if known.
        """
        if self.tracer:
            for entry in entries:
                for message in _messages(entry):
                    self.tracer("send", message)
        self._in_flight += len(entries)
        if self._delivering:
            self._push_during_delivery(entries)
            return
        self._fresh += entries
        if kind is None:
            self._fresh_kinds.update(map(_kind, entries))
        else:
            self._fresh_kinds.add(kind)
        if head is None:
            head = min(entries)[0]
        if head < self._alarm_at:
            self._arm(head)

    def _push_columns(self, block: _Columns, kind: str, head: float) -> None:
        """Queue the messages of one ``broadcast_each`` call on plain links (sequences taken just now, no
        tracer): ``head`` is their least due time."""
        self._in_flight += len(block.due)
        if self._delivering:
            self._push_during_delivery(block.entries(0, len(block.due), self._kind_names))
            return
        self._fresh.append(block)
        self._fresh_kinds.add(kind)
        if head < self._alarm_at:
            self._arm(head)

    def _code(self, kind: str) -> int:
        """The code of ``kind`` in :attr:`_Columns.kind`."""
        code = self._kind_codes.get(kind)
        if code is None:
            code = self._kind_codes[kind] = len(self._kind_names)
            self._kind_names.append(kind)
        return code

    def _push_during_delivery(self, entries: list[tuple]) -> None:
        """Put entries sent by a handler on the heap, where the running loop sees them."""
        heap = self._heap
        if len(entries) > 8 and len(entries) * 4 > len(heap):
            heap.extend(entries)
            heapq.heapify(heap)
        else:
            push = heapq.heappush
            for entry in entries:
                push(heap, entry)

    def _file(self) -> None:
        """Move the fresh messages to the run (one stable argsort with its unread rest) or, if few, to the heap.

        Entries that columns would not give back as they are (an int time, a numpy node id: not
        :func:`~netsim.engine.messages._columnar`) wait on the heap, which keeps them as they are."""
        fresh, kinds, run, cursor = self._fresh, self._fresh_kinds, self._run, self._cursor
        self._fresh, self._fresh_kinds = [], set()
        push, heap = heapq.heappush, self._heap
        unread = len(run.due) - cursor
        if sum(len(part.due) if type(part) is _Columns else 1 for part in fresh) * 4 < unread:
            for part in fresh:
                if type(part) is _Columns:
                    for entry in part.entries(0, len(part.due), self._kind_names):
                        push(heap, entry)
                else:
                    push(heap, part)
            return
        parts = [_Columns(*(column[cursor:] for column in run))] if unread else []
        for block, group in groupby(fresh, type):  # in send order: blocks, and runs of single entries
            if block is _Columns:
                parts += group
                continue
            entries = []
            for entry in group:
                if _columnar(entry):
                    entries.append(entry)
                else:
                    push(heap, entry)
            if entries:
                parts.append(_columns(entries, self._code))
        if not parts:
            return
        columns = _concat(parts)
        self._run = columns.take(np.argsort(columns.due, kind="stable"))  # ties keep send order
        self._cursor = 0
        self._run_kinds = kinds | self._run_kinds if unread else kinds

    def _arm(self, due: float) -> None:
        self._alarm_at = due
        self._alarm = _WakeUp(self.env, due - self.env.now, self._wake)

    def _wake(self, event: _WakeUp) -> None:
        """Deliver every entry due before the next SimPy event (see the module docstring).

        Each turn delivers a stretch of the run (due strictly before ``bound``, the heap's head or
        the next SimPy event: no tie with the heap to break, no bound to re-read unless a handler
        sends or schedules something), then takes one general step: the next entry in
        ``(due, sequence)`` order from either place, alone or with the rest of its instant.
        """
        if event is not self._alarm:
            return  # superseded by an earlier wake-up
        if self._noted:
            self._send_noted()  # the broadcasts noted at this instant (Network.broadcast): nothing due before now
        self._alarm, self._alarm_at = None, math.inf
        self._delivering = True  # sends go to the heap until the loop ends, and arm nothing
        self._noted = None  # and broadcasts are sent at once
        if self._fresh:
            self._file()
        heap, run, cursor = self._heap, self._run, self._cursor
        end = len(run.due)
        rows = None  # the run as entries (_rows), made when a step other than a uniform stretch first reads it
        env = self.env
        queue = env._queue
        pop = heapq.heappop
        # the fast paths need: no tracer, no crashes, no per-node handlers
        plain = not self.tracer and not self._node_handlers and (self.faults is None or not self.faults.has_crashes)
        by_kind = self.metrics.messages
        # (a kind first sent during this loop takes the general path once: no counter is created here)
        fast = {kind: (handler, by_kind[kind]) for kind, handler in self._handlers.items() if kind in by_kind}
        kinds = self._run_kinds
        uniform = None
        if len(kinds) == 1:
            (kind,) = kinds
            if kind in fast:
                uniform = kind, fast[kind]
        # a message alone at its instant goes to a batch reader as a batch of one, without the general step
        fast.update({kind: (handler, by_kind[kind]) for kind, handler in self._alone.items() if kind in by_kind})
        received = self.metrics.received_by_node
        inf = math.inf
        start = None  # where the running stretch started reading the run
        try:
            while True:
                size, waiting = len(queue), len(heap)
                limit, limit_priority = queue[0][:2] if size else (inf, inf)
                if plain:
                    bound = heap[0][0] if waiting and heap[0][0] < limit else limit
                    start = streak = cursor  # streak: where the stretch's current kind began
                    if uniform is not None and not waiting:
                        # the run holds one kind, with a per-message handler, and the heap is empty: deliver
                        # everything due before the bound in order, same-instant messages too (no batch
                        # reader to wait for them), until a handler sends or schedules something
                        kind, (handler, counts) = uniform
                        stop = max(cursor, int(run.due.searchsorted(bound)))
                        messages, sources = run.messages(cursor, stop, self._kind_names, kind)
                        try:
                            for message in messages:
                                env._now = message[5]
                                handler(message)
                                if heap or len(queue) != size:
                                    break
                        finally:  # the messages taken, the one whose handler raised included
                            cursor = stop - length_hint(sources)
                    else:
                        if rows is None:
                            rows = self._rows(cursor, limit)
                        kind = handler = counts = None
                        while True:
                            entry = rows[cursor]
                            due = entry[0]
                            if due >= bound or rows[cursor + 1][0] == due:
                                break
                            if entry[2] is not kind:
                                target = fast.get(entry[2])
                                if target is None:
                                    break
                                if kind is not None:
                                    counts.delivered += cursor - streak
                                streak, kind = cursor, entry[2]
                                handler, counts = target
                            cursor += 1
                            env._now = due
                            handler(_new(Message, entry[2:9]))
                            if len(queue) != size or len(heap) != waiting:  # a handler sent or scheduled
                                size, waiting = len(queue), len(heap)
                                limit, limit_priority = queue[0][:2] if size else (inf, inf)
                                bound = heap[0][0] if waiting and heap[0][0] < limit else limit
                    if cursor != start:
                        counts.delivered += cursor - streak
                        self._count_stretch(start, cursor)
                    start = None
                    if len(queue) != size or len(heap) != waiting:
                        continue  # re-read the bounds and go on with the next stretch
                # the general step: the next entry in (due, sequence) order, the run's unless the heap's is first
                if rows is not None:
                    head = rows[cursor]
                else:  # its due time and sequence only: entries are made when one is taken
                    head = (run.due.item(cursor), run.seq.item(cursor)) if cursor < end else _END
                if heap and heap[0] < head:
                    entry = heap[0]
                    due = entry[0]
                    if due >= limit and (due > limit or limit_priority <= DELIVERY):
                        break
                    pop(heap)
                else:
                    due = head[0]
                    if head is _END or due >= limit and (due > limit or limit_priority <= DELIVERY):
                        break
                    if rows is None:
                        rows = self._rows(cursor, limit)
                    entry = rows[cursor]
                    cursor += 1
                env._now = due
                if rows is not None:
                    following = rows[cursor][0]
                else:
                    following = run.due.item(cursor) if cursor < end else inf
                if heap and heap[0][0] < following:
                    following = heap[0][0]
                if following != due and plain and type(entry[4]) is int:
                    target = fast.get(entry[2])
                    if target is not None:
                        self._in_flight -= 1
                        target[1].delivered += 1
                        dst = entry[4]
                        received[dst] += 1
                        target[0](_new(Message, entry[2:9]))
                        continue
                batch = [entry]
                if following == due:  # the rest of the instant, from both places, in send order
                    if rows is None:
                        rows = self._rows(cursor, limit)
                    first = cursor
                    while rows[cursor][0] == due:
                        cursor += 1
                    batch += rows[first:cursor]
                    if heap and heap[0][0] == due:
                        while heap and heap[0][0] == due:
                            batch.append(pop(heap))
                        batch.sort(key=_sequence)
                self._deliver(batch)
        finally:
            if start is not None and cursor != start:  # a handler raised inside a stretch
                counts.delivered += cursor - streak
                self._count_stretch(start, cursor)
            self._delivering = False
            self._note_broadcasts()
            if cursor >= end:
                self._run, self._cursor, self._run_kinds = _NO_COLUMNS, 0, set()
            else:
                self._cursor = cursor
            head = min(run.due.item(cursor) if cursor < end else inf, heap[0][0] if heap else inf)
            if head < inf:
                self._arm(head)

    def _rows(self, cursor: int, limit: float) -> list:
        """The run's messages due by ``limit`` (the next SimPy event's time) as entries, indexed like the run
        (``None`` before ``cursor``), closed by the ``(due, sequence)`` of the next message or ``_END``.

        A wake-up delivers nothing due after its first limit (the SimPy queue only gains events while it
        runs, so its head only moves earlier): the entries made are those it will deliver, and the closing
        pair stops every read of the run, as ``_END`` does."""
        run = self._run
        stop = int(run.due.searchsorted(limit, "right"))
        close = (run.due.item(stop), run.seq.item(stop)) if stop < len(run.due) else _END
        return [None] * cursor + run.entries(cursor, stop, self._kind_names) + [close]

    def _count_stretch(self, start: int, stop: int) -> None:
        """Count the messages ``run[start:stop]`` delivered by a stretch: receivers (noted, counted in bulk
        by :class:`~netsim.engine.metrics.Metrics`), in flight."""
        self._in_flight -= stop - start
        self.metrics.note_received(self._run.dst[start:stop])

    # ------------------------------------------------------------------ delivery
    def _deliver(self, batch: list[tuple]) -> None:
        """Deliver the entries of one instant, in send order."""
        metrics = self.metrics
        by_kind = metrics.messages
        self._in_flight -= sum(entry[9] for entry in batch)
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
            by_kind[kind].delivered += entry[9]
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
            self.settle()  # the kind's held flights due by now come first (docs/engine.md, one instant)
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
                    kept.append(entry[:4] + (_subset(record, alive),) + entry[5:9] + (len(alive) - lost,))
            elif up[dst]:
                kept.append(entry)
            else:
                by_kind[entry[2]].dropped += 1
                extras["dropped_crashed"] += 1
                if self.tracer:
                    self.tracer("drop", _messages(entry)[0])
        return kept

    # ------------------------------------------------------------------ held flights (netsim.engine.held)
    def settle(self) -> None:
        """Bring the flights of deferred kinds up to now: count, drop (receiver down at its due time) and
        hold every message due before now, and at now unless the running event comes before the instant's
        deliveries (:meth:`_before_deliveries`).

        Flights are settled when something can see them, not at every delivery instant: :meth:`collect`,
        :attr:`in_flight`, a queue delivery of the same kind, crash and restart events (before a node's
        state changes) and the end of the trial call this. Between two calls no handler of a deferred
        kind runs and nobody reads its books, so settling later in one step is the same as settling at
        every due time; only the kind's counters in :attr:`metrics` lag until then.
        """
        if self._noted:
            self._send_noted()
        holding = self._holding
        head = holding.head
        now = self.env.now
        if head < now or head == now and not self._early:
            holding.settle(now, not self._early)

    def _before_deliveries(self, early: bool = True) -> None:
        """Mark whether the running event comes before this instant's deliveries (the engine's crash and
        restart events, the end at the horizon): while marked, what is due now stays in flight for every
        read. Marking settles what is due before now (a crash must not drop a message due earlier)."""
        self._early = early
        if early:
            self.settle()

    @property
    def in_flight(self) -> int:
        """Messages sent but neither delivered nor dropped yet."""
        self.settle()
        return self._in_flight
