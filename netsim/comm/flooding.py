"""The LOCAL (time-to-live flooding) message protocol as a reusable, algorithm-agnostic piece.

Dubey & Pentland (2020), "Private and Byzantine-Proof Cooperative Decision-Making", Sec. 2
(Communication Protocol, Eq. 3): at trial t agent m creates a message
``q_m(t) = <m, t, f_1(H_m(t)), ..., f_L(H_m(t))>`` and broadcasts it to its neighbours; every
agent forwards each message it has not received before to all its neighbours, and a message
is discarded after it has travelled ``gamma`` hops. Agent m therefore hears agent m' with a
delay of d(m, m') trials, if and only if d(m, m') <= gamma.

Records
    A record is one row of a numpy structured array with the columns ``origin`` (agent that
    created it), ``seq`` (the origin's publication counter, 0, 1, ...), ``created`` (simulated
    time of creation), ``life`` (hops it may still travel) and the protocol's value columns
    (``value_dtype``, e.g. ``[("arm", "i4"), ("reward", "f8")]`` or
    ``[("mean", "f8", (K,)), ("count", "f8", (K,))]``). A record is identified by
    ``(origin, seq)``.

Batching
    :meth:`Flooding.flush` sends, over every link (u, v), ONE engine message whose payload is
    the array of all records u forwards this trial and whose ``size`` is their number
    (``records`` in the engine counters). The whole flush is one engine call
    (:meth:`netsim.engine.network.Network.broadcast_chunks`: every sender's rows of one array, its
    agent neighbours as destinations), and with constant link delays one heap entry. Nothing is
    a Python object per record or per link: the receive side gets the delivered messages as
    :class:`~netsim.engine.network.Multicast` arrays (``subscribe_records``) and works on whole arrays.

Timing (paper mode: unit link delays, one protocol tick per trial)
    The protocol calls :meth:`publish` then :meth:`flush` in its tick at time t. A record sent
    at t arrives at t + 1, before the tick of t + 1 (engine order: deliveries, then ticks), is
    queued for forwarding and leaves with the flush of t + 1. So the record created by m' at t
    is in m's table at exactly t + d(m, m'). With sampled delays (realistic mode) a record
    waits in the receiver's outbox from its arrival until the next flush, i.e. the per-hop
    latency is the sampled delay rounded up to the next tick; ``relay="on_receipt"`` instead
    forwards right after the delivery instant (one message per link per delivery instant).

Life
    A record is created with ``life = gamma``. Each hop decrements it: the payload of a flush
    carries ``life - 1``, and a receiver forwards a new record only if the life it arrived
    with is >= 1. ``gamma = 0`` means no communication.

Duplicates
    A node forwards (and reports to the protocol) a given ``(origin, seq)`` at most once. The
    per-(receiver, origin) memory is an anti-replay window (as in IPsec, and as
    :class:`netsim.comm.sequencing.ReplayWindow`): the highest ``seq`` seen and a 64-bit mask of which
    of the 64 preceding ``seq`` were seen. A record more than 63 publications older than the
    newest one already seen from its origin is dropped as stale. With unit delays and one
    publication per trial this never happens while gamma < 64 (every copy of a record arrives
    within gamma trials of its creation), so the rule is exact there; records that come back to
    their own origin are dropped too. A duplicated or reordered engine message is therefore
    harmless: its records are the records already seen, or stale.

    Memory is linear in the pairs that can talk: a record travels at most gamma hops, so only
    the pairs (receiver, origin) at distance <= gamma have a window (the gamma-ball of every
    agent, computed once with sparse products of the adjacency matrix, stored as a CSR
    array). The copies of a batch are checked one at a time in delivery order (receiver by
    receiver: every rule is per receiver) by a compiled loop, O(1) each, at any M, without a
    Python object per message or record (:mod:`netsim.comm.heard`, :mod:`netsim.comm.kernels`).

Synchronous hops (paper mode)
    With ``synchronous=True`` and a paper-mode run (every agent link delays exactly one clock
    period; no loss, faults, corruption or tracer), a record published at tick s reaches the
    nodes at distance exactly h at tick s + h, first, and every other copy is a duplicate: the
    outcome of the message-by-message protocol is fixed by the graph. The module then computes
    it with sparse products instead of per-record copies: the rings D_h (pairs at distance
    exactly h, from h products of the adjacency matrix) give each receiver's latest record per
    origin (the origin's latest as of h ticks ago) and the ``sums`` over them
    (sum_h D_h @ snapshot(t - h)); what each node forwards at a flush is its own new record plus
    the origins at distance h < gamma that published h ticks ago. The engine still carries one
    message per link and flush with ``size`` = the number of records forwarded (every counter,
    link and message count is as on the message path; the rows' content is the model's). With
    ``on_receive`` each receiver gets the records it first receives at a tick, taken from the
    snapshots, in the order the message path hands them over (:func:`netsim.comm.hops.arrival_order`:
    fixed by the graph, since every node takes in its deliveries, publishes, then flushes what
    it first heard with life left followed by its own record). Corruption at the source (no
    ``relay``, no ``link_corruption``) is kept: the payload of a flush then has each sender's own
    record last in its chunk, as on the message path, so the corruptor makes the same draws, and
    what the engine delivers is what the receivers read. Tested against the message path
    (``tests/test_dubey2020a_flooding.py``): same counters, tables, records and order; sums equal
    up to floating-point summation order.

Crashes and restarts
    :meth:`Flooding.forget` is what a node that lost its state (crash with ``state = "lost"``)
    does: it forgets which records it has seen and its latest-record table, and starts a new
    *incarnation* of its own sequence numbers (``seq`` continues above ``2**32`` times the
    incarnation count, as :class:`netsim.comm.sequencing.Sequencer` does), so that what it publishes
    afresh is never taken for a duplicate of its earlier life. Messages to and from a crashed
    node are dropped by the engine.

Latest message per origin
    With ``latest=True`` the module keeps, for every receiver m and origin m' within gamma hops,
    the newest record (highest ``seq``) m has received from m', the table Alg. 1
    (ISLATESTMESSAGE) reads; a reordered older record never overwrites a newer one. It is stored
    per pair of the gamma-balls; ``latest_seq[m, m']`` (-1 if none), ``latest_values[name][m, m']``
    and ``latest_created`` are dense (M, M) views built on demand (for tests and small M).
    ``on_receive(dst, records)`` is called with every new (non-duplicate) record delivered at an
    instant, ``dst[i]`` being the receiver of ``records[i]``, after the table is updated;
    ``on_latest(dst, origin, previous, records)`` with the table entries that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.comm.heard import HEADER, Receiving, take
from netsim.comm.hops import _product, arrival_order, balls, rings
from netsim.engine.errors import ProtocolError
from netsim.engine.held import stable_order

if TYPE_CHECKING:
    from netsim.engine.sim import Simulation

INCARNATION = 1 << 32

ReceiveCallback = Callable[[np.ndarray, np.ndarray], None]
LatestCallback = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def record_dtype(value_dtype: Sequence[tuple] | np.dtype) -> np.dtype:
    """The record dtype: the header columns followed by the protocol's value columns."""
    values = np.dtype(value_dtype)
    clash = set(values.names or ()) & {name for name, _ in HEADER}
    if clash:
        raise ValueError(f"value columns {sorted(clash)} clash with the record header; accepted: other names")
    return np.dtype(HEADER + [(name, values.fields[name][0]) for name in values.names or ()])


