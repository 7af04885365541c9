"""The receive side of LOCAL flooding: a batch of delivered messages as array work, no object per message.

Part of :class:`netsim.comm.flooding.Flooding` (its base class; see that module's docstring,
"Duplicates" and "Latest message per origin", and ``docs/engine.md``). A batch (what a deferred
reader collects at a tick, or what a record reader gets at an instant) is handled as:

1. its messages as arrays (receiver, first row, row end, due time) over the distinct payloads
   joined once as raw rows, put in delivery order (a stable sort by due time);
2. every record copy as (receiver, origin, seq, arrival index), sorted once as packed 64-bit keys
   (a lexsort where they do not fit): the first copy of each (pair, seq) leads, the others are
   duplicates; each pair's anti-replay window (the newest seq and a 64-bit mask) is checked and
   advanced with one OR per pair;
3. the newest fresh record of each pair replaces the latest-table entry when newer (the table is
   stored column-wise, one row per element and one column per pair, so that a batch's arithmetic
   runs along contiguous rows); the running sums are updated by differences when few entries
   change, else summed afresh over the table (in steady state every origin publishes once per tick
   and every pair changes).

The pair of (receiver, origin) comes from a dense M x M table up to :data:`DENSE_PAIRS` entries,
else from a search in the sorted pair keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.engine.errors import ProtocolError
from netsim.engine.held import stable_order

HEADER = [("origin", "i4"), ("seq", "i8"), ("created", "f8"), ("life", "i4")]  # a record's first columns
HEAD = np.dtype(HEADER)
WINDOW = 64
DENSE_PAIRS = 1 << 26  # a dense M x M pair table (int64) up to M = 8192 (512 MiB); a search beyond
_ONE = np.uint64(1)


def take(records: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``records[index]`` for a structured array, ~10x faster: rows are gathered as opaque bytes."""
    return records.view(np.dtype((np.void, records.dtype.itemsize)))[index].view(records.dtype)


