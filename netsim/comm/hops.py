"""LOCAL flooding hops as sparse products: the gamma-balls and distance rings of the agent graph, the
order in which paper-mode flooding delivers records: the graph algebra of the synchronous
(paper-mode) hops of :class:`netsim.comm.flooding.Flooding` (its "Synchronous hops", whose state
machine lives beside it in :mod:`netsim.comm.flooding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy import sparse


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
    (:meth:`netsim.comm.flooding.Flooding.flush`), and r keeps the first copy of each record it has not
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
