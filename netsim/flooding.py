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
    (``records`` in the engine counters). Nothing is a Python object per record per hop: the
    receive side concatenates every payload delivered at one instant (``subscribe_batch``)
    and works on whole arrays.

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
    per-(receiver, origin) memory is an anti-replay window (as in IPsec): the highest ``seq``
    seen and a 64-bit mask of which of the 64 preceding ``seq`` were seen. A record more than
    63 publications older than the newest one already seen from its origin is dropped as
    stale. With unit delays and one publication per trial this never happens while
    gamma < 64 (every copy of a record arrives within gamma trials of its creation), so the
    rule is exact there; records that come back to their own origin are dropped too.

Latest message per origin
    With ``latest=True`` the module keeps, for every receiver m and origin m', the newest
    record (highest ``seq``) m has received from m' (``latest_seq[m, m']``, -1 if none, and the
    value columns in ``latest_values[m, m']``), the table Alg. 1 (ISLATESTMESSAGE) reads.
    ``on_receive(dst, records)`` is called with every new (non-duplicate) record delivered at an
    instant, ``dst[i]`` being the receiver of ``records[i]``, after the table is updated;
    ``on_latest(dst, origin, previous, records)`` with the table entries that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.errors import ProtocolError

if TYPE_CHECKING:
    from netsim.sim import Simulation

HEADER = [("origin", "i4"), ("seq", "i8"), ("created", "f8"), ("life", "i4")]
WINDOW = 64
_ONE = np.uint64(1)
_NONE = np.iinfo(np.int64).max

ReceiveCallback = Callable[[np.ndarray, np.ndarray], None]
LatestCallback = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def take(records: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``records[index]`` for a structured array, ~10x faster: rows are gathered as opaque bytes."""
    return records.view(np.dtype((np.void, records.dtype.itemsize)))[index].view(records.dtype)


def record_dtype(value_dtype: Sequence[tuple] | np.dtype) -> np.dtype:
    """The record dtype: the header columns followed by the protocol's value columns."""
    values = np.dtype(value_dtype)
    clash = set(values.names or ()) & {name for name, _ in HEADER}
    if clash:
        raise ValueError(f"value columns {sorted(clash)} clash with the record header; accepted: other names")
    return np.dtype(HEADER + [(name, values.fields[name][0]) for name in values.names or ()])


class Flooding:
    """LOCAL protocol with time-to-live ``gamma`` for messages of one ``kind`` among the agents.

    Parameters
    ----------
    sim:
        The running :class:`~netsim.sim.Simulation` (its network carries the messages).
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
        in entry ``(dst[i], origin[i])`` (zero where there was none). Lets a protocol keep running
        aggregates over the table instead of re-reading it.
    deferred:
        Queue deliveries and handle them together at the next :meth:`process` or :meth:`flush`
        (which calls it first). For protocols that read only in their ticks: with sampled
        delays nearly every message has its own delivery instant, and this turns thousands of
        small batches per trial into one. Callbacks then run at that call, not at delivery.
    relay:
        ``"flush"`` (default): received records are forwarded at the next :meth:`flush`;
        ``"on_receipt"``: they are forwarded right after their delivery instant.
    """

    def __init__(self, sim: Simulation, kind: str, gamma: int, value_dtype: Sequence[tuple] | np.dtype, *,
                 on_receive: ReceiveCallback | None = None, latest: bool = True, relay: str = "flush",
                 on_latest: LatestCallback | None = None, deferred: bool = False):
        if int(gamma) != gamma or gamma < 0:
            raise ValueError(f"gamma = {gamma!r}; accepted: an integer >= 0")
        if relay not in ("flush", "on_receipt"):
            raise ValueError(f"relay = {relay!r}; accepted: 'flush', 'on_receipt'")
        if deferred and relay == "on_receipt":
            raise ValueError("deferred handling forwards at the next flush; accepted: relay = 'flush'")
        self.sim = sim
        self.network = sim.network
        self.kind = kind
        self.gamma = int(gamma)
        self.dtype = record_dtype(value_dtype)
        self.value_names = tuple(np.dtype(value_dtype).names or ())
        self.on_receive = on_receive
        self.on_latest = on_latest
        self.relay = relay
        self.deferred = deferred
        self._inbox: list = []
        m = sim.num_agents
        self.num_agents = m
        self._neighbors = [self.network.agent_neighbors(a) for a in range(m)]
        self._seq = np.zeros(m, dtype=np.int64)
        self._high = np.full(m * m, -1, dtype=np.int64)  # anti-replay window: newest seq per (dst, origin)
        self._mask = np.zeros(m * m, dtype=np.uint64)     # bit j: seq (high - j) seen
        self._outbox: list[np.ndarray] = []                # record arrays, column "_from" kept aside
        self._outbox_from: list[np.ndarray] = []
        self.keep_latest = latest
        self._calls = 0
        # scratch table for in-batch duplicate detection (at most 2^22 entries = 32 MB, else sorting is used)
        self._scratch = np.full(m * m * WINDOW, _NONE, dtype=np.int64) if m * m * WINDOW <= 1 << 22 else None
        if latest:
            self.latest_seq = np.full((m, m), -1, dtype=np.int64)
            values = np.dtype(value_dtype)
            # one contiguous array per value column, shape (receivers, origins, *column shape)
            self.latest_values = {name: np.zeros((m, m) + values.fields[name][0].shape,
                                                 dtype=values.fields[name][0].base) for name in self.value_names}
            self._latest_flat = {name: a.reshape((m * m,) + a.shape[2:]) for name, a in self.latest_values.items()}
            self._best = np.full(m * m, -1, dtype=np.int64)
            self.latest_created = np.full((m, m), np.nan)
        # counters (records, not engine messages)
        self.published = 0
        self.records_forwarded = 0   # record-hops: sum of payload sizes sent
        self.records_received = 0    # record-hops delivered (duplicates included)
        self.duplicates = 0          # delivered records dropped as already seen (or stale)
        self.network.subscribe_batch(kind, self._receive)

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
        if len(np.unique(agents)) != len(agents):
            raise ProtocolError("publish: an agent may appear at most once per call")
        rec = self.records(agents, values)
        rec["seq"] = self._seq[agents]
        self._seq[agents] += 1
        self.published += len(agents)
        if self.gamma > 0 and len(agents):
            self._queue(agents, rec)
        return rec

    def _queue(self, senders: np.ndarray, records: np.ndarray) -> None:
        self._outbox.append(records)
        self._outbox_from.append(senders)

    # ------------------------------------------------------------------ sending
    def flush(self) -> int:
        """Send every queued record: one engine message per link, carrying all records its sender forwards.

        Returns the number of engine messages sent.
        """
        self.process()
        if not self._outbox:
            return 0
        records = np.concatenate(self._outbox) if len(self._outbox) > 1 else self._outbox[0]
        senders = np.concatenate(self._outbox_from) if len(self._outbox_from) > 1 else self._outbox_from[0]
        self._outbox.clear()
        self._outbox_from.clear()
        order = np.argsort(senders, kind="stable")
        records = take(records, order)
        senders = senders[order]
        records["life"] -= 1  # the hop about to be made
        bounds = np.flatnonzero(np.diff(senders)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [len(senders)]))
        send_many = self.network.send_many
        kind = self.kind
        sent = 0
        for a, b, src in zip(starts.tolist(), ends.tolist(), senders[starts].tolist(), strict=False):
            neighbors = self._neighbors[src]
            self._calls = 0  # corruptor calls for this chunk (see corruptor)
            send_many(src, neighbors, kind, records[a:b], size=b - a)
            sent += len(neighbors)
            self.records_forwarded += (b - a) * len(neighbors)
        return sent

    # ------------------------------------------------------------------ receiving
    def _receive(self, messages: list) -> None:
        if self.deferred:
            self._inbox.extend(messages)
        else:
            self._process(messages)

    def process(self) -> None:
        """Handle the deliveries queued since the last call (``deferred=True``); a no-op otherwise."""
        if self._inbox:
            messages, self._inbox = self._inbox, []
            self._process(messages)

    def _process(self, messages: list) -> None:
        # Messages of one flush share their payload (every link of a sender carries the same chunk),
        # so the distinct payloads are joined once and each message becomes a range of row indices.
        # (Joining raw bytes is also ~50x faster than np.concatenate on structured arrays.)
        slot: dict[int, int] = {}
        chunks: list[np.ndarray] = []
        which = []
        for msg in messages:
            payload = msg.payload
            j = slot.get(id(payload))
            if j is None:
                j = slot[id(payload)] = len(chunks)
                chunks.append(payload)
            which.append(j)
        base = np.frombuffer(b"".join([c.tobytes() for c in chunks]), dtype=self.dtype)
        lengths = np.array([len(c) for c in chunks], dtype=np.int64)
        which = np.array(which, dtype=np.int64)
        sizes = lengths[which]
        total = int(sizes.sum())
        starts = np.cumsum(lengths) - lengths
        copy_start = np.cumsum(sizes) - sizes
        row = np.repeat(starts[which] - copy_start, sizes) + np.arange(total)   # row of base for every copy
        dst = np.repeat(np.array([msg.dst for msg in messages], dtype=np.int64), sizes)
        self.records_received += total
        keep = self._fresh_keys(dst, base["origin"][row].astype(np.int64), base["seq"][row])
        self.duplicates += total - len(keep)
        if not len(keep):
            return
        dst, records = dst[keep], take(base, row[keep])
        if self.keep_latest:
            self._update_latest(dst, records)
        if self.on_receive is not None:
            self.on_receive(dst, records)
        alive = np.flatnonzero(records["life"] >= 1)
        if len(alive):
            self._queue(dst[alive], take(records, alive))
            if self.relay == "on_receipt":
                self.flush()

    def _fresh(self, dst: np.ndarray, records: np.ndarray) -> np.ndarray:
        """Indices (in arrival order) of the records not seen before by their receiver; updates the window."""
        return self._fresh_keys(np.asarray(dst, dtype=np.int64), records["origin"].astype(np.int64), records["seq"])

    def _first_copies(self, pair: np.ndarray, seq: np.ndarray) -> np.ndarray:
        """Index of the first copy of each distinct (pair, seq) in this batch, in arrival order."""
        n = len(pair)
        table = self._scratch
        if table is not None and n:
            # seqs of one pair within a batch lie within a few publications: key them modulo WINDOW
            key = pair * WINDOW + (seq & (WINDOW - 1))
            index = np.arange(n)
            table[key[::-1]] = index[::-1]        # in-order assignment: the first copy wins
            rep = table[key]
            table[key] = _NONE
            if np.all(rep <= index) and np.array_equal(seq[rep], seq):  # verified: first copy, no collision
                return np.flatnonzero(rep == index)
        _, first = np.unique(pair * (1 << 32) + seq, return_index=True)
        return np.sort(first)

    def _fresh_keys(self, dst: np.ndarray, origin: np.ndarray, seq: np.ndarray) -> np.ndarray:
        m = self.num_agents
        seq = seq.astype(np.int64)
        pair = dst * m + origin
        first = self._first_copies(pair, seq)
        first = first[origin[first] != dst[first]]     # a record never comes back to its origin
        if not len(first):
            return first
        p, s = pair[first], seq[first]
        order = np.lexsort((s, p))
        first, p, s = first[order], p[order], s[order]
        high = self._high[p]
        offset = high - s
        seen = (offset >= 0) & ((offset >= WINDOW) | (
            ((self._mask[p] >> np.minimum(np.maximum(offset, 0), WINDOW - 1).astype(np.uint64)) & _ONE) == _ONE))
        # advance each pair's window to its newest seq in this batch (p sorted, s sorted within p)
        last = np.flatnonzero(np.append(p[1:] != p[:-1], True))
        up, top = p[last], s[last]
        old = self._high[up]
        new = np.maximum(old, top)
        shift = new - old
        mask = self._mask[up]
        shifted = mask << np.minimum(shift, WINDOW - 1).astype(np.uint64)
        self._mask[up] = np.where(shift >= WINDOW, np.uint64(0), shifted)
        self._high[up] = new
        fresh = ~seen
        bit = self._high[p] - s
        setting = fresh & (bit < WINDOW)
        np.bitwise_or.at(self._mask, p[setting], _ONE << bit[setting].astype(np.uint64))
        return np.sort(first[fresh])

    def _update_latest(self, dst: np.ndarray, records: np.ndarray) -> None:
        if not len(records):
            return
        seq = records["seq"].astype(np.int64)
        flat = dst * self.num_agents + records["origin"].astype(np.int64)
        best = self._best
        np.maximum.at(best, flat, seq)                 # newest seq per (receiver, origin) in this batch
        newest = seq == best[flat]                     # (flat, seq) are distinct among new records
        best[flat] = -1
        latest_seq = self.latest_seq.reshape(-1)
        idx = np.flatnonzero(newest & (seq > latest_seq[flat]))
        if not len(idx):
            return
        f = flat[idx]
        table = self._latest_flat
        previous = {name: table[name][f] for name in self.value_names} if self.on_latest is not None else None
        latest_seq[f] = seq[idx]
        self.latest_created.reshape(-1)[f] = records["created"][idx]
        chosen = take(records, idx)
        for name in self.value_names:
            table[name][f] = chosen[name]
        if self.on_latest is not None:
            m = self.num_agents
            self.on_latest(f // m, f % m, previous, chosen)

    # ------------------------------------------------------------------ byzantine reports
    def corruptor(self, column: str, *, records_corrupted: Callable[[int], None] | None = None) -> Callable[..., tuple]:
        """A corruption rule for ``network.corruptible(kind, ...)`` that rewrites the value ``column``.

        Each record the sender created (``origin == sender``), and with ``relay`` also each record
        it relays, is replaced with probability ``probability`` by a draw of ``q``. The decision is
        taken once per forwarding: the engine calls the rule once per link, and every link of
        the same flush (same payload object, same sender) gets the same corrupted copy, so a
        corrupted message is the same for all receivers (corruption at the source, Sec. 4).
        The engine's in-transit ``link_corruption`` (its second call within one send) is drawn
        independently on every link.
        ``records_corrupted(n)`` is told how many records each forwarding corrupted.
        """
        if column not in self.value_names:
            raise ValueError(f"column {column!r}; accepted: {', '.join(self.value_names)}")
        cache: dict[str, Any] = {"payload": None, "period": 1}

        def corrupt(payload: np.ndarray, *, sender: int, rng: np.random.Generator, probability: float,
                    q: Any, relay: bool) -> tuple[np.ndarray, int]:
            # The engine calls the rule, for each link of a flushed chunk, first as the byzantine
            # source (if the sender is byzantine) and then for link corruption (if enabled); a
            # lost message gets neither call. So the calls of one chunk alternate source/link.
            calls = self._calls
            self._calls = calls + 1
            if calls and cache["payload"] is payload and calls % cache["period"] == 0:
                return cache["result"]  # a further link of the chunk already decided at the source
            adv = self.network.adversary
            period = 2 if adv.link_probability > 0.0 else 1
            source = calls % period == 0 and sender in adv.byzantine and adv.probability > 0.0
            eligible = np.ones(len(payload), dtype=bool) if relay else payload["origin"] == sender
            hit = eligible & (rng.random(len(payload)) < probability)
            n = int(hit.sum())
            out = payload
            if n:
                out = payload.copy()
                shape = out[column].shape[1:]
                draws = np.asarray(q.sample(rng, n * int(np.prod(shape, dtype=np.int64))), dtype=float)
                out[column][hit] = draws.reshape((n,) + shape)
                if records_corrupted is not None:
                    records_corrupted(n)
            if source:
                cache.update(payload=payload, result=(out, n), period=period)
            return out, n

        return corrupt
