"""LOCAL flooding hops as sparse products: the gamma-balls and distance rings of the agent graph, the
order in which paper-mode flooding delivers records, and the synchronous (paper-mode) hops of
:class:`netsim.flooding.Flooding` (its "Synchronous hops").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.errors import ProtocolError

if TYPE_CHECKING:
    from scipy import sparse

    from netsim.flooding import Flooding


def balls(ptr: np.ndarray, dst: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)`` of the balls of ``radius`` hops around every node (itself included).

    ``ptr``/``dst`` is the graph's adjacency in CSR form. Computed as the sparsity pattern of
    (A + I)^radius, one sparse product per hop; indices are sorted within each row.
    """
    from scipy import sparse

    n = len(ptr) - 1
    step = sparse.csr_matrix((np.ones(len(dst), dtype=np.int8), dst, ptr), shape=(n, n)) + sparse.identity(
        n, dtype=np.int8, format="csr")
    ball = sparse.identity(n, dtype=np.int8, format="csr")
    for _ in range(radius):
        ball = (ball @ step).astype(bool).astype(np.int8)
    ball.sort_indices()
    return ball.indptr.astype(np.int64), ball.indices.astype(np.int64)


def rings(ptr: np.ndarray, dst: np.ndarray, radius: int) -> list[sparse.csr_matrix]:
    """The distance rings D_1 .. D_radius: ``D_h[r, o] = 1`` iff d(r, o) = h (CSR, sorted indices)."""
    from scipy import sparse

    m = len(ptr) - 1
    adjacency = sparse.csr_matrix((np.ones(len(dst)), dst, ptr), shape=(m, m))
    reached = sparse.identity(m, format="csr")
    frontier = reached
    out = []
    for _ in range(radius):
        step = (adjacency @ frontier).tocsr()
        step.data[:] = 1.0
        new = (step - step.multiply(reached)).tocsr()
        new.eliminate_zeros()
        new.sort_indices()
        out.append(new)
        reached = (reached + new).tocsr()
        frontier = new
    return out


def arrival_order(ptr: np.ndarray, dst: np.ndarray, ring: list[sparse.csr_matrix]) -> tuple[np.ndarray, ...]:
    """For every receiver, the origins whose records it first receives at one tick, in the order the
    message path hands them to the protocol: CSR ``(indptr, origin, hops)``.

    Paper mode (unit delays, every node flushes once per tick, and takes in what arrived before it
    publishes): the record of origin o published at tick s first reaches r at s + d(r, o), so the
    records r first receives at tick t are those of the origins o with 1 <= d(r, o) <= gamma, each
    published at t - d(r, o). They arrive in the flushes of r's neighbours, which the engine delivers
    in increasing sender id; a sender s's flush carries the records it first received at t - 1 that
    have life left (d(s, o) < gamma), in its own arrival order, then its own new record
    (:meth:`netsim.flooding.Flooding.flush`), and r keeps the first copy of each record it has not
    seen before, i.e. of o with d(r, o) = d(s, o) + 1. The order therefore depends on the graph
    only (an origin that did not publish is just left out); it is found by applying that rule
    gamma times, starting from empty lists (after h rounds the origins within h hops are placed).
    ``ring`` is :func:`rings` (its length is gamma).
    """
    m = len(ptr) - 1
    gamma = len(ring)
    within = [r.tocoo() for r in ring]
    key = np.concatenate([c.row.astype(np.int64) * m + c.col for c in within] or [np.zeros(0, dtype=np.int64)])
    if not len(key):  # no links: nothing is ever received
        return np.zeros(m + 1, dtype=np.int64), key, key
    hops = np.concatenate([np.full(c.nnz, h, dtype=np.int64) for h, c in enumerate(within, 1)])
    order = np.argsort(key)
    key, hops = key[order], hops[order]
    receiver = np.repeat(np.arange(m, dtype=np.int64), np.diff(ptr))
    link = np.lexsort((dst, receiver))                        # (receiver, sender) with senders increasing
    link_r, link_s = receiver[link], np.asarray(dst, dtype=np.int64)[link]
    nodes = np.arange(m, dtype=np.int64)
    list_ptr, list_origin, list_hops = np.zeros(m + 1, dtype=np.int64), nodes[:0], nodes[:0]
    for _ in range(gamma):
        # what each node forwards: the records it first received with life left, then its own
        holder = np.repeat(nodes, np.diff(list_ptr))
        alive = list_hops < gamma
        owner = np.concatenate((holder[alive], nodes))
        sort = np.argsort(owner, kind="stable")
        fwd_origin = np.concatenate((list_origin[alive], nodes))[sort]
        fwd_hops = np.concatenate((list_hops[alive], np.zeros(m, dtype=np.int64)))[sort]
        fwd_len = np.bincount(owner, minlength=m)
        fwd_ptr = np.concatenate(([0], np.cumsum(fwd_len)))
        # every copy each receiver gets, in delivery order, kept if it is the record's first arrival
        size = fwd_len[link_s]
        at = np.repeat(fwd_ptr[link_s] - (np.cumsum(size) - size), size) + np.arange(int(size.sum()))
        to, origin, hop = np.repeat(link_r, size), fwd_origin[at], fwd_hops[at] + 1
        pair = to * m + origin
        where = np.minimum(np.searchsorted(key, pair), len(key) - 1)
        first_arrival = (key[where] == pair) & (hops[where] == hop)
        to, origin, hop, pair = to[first_arrival], origin[first_arrival], hop[first_arrival], pair[first_arrival]
        _, first = np.unique(pair, return_index=True)
        first.sort()
        list_origin, list_hops = origin[first], hop[first]
        list_ptr = np.concatenate(([0], np.cumsum(np.bincount(to[first], minlength=m))))
    return list_ptr, list_origin, list_hops


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise product of two column arrays, ``b`` broadcast over ``a``'s trailing axes (its shape wins)."""
    return a * b.reshape(b.shape + (1,) * (a.ndim - b.ndim))


