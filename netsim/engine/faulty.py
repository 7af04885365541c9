"""Sends over links with loss, faults, several delay laws, a tracer or a corruptor: :class:`FaultySends`.

Part of :class:`netsim.engine.network.Network` (its base class): the rest of ``Network._send`` when the
links are not plain. Drops at send (crashed sender or receiver, links down), losses (one draw per link
from the ``network`` stream), in-transit corruption (``Corruptor``), duplication and reordering
(``netsim.engine.faults``) are applied here, then the messages are queued as on the plain path; see
``docs/engine.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netsim.engine.distributions import Distribution
from netsim.engine.messages import Message


class FaultySends:
    """``_send_faulty`` and its parts (the network sets the state they use)."""

    __slots__ = ()

    def _send_faulty(self, src: int, dsts: Sequence[int], kind: str, payload: Any, size: int, counts: Any,
                     now: float) -> None:
        """The rest of :meth:`_send` for links with faults, loss, several laws, a tracer or a corruptor."""
        count = len(dsts)
        faults = self._faults
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
        if self.adversary is not None and kind in self._corruptors:
            self._send_corrupted(src, dsts, kind, payload, size, laws or [(law, loss)] * count, counts)
            return
        if faults is not None and faults.perturbs:
            self._send_perturbed(src, dsts, kind, payload, size, laws or [(law, loss)] * count, counts)
            return
        if laws is None and law.is_constant:
            due = now + law.args["value"]
            dst = dsts[0] if count == 1 else list(dsts)
            self._push((due, next(self._sequence), kind, src, dst, payload, now, due, size, count))
            return
        if laws is None:
            delays = self._law(law).take(count)
        else:
            delays = [lw.args["value"] if lw.is_constant else self._law(lw).next() for lw, _ in laws]
        sequence = self._sequence
        entries = [((due := now + delay), next(sequence), kind, src, d, payload, now, due, size, 1)
                   for d, delay in zip(dsts, delays, strict=True)]
        self._push_all(entries)

    def _send_corrupted(self, src: int, dsts: Sequence[int], kind: str, payload: Any, size: int,
                        laws: Sequence[tuple[Distribution, float]], counts: Any) -> None:
        """A send whose payload the adversary may rewrite: once at a byzantine source, per link in transit."""
        adv = self.adversary
        corrupt = self._corruptors[kind]
        source_hits = 0
        if src in adv.byzantine and adv.probability > 0.0:
            payload, source_hits = corrupt(payload, sender=src, rng=self._adversary_rng, probability=adv.probability,
                                           q=adv.q, relay=adv.relay)
        now = self.env.now
        for d, (law, _) in zip(dsts, laws, strict=True):
            copy, hits = payload, source_hits
            if adv.link_probability > 0.0:
                copy, n = corrupt(payload, sender=src, rng=self._adversary_rng, probability=adv.link_probability,
                                  q=adv.q, relay=True)
                hits += n
            if hits:
                counts.corrupted += 1
            self._send_one(Message(kind, src, d, copy, now, now, size), law, corrupted=bool(hits))

    def _send_one(self, message: Message, law: Distribution, *, corrupted: bool = False) -> None:
        """Schedule one message (duplication and reordering faults applied when present)."""
        now = message.sent_at
        delay = law.args["value"] if law.is_constant else self._law(law).next()
        if corrupted and self.tracer:
            self.tracer("corrupt", message._replace(due_at=now + delay))
        faults = self.faults
        if faults is None or not faults.perturbs:
            due = now + delay
            self._push((due, next(self._sequence), message.kind, message.src, message.dst, message.payload, now, due,
                        message.size, 1))
            return
        self._perturbed(message, law, delay)

    def _send_perturbed(self, src: int, dsts: Sequence[int], kind: str, payload: Any, size: int,
                        laws: Sequence[tuple[Distribution, float]], counts: Any) -> None:
        """Send with duplication and reordering faults (``netsim.engine.faults``), one message at a time."""
        now = self.env.now
        for d, (law, _) in zip(dsts, laws, strict=True):
            delay = law.args["value"] if law.is_constant else self._law(law).next()
            self._perturbed(Message(kind, src, d, payload, now, now, size), law, delay)

    def _perturbed(self, message: Message, law: Distribution, delay: float) -> None:
        """One message under duplication and reordering.

        The link delay comes from the delays stream as on the plain path; whether a message is
        held back (and by how much) and whether it is duplicated (and the copy's delay) come from
        the faults stream. A copy counts as one more message sent of its kind (not by its sender).
        """
        faults = self.faults
        rng = faults.message_rng
        copies = [delay]
        if faults.duplication > 0 and rng.random() < faults.duplication:
            copies.append(float(law.sample(rng)))
            faults.extras["duplicated"] += 1
            counts = self.metrics.kind(message.kind)
            counts.sent += 1
            counts.records += message.size
        now = message.sent_at
        for delay in copies:
            if faults.reorder > 0 and rng.random() < faults.reorder:
                delay += float(faults.reorder_delay.sample(rng))
                faults.extras["reordered"] += 1
            due = now + delay
            self._push((due, next(self._sequence), message.kind, message.src, message.dst, message.payload, now, due,
                        message.size, 1))
