"""The ADV -> REQ -> DATA exchange between neighbours, built on ``Network.send``/``subscribe``.

A node that holds new keyed records *advertises* their keys to some neighbours (ADV); a
neighbour that misses some of them *requests* those (REQ); the advertiser answers with the
records (DATA). Each stage is a real message over the link, with the link's own sampled delay
and loss, counted by the engine like any other message (and building the link for Eq. (2)
accounting in the slot it is sent). This is the three-way handshake of SPIN-style
dissemination used by the GIS protocol of li2022 (Alg. 2); it knows nothing about bandits.

Keys are record ids ``0, 1, 2, ...``; a set of keys travels and is handled as one Python integer
used as a bit set (bit ``j`` set: record ``j``; :func:`bits` and :func:`ids` convert), so that
every handler step is a few integer operations whatever the number of keys, and a message's
``size`` is the number of keys it names. What the owner supplies (callbacks):

* ``missing(node, keys)`` -> the keys (bit set) ``node`` does not hold yet and wants;
* ``fetch(node, keys)`` -> ``(served, payload)``: the keys ``node`` can serve (those it holds) and
  the DATA payload for them (any object; ``None`` when the records live in a table the owner
  shares); no DATA is sent when ``served`` is empty;
* ``on_data(node, src, keys, payload)`` -> ``node`` received the records ``keys`` from ``src``.

Handlers are per message (``subscribe``): with per-stage integer work the engine's per-message
delivery is the cheaper path, paper mode (same-instant batches) included; measured in
docs/protocols/li2022.md ("Speed").

Timing in paper mode. The handshake itself takes three link delays. A protocol that wants
"one exchange per slot" advertises only at slot boundaries and chooses a per-stage delay of at
most a third of the slot (e.g. ``delay = { model = "constant", value = 0.25 }`` with unit
slots): ADV, REQ and DATA are then all sent within one slot, so each used pair builds one link
per slot, and records received during slot s are advertised at the boundary of slot s + 1.

Stale traffic. :meth:`Handshake.reset` starts a new exchange epoch (``tag``); messages of an
older epoch that are still in flight are ignored on delivery.

Loss (``reliable=True``, with a :class:`~netsim.comm.transport.RetransmitTimer`). Without loss the
exchange is exactly ADV/REQ/DATA: a neighbour that already holds every advertised key stays
silent. With loss the answer of each stage is its acknowledgement, and two
:class:`~netsim.comm.exchanges.Exchanges` repeat unanswered stages on RFC 6298 timers, one per
(requester, peer) pair:

* ADV. Node a remembers, per neighbour b, the keys b is known to hold (``told``: b advertised
  them to a, or sent them as DATA) and keeps the keys it advertised to b, not known to be held by
  b, that have no answer yet (``pending``). Every ADV transmission carries a number. b's REQ names
  the number of the ADV it answers: those keys are settled (b requested what it lacks; the rest
  it holds). An ADV from b settles the keys it names too (b holds them): in a flood every node
  advertises each record it gets to every neighbour, so a neighbour that already holds what a
  advertises answers by its own ADV, and stays silent as in paper mode. When a's timer for b expires, a advertises the
  pending keys again, marked as a repeat; a repeated ADV is always answered by a REQ, empty if
  nothing is missing.
* REQ. b keeps, per advertiser a, the keys it requested and has not received (``wanted``); every
  REQ transmission carries a number that the DATA echoes. On expiry b requests again the keys it
  still misses (a DATA from another neighbour may have brought some); with none left the exchange
  ends.
* DATA is not acknowledged: a lost DATA leaves its keys wanted, so the REQ is repeated.

Each answer measures the round trip of the transmission it names (the timer's estimate per pair,
:class:`~netsim.comm.transport.RetransmitTimer`); timers double per expiry and start again from the
estimate for the next exchange. As long as the loss probability is below one every advertised
record eventually reaches every neighbour that wants it.

Duplicates and reordering. Records are named and immutable within an epoch, so every stage is
idempotent: a copy of a DATA brings keys the receiver already holds (ignored), and a copy of an
ADV or REQ can only cause the same answer the original caused, for keys still missing. Messages
of an older epoch are ignored (``tag``). Nothing a late or repeated message carries can replace
newer information.

Crashes. Given the ``up`` array of the engine's faults (``sim.faults.up``), a node that is down
repeats nothing (its open exchanges wait until it is up again; messages to it are dropped by the
engine). :meth:`lost` forgets the open exchanges of a node that restarted without its state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from netsim.comm.exchanges import Exchanges
from netsim.comm.transport import RetransmitTimer
from netsim.engine.network import Message

Missing = Callable[[int, int], int]
Fetch = Callable[[int, int], tuple[int, Any]]
OnData = Callable[[int, int, int, Any], None]


def bits(ids: Iterable[int]) -> int:
    """The bit set of the record ids ``ids``."""
    mask = 0
    for i in ids:
        mask |= 1 << int(i)
    return mask


def ids(mask: int) -> np.ndarray:
    """The record ids of the bit set ``mask``, ascending (an int64 array)."""
    if not mask:
        return np.zeros(0, dtype=np.int64)
    raw = np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).astype(np.int64)


class Handshake:
    """ADV/REQ/DATA exchanges of keyed records over the links of ``sim.network``.

    Parameters
    ----------
    sim:
        The running :class:`~netsim.engine.sim.Simulation` (messages go only along graph edges).
    prefix:
        Message kinds are ``<prefix>-adv``, ``<prefix>-req`` and ``<prefix>-data``.
    missing, fetch, on_data:
        The owner's callbacks (see the module docstring).
    timer:
        ``None``: no repeats (for runs in which no message can be lost). Otherwise the
        :class:`~netsim.comm.transport.RetransmitTimer` of the reliable mode.
    up:
        Boolean array over nodes, true while a node runs (``sim.faults.up``); ``None``: always up.
    """

    def __init__(self, sim: Any, prefix: str, *, missing: Missing, fetch: Fetch, on_data: OnData,
                 timer: RetransmitTimer | None = None, up: Any = None):
        self.network = network = sim.network
        self.kinds = (f"{prefix}-adv", f"{prefix}-req", f"{prefix}-data")
        self._missing = missing
        self._fetch = fetch
        self._on_data = on_data
        self.reliable = timer is not None
        self.tag = 0
        self._pending: dict[tuple[int, int], int] = {}   # (advertiser, neighbour) -> keys not answered
        self._told: dict[tuple[int, int], int] = {}      # (node, neighbour) -> keys the neighbour is known to hold
        self._carried: dict[int, int] = {}               # ADV transmission number -> keys it named
        self._wanted: dict[tuple[int, int], int] = {}    # (requester, advertiser) -> keys requested, not received
        if timer is not None:
            self.adv = Exchanges(sim, timer, self._repeat_adv, up=up)
            self.req = Exchanges(sim, timer, self._repeat_req, up=up)
        adv, req, data = self.kinds
        network.subscribe(adv, self._on_adv)
        network.subscribe(req, self._on_req)
        network.subscribe(data, self._on_data_msg)

    # ------------------------------------------------------------------ owner API
    def reset(self) -> None:
        """Start a new exchange epoch: forget open exchanges, ignore older messages still in flight."""
        self.tag += 1
        if self.reliable:
            self.adv.clear()
            self.req.clear()
            self._pending.clear()
            self._told.clear()
            self._carried.clear()
            self._wanted.clear()

    def forget(self, nodes: Iterable[int]) -> None:
        """Drop the open exchanges of ``nodes`` (as advertiser or requester): they stop repeating."""
        if not self.reliable:
            return
        gone = set(nodes)
        self.adv.forget(gone)
        self.req.forget(gone)
        for table in (self._pending, self._told, self._wanted):
            for pair in [p for p in table if p[0] in gone]:
                del table[pair]

    def lost(self, node: int) -> None:
        """``node`` restarted without its state: its open exchanges (as advertiser or requester) are gone."""
        self.forget((node,))

    def advertise(self, src: int, dsts: Sequence[int], keys: int) -> None:
        """ADV stage: ``src`` names ``keys`` (a bit set) to each neighbour in ``dsts`` (one message each)."""
        if not keys:
            return
        size = keys.bit_count()
        adv = self.kinds[0]
        if not self.reliable:
            self.network.send_many(src, dsts, adv, (self.tag, keys, 0, False), size=size)
            return
        for dst in dsts:
            pair = (src, dst)
            unknown = keys & ~self._told.get(pair, 0)
            number = 0
            if unknown:  # an answer is awaited only for keys dst may lack
                number = self.adv.transmit(src, dst)
                self._carried[number] = unknown
                self._pending[pair] = self._pending.get(pair, 0) | unknown
            self.network.send(src, dst, adv, (self.tag, keys, number, False), size=size)

    @property
    def open_exchanges(self) -> int:
        """ADVs and REQs still waiting for an answer (reliable mode)."""
        return len(self.adv) + len(self.req) if self.reliable else 0

    @property
    def retries(self) -> int:
        """Stages sent again after their timer expired (reliable mode)."""
        return self.adv.repeats + self.req.repeats if self.reliable else 0

    # ------------------------------------------------------------------ repeats (reliable mode)
    def _repeat_adv(self, src: int, dst: int) -> bool:
        keys = self._pending.get((src, dst), 0)
        if not keys:
            self._pending.pop((src, dst), None)
            return False
        number = self.adv.transmit(src, dst)
        self._carried[number] = keys
        self.network.send(src, dst, self.kinds[0], (self.tag, keys, number, True), size=keys.bit_count())
        return True

    def _repeat_req(self, src: int, dst: int) -> bool:
        still = self._missing(src, self._wanted.get((src, dst), 0))
        if not still:
            self._wanted.pop((src, dst), None)
            return False
        self._wanted[(src, dst)] = still
        number = self.req.transmit(src, dst)
        self.network.send(src, dst, self.kinds[1], (self.tag, still, 0, number), size=still.bit_count())
        return True

    def _settle_adv(self, node: int, peer: int, keys: int, number: int | None) -> None:
        """``peer`` answered (or holds) ``keys`` that ``node`` advertised to it."""
        pair = (node, peer)
        pending = self._pending.get(pair)
        if pending is None:
            return
        pending &= ~keys
        if pending:
            self._pending[pair] = pending
        else:
            del self._pending[pair]
        self.adv.answered(node, peer, number, done=not pending)

    # ------------------------------------------------------------------ handlers
    def _on_adv(self, message: Message) -> None:
        tag, keys, number, repeated = message.payload
        if tag != self.tag:
            return
        node, src = message.dst, message.src
        reliable = self.reliable
        if reliable:  # src holds what it advertises
            pair = (node, src)
            self._told[pair] = self._told.get(pair, 0) | keys
            if pair in self._pending:
                self._settle_adv(node, src, keys, None)
        wanted = self._missing(node, keys)
        if not wanted and not repeated:
            return
        own = 0
        if reliable and wanted:
            own = self.req.transmit(node, src)
            self._wanted[(node, src)] = self._wanted.get((node, src), 0) | wanted
        self.network.send(node, src, self.kinds[1], (tag, wanted, number, own), size=max(wanted.bit_count(), 1))

    def _on_req(self, message: Message) -> None:
        tag, keys, answers, number = message.payload
        if tag != self.tag:
            return
        node, requester = message.dst, message.src
        if answers and self.reliable:
            self._settle_adv(node, requester, self._carried.pop(answers, 0), answers)
        if keys:
            served, payload = self._fetch(node, keys)
            if served:
                self.network.send(node, requester, self.kinds[2], (tag, served, number, payload),
                                  size=served.bit_count())

    def _on_data_msg(self, message: Message) -> None:
        tag, keys, answers, payload = message.payload
        if tag != self.tag:
            return
        node, src = message.dst, message.src
        if self.reliable:
            pair = (node, src)
            self._told[pair] = self._told.get(pair, 0) | keys
            wanted = self._wanted.get(pair)
            if wanted is not None:
                wanted &= ~keys
                if wanted:
                    self._wanted[pair] = wanted
                else:
                    del self._wanted[pair]
                self.req.answered(node, src, answers or None, done=not wanted)
        self._on_data(node, src, keys, payload)