class _Synchronous:
    """Paper-mode LOCAL flooding as sparse products (module docstring of :mod:`netsim.flooding`, "Synchronous hops").

    Keeps, per origin, its latest published record (and a snapshot of those per tick for the
    last gamma ticks); the pairs at distance exactly h are the sparse matrix ``rings[h - 1]``
    (receiver x origin). A receiver at distance h from an origin holds, after the deliveries
    of tick t, the origin's latest record as of tick t - h; the records it first receives at
    tick t are those of :func:`arrival_order`, taken from these snapshots.
    """

    def __init__(self, flood: Flooding, corrupted: bool):
        net = flood.network
        m, gamma = flood.num_agents, flood.gamma
        self.flood = flood
        self.period = flood.sim.clock_period
        self.degree = np.diff(net.agent_ptr)
        self.rings = rings(net.agent_ptr, net.agent_dst, gamma)
        self.ring_size = [np.diff(ring.indptr) for ring in self.rings]  # |S_h(o)| (symmetric graph)
        self.order = None
        if flood.on_receive is not None:
            ptr, origin, hops = arrival_order(net.agent_ptr, net.agent_dst, self.rings)
            self.order = (np.repeat(np.arange(m), np.diff(ptr)), origin, hops, (hops - 1) * m + origin)
        dtype = flood._value_dtype
        # where the kind is corrupted at the source, the payload rows carry the own records: origin and values
        self.payload_dtype = np.dtype([("origin", "i4")] + [(name, dtype.fields[name][0])
                                                            for name in flood.value_names]) if corrupted else None
        self.sent: tuple[np.ndarray, np.ndarray] | None = None  # (origins, payload rows) of the last flush
        self.values = {name: np.zeros((m,) + dtype.fields[name][0].shape, dtype=dtype.fields[name][0].base)
                       for name in flood.value_names}
        self.seq = np.full(m, -1, dtype=np.int64)
        self.created = np.full(m, np.nan)
        self.published = np.zeros(m, dtype=bool)
        self.snapshots: list[dict] = []  # newest first: snapshots[h] was taken h periods before the last
        self.view: list[dict] = []      # the snapshots the receivers hold (as of the last arrival)
        self.last_flush: float | None = None

    def publish(self, agents: np.ndarray, records: np.ndarray) -> None:
        for name in self.values:
            self.values[name][agents] = records[name]
        self.seq[agents] = records["seq"]
        self.created[agents] = records["created"]
        self.published[agents] = True

    def _derive(self, snap: dict) -> None:
        """The per-origin terms of the running sums, from the snapshot's values: one column block per sum."""
        m = self.flood.num_agents
        terms = [(snap[spec[0]] if len(spec) == 1 else _product(snap[spec[0]], snap[spec[1]])).reshape(m, -1)
                 for spec in self.flood.sum_spec.values()]
        snap["sums"] = np.concatenate(terms, axis=1) if terms else None

    def flush(self) -> int:
        flood = self.flood
        now = flood.sim.now
        if self.last_flush is not None and now != self.last_flush + self.period:
            raise ProtocolError(f"synchronous flooding {flood.kind!r}: flush at t = {now:g} after one at "
                                f"t = {self.last_flush:g}; accepted: one flush per clock tick")
        self.last_flush = now
        snap = {"published": self.published.copy(), "seq": self.seq.copy(), "created": self.created.copy(),
                **{name: values.copy() for name, values in self.values.items()}}
        self._derive(snap)
        self.snapshots.insert(0, snap)
        del self.snapshots[flood.gamma:]
        self.published[:] = False
        # what each node forwards now: the records it first received now that have life left (origins at
        # distance h < gamma that published h ticks ago), then its own new record
        size = snap["published"].astype(np.int64)
        for h, earlier in enumerate(self.snapshots[1:flood.gamma], 1):
            published = earlier["published"]
            size += self.ring_size[h - 1] if published.all() else \
                (self.rings[h - 1] @ published.astype(float)).astype(np.int64)
        senders = np.flatnonzero(size)
        if not len(senders):
            return 0
        bounds = np.concatenate(([0], np.cumsum(size[senders])))
        flood.records_forwarded += int((size[senders] * self.degree[senders]).sum())
        # the rows' content is the model's: only their number travels through the engine; where the kind is
        # corrupted at the source, the rows carry what the corruption rule reads and writes (origin and
        # values), each sender's own record last in its chunk, and -1 (no origin) elsewhere
        payload = np.zeros(int(bounds[-1]), dtype=bool)
        if self.payload_dtype is not None:
            payload = np.zeros(int(bounds[-1]), dtype=self.payload_dtype)
            payload["origin"] = -1
            own = snap["published"][senders]
            origins, rows = senders[own], bounds[1:][own] - 1
            payload["origin"][rows] = origins
            for name in self.values:
                payload[name][rows] = snap[name][origins]
            self.sent = (origins, rows)
        return flood.network.broadcast_chunks(flood.kind, senders, bounds, payload)

    def arrived(self, held: list) -> None:
        flood = self.flood
        received = int(sum(int((item.stop - item.start).sum()) for item in held))
        flood.records_received += received
        if self.sent is not None:  # the own records as the engine delivered them (some corrupted)
            origins, rows = self.sent
            delivered, snap = held[-1].payload, self.snapshots[0]
            current = self.seq[origins] == snap["seq"][origins]  # not published again since
            for name, values in self.values.items():
                snap[name][origins] = delivered[name][rows]
                values[origins[current]] = snap[name][origins[current]]
            self._derive(snap)
            self.sent = None
        self.view = self.snapshots[:]  # snapshots[h - 1]: as of h periods ago, for the pairs at distance h
        fresh = sum(int(self.ring_size[h - 1][snap["published"]].sum()) for h, snap in enumerate(self.view, 1))
        flood.duplicates += received - fresh
        if flood.sum_spec:  # every sum at once: one sparse product per ring (each column summed as alone)
            total = np.zeros_like(self.view[0]["sums"])
            for h, snap in enumerate(self.view, 1):
                total += self.rings[h - 1] @ snap["sums"]
            start = 0
            for values in flood.sums.values():
                width = values[0].size
                values[...] = total[:, start:start + width].reshape(values.shape)
                start += width
        if self.order is not None:
            flood.on_receive(*self.fresh())

    def fresh(self) -> tuple[np.ndarray, np.ndarray]:
        """(receivers, records): the records first received at the last arrival, each receiver's in
        the message path's order (:func:`arrival_order`), receivers in increasing id."""
        flood = self.flood
        receiver, origin, hops, index = self.order
        stack = {name: np.concatenate([snap[name] for snap in self.view])  # row (h - 1) * M + origin
                 for name in ("published", "seq", "created", *self.values)}
        if len(self.view) < flood.gamma or not stack["published"].all():
            keep = hops <= len(self.view)
            keep[keep] = stack["published"][index[keep]]
            receiver, origin, hops, index = (column[keep] for column in self.order)
        records = np.empty(len(index), dtype=flood.dtype)
        records["origin"] = origin
        records["life"] = flood.gamma - hops
        for name in ("seq", "created", *self.values):
            records[name] = stack[name][index]
        return receiver, records

    def dense(self, name: str, fill: Any) -> np.ndarray:
        """(M, M, ...) view of the latest table's ``name`` column (``seq``, ``created`` or a value column)."""
        m = self.flood.num_agents
        base = self.seq if name == "seq" else self.created if name == "created" else self.values[name]
        out = np.full((m, m) + base.shape[1:], fill, dtype=base.dtype)
        for h, snap in enumerate(self.view, 1):
            ring = self.rings[h - 1].tocoo()
            values = snap[name][ring.col]
            known = snap["seq"][ring.col] >= 0
            out[ring.row[known], ring.col[known]] = values[known]
        return out
