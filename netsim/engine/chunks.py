"""Array sends: :meth:`ChunkSends.broadcast_chunks`, every sender's rows of one array to its agent neighbours.

Part of :class:`netsim.engine.network.Network` (its base class), for LOCAL flooding and any protocol
whose senders each send their own rows of one array: one engine call per flush, one message per
link counted, lost, delayed and corrupted exactly as one ``send_many`` per sender would be. With
constant delays the flush is one queue entry (a :class:`~netsim.engine.messages.Multicast`); for a kind
with a deferred reader it is one flight of arrays whatever the delays (:mod:`netsim.engine.held`); with
sampled delays for other readers, one entry per link, built in bulk. See ``docs/engine.md``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from netsim.engine.held import Flight
from netsim.engine.messages import Message, Multicast, _subset


def _copy(payload: Any) -> Any:
    """A copy of a message payload; a structured array is copied as raw rows (numpy copies those field by
    field, ~20x slower)."""
    if isinstance(payload, np.ndarray) and payload.dtype.names:
        return payload.view(np.dtype((np.void, payload.dtype.itemsize))).copy().view(payload.dtype)
    return payload.copy()


class ChunkSends:
    """``broadcast_chunks`` and its parts (the network sets the state they use)."""

    __slots__ = ()

    def broadcast_chunks(self, kind: str, srcs: np.ndarray, bounds: np.ndarray, payload: np.ndarray) -> int:
        """Every agent ``srcs[i]`` sends the rows ``payload[bounds[i]:bounds[i+1]]`` to each agent neighbour.

        The vectorised form of one :meth:`send_many` per sender (LOCAL flooding): one message per
        link with ``size`` = its number of rows, counted, lost, delayed and corrupted exactly as
        the per-sender sends would be (the per-sender loss draws are taken in the same order).
        ``srcs`` must be increasing agent ids. Returns the number of messages sent.
        """
        self._send_noted()
        srcs = np.asarray(srcs, dtype=np.int64)
        bounds = np.asarray(bounds, dtype=np.int64)
        ptr, dst_all = self.agent_ptr, self.agent_dst
        degree = ptr[srcs + 1] - ptr[srcs]
        total = int(degree.sum())
        if total == 0:
            return 0
        now = self.env.now
        sizes = bounds[1:] - bounds[:-1]
        # per link: position in the CSR arrays and the sender's chunk index
        chunk = np.repeat(np.arange(len(srcs)), degree)
        slot = np.arange(total) - np.repeat(np.cumsum(degree) - degree, degree) + ptr[srcs][chunk]
        src = srcs[chunk]
        dst = dst_all[slot]
        metrics = self.metrics
        counts = metrics.kind(kind)
        counts.sent += total
        counts.records += int((sizes * degree).sum())
        metrics.sent_bulk[srcs] += degree
        metrics.edges_used(self.agent_edge[slot], now)
        keep = None
        faults = self.faults
        if faults is not None and (faults.has_crashes or faults.has_link_faults):
            keep = faults.kept_at_send(src, dst, now)
        if self._overrides or self._loss > 0:
            # loss is drawn for the links that survived the faults, in link order (as per-sender sends draw)
            alive = np.arange(total) if keep is None else np.flatnonzero(keep)
            loss = self._link_losses(src[alive], dst[alive])
            if np.any(loss > 0):
                lost = self.rng.random(len(alive)) < loss
                keep = np.ones(total, dtype=bool) if keep is None else keep.copy()
                keep[alive[lost]] = False
        if keep is not None and not keep.all():
            counts.dropped += int(total - keep.sum())
            if self.tracer:
                for s, d, c in zip(src[~keep].tolist(), dst[~keep].tolist(), chunk[~keep].tolist(), strict=True):
                    self.tracer("drop", Message(kind, s, d, payload[bounds[c]:bounds[c + 1]], now, now,
                                                int(sizes[c])))
            src, dst, chunk = src[keep], dst[keep], chunk[keep]
            if not len(src):
                return total
        start, stop = bounds[:-1][chunk], bounds[1:][chunk]
        hit = None
        if self.adversary is not None and kind in self._corruptors:
            payload, start, stop, hit = self._corrupt_chunks(kind, srcs, bounds, payload, src, chunk, start, stop,
                                                             counts)
        perturbs = faults is not None and faults.perturbs
        if kind in self._held and not self._tracer and not perturbs and not self._delivering:
            # a deferred kind: one flight, per-link due times as an array (netsim.engine.held)
            due, constant = self._link_dues(src, dst, now)
            self._hold(Flight(kind, due, src, dst, start, stop, payload, now, self._take_sequences(len(src)),
                              constant))
            return total
        simple = self._uniform_links and not self._overrides and self._delay.is_constant and not perturbs
        if simple:
            due = now + self._delay.args["value"]
            record = Multicast(kind, src, dst, start, stop, payload, now, due)
            if self.tracer and hit is not None:
                for message in _subset(record, hit).messages():
                    self.tracer("corrupt", message)
            self._push((due, next(self._sequence), kind, -1, record, payload, now, due, 0, len(src)))
            return total
        if not self._tracer and not perturbs:  # sampled delays: one entry per link, built in bulk
            due, _ = self._link_dues(src, dst, now)
            first = self._take_sequences(len(src))
            self._push_all([(d, q, kind, s, t, payload[a:b], now, d, b - a, 1) for d, q, s, t, a, b in
                             zip(due.tolist(), range(first, first + len(src)), src.tolist(), dst.tolist(),
                                 start.tolist(), stop.tolist())])
            return total
        # a tracer or message faults: one entry per link, through the single-message machinery
        hits = hit.tolist() if hit is not None else [False] * len(src)
        for s, d, a, b, h in zip(src.tolist(), dst.tolist(), start.tolist(), stop.tolist(), hits, strict=True):
            law, _ = self.link_law(s, d)
            self._send_one(Message(kind, s, d, payload[a:b], now, now, b - a), law, corrupted=h)
        return total

    def _link_dues(self, src: np.ndarray, dst: np.ndarray, now: float) -> tuple[np.ndarray, bool]:
        """Due times of messages sent now over the agent links ``src[i] -> dst[i]`` (the delays of one
        message per link in link order, as per-link sends draw them); True if all are equal."""
        if not self._overrides:
            law = self._delay
            if law.is_constant:
                return np.full(len(src), now + law.args["value"]), True
            return now + self._law(law).take_array(len(src)), False
        laws = [self.link_law(s, d)[0] for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
        due = np.array([now + (law.args["value"] if law.is_constant else self._law(law).next()) for law in laws])
        return due, False

    def _take_sequences(self, count: int) -> int:
        """Reserve ``count`` consecutive send sequences; returns the first."""
        first = next(self._sequence)
        self._sequence = itertools.count(first + count)
        return first

    def _hold(self, flight: Flight) -> None:
        """Queue a flight of a deferred kind (``netsim.engine.held``)."""
        self._in_flight += len(flight.due)
        self._holding.add(flight)  # settled when read (DeliveryHeap.settle): no wake-up of its own

    def _link_losses(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        if not self._overrides:
            return np.full(len(src), self._loss)
        return np.array([self.link_law(s, d)[1] for s, d in zip(src.tolist(), dst.tolist(), strict=True)])

    def _corrupt_chunks(self, kind: str, srcs: np.ndarray, bounds: np.ndarray, payload: np.ndarray,
                        src: np.ndarray, chunk: np.ndarray, start: np.ndarray, stop: np.ndarray,
                        counts: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Source corruption once per sender chunk; link corruption per link (new rows appended).

        Returns the payload, the per-link row ranges and which links carry a corrupted copy.
        """
        adv = self.adversary
        corrupt = self._corruptors[kind]
        rng = self._adversary_rng
        hit_chunk = np.zeros(len(srcs), dtype=bool)
        # chunks with at least one surviving link (a lost one is never corrupted); ``chunk`` is non-decreasing
        sending = chunk[np.flatnonzero(np.diff(chunk, prepend=-1))]
        if adv.probability > 0.0 and adv.byzantine:
            byzantine = np.fromiter(adv.byzantine, dtype=np.int64)
            liars = sending[np.isin(srcs[sending], byzantine)]
            if len(liars):
                payload = _copy(payload)
                many = getattr(corrupt, "chunks", None)
                if many is not None:  # the rule's vectorised form: same draws as one call per chunk
                    hits = many(payload, bounds[liars], bounds[liars + 1], srcs[liars], rng=rng,
                                probability=adv.probability, q=adv.q, relay=adv.relay)
                    hit_chunk[liars[hits > 0]] = True
                    liars = liars[:0]
                for c in liars.tolist():
                    a, b = int(bounds[c]), int(bounds[c + 1])
                    new, hits = corrupt(payload[a:b], sender=int(srcs[c]), rng=rng, probability=adv.probability,
                                        q=adv.q, relay=adv.relay)
                    if hits:
                        payload[a:b] = new
                        hit_chunk[c] = True
        hit = hit_chunk[chunk]
        if adv.link_probability > 0.0:
            extra = [payload]
            rows = len(payload)
            start, stop = start.copy(), stop.copy()
            for i, (s, a, b) in enumerate(zip(src.tolist(), start.tolist(), stop.tolist(), strict=True)):
                new, hits = corrupt(payload[a:b], sender=s, rng=rng, probability=adv.link_probability, q=adv.q,
                                    relay=True)
                if hits:
                    extra.append(new)
                    start[i], stop[i] = rows, rows + (b - a)
                    rows += b - a
                    hit[i] = True
            if len(extra) > 1:
                payload = np.concatenate(extra)
        counts.corrupted += int(hit.sum())
        return payload, start, stop, hit
