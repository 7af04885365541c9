"""Reliable messaging for protocols that wait for an answer: RFC 6298 timers, sequence numbers, acknowledgements.

A protocol that sends something and waits for it to arrive (an upload to a server, a vote, a
gossip request) must retransmit on loss. How long it waits decides what a study measures: a
fixed timer that is short against the link delay floods the network with copies, one that keeps
its backed-off value into later exchanges stalls the protocol under loss. Both are artefacts of
the simulator, not of the algorithm. This module is the one place where netsim decides how long
to wait, the way TCP does (RFC 6298, "Computing TCP's Retransmission Timer"); it knows nothing
about bandits.

:class:`RetransmitTimer`
    One round-trip estimator per key (a protocol uses the ordered pair ``(src, dst)``):

    * before the first measurement, RTO = ``initial`` (RFC 6298 (2.1));
    * the first measurement R gives SRTT = R, RTTVAR = R / 2 (2.2); each later R' gives
      RTTVAR = (1 - beta) RTTVAR + beta |SRTT - R'|, then SRTT = (1 - alpha) SRTT + alpha R'
      with alpha = 1/8, beta = 1/4 (2.3); RTO = SRTT + max(G, K RTTVAR), K = 4, G the clock
      granularity (here ``minimum``);
    * RTO is never below ``minimum`` (2.4) nor above ``maximum`` (2.5);
    * attempt ``a`` of one exchange (0 = first transmission) waits ``min(RTO 2^a, maximum)``: the
      timer doubles on every expiry (5.5) and, a decision of netsim, **starts again from RTO when a
      new exchange starts**: the backed-off value serves the retransmissions of the message that
      earned it, never a later exchange;
    * Karn's rule (RFC 6298 Sec. 3): only an answer to a message that was never retransmitted
      gives a measurement (:class:`Transport` enforces it).

:class:`Transport`
    Acknowledged, de-duplicated delivery of messages of one kind, on top of ``network.send`` and
    ``network.subscribe_batch``:

    * every message of a pair (src, dst) carries the pair's next sequence number and the lowest
      number the sender still retransmits (everything below it was acknowledged, cancelled or
      given up); the receiver acknowledges every copy it gets (``<kind>-ack``, one message per
      pair and instant carrying the numbers it acknowledges: an acknowledgement may be lost too)
      and hands each number to the owner's handler exactly once, whatever duplication,
      reordering or retransmission brought. It remembers, per pair, a floor (every number below
      it was seen or will never be sent again) and the numbers seen above it, so its memory is
      bounded by what the sender has outstanding, with no window limit;
    * the sender keeps every unacknowledged message and one timer per pair (RFC 6298 (5.1)-(5.6)):
      started when a message is sent and the timer is not running; restarted when an
      acknowledgement covers new data; stopped when nothing is outstanding; on expiry every
      outstanding message of the pair is sent again and the timer backs off (attempt + 1). The
      backoff ends with a valid measurement or when the pair has nothing outstanding;
    * ``attempts`` bounds the transmissions of a message (``None``: until acknowledged; with
      exponential backoff an outage of length L then costs O(log L) retransmissions, once the
      timer reaches ``maximum`` one per ``maximum``); a message given up is reported to
      ``on_give_up``;
    * a sender that is down (``up[src]`` false) retransmits nothing: its expired timer waits one
      RTO and looks again, without backing off;
    * :meth:`Transport.forget` is what a node that lost its state does: its outstanding messages
      are gone, its numbers go on in a new incarnation (``incarnation << 32``, as
      :class:`netsim.comm.sequencing.Sequencer`), and what it had received is forgotten.

    * ``acknowledge=False`` is a request whose answer is another message (a call answered by an
      upload): the receiver sends no acknowledgement, and the request stays outstanding, retransmitted
      on the timer, until the owner reports the answer with :meth:`Transport.answered` (which counts
      as the acknowledgement: Karn's rule, (5.2)-(5.3)), cancels it, or it is given up. Retransmitted
      copies are still handed over once, so the receiver's owner answers each request once (its
      answer travels on a transport of its own). A copy of a request already handed over is
      reported to ``on_duplicate``: it says that the answer was lost (or is slow), and the owner may
      send the answer again at once with :meth:`Transport.resend`, RFC 5681's fast retransmit (there
      duplicate acknowledgements play that role);
    * ``reliable=False`` is the same interface over plain datagrams (``network.send``, the owner's
      payloads as they are, no numbers, no acknowledgements, nothing retransmitted): for a run in
      which no message can be lost (:func:`can_lose`), so that paper mode sends exactly what the
      paper's algorithm sends, and the owner's code is the same in both.

    The wire payload is ``(seq, low, payload)``; the owner's handler receives :class:`Message` objects
    whose ``payload`` is the owner's own, or, with ``fanout=True``, :class:`Fanout` groups: one payload
    from one sender to an array of receivers (on plain datagrams a multicast of one payload reaches the
    owner as one group through ``network.subscribe_records``, without a Message per receiver), or, with
    ``fanin=True``, :class:`Fanin` groups: a payload each from an array of senders to one receiver (on
    plain datagrams a :meth:`Transport.send_each` reaches the owner as one group, the engine's gather
    record of ``network.send_each``, without a Message per sender). A
    byzantine sender or a corrupting link rewrites the owner's payload through the corruptor given to
    :meth:`Transport.corruptible` (acknowledgements carry no statistics and are never corrupted).

Timers cost no SimPy process: :class:`Timers` keeps a heap of deadlines and one engine callback
(``sim.call_at``) armed for the earliest.

:class:`netsim.comm.exchanges.Exchanges` (its own module)
    Requests whose *answer* is their acknowledgement and whose repeat the owner rebuilds (a REQ
    answered by its DATA, asking again only for the records still missing; an ADV answered by a
    REQ or by the neighbour's own ADV; a server's recall answered by the upload, the first request
    being implicit): the requester repeats on the same RFC 6298 timers, one per (requester, peer)
    pair, until the answer arrives, without acknowledgement messages and without the receiver
    filtering copies (a repeated request is answered again). Every transmission gets a number that
    its answer echoes, so each answer measures the round trip of the very transmission it answers,
    retransmissions included (the exception to Karn's rule that RFC 6298 Sec. 3 makes for TCP
    timestamps); an answer that names no transmission ends the wait without a measurement. The
    owner says what to send again (``repeat``), and when an exchange is over.

Protocols that expose the timer's bounds as scenario keys use :data:`TIMER_FIELDS` (``rto_initial``,
``rto_min``, ``rto_max``, in clock periods) with :func:`check_timer` (bad input, before any trial)
and :func:`timer_from` (the :class:`RetransmitTimer` of a run).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import numpy as np

from netsim.engine import faults as F
from netsim.engine import params as P
from netsim.engine.errors import InputError, ProtocolError
from netsim.engine.messages import Corruptor, Message, Multicast

ALPHA = 1.0 / 8.0   # RFC 6298 (2.3)
BETA = 1.0 / 4.0
K = 4.0
INCARNATION = 1 << 32
MAX_BACKOFF = 62     # 2**62 already exceeds any maximum; keeps the power finite


class RetransmitTimer:
    """RFC 6298 retransmission timeouts, one round-trip estimator per key (see the module docstring).

    Parameters
    ----------
    initial:
        RTO before the first measurement of a key (RFC 6298 (2.1)).
    minimum:
        Lower bound of every RTO and the clock granularity G of (2.2)-(2.3) (RFC 6298 (2.4)).
    maximum:
        Upper bound of every RTO, backed off or not (RFC 6298 (2.5)).
    """

    def __init__(self, *, initial: float, minimum: float, maximum: float):
        if not (0.0 < minimum <= initial <= maximum < math.inf):
            raise ValueError(f"initial = {initial!r}, minimum = {minimum!r}, maximum = {maximum!r}; accepted: "
                             "0 < minimum <= initial <= maximum < inf")
        self.initial, self.minimum, self.maximum = float(initial), float(minimum), float(maximum)
        self._srtt: dict[Hashable, float] = {}
        self._rttvar: dict[Hashable, float] = {}
        self.samples = 0

    def rto(self, key: Hashable, attempt: int = 0) -> float:
        """The timeout of attempt ``attempt`` (0: first transmission) of an exchange on ``key``."""
        srtt = self._srtt.get(key)
        base = self.initial if srtt is None else srtt + max(self.minimum, K * self._rttvar[key])
        base = min(max(base, self.minimum), self.maximum)
        return min(base * 2.0 ** min(attempt, MAX_BACKOFF), self.maximum)

    def sample(self, key: Hashable, rtt: float) -> None:
        """A round-trip measurement of ``key`` (only from a message never retransmitted: Karn's rule)."""
        if not rtt >= 0.0:
            raise ProtocolError(f"round-trip time {rtt!r}; accepted: a number >= 0")
        self.samples += 1
        srtt = self._srtt.get(key)
        if srtt is None:                                                   # (2.2)
            self._srtt[key], self._rttvar[key] = rtt, rtt / 2.0
            return
        self._rttvar[key] = (1.0 - BETA) * self._rttvar[key] + BETA * abs(srtt - rtt)   # (2.3), old SRTT
        self._srtt[key] = (1.0 - ALPHA) * srtt + ALPHA * rtt

    def srtt(self, key: Hashable) -> float:
        """The smoothed round-trip time of ``key`` (nan before the first measurement)."""
        return self._srtt.get(key, math.nan)

    def forget(self, key: Hashable) -> None:
        """Start ``key`` afresh (its estimate is gone: the next RTO is ``initial``)."""
        self._srtt.pop(key, None)
        self._rttvar.pop(key, None)


#: the scenario keys of a protocol's retransmission timer, in clock periods (RFC 6298: 1 s initial and
#: minimum, at least 60 s maximum; netsim reads "second" as "clock period" and starts at 3, RFC 2988's value)
TIMER_FIELDS: dict[str, P.Field] = {
    "rto_initial": P.real(3.0, low=0.0, low_open=True,
                          doc="retransmission timeout before the first round-trip measurement, in clock periods "
                              "(RFC 6298 (2.1))", label="initial retransmission timeout", unit="clock periods"),
    "rto_min": P.real(1.0, low=0.0, low_open=True,
                      doc="lower bound of every retransmission timeout and clock granularity G, in clock periods "
                          "(RFC 6298 (2.4))", label="minimum retransmission timeout", unit="clock periods"),
    "rto_max": P.real(64.0, low=0.0, low_open=True,
                      doc="upper bound of every (backed-off) retransmission timeout, in clock periods "
                          "(RFC 6298 (2.5))", label="maximum retransmission timeout", unit="clock periods"),
}


def check_timer(params: Any) -> None:
    """Refuse ``[protocol]`` timer keys (:data:`TIMER_FIELDS`) out of order, naming the key."""
    low, initial, high = params["rto_min"], params["rto_initial"], params["rto_max"]
    if not low <= initial <= high:
        key = "protocol.rto_min" if low > initial else "protocol.rto_max"
        raise InputError(f"rto_min = {low:g}, rto_initial = {initial:g}, rto_max = {high:g}; accepted: "
                         "rto_min <= rto_initial <= rto_max", key=key)


def timer_from(params: Any, period: float) -> RetransmitTimer:
    """The :class:`RetransmitTimer` of :data:`TIMER_FIELDS` ``params``, in units of ``period``."""
    return RetransmitTimer(initial=params["rto_initial"] * period, minimum=params["rto_min"] * period,
                           maximum=params["rto_max"] * period)


def can_lose(scenario: Any) -> bool:
    """Whether a message of ``scenario`` can be lost: link loss, link outages or node crashes.

    Duplication and reordering lose nothing, and delays only delay.
    """
    network = scenario.network
    lossy = network["loss"] > 0 or any((link.get("loss") or 0) > 0 for link in network["links"])
    return lossy or bool({"link_down", "crash"} & set(F.kinds(scenario.faults)))


class Timers:
    """One-shot timers keyed by any hashable, on the engine clock, without a SimPy process per timer.

    Deadlines wait in a heap; one engine callback (``sim.call_at``) is armed for the earliest. When
    deadlines come, ``expired(key)`` is called for each, in deadline order (ties in the order the
    timers were started); it may start timers again. Starting a running timer restarts it.
    """

    def __init__(self, sim: Any, expired: Callable[[Hashable], None]):
        self.sim, self.expired = sim, expired
        self._token: dict[Hashable, int] = {}                      # key -> its running timer
        self._heap: list[tuple[float, int, Hashable]] = []          # (deadline, token, key)
        self._armed = math.inf
        self._tokens = 0

    def start(self, key: Hashable, delay: float) -> None:
        """(Re)start the timer of ``key``: it expires ``delay`` from now."""
        self._tokens += 1
        token = self._token[key] = self._tokens
        deadline = self.sim.now + delay
        heapq.heappush(self._heap, (deadline, token, key))
        if deadline < self._armed:
            self._armed = deadline
            self.sim.call_at(deadline, self._fire)

    def stop(self, key: Hashable) -> None:
        """Stop the timer of ``key`` (nothing happens if it is not running)."""
        self._token.pop(key, None)

    def running(self, key: Hashable) -> bool:
        """Whether the timer of ``key`` is running."""
        return key in self._token

    def _fire(self) -> None:
        now = self.sim.now
        if now < self._armed:
            return  # an earlier arming already handled this instant
        heap, tokens = self._heap, self._token
        while heap and heap[0][0] <= now:
            _, token, key = heapq.heappop(heap)
            if tokens.get(key) != token:
                continue  # stopped or restarted since
            del tokens[key]
            self.expired(key)
        self._armed = math.inf
        while heap and tokens.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)  # stale heads: the next arming is for a live timer
        if heap:
            self._armed = heap[0][0]
            self.sim.call_at(self._armed, self._fire)


