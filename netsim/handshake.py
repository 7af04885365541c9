"""The ADV -> REQ -> DATA exchange between neighbours, built on ``Network.send``/``subscribe``.

A node that holds new keyed records *advertises* their keys to some neighbours (ADV); a
neighbour that misses some of them *requests* those (REQ); the advertiser answers with the
records (DATA). Each stage is a real message over the link, with the link's own sampled delay
and loss, counted by the engine like any other message (and building the link for Eq. (2)
accounting in the slot it is sent). This is the three-way handshake of SPIN-style
dissemination used by the GIS protocol of li2022 (Alg. 2); it knows nothing about bandits.

What the owner supplies (callbacks; ``keys`` are any sequence the owner chose, e.g. a numpy
array of record ids, passed through unchanged):

* ``missing(node, keys)`` -> the keys ``node`` does not hold yet;
* ``fetch(node, keys)`` -> ``(served, payload)``: the keys ``node`` can serve (those it holds) and
  the DATA payload for them (any object; ``None`` when the records live in a table the owner
  shares); no DATA is sent when ``served`` is empty;
* ``on_data(node, src, keys, payload)`` -> ``node`` received the records ``keys`` from ``src``.

Timing in paper mode. The handshake itself takes three link delays. A protocol that wants
"one exchange per slot" advertises only at slot boundaries and chooses a per-stage delay of at
most a third of the slot (e.g. ``delay = { model = "constant", value = 0.25 }`` with unit
slots): ADV, REQ and DATA are then all sent within one slot, so each used pair builds one link
per slot, and records received during slot s are advertised at the boundary of slot s + 1.

Stale traffic. :meth:`Handshake.reset` starts a new exchange epoch (``tag``); messages of an
older epoch that are still in flight are ignored on delivery.

Loss (``reliable=True``). Without loss the exchange is exactly ADV/REQ/DATA: a neighbour that
already holds every advertised key stays silent. With loss, a REQ is always sent in answer to
an ADV (possibly empty) and names the advertised keys it answers, and :meth:`Handshake.retry`, called by
the owner's clock, repeats

* an ADV that has not been answered by a REQ within ``timeout``, and
* a REQ whose DATA has not arrived within ``timeout`` (only for keys still missing).

Every message may be lost independently; as long as the loss probability is below one, every
advertised record eventually reaches every neighbour that wants it.

Duplicates and reordering. Records are named and immutable within an epoch, so every stage is
idempotent: a copy of a DATA brings keys the receiver already holds (ignored), and a copy of an
ADV or REQ can only cause the same answer the original caused, for keys still missing. Messages
of an older epoch are ignored (``tag``). Nothing a late or repeated message carries can replace
newer information.

Crashes. Given the ``up`` array of the engine's faults (``sim.faults.up``), a node that is down
neither retries nor is retried for (its open exchanges wait until it is up again; messages to
it are dropped by the engine). :meth:`lost` forgets the open exchanges of a node that restarted
without its state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from netsim.network import Message, Network

Missing = Callable[[int, Sequence[Any]], Sequence[Any]]
Fetch = Callable[[int, Sequence[Any]], tuple[Sequence[Any], Any]]
OnData = Callable[[int, int, Sequence[Any], Any], None]


class Handshake:
    """ADV/REQ/DATA exchanges of keyed records over the links of ``network``.

    Parameters
    ----------
    network:
        The engine's network (messages go only along graph edges).
    prefix:
        Message kinds are ``<prefix>-adv``, ``<prefix>-req`` and ``<prefix>-data``.
    missing, fetch, on_data:
        The owner's callbacks (see the module docstring).
    reliable:
        Acknowledge ADVs and repeat unanswered stages on :meth:`retry` (for lossy links).
    timeout:
        Time after which an unanswered ADV or REQ is repeated (reliable mode only).
    up:
        Boolean array over nodes, true while a node runs (``sim.faults.up``); ``None``: always up.
    """

    def __init__(self, network: Network, prefix: str, *, missing: Missing, fetch: Fetch, on_data: OnData,
                 reliable: bool = False, timeout: float = 1.0, up: Any = None):
        if timeout <= 0:
            raise ValueError(f"timeout = {timeout!r}; accepted: a number > 0")
        self.network = network
        self.kinds = (f"{prefix}-adv", f"{prefix}-req", f"{prefix}-data")
        self._missing = missing
        self._fetch = fetch
        self._on_data = on_data
        self.reliable = reliable
        self.timeout = timeout
        self.up = up
        self.tag = 0
        self.retries = 0
        # (advertiser, neighbour) -> [keys, sent_at]: ADVs not yet answered (reliable mode)
        self._open_adv: dict[tuple[int, int], list[Any]] = {}
        # (requester, advertiser) -> [keys, sent_at]: REQs whose DATA has not arrived (reliable mode)
        self._open_req: dict[tuple[int, int], list[Any]] = {}
        adv, req, data = self.kinds
        network.subscribe(adv, self._on_adv)
        network.subscribe(req, self._on_req)
        network.subscribe(data, self._on_data_msg)

    # ------------------------------------------------------------------ owner API
    def reset(self) -> None:
        """Start a new exchange epoch: forget open exchanges, ignore older messages still in flight."""
        self.tag += 1
        self._open_adv.clear()
        self._open_req.clear()

    def forget(self, nodes: Iterable[int]) -> None:
        """Drop the open exchanges of ``nodes`` (as advertiser or requester): they stop retrying."""
        gone = set(nodes)
        for table in (self._open_adv, self._open_req):
            for pair in [p for p in table if p[0] in gone]:
                del table[pair]

    def lost(self, node: int) -> None:
        """``node`` restarted without its state: its open exchanges (as advertiser or requester) are gone."""
        self.forget((node,))

    def advertise(self, src: int, dsts: Sequence[int], keys: Sequence[Any]) -> None:
        """ADV stage: ``src`` names ``keys`` to each neighbour in ``dsts`` (one message each)."""
        if not len(keys):
            return
        if not self.reliable:
            self.network.send_many(src, dsts, self.kinds[0], (self.tag, keys), size=len(keys))
            return
        now = self.network.env.now
        for dst in dsts:
            self.network.send(src, dst, self.kinds[0], (self.tag, keys), size=len(keys))
            entry = self._open_adv.get((src, dst))
            if entry is None:
                self._open_adv[(src, dst)] = [set(keys), now]
            else:
                entry[0].update(keys)
                entry[1] = now

    def retry(self, now: float) -> int:
        """Repeat overdue ADVs and REQs (reliable mode); returns how many messages were re-sent."""
        if not self.reliable:
            return 0
        sent = 0
        adv, req, _ = self.kinds
        up = self.up
        for (src, dst), entry in list(self._open_adv.items()):
            if now - entry[1] >= self.timeout and (up is None or up[src]):
                keys = tuple(sorted(entry[0]))
                self.network.send(src, dst, adv, (self.tag, keys), size=len(keys))
                entry[1] = now
                sent += 1
        for (requester, src), entry in list(self._open_req.items()):
            if now - entry[1] < self.timeout or (up is not None and not up[requester]):
                continue
            still = tuple(self._missing(requester, tuple(sorted(entry[0]))))
            if not still:
                del self._open_req[(requester, src)]
                continue
            self.network.send(requester, src, req, (self.tag, still, ()), size=len(still))
            entry[0], entry[1] = set(still), now
            sent += 1
        self.retries += sent
        return sent

    @property
    def open_exchanges(self) -> int:
        """ADVs and REQs still waiting for an answer (reliable mode)."""
        return len(self._open_adv) + len(self._open_req)

    # ------------------------------------------------------------------ handlers
    def _on_adv(self, message: Message) -> None:
        tag, keys = message.payload
        if tag != self.tag:
            return
        node, src = message.dst, message.src
        wanted = self._missing(node, keys)
        if not len(wanted) and not self.reliable:
            return
        answered = keys if self.reliable else ()
        self.network.send(node, src, self.kinds[1], (tag, wanted, answered), size=max(len(wanted), 1))
        if self.reliable and len(wanted):
            entry = self._open_req.get((node, src))
            if entry is None:
                self._open_req[(node, src)] = [set(wanted), self.network.env.now]
            else:
                entry[0].update(wanted)
                entry[1] = self.network.env.now

    def _on_req(self, message: Message) -> None:
        tag, keys, answered = message.payload
        if tag != self.tag:
            return
        node, requester = message.dst, message.src
        if len(answered):
            entry = self._open_adv.get((node, requester))
            if entry is not None:
                entry[0].difference_update(answered)
                if not entry[0]:
                    del self._open_adv[(node, requester)]
        if len(keys):
            served, payload = self._fetch(node, keys)
            if len(served):
                self.network.send(node, requester, self.kinds[2], (tag, served, payload), size=len(served))

    def _on_data_msg(self, message: Message) -> None:
        tag, keys, payload = message.payload
        if tag != self.tag:
            return
        node, src = message.dst, message.src
        if self.reliable:
            entry = self._open_req.get((node, src))
            if entry is not None:
                entry[0].difference_update(keys)
                if not entry[0]:
                    del self._open_req[(node, src)]
        self._on_data(node, src, keys, payload)