def _messages(items: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(receivers, first rows, row ends, due times, joined payloads) of delivered items, in list order.

    Items are :class:`~netsim.engine.network.Multicast` records (rows ``start:stop`` of their payload) or
    single Messages (their whole payload); consecutive Messages are gathered in plain lists.
    """
    offset: dict[int, int] = {}  # payload -> its first row in the joined payloads
    chunks: list[np.ndarray] = []
    rows = 0
    dsts, starts, stops, dues = [], [], [], []
    single: list[list] = [[], [], [], []]  # a run of single Messages: dst, start, stop, due

    def close() -> None:
        if single[0]:
            for out, values in zip((dsts, starts, stops, dues), single, strict=True):
                out.append(np.array(values))
                values.clear()

    for item in items:
        payload = item.payload
        at = offset.get(id(payload))
        if at is None:
            at = offset[id(payload)] = rows
            chunks.append(payload)
            rows += len(payload)
        if hasattr(item, "start"):
            close()
            dsts.append(item.dst)
            starts.append(item.start + at)
            stops.append(item.stop + at)
            due = item.due_at
            dues.append(due if isinstance(due, np.ndarray) else np.full(len(item.dst), due))
        else:
            for values, value in zip(single, (item.dst, at, at + len(payload), item.due_at), strict=True):
                values.append(value)
    close()
    dtype = chunks[0].dtype
    base = np.concatenate([c.view(np.dtype((np.void, dtype.itemsize))) for c in chunks]).view(dtype)
    return (np.concatenate(dsts).astype(np.int64, copy=False), np.concatenate(starts).astype(np.int64, copy=False),
            np.concatenate(stops).astype(np.int64, copy=False), np.concatenate(dues).astype(float, copy=False), base)


def _scatter(table: np.ndarray, columns: np.ndarray, values: np.ndarray) -> None:
    """``table[:, columns] = values`` for a 2-d table, row by row (one flat scatter per row is faster)."""
    for row, value in zip(table, np.broadcast_to(values, (len(table), len(columns))), strict=True):
        row[columns] = value


class Receiving:
    """The batch path of :class:`~netsim.comm.flooding.Flooding` (which sets the state it uses)."""

    _pair_of: np.ndarray | None
    _pair_key: np.ndarray
    _high: np.ndarray
    _mask: np.ndarray
    _latest: dict[str, np.ndarray]
    _terms: dict[str, np.ndarray]
    sums: dict[str, np.ndarray]
    on_receive: Any
    on_latest: Any

    def _process(self, items: list) -> None:
        """Handle delivered messages: :class:`~netsim.engine.network.Multicast` records or single Messages.

        A record's ``due_at`` is one time or one per message (held deliveries, ``netsim.engine.held``); the
        messages are taken in delivery order, the stable sort by due time of the items' messages in
        list order. Messages of one flush share their payload array, so the distinct payloads are
        joined once and each message becomes a range of row indices (joining raw bytes is ~50x
        faster than np.concatenate on structured arrays); no Python object per message.
        """
        dst, start, stop, due, base = _messages(items)
        if len(due) > 1 and np.any(due[1:] < due[:-1]):
            order = stable_order(due)
            dst, start, stop = dst[order], start[order], stop[order]
        sizes = stop - start
        total = int(sizes.sum())
        if total == len(sizes):  # one record per message
            row = start
        else:
            copy_start = np.cumsum(sizes) - sizes
            row = np.repeat(start - copy_start, sizes) + np.arange(total)   # row of base for every copy
            dst = np.repeat(dst, sizes)
        self.records_received += total
        # the header of every copy, gathered once as raw bytes (one random access per copy)
        head = np.ndarray((len(base),), np.dtype((np.void, HEAD.itemsize)), base, 0, (base.itemsize,))[row].view(HEAD)
        fresh, newest, pair, seq = self._fresh_keys(dst, head["origin"].astype(np.int64), head["seq"])
        self.duplicates += total - len(fresh)
        if not len(fresh):
            return
        if self.keep_latest:
            self._update_latest(dst[newest], pair, seq, base, row[newest])
        if self.on_receive is not None:
            fresh = np.sort(fresh)  # arrival order
            self.on_receive(dst[fresh], take(base, row[fresh]))
        alive = fresh[head["life"][fresh] >= 1]
        if len(alive):
            alive.sort()
            self._queue(dst[alive], take(base, row[alive]))
            if self.relay == "on_receipt":
                self.flush()

    def _fresh(self, dst: np.ndarray, records: np.ndarray) -> np.ndarray:
        """Indices (in arrival order) of the records not seen before by their receiver; updates the window."""
        return self._fresh_keys(np.asarray(dst, dtype=np.int64), records["origin"].astype(np.int64),
                                records["seq"].astype(np.int64))[0]

    def _fresh_keys(self, dst: np.ndarray, origin: np.ndarray, seq: np.ndarray) -> tuple[np.ndarray, ...]:
        """The first copies, among records delivered in this order, never seen before by their receiver.

        Returns their indices (in no particular order), then the index of the newest of them per (receiver,
        origin) pair, that pair's index in the gamma-ball arrays and its seq, in pair order; updates the
        anti-replay windows. The copies are sorted by (receiver, origin, seq, arrival) with one sort
        of packed 64-bit keys where they fit (a lexsort otherwise).
        """
        m = self.num_agents
        key = dst * m + origin
        own = origin == dst                             # a record never comes back to its origin: such
        kept = len(key) - int(np.count_nonzero(own))    # copies get a key past every pair and are cut off
        key[own] = m * m
        n = len(dst)
        if not kept:
            return (np.zeros(0, np.int64),) * 4
        s0 = int(seq.min())
        key_bits, seq_bits, index_bits = (m * m).bit_length(), (int(seq.max()) - s0).bit_length(), n.bit_length()
        if key_bits + seq_bits + index_bits <= 63:
            packed = key << (seq_bits + index_bits)
            packed |= (seq - s0) << index_bits
            packed |= np.arange(n)
            packed.sort()
            packed = packed[:kept]
            n = kept
            first = packed & ((1 << index_bits) - 1)
            packed >>= index_bits                       # (pair, seq) as one number
            lead = packed[1:] != packed[:-1]            # the first copy of each (pair, seq) ...
            key, seq = packed >> seq_bits, (packed & ((1 << seq_bits) - 1)) + s0
        else:
            first = np.lexsort((np.arange(n), seq, key))[:kept]
            key, seq = key[first], seq[first]
            lead = (key[1:] != key[:-1]) | (seq[1:] != seq[:-1])
        if not lead.all():                              # ... leads, the other copies are duplicates
            lead = np.flatnonzero(np.append(True, lead))
            key, seq, first = key[lead], seq[lead], first[lead]
        change = np.append(key[1:] != key[:-1], True)
        ends = np.flatnonzero(change) + 1               # one run per pair
        runs = np.append(0, ends[:-1])
        p = np.repeat(self._pairs(key[runs]), ends - runs)
        high, mask = self._high[p], self._mask[p]
        offset = high - seq                             # >= 0: at or below the pair's newest seq so far
        behind = np.flatnonzero(offset >= 0)
        if len(behind):
            back = offset[behind]
            seen = (back >= WINDOW) | ((mask[behind] >> np.minimum(back, WINDOW - 1).astype(np.uint64)) & _ONE == _ONE)
            behind = behind[seen]
        # advance each pair's window to its newest seq in this batch (p sorted, seq sorted within p) and set
        # the bits of the fresh seqs (one OR per pair)
        last = ends - 1
        up, old = p[last], high[last]
        new = np.maximum(old, seq[last])
        shift = new - old
        mask = np.where(shift >= WINDOW, np.uint64(0), mask[last] << np.minimum(shift, WINDOW - 1).astype(np.uint64))
        self._high[up] = new
        bit = np.repeat(new, ends - runs) - seq if len(up) < len(p) else new - seq
        bits = np.where(bit < WINDOW, _ONE << np.minimum(bit, WINDOW - 1).astype(np.uint64), np.uint64(0))
        if len(behind):
            bits[behind] = 0
        mask |= bits if len(up) == len(p) else np.bitwise_or.reduceat(bits, runs)
        self._mask[up] = mask
        if not len(behind):
            return first, first[last], up, seq[last]
        fresh = np.ones(len(p), dtype=bool)
        fresh[behind] = False
        # the newest fresh record of each pair: the last fresh one of its run (-1: none)
        newest = np.maximum.reduceat(np.where(fresh, np.arange(len(p)), -1), runs)
        up = up[newest >= 0]
        newest = newest[newest >= 0]
        return first[fresh], first[newest], up, seq[newest]

    def _pairs(self, key: np.ndarray) -> np.ndarray:
        """Index in the gamma-ball arrays of the pairs ``key = receiver * M + origin`` (every pair that can talk
        has one)."""
        if self._pair_of is not None:
            pair = self._pair_of[key]
            if len(pair) and pair.min() < 0:
                raise ProtocolError(f"flooding {self.kind!r}: a record reached a node beyond gamma = {self.gamma} hops")
            return pair
        pair = np.searchsorted(self._pair_key, key)
        if len(pair) and (pair.max() >= len(self._pair_key) or np.any(self._pair_key[pair] != key)):
            raise ProtocolError(f"flooding {self.kind!r}: a record reached a node beyond gamma = {self.gamma} hops")
        return pair

    def _update_latest(self, dst: np.ndarray, pair: np.ndarray, seq: np.ndarray, base: np.ndarray,
                       rows: np.ndarray) -> None:
        """Keep the newest record per pair (``base[rows]``, sequence numbers ``seq``, in pair order); older
        (reordered) records never overwrite newer ones."""
        newer = seq > self._latest_seq[pair]
        if not newer.all():
            newer = np.flatnonzero(newer)
            if not len(newer):
                return
            dst, pair, seq, rows = dst[newer], pair[newer], seq[newer], rows[newer]
        # the records, gathered once as raw rows (one random access each); then each value column as
        # (elements, n) rows, copied element by element from them
        records = take(base, rows)
        current = {}
        for name in self.value_names:
            column = records[name].reshape(len(rows), -1)
            current[name] = out = np.empty((column.shape[1], len(rows)), column.dtype)
            for k in range(column.shape[1]):
                out[k] = column[:, k]
        previous = {name: np.take(self._latest[name], pair, axis=1) for name in self.value_names} \
            if self.on_latest else None
        # the sums: by differences when few entries change, else summed afresh over the whole table (in
        # steady state every origin publishes once per tick and every pair changes)
        few = len(rows) * 4 < len(self._ball_origin)
        if few and self.sum_spec:
            runs = np.flatnonzero(np.append(True, dst[1:] != dst[:-1]))   # receivers in increasing order
            old = {name: np.take(terms, pair, axis=1) for name, terms in self._terms.items()}
        self._latest_seq[pair] = seq
        self._latest_created[pair] = records["created"]
        for name in self.value_names:
            _scatter(self._latest[name], pair, current[name])
        for name, spec in self.sum_spec.items():
            terms = self._terms[name]
            if len(spec) == 2:  # (elements, n) rows: a column of one element broadcasts over the other's
                _scatter(terms, pair, current[spec[0]] * current[spec[1]])
            total = self.sums[name]
            if few:
                change = np.add.reduceat(np.take(terms, pair, axis=1) - old[name], runs, axis=1)
                total[dst[runs]] += change.T.reshape((len(runs),) + total.shape[1:])
            else:
                summed = np.add.reduceat(terms, self._ball_ptr[self._receivers], axis=1)
                total[self._receivers] = summed.T.reshape((len(self._receivers),) + total.shape[1:])
        if self.on_latest is not None:
            self.on_latest(dst, self._ball_origin[pair], *({name: self._column(name, rows) for name, rows in x.items()}
                                                           for x in (previous, current)))