#: what :attr:`Transport.counts` counts
TRANSPORT_COUNTS = ("sent", "retransmitted", "acknowledged", "duplicates", "abandoned")


# functional syntax: real (not string) annotations, which the documentation tools resolve (as netsim.engine.messages)
_FanoutFields = NamedTuple("_FanoutFields", [("payload", Any), ("src", int), ("dst", np.ndarray)])  # noqa: UP014


class Fanout(_FanoutFields):
    """Messages of one payload object from one sender, in delivery order: ``dst[j]`` received ``payload``.
    Fields: ``payload, src, dst`` (an int64 array of receivers)."""

    __slots__ = ()


def fanouts(items: list[Multicast | Message]) -> list[Fanout]:
    """Delivered messages as :class:`Fanout` groups, in delivery order.

    ``items`` are what a record reader gets (``network.subscribe_records``: one :class:`Multicast` per
    multicast, single :class:`Message` objects) or Messages alone. A multicast of one payload object is one
    group; any other record (array rows, or a payload each) gives a group per message; consecutive
    Messages of one sender with the very same payload object are merged into one group. Reading the
    groups in order, receiver after receiver, is reading the messages in order.
    """
    groups: list[Fanout] = []
    payload: Any = None
    src, dsts = -1, []
    for item in items:
        if isinstance(item, Multicast):
            if not item.same_payload:  # rows or objects: a payload per message
                messages = item.messages()
            else:  # one payload object to every receiver (a constant-delay send_many or broadcast)
                if dsts:
                    groups.append(Fanout(payload, src, np.array(dsts, dtype=np.int64)))
                    dsts = []
                groups.append(Fanout(item.payload, int(item.src[0]), item.dst))
                continue
        else:
            messages = (item,)
        for message in messages:
            if dsts and (message.payload is not payload or message.src != src):
                groups.append(Fanout(payload, src, np.array(dsts, dtype=np.int64)))
                dsts = []
            if not dsts:
                payload, src = message.payload, message.src
            dsts.append(message.dst)
    if dsts:
        groups.append(Fanout(payload, src, np.array(dsts, dtype=np.int64)))
    return groups


