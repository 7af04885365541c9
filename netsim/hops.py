"""LOCAL flooding hops as sparse products: the gamma-balls and distance rings of the agent graph, and
the synchronous (paper-mode) hops of :class:`netsim.flooding.Flooding` (its "Synchronous hops").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.errors import ProtocolError

if TYPE_CHECKING:
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


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise product of two column arrays, ``b`` broadcast over ``a``'s trailing axes (its shape wins)."""
    return a * b.reshape(b.shape + (1,) * (a.ndim - b.ndim))


class _Synchronous:
    """Paper-mode LOCAL flooding as sparse products (module docstring, "Synchronous hops").

    Keeps, per origin, its latest published record (and a snapshot of those per tick for the
    last gamma ticks); the pairs at distance exactly h are the sparse matrix ``rings[h - 1]``
    (receiver x origin). A receiver at distance h from an origin holds, after the deliveries
    of tick t, the origin's latest record as of tick t - h.
    """

    def __init__(self, flood: Flooding):
        from scipy import sparse

        self.flood = flood
        net = flood.network
        m, gamma = flood.num_agents, flood.gamma
        self.period = flood.sim.clock_period
        self.degree = np.diff(net.agent_ptr)
        adjacency = sparse.csr_matrix((np.ones(len(net.agent_dst)), net.agent_dst, net.agent_ptr), shape=(m, m))
        reached = sparse.identity(m, format="csr")
        frontier = reached
        self.rings = []
        for _ in range(gamma):
            step = (adjacency @ frontier).tocsr()
            step.data[:] = 1.0
            new = (step - step.multiply(reached)).tocsr()
            new.eliminate_zeros()
            new.sort_indices()
            self.rings.append(new)
            reached = (reached + new).tocsr()
            frontier = new
        self.ring_size = [np.diff(ring.indptr) for ring in self.rings]  # |S_h(o)| (symmetric graph)
        dtype = flood._value_dtype
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

    def flush(self) -> int:
        flood = self.flood
        now = flood.sim.now
        if self.last_flush is not None and now != self.last_flush + self.period:
            raise ProtocolError(f"synchronous flooding {flood.kind!r}: flush at t = {now:g} after one at "
                                f"t = {self.last_flush:g}; accepted: one flush per clock tick")
        self.last_flush = now
        snap = {"published": self.published.copy(), "seq": self.seq.copy(), "created": self.created.copy(),
                **{name: values.copy() for name, values in self.values.items()}}
        for name, spec in flood.sum_spec.items():
            snap["sum:" + name] = snap[spec[0]] if len(spec) == 1 else _product(snap[spec[0]], snap[spec[1]])
        self.snapshots.insert(0, snap)
        del self.snapshots[flood.gamma:]
        self.published[:] = False
        # what each node forwards now: its own new record, and the records it first received now
        # that have life left (origins at distance h < gamma that published h ticks ago)
        size = snap["published"].astype(np.int64)
        for h in range(1, flood.gamma):
            if h < len(self.snapshots):
                size += (self.rings[h - 1] @ self.snapshots[h]["published"].astype(float)).astype(np.int64)
        senders = np.flatnonzero(size)
        if not len(senders):
            return 0
        bounds = np.concatenate(([0], np.cumsum(size[senders])))
        flood.records_forwarded += int((size[senders] * self.degree[senders]).sum())
        # the rows' content is the model's: only their number travels through the engine
        return flood.network.broadcast_chunks(flood.kind, senders, bounds, np.zeros(int(bounds[-1]), dtype=bool))

    def arrived(self, held: list) -> None:
        flood = self.flood
        received = int(sum(int((item.stop - item.start).sum()) for item in held))
        flood.records_received += received
        self.view = self.snapshots[:]  # snapshots[h - 1]: as of h periods ago, for the pairs at distance h
        fresh = sum(int(self.ring_size[h - 1][snap["published"]].sum()) for h, snap in enumerate(self.view, 1))
        flood.duplicates += received - fresh
        m = flood.num_agents
        for name in flood.sum_spec:
            total = np.zeros((m, int(np.prod(flood.sums[name].shape[1:], dtype=np.int64))))
            for h, snap in enumerate(self.view, 1):
                total += self.rings[h - 1] @ snap["sum:" + name].reshape(m, -1)
            flood.sums[name][...] = total.reshape(flood.sums[name].shape)

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