class Flooding(Receiving):
    """LOCAL protocol with time-to-live ``gamma`` for messages of one ``kind`` among the agents.

    Parameters
    ----------
    sim:
        The running :class:`~netsim.engine.sim.Simulation` (its network carries the messages).
    kind:
        Message kind used on the engine (one kind per Flooding instance).
    gamma:
        Number of hops a record travels (life at creation), an integer >= 0.
    value_dtype:
        The protocol's value columns (numpy dtype description).
    on_receive:
        Optional ``callback(dst, records)`` for the new records delivered at one instant.
    latest:
        Keep the per-receiver table of the latest record of each origin.
    on_latest:
        Optional ``callback(dst, origin, previous, records)`` called when entries of the latest
        table change: ``previous[column][i]`` holds the value that ``records[column][i]`` replaces
        in entry ``(dst[i], origin[i])`` (zero where there was none); both are dicts of column
        arrays; the entries come receiver by receiver (increasing ``dst``). Lets a protocol keep
        running aggregates over the table instead of re-reading it.
    deferred:
        Let the engine hold deliveries (``subscribe_deferred``) and handle them together at the
        next :meth:`process` or :meth:`flush` (which calls it first). For protocols that read
        only in their ticks: with sampled delays nearly every message has its own delivery
        instant, and this turns thousands of small batches per trial into one. Callbacks then run
        at that call, not at delivery.
    relay:
        ``"flush"`` (default): received records are forwarded at the next :meth:`flush`;
        ``"on_receipt"``: they are forwarded right after their delivery instant.
    sums:
        Running sums over each receiver's latest table, ``{name: column}`` or
        ``{name: (column_a, column_b)}`` (the product of two columns), kept in ``self.sums[name]``
        (shape (M, *column shape)): sum over the origins m' a receiver holds a record from of that
        record's value. Needs ``latest=True``.
    synchronous:
        The protocol promises, at every clock tick, :meth:`process`, then :meth:`publish`, then
        one :meth:`flush`, and reads ``sums`` or ``on_receive`` (no ``on_latest``; ``deferred``).
        When, in addition, every agent link has the same constant delay equal to the clock period
        and there are no loss, faults, tracer, or corruption other than at the source (paper
        mode), the hops are computed as sparse products instead of record by record (see
        "Synchronous hops" in the module docstring); otherwise this flag changes nothing.
    """

    def __init__(self, sim: Simulation, kind: str, gamma: int, value_dtype: Sequence[tuple] | np.dtype, *,
                 on_receive: ReceiveCallback | None = None, latest: bool = True, relay: str = "flush",
                 on_latest: LatestCallback | None = None, deferred: bool = False,
                 sums: Mapping[str, str | tuple[str, str]] | None = None, synchronous: bool = False):
        if int(gamma) != gamma or gamma < 0:
            raise ValueError(f"gamma = {gamma!r}; accepted: an integer >= 0")
        if relay not in ("flush", "on_receipt"):
            raise ValueError(f"relay = {relay!r}; accepted: 'flush', 'on_receipt'")
        if deferred and relay == "on_receipt":
            raise ValueError("deferred handling forwards at the next flush; accepted: relay = 'flush'")
        self.sim = sim
        self.network = network = sim.network
        self.kind = kind
        if sums and not latest:
            raise ValueError("sums are taken over the latest table; accepted: latest = True")
        self.sum_spec = {name: (spec,) if isinstance(spec, str) else tuple(spec) for name, spec in (sums or {}).items()}
        self.synchronous = bool(synchronous) and deferred and on_latest is None
        self._sync: _Synchronous | None = None
        self._mode = "" if self.synchronous else "messages"  # "sync" (sparse hops): decided at the first flush
        self.gamma = int(gamma)
        self.dtype = record_dtype(value_dtype)
        self.value_names = tuple(np.dtype(value_dtype).names or ())
        self.on_receive = on_receive
        self.on_latest = on_latest
        self.relay = relay
        self.deferred = deferred
        m = sim.num_agents
        self.num_agents = m
        self._seq = np.zeros(m, dtype=np.int64)
        self._outbox: list[np.ndarray] = []
        self._outbox_from: list[np.ndarray] = []
        self.keep_latest = latest
        values = np.dtype(value_dtype)
        self._value_dtype = values
        self._width = {name: int(np.prod(values.fields[name][0].shape, dtype=np.int64)) for name in self.value_names}
        self.sums = {name: np.zeros((m,) + values.fields[spec[0]][0].shape) for name, spec in self.sum_spec.items()}
        if not self.synchronous:
            self._pair_state()
        # counters (records, not engine messages)
        self.published = 0
        self.records_forwarded = 0   # record-hops: sum of payload sizes sent
        self.records_received = 0    # record-hops delivered (duplicates included)
        self.duplicates = 0          # delivered records dropped as already seen (or stale)
        if deferred:
            network.subscribe_deferred(kind)
        else:
            network.subscribe_records(kind, self._process)

    def _pair_state(self) -> None:
        """Windows and latest table of the message path, one entry per pair of the gamma-balls."""
        m = self.num_agents
        # the pairs (receiver, origin) that can ever talk: origin within gamma hops of the receiver
        self._ball_ptr, self._ball_origin = balls(self.network.agent_ptr, self.network.agent_dst, self.gamma)
        pairs = len(self._ball_origin)
        self._pair_key = np.repeat(np.arange(m, dtype=np.int64), np.diff(self._ball_ptr)) * m + self._ball_origin
        self._high = np.full(pairs, -1, dtype=np.int64)   # anti-replay window: newest seq per pair
        self._mask = np.zeros(pairs, dtype=np.uint64)      # bit j: seq (high - j) seen
        self._where = np.full(m, -1, dtype=np.int64)       # scratch of the compiled loop: a receiver's pair by origin
        self._buffer = self._none = np.zeros(0, dtype=np.int64)  # scratch of the batches (Receiving._scratch)
        self._rows = np.zeros(0, dtype=self.dtype)                # the joined rows of a batch (Receiving._joined)
        self._heads = (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32))  # and their header columns
        self._count = np.zeros(m + 1, dtype=np.int64)      # scratch of the compiled loop: messages per receiver
        self._words = None                                 # Receiving._latest_state
        words, floats = np.zeros((0, 0), dtype=np.uint64), np.zeros((0, 0))
        self._no_latest = (words, words, floats, floats, False, np.zeros((0, 2), dtype=np.int64), floats, self._none,
                           floats)  # Receiving._latest_args where receive() leaves the latest table alone
        if self.keep_latest:
            self._latest_state(pairs)

    # ------------------------------------------------------------------ dense views
    def _dense(self, values: np.ndarray | str, fill: Any) -> np.ndarray:
        m = self.num_agents
        if isinstance(values, str):  # before the first flush of a synchronous instance: nothing heard yet
            dtype = self._value_dtype.fields[values][0] if values in self.value_names else np.dtype(type(fill))
            return np.full((m, m) + dtype.shape, fill, dtype=dtype.base)
        out = np.full((m * m,) + values.shape[1:], fill, dtype=values.dtype)
        out[self._pair_key] = values
        return out.reshape((m, m) + values.shape[1:])

    @property
    def latest_seq(self) -> np.ndarray:
        """(M, M) newest ``seq`` received by m from m' (-1: none); a dense copy."""
        if self._mode == "sync":
            return self._sync.dense("seq", -1)
        return self._dense(self._high if self._mode else "seq", -1)  # the newest seq a window saw

    @property
    def latest_created(self) -> np.ndarray:
        """(M, M) creation time of that record (nan: none); a dense copy."""
        if self._mode == "sync":
            return self._sync.dense("created", np.nan)
        return self._dense(self._table["created"] if self._mode else "created", np.nan)

    @property
    def latest_values(self) -> dict[str, np.ndarray]:
        """Value columns of the latest records, each (M, M, *shape) (zero: none); dense copies."""
        if self._mode == "sync":
            return {name: self._sync.dense(name, 0) for name in self.value_names}
        if not self._mode:
            return {name: self._dense(name, 0) for name in self.value_names}
        return {name: self._dense(self._table[name], 0) for name in self.value_names}

    # ------------------------------------------------------------------ sources
    def records(self, agents: np.ndarray, values: Mapping[str, Any] | np.ndarray | None = None) -> np.ndarray:
        """A fresh record array (one row per agent) with the header filled; values copied if given."""
        agents = np.asarray(agents, dtype=np.int64)
        rec = np.zeros(len(agents), dtype=self.dtype)
        rec["origin"] = agents
        rec["created"] = self.sim.now
        rec["life"] = self.gamma
        if values is not None:
            for name in self.value_names:
                rec[name] = values[name]
        return rec

    def publish(self, agents: np.ndarray, values: Mapping[str, Any] | np.ndarray) -> np.ndarray:
        """Create one record per listed agent (its next ``seq``) and queue it for the next flush.

        ``values`` maps each value column to an array aligned with ``agents`` (a dict or a
        structured array). An agent may appear at most once per call. Returns the records.
        """
        agents = np.asarray(agents, dtype=np.int64)
        if not np.all(agents[1:] > agents[:-1]) and len(np.unique(agents)) != len(agents):  # increasing: distinct
            raise ProtocolError("publish: an agent may appear at most once per call")
        rec = self.records(agents, values)
        rec["seq"] = self._seq[agents]
        self._seq[agents] += 1
        self.published += len(agents)
        if self.synchronous and not self._mode:
            self._choose_mode()
        if self._mode == "sync":
            self.network.settle()  # held flights are settled when read
            if self.network._held[self.kind]:
                raise ProtocolError(f"synchronous flooding {self.kind!r}: publish with deliveries not yet "
                                    "processed; accepted: process(), then publish(), then flush() in each tick")
            self._sync.publish(agents, rec)
        elif self.gamma > 0 and len(agents):
            self._queue(agents, rec)
        return rec

    def _choose_mode(self) -> None:
        """Sparse hops when the run is paper mode (see ``synchronous``), else messages; once per trial."""
        net, sim = self.network, self.sim
        law, adversary = net._delay, net.adversary
        corrupted = adversary is not None and self.kind in net._corruptors
        at_source = not corrupted or (not adversary.relay and adversary.link_probability == 0.0)
        paper = (self.synchronous and self.gamma >= 1 and not sim.faults.active and net._simple
                 and law.is_constant and law.args["value"] == sim.clock_period and at_source
                 and net.tracer is None and self.relay == "flush")
        self._mode = "sync" if paper else "messages"
        if paper:
            self._sync = _Synchronous(self, corrupted)
        else:
            self._pair_state()

    def forget(self, agents: np.ndarray) -> None:
        """``agents`` lost their state (crash with ``state = "lost"``): see "Crashes and restarts" above."""
        for a in np.asarray(agents, dtype=np.int64).tolist():
            lo, hi = self._ball_ptr[a], self._ball_ptr[a + 1]
            if self.keep_latest:
                self._forget_latest(a, lo, hi)
            self._high[lo:hi] = -1
            self._mask[lo:hi] = 0
            self._seq[a] = (self._seq[a] // INCARNATION + 1) * INCARNATION
        if len(self._outbox_from):  # what they had queued for forwarding is gone too
            gone = np.asarray(agents, dtype=np.int64)
            for i, senders in enumerate(self._outbox_from):
                keep = ~np.isin(senders, gone)
                self._outbox_from[i], self._outbox[i] = senders[keep], take(self._outbox[i], np.flatnonzero(keep))

    def _queue(self, senders: np.ndarray, records: np.ndarray) -> None:
        self._outbox.append(records)
        self._outbox_from.append(senders)

    # ------------------------------------------------------------------ sending
    def flush(self) -> int:
        """Send every queued record: one engine message per link, carrying all records its sender forwards.

        Returns the number of engine messages sent.
        """
        if self.synchronous and not self._mode:
            self._choose_mode()
        if self._mode == "sync":
            self.process()
            return self._sync.flush()
        self.process()
        if not self._outbox:
            return 0
        joined = len(self._outbox) > 1  # a new array (else the caller's, which must not change)
        records = np.concatenate(self._outbox) if joined else self._outbox[0]
        senders = np.concatenate(self._outbox_from) if joined else self._outbox_from[0]
        self._outbox.clear()
        self._outbox_from.clear()
        faults = self.sim.faults
        if faults.has_crashes:  # a crashed node forwards nothing: what it had queued is lost with it
            up = faults.up[senders]
            if not up.all():
                senders, records = senders[up], take(records, np.flatnonzero(up))
        if not len(senders):
            return 0
        step = np.diff(senders)
        if np.any(step < 0):
            order = stable_order(senders)
            records, senders = take(records, order), senders[order]
            step = np.diff(senders)
        elif not joined:
            records = records.copy()
        records["life"] -= 1  # the hop about to be made
        ptr = self.network.agent_ptr
        if step.all():  # one record per sender (its own, with gamma = 1)
            self.records_forwarded += int(ptr[senders + 1].sum() - ptr[senders].sum())
            return self.network.broadcast_chunks(self.kind, senders, np.arange(len(senders) + 1), records)
        cut = np.flatnonzero(step) + 1
        bounds = np.concatenate(([0], cut, [len(senders)]))
        who = senders[bounds[:-1]]
        self.records_forwarded += int((np.diff(bounds) * (ptr[who + 1] - ptr[who])).sum())
        return self.network.broadcast_chunks(self.kind, who, bounds, records)

    # ------------------------------------------------------------------ receiving
    def process(self) -> None:
        """Handle the deliveries held by the engine since the last call (``deferred=True``); else a no-op."""
        if self.deferred:
            held = self.network.collect(self.kind)
            if held:
                if self._mode == "sync":
                    self._sync.arrived(held)
                else:
                    self._process(held)

    # ------------------------------------------------------------------ byzantine reports
    def corruptor(self, column: str, *, records_corrupted: Callable[[int], None] | None = None) -> Callable[..., tuple]:
        """A corruption rule for ``network.corruptible(kind, ...)`` that rewrites the value ``column``.

        Each record the sender created (``origin == sender``), and with ``relay`` also each record
        it relays, is replaced with probability ``probability`` by a draw of ``q``. The engine
        calls the rule once per forwarding for a byzantine sender, so every link of the same flush
        gets the same corrupted copy (corruption at the source, Sec. 4), and once per link for its
        in-transit ``link_corruption``. ``records_corrupted(n)`` is told how many records each call
        corrupted.
        """
        if column not in self.value_names:
            raise ValueError(f"column {column!r}; accepted: {', '.join(self.value_names)}")

        def corrupt(payload: np.ndarray, *, sender: int, rng: np.random.Generator, probability: float,
                    q: Any, relay: bool) -> tuple[np.ndarray, int]:
            eligible = np.ones(len(payload), dtype=bool) if relay else payload["origin"] == sender
            hit = eligible & (rng.random(len(payload)) < probability)
            n = int(hit.sum())
            if not n:
                return payload, 0
            out = payload.copy()
            shape = out[column].shape[1:]
            draws = np.asarray(q.sample(rng, n * int(np.prod(shape, dtype=np.int64))), dtype=float)
            out[column][hit] = draws.reshape((n,) + shape)
            if records_corrupted is not None:
                records_corrupted(n)
            return out, n

        def chunks(payload: np.ndarray, starts: np.ndarray, stops: np.ndarray, senders: np.ndarray, *,
                   rng: np.random.Generator, probability: float, q: Any, relay: bool) -> np.ndarray:
            """``corrupt`` on every chunk, in order, vectorised; same draws (see the engine's Corruptor).

            The uniforms of all chunks are drawn at once; where a chunk has a hit, the generator is
            rewound and replayed up to that chunk's end, so Q's draws come where one call per chunk
            would take them (hits are rare: one replay per hit chunk).
            """
            lengths = stops - starts
            out = np.zeros(len(starts), dtype=np.int64)
            shape = payload[column].shape[1:]
            width = int(np.prod(shape, dtype=np.int64))
            i = 0
            while i < len(starts):
                sizes = lengths[i:]
                ends = np.cumsum(sizes)                                # end of each chunk (from i) in the draws
                state = rng.bit_generator.state
                draw = np.flatnonzero(rng.random(int(ends[-1])) < probability)
                chunk = np.searchsorted(ends, draw, side="right")      # chunk (from i) of each such draw
                rows = starts[i:][chunk] + draw - (ends - sizes)[chunk]
                if not relay:
                    mine = payload["origin"][rows] == senders[i:][chunk]
                    chunk, rows = chunk[mine], rows[mine]
                if not len(rows):
                    return out
                c = int(chunk[0])                                      # the first chunk with a hit
                rng.bit_generator.state = state
                rng.random(int(ends[c]))                               # replay the draws up to its end
                mine = rows[chunk == c]
                draws = np.asarray(q.sample(rng, len(mine) * width), dtype=float)
                payload[column][mine] = draws.reshape((len(mine),) + shape)
                out[i + c] = len(mine)
                if records_corrupted is not None:
                    records_corrupted(len(mine))
                i += c + 1
            return out

        corrupt.chunks = chunks
        return corrupt


class _Synchronous:
    """Paper-mode LOCAL flooding as sparse products (module docstring of :mod:`netsim.comm.flooding`, "Synchronous
    hops").

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
        receiver, _, hops, index = self.order
        m = flood.num_agents
        # every record a receiver can get, as the rows of one table: row (h - 1) * M + origin
        table = np.empty(len(self.view) * m, dtype=flood.dtype)
        table["origin"] = np.tile(np.arange(m, dtype=np.int32), len(self.view))
        table["life"] = np.repeat(flood.gamma - np.arange(1, len(self.view) + 1), m)
        for name in ("seq", "created", *self.values):
            table[name] = np.concatenate([snap[name] for snap in self.view])
        published = np.concatenate([snap["published"] for snap in self.view])
        if len(self.view) < flood.gamma or not published.all():
            keep = hops <= len(self.view)
            keep[keep] = published[index[keep]]
            receiver, index = receiver[keep], index[keep]
        # rows gathered as raw bytes: numpy copies a structured array's rows field by field, ~10x slower
        raw = np.take(table.view(np.uint8).reshape(len(table), table.itemsize), index, axis=0)
        return receiver, raw.view(flood.dtype).reshape(-1)

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