_FaninFields = NamedTuple("_FaninFields", [("payload", list), ("src", np.ndarray), ("dst", int)])  # noqa: UP014


class Fanin(_FaninFields):
    """Messages from several senders to one receiver, in delivery order: ``src[j]`` sent ``payload[j]`` to ``dst``.
    Fields: ``payload`` (a list, one payload per message), ``src`` (an int64 array of senders), ``dst``."""

    __slots__ = ()


def fanins(items: list[Multicast | Message]) -> list[Fanin]:
    """Delivered messages as :class:`Fanin` groups, in delivery order.

    ``items`` are what a record reader gets (``network.subscribe_records``) or Messages alone. Consecutive
    messages to one receiver form one group: a record whose messages all go to one node (a constant-delay
    ``network.send_each``, many senders to one node) joins as a whole, without a Message per sender. Reading
    the groups in order, sender after sender, is reading the messages in order.
    """
    groups: list[Fanin] = []
    payloads: list[Any] = []
    srcs: list[int] = []
    dst = -1
    for item in items:
        if isinstance(item, Multicast):
            receivers = item.dst
            if len(receivers) and (receivers == receivers[0]).all():  # one receiver: the record joins as a whole
                if payloads and receivers[0] != dst:
                    groups.append(Fanin(payloads, np.array(srcs, dtype=np.int64), dst))
                    payloads, srcs = [], []
                if not payloads:  # the group starts with this record: its own lists and arrays
                    dst = int(receivers[0])
                    payloads, srcs = list(item.payloads()), item.src.tolist()
                else:
                    payloads += item.payloads()
                    srcs += item.src.tolist()
                continue
            messages = item.messages()
        else:
            messages = (item,)
        for message in messages:
            if payloads and message.dst != dst:
                groups.append(Fanin(payloads, np.array(srcs, dtype=np.int64), dst))
                payloads, srcs = [], []
            dst = message.dst
            payloads.append(message.payload)
            srcs.append(message.src)
    if payloads:
        groups.append(Fanin(payloads, np.array(srcs, dtype=np.int64), dst))
    return groups


class _Pending:
    """One unacknowledged message: what to send again and when it was first sent."""

    __slots__ = ("payload", "size", "first_sent", "attempts")

    def __init__(self, payload: Any, size: int, first_sent: float):
        self.payload, self.size, self.first_sent, self.attempts = payload, size, first_sent, 0


class Transport:
    """Acknowledged, de-duplicated delivery of messages of ``kind`` (see the module docstring).

    Parameters
    ----------
    sim:
        The running :class:`~netsim.engine.sim.Simulation`.
    kind:
        The message kind of the data; acknowledgements are ``<kind>-ack``.
    handler:
        ``handler(messages)``: the new messages delivered at one instant (each number once), in
        delivery order, payloads as the owner sent them.
    timer:
        The :class:`RetransmitTimer` (shared with other transports of the owner if it likes: keys
        are ``(src, dst)`` pairs).
    attempts:
        Transmissions of one message before it is given up (``None``: until acknowledged).
    on_give_up:
        ``on_give_up(src, dst, payload)`` for every message given up.
    up:
        Boolean array over nodes, true while a node runs (``sim.faults.up``); ``None``: always up.
    acknowledge:
        ``False``: the receiver sends no acknowledgement; a message stays outstanding until the owner
        calls :meth:`answered` (a request answered by another message), cancels it or gives it up.
    reliable:
        ``False``: plain datagrams with the same interface (no numbers, acknowledgements or
        retransmissions; ``timer`` may be ``None``), for runs in which nothing can be lost.
    on_duplicate:
        ``on_duplicate(message)`` for every copy not handed over (its number already was), payload as
        the owner sent it.
    fanout:
        ``True``: ``handler(groups)`` receives the new messages as :class:`Fanout` groups (:func:`fanouts`)
        instead of Messages; for owners that multicast one payload (a call, a sync) and read it per group.
    fanin:
        ``True``: ``handler(groups)`` receives the new messages as :class:`Fanin` groups (:func:`fanins`)
        instead of Messages; for owners that gather one message from each of many senders (requests, uploads
        to a server, sent with :meth:`send_each`) and read them per group.
    """

    def __init__(self, sim: Any, kind: str, handler: Callable[[list[Message]], None], *,
                 timer: RetransmitTimer | None, attempts: int | None = None,
                 on_give_up: Callable[[int, int, Any], None] | None = None, up: np.ndarray | None = None,
                 acknowledge: bool = True, reliable: bool = True,
                 on_duplicate: Callable[[Message], None] | None = None, fanout: bool = False, fanin: bool = False):
        if attempts is not None and attempts < 1:
            raise ValueError(f"attempts = {attempts!r}; accepted: an integer >= 1 or None")
        if reliable and timer is None:
            raise ValueError("a reliable transport needs a RetransmitTimer")
        if fanout and fanin:
            raise ValueError("fanout and fanin: accepted: at most one of them")
        self.sim, self.network = sim, sim.network
        self.kind, self.ack_kind = kind, f"{kind}-ack"
        self.handler, self.timer = handler, timer
        self.groups = fanouts if fanout else fanins if fanin else None  # how the handler reads what arrives
        self.attempts, self.on_give_up, self.up = attempts, on_give_up, up
        self.acknowledge, self.reliable, self.on_duplicate = acknowledge, reliable, on_duplicate
        self.counts = dict.fromkeys(TRANSPORT_COUNTS, 0)
        self._next: dict[tuple[int, int], int] = {}                    # (src, dst) -> next sequence number
        self._outstanding: dict[tuple[int, int], dict[int, _Pending]] = {}
        self._backoff: dict[tuple[int, int], int] = {}                 # expiries since the timer last reset
        self._floor: dict[tuple[int, int], int] = {}                   # (dst, src): every number below was seen
        self._above: dict[tuple[int, int], set[int]] = {}              # numbers seen at or above the floor
        self._timers = Timers(sim, self._expired)                      # one timer per pair
        if not reliable:
            if self.groups is not None:
                groups = self.groups
                self.network.subscribe_records(kind, lambda items: self.handler(groups(items)))
            else:
                self.network.subscribe_batch(kind, handler)
            return
        self.network.subscribe_batch(kind, self._on_data)
        if acknowledge:
            self.network.subscribe_batch(self.ack_kind, self._on_ack)

    # ------------------------------------------------------------------ sending
    def send(self, src: int, dst: int, payload: Any, *, size: int = 1) -> int:
        """Send ``payload`` from ``src`` to ``dst`` until acknowledged; returns its sequence number
        (``-1`` for a datagram: ``reliable=False``)."""
        if not self.reliable:
            self.counts["sent"] += 1
            self.network.send(src, dst, self.kind, payload, size=size)
            return -1
        pair = (src, dst)
        seq = self._next.get(pair, 0)
        self._next[pair] = seq + 1
        outstanding = self._outstanding.setdefault(pair, {})
        outstanding[seq] = _Pending(payload, size, self.sim.now)
        self.counts["sent"] += 1
        self.network.send(src, dst, self.kind, (seq, next(iter(outstanding)), payload), size=size)
        if not self._timers.running(pair):                             # (5.1): start the timer if not running
            self._start(pair)
        return seq

    def send_many(self, src: int, dsts: list[int], payload: Any, *, size: int = 1) -> list[int]:
        """:meth:`send` of one ``payload`` to each of ``dsts``; returns their sequence numbers.

        Datagrams go as one ``network.send_many`` (one queue entry with constant delays: the same
        messages, draws and delivery order as one send per destination).
        """
        if not self.reliable:
            self.counts["sent"] += len(dsts)
            self.network.send_many(src, dsts, self.kind, payload, size=size)
            return [-1] * len(dsts)
        return [self.send(src, dst, payload, size=size) for dst in dsts]

    def send_each(self, srcs: list[int], dst: int, payloads: list[Any], *, size: int = 1) -> list[int]:
        """:meth:`send` of ``payloads[j]`` from ``srcs[j]`` to ``dst`` for every j; returns their sequence numbers.

        Datagrams go as one ``network.send_each`` (the same messages, draws and delivery order as one send
        each).
        """
        if not self.reliable:
            self.counts["sent"] += len(srcs)
            self.network.send_each(srcs, dst, self.kind, payloads, size=size)
            return [-1] * len(srcs)
        return [self.send(src, dst, payload, size=size) for src, payload in zip(srcs, payloads, strict=True)]

    def outstanding(self, src: int | None = None) -> int:
        """Messages sent and not yet acknowledged (of ``src``, or of every sender)."""
        return sum(len(v) for (s, _), v in self._outstanding.items() if src is None or s == src)

    def cancel(self, src: int, dst: int | None = None, keep: Callable[[Any], bool] | None = None) -> int:
        """Stop retransmitting what ``src`` sent (to ``dst``), except the payloads ``keep`` approves.

        For an owner whose exchange ended by other means (a round closed). Returns how many
        messages were dropped from the retransmission queue.
        """
        dropped = 0
        for pair in [p for p in self._outstanding if p[0] == src and (dst is None or p[1] == dst)]:
            queue = self._outstanding[pair]
            for seq in [s for s, p in queue.items() if keep is None or not keep(p.payload)]:
                del queue[seq]
                dropped += 1
            if not queue:
                self._stop(pair)
        return dropped

    def answered(self, src: int, dst: int, seq: int, *, sample: bool = True) -> bool:
        """The answer to message ``seq`` of ``src`` -> ``dst`` arrived: it counts as its acknowledgement.

        For ``acknowledge=False`` (a request answered by another message); a round-trip sample if the
        request was never retransmitted (Karn's rule) and ``sample`` (``False`` for an answer that may
        itself have been retransmitted, whose delay would then include the answerer's timeout).
        Returns whether ``seq`` was still outstanding.
        """
        if not self.reliable:
            return False
        return self._acknowledged((src, dst), (seq,), self.sim.now, sample=sample)

    def resend(self, src: int, dst: int) -> int:
        """Send every outstanding message of ``src -> dst`` again now, without backing off the timer.

        RFC 5681's fast retransmit, for an owner that learnt that an answer was lost (a repeated
        request, :attr:`on_duplicate`). The copies count as retransmissions (and towards
        ``attempts``), so by Karn's rule they give no round-trip sample. Returns how many were sent.
        """
        queue = self._outstanding.get((src, dst))
        if not queue or (self.up is not None and not self.up[src]):
            return 0
        low = next(iter(queue))
        for seq, pending in queue.items():
            pending.attempts += 1
            self.counts["retransmitted"] += 1
            self.network.send(src, dst, self.kind, (seq, low, pending.payload), size=pending.size)
        return len(queue)

    def forget(self, node: int) -> None:
        """``node`` lost its state: nothing outstanding, a new incarnation of its numbers, nothing received."""
        for pair in [p for p in self._outstanding if p[0] == node]:
            self._stop(pair)
        for pair in [p for p in self._next if p[0] == node]:
            self._next[pair] = (self._next[pair] // INCARNATION + 1) * INCARNATION
        for pair in [p for p in self._floor if p[0] == node]:
            del self._floor[pair], self._above[pair]

    def corruptible(self, corruptor: Corruptor | Callable[..., tuple[Any, int]]) -> None:
        """Declare how the owner's payloads are corrupted (``network.corruptible`` for the wire format)."""
        if not self.reliable:
            self.network.corruptible(self.kind, corruptor)
            return

        def on_wire(wire: tuple[int, int, Any], **how: Any) -> tuple[Any, int]:
            seq, low, payload = wire
            new, hits = corruptor(payload, **how)
            return ((seq, low, new), hits) if hits else (wire, 0)

        self.network.corruptible(self.kind, on_wire)

    # ------------------------------------------------------------------ timers
    def _start(self, pair: tuple[int, int]) -> None:
        """(5.1)/(5.3)/(5.6): the pair's timer expires one (backed-off) RTO from now."""
        self._timers.start(pair, self.timer.rto(pair, self._backoff.get(pair, 0)))

    def _stop(self, pair: tuple[int, int]) -> None:
        """(5.2): nothing outstanding; the backoff ends with the exchange."""
        self._outstanding.pop(pair, None)
        self._timers.stop(pair)
        self._backoff.pop(pair, None)

    def _expired(self, pair: tuple[int, int]) -> None:
        if self.up is not None and not self.up[pair[0]]:
            self._start(pair)  # a crashed sender looks again one RTO later, without backing off
            return
        self._retransmit(pair)

    def _retransmit(self, pair: tuple[int, int]) -> None:
        """(5.4)-(5.6): send every outstanding message of the pair again; back the timer off."""
        queue = self._outstanding.get(pair)
        if not queue:
            self._stop(pair)
            return
        src, dst = pair
        low = next(iter(queue))
        for seq in list(queue):
            pending = queue[seq]
            if self.attempts is not None and pending.attempts + 1 >= self.attempts:
                del queue[seq]
                self.counts["abandoned"] += 1
                if self.on_give_up is not None:
                    self.on_give_up(src, dst, pending.payload)
                continue
            pending.attempts += 1
            self.counts["retransmitted"] += 1
            self.network.send(src, dst, self.kind, (seq, low, pending.payload), size=pending.size)
        if not queue:
            self._stop(pair)
            return
        self._backoff[pair] = self._backoff.get(pair, 0) + 1
        self._start(pair)

    # ------------------------------------------------------------------ receiving
    def _on_data(self, messages: list[Message]) -> None:
        acks: dict[tuple[int, int], list[int]] = {}
        fresh: list[Message] = []
        for msg in messages:
            seq, low, payload = msg.payload
            acks.setdefault((msg.dst, msg.src), []).append(seq)
            if self._first(msg.dst, msg.src, seq, low):
                fresh.append(msg._replace(payload=payload))
            else:
                self.counts["duplicates"] += 1
                if self.on_duplicate is not None:
                    self.on_duplicate(msg._replace(payload=payload))
        if self.acknowledge:
            for (node, src), seqs in acks.items():
                self.network.send(node, src, self.ack_kind, tuple(seqs))
        if fresh:
            self.handler(fresh if self.groups is None else self.groups(fresh))

    def _first(self, node: int, src: int, seq: int, low: int) -> bool:
        """True the first time number ``seq`` of the pair src -> node arrives (and remember it).

        ``low`` is the sender's lowest number still outstanding when it sent this copy: numbers
        below it will never come again, so the floor moves up to it.
        """
        key = (node, src)
        floor = self._floor.get(key)
        if floor is None or seq // INCARNATION > floor // INCARNATION:
            floor = seq // INCARNATION * INCARNATION   # a first message, or a sender's new incarnation
            self._floor[key], self._above[key] = floor, set()
        above = self._above[key]
        if seq < floor or seq in above:
            return False
        if low > floor:
            above.difference_update([s for s in above if s < low])
            floor = low
        above.add(seq)
        while floor in above:
            above.discard(floor)
            floor += 1
        self._floor[key] = floor
        return True

    def _on_ack(self, messages: list[Message]) -> None:
        now = self.sim.now
        for msg in messages:
            self._acknowledged((msg.dst, msg.src), msg.payload, now)

    def _acknowledged(self, pair: tuple[int, int], seqs: Any, now: float, *, sample: bool = True) -> bool:
        """Numbers ``seqs`` of ``pair`` are acknowledged: sample (Karn), then restart or stop the timer."""
        queue = self._outstanding.get(pair)
        if not queue:
            return False
        new = False
        for seq in seqs:
            pending = queue.pop(seq, None)
            if pending is None:
                continue  # a copy of an acknowledgement, or of a cancelled message
            new = True
            self.counts["acknowledged"] += 1
            if sample and pending.attempts == 0:                       # Karn's rule
                self.timer.sample(pair, now - pending.first_sent)
                self._backoff.pop(pair, None)                          # a valid measurement ends the backoff
        if not new:
            return False
        if queue:
            self._start(pair)                                          # (5.3)
        else:
            self._stop(pair)                                           # (5.2)
        return True

