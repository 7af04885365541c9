"""The receive side of LOCAL flooding: a batch of delivered messages as array work, no object per message.

Part of :class:`netsim.comm.flooding.Flooding` (its base class; see that module's docstring,
"Duplicates" and "Latest message per origin", and ``docs/engine.md``). A batch (what a deferred
reader collects at a tick, or what a record reader gets at an instant) is handled as:

1. its messages as arrays (receiver, first row, row end, due time) over the rows they carry, joined
   once as raw rows, put in delivery order (a stable sort by due time), then grouped by receiver
   (delivery order kept within each);
2. the record copies, receiver by receiver in blocks of about :data:`BLOCK` copies (whole receivers,
   so that a block's arrays stay in the processor's cache; every rule below is per receiver): each
   copy's pair (receiver, origin) looked up, the copies sorted once as packed 64-bit keys (pair, seq,
   arrival) (a lexsort where they do not fit); the first copy of each (pair, seq) leads, the others
   are duplicates; a pair's copies are taken in increasing seq, each checked against its anti-replay
   window (the newest seq and a 64-bit mask) as it was before the batch, and the window advances
   with one OR per pair;
3. the newest copy of each pair, where fresh and newer than the latest-table entry, replaces it (the
   table holds the record as received, one raw row per pair: one gather and one scatter per change);
   the terms of the running sums are stored column-wise (one row per element and one column per pair)
   and the sums updated by differences when few entries change, else summed afresh over the table
   (in steady state every origin publishes once per tick and every pair changes);
4. what is reported (``on_receive``) and forwarded is put back in delivery order.

The pair of (receiver, origin) comes from a dense M x M table (int32) up to :data:`DENSE_PAIRS`
entries, else from a search in the sorted pair keys of the block's receivers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.engine.errors import ProtocolError
from netsim.engine.held import stable_order

HEADER = [("origin", "i4"), ("seq", "i8"), ("created", "f8"), ("life", "i4")]  # a record's first columns
HEAD = np.dtype(HEADER)
WINDOW = 64
DENSE_PAIRS = 1 << 27  # a dense M x M pair table (int32) up to M = 11585 (512 MiB); a search beyond
_ONE = np.uint64(1)
_LAST = np.iinfo(np.int64).max  # a sort key past every other
BLOCK = 1 << 15  # record copies handled together (whole receivers): their arrays stay in the processor's cache


def take(records: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``records[index]`` for a structured array, ~10x faster: rows are gathered as opaque bytes."""
    return records.view(np.dtype((np.void, records.dtype.itemsize)))[index].view(records.dtype)


def _messages(items: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(receivers, first rows, row ends, due times, joined payloads) of delivered items, in list order.

    Items are :class:`~netsim.engine.network.Multicast` records (rows ``start:stop`` of their payload) or
    single Messages (their whole payload); consecutive Messages are gathered in plain lists. The joined
    payloads hold the rows the messages carry, each once.
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
    start, stop = (np.concatenate(x).astype(np.int64, copy=False) for x in (starts, stops))
    # only the rows some message carries are joined (a flight's payload comes with every batch that has one of
    # its messages): a row's place in the joined payloads is its rank among those
    used = np.cumsum(np.bincount(start, minlength=rows + 1) - np.bincount(stop, minlength=rows + 1)) > 0
    rank = np.cumsum(used) - 1
    raw = np.dtype((np.void, chunks[0].dtype.itemsize))
    parts, at = [], 0
    for chunk in chunks:
        keep = used[at:at + len(chunk)]
        parts.append(chunk.view(raw) if keep.all() else chunk.view(raw)[keep])
        at += len(chunk)
    base = np.concatenate(parts).view(chunks[0].dtype)
    first = rank[start]
    return (np.concatenate(dsts).astype(np.int64, copy=False), first, first + (stop - start),
            np.concatenate(dues).astype(float, copy=False), base)


def _in_delivery_order(parts: list[tuple[np.ndarray, ...]], base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(receivers, records) of the copies ``parts`` (delivery indices, receivers, rows of ``base``), in delivery
    order."""
    at, to, row = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.argsort(at)  # the indices are distinct
    return to[order], take(base, row[order])


def _blocks(dst: np.ndarray, sizes: np.ndarray, total: int) -> list[tuple[int, int]]:
    """Message ranges ``(a, b)`` of about :data:`BLOCK` copies each, whole receivers (``dst`` grouped)."""
    first = np.flatnonzero(np.append(True, dst[1:] != dst[:-1]))   # each receiver's first message
    before = (np.cumsum(sizes) - sizes)[first]                     # copies before it
    cut = np.unique(np.searchsorted(before, np.arange(0, total, BLOCK)))
    edges = np.append(first[cut[cut < len(first)]], len(dst)).tolist()
    if edges[0] != 0:
        edges.insert(0, 0)
    return list(zip(edges[:-1], edges[1:], strict=True))


class Receiving:
    """The batch path of :class:`~netsim.comm.flooding.Flooding` (which sets the state it uses)."""

    _pair_of: np.ndarray | None
    _pair_key: np.ndarray
    _high: np.ndarray
    _mask: np.ndarray
    _table: np.ndarray
    _terms: np.ndarray
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

        The record copies are then handled receiver by receiver, in blocks of about :data:`BLOCK`
        copies (whole receivers): the messages are grouped by receiver (delivery order kept within
        each), and a block's per-copy arrays stay in the processor's cache. Every rule is per
        receiver (duplicates, windows, latest table), so the blocks are independent; what is
        forwarded or reported is put back in delivery order.
        """
        dst, start, stop, due, base = _messages(items)
        if len(due) > 1 and np.any(due[1:] < due[:-1]):
            order = stable_order(due)
            dst, start, stop = dst[order], start[order], stop[order]
        sizes = stop - start
        total = int(sizes.sum())
        self.records_received += total
        if not total:
            return
        arrival = np.cumsum(sizes) - sizes          # delivery index of each message's first copy
        if len(dst) > 1 and np.any(dst[1:] < dst[:-1]):
            order = stable_order(dst)               # by receiver, delivery order within each
            dst, start, sizes, arrival = dst[order], start[order], sizes[order], arrival[order]
        # per payload row, contiguous (the copies gather from these)
        origin, seq, alive = base["origin"].astype(np.int64), base["seq"].copy(), base["life"] >= 1
        ptr = self._ball_ptr
        kept = 0
        heard, moved, winners = [], [], []   # per block: fresh copies (for on_receive), alive ones, latest updates
        for a, b in _blocks(dst, sizes, total):
            size = sizes[a:b]
            ends = np.cumsum(size)
            n = int(ends[-1])
            if not n:
                continue
            row = np.repeat(start[a:b] - (ends - size), size)
            row += np.arange(n)                     # row of base for every copy
            to = np.repeat(dst[a:b], size)
            fresh, newest, pair, s = self._fresh_keys(to, origin[row], seq[row], (ptr[dst[a]], ptr[dst[b - 1] + 1]))
            if not len(fresh):
                continue
            kept += len(fresh)
            if self.keep_latest:
                newer = np.flatnonzero(s > self._latest_seq[pair])  # older (reordered) records never overwrite
                winners.append((to[newest[newer]], pair[newer], row[newest[newer]]))
            first = arrival[a:b] - ends + size      # delivery index of each message's first copy, less its block index
            for out, picked in ((heard, fresh),) * (self.on_receive is not None) + ((moved, fresh[alive[row[fresh]]]),):
                out.append((first[np.searchsorted(ends, picked, side="right")] + picked, to[picked], row[picked]))
        self.duplicates += total - kept
        if not kept:
            return
        if self.keep_latest:
            self._update_latest(winners, base)
        if self.on_receive is not None:
            self.on_receive(*_in_delivery_order(heard, base))
        to, records = _in_delivery_order(moved, base)
        if len(to):
            self._queue(to, records)
            if self.relay == "on_receipt":
                self.flush()

    def _fresh(self, dst: np.ndarray, records: np.ndarray) -> np.ndarray:
        """Indices (in arrival order) of the records not seen before by their receiver; updates the window."""
        return self._fresh_keys(np.asarray(dst, dtype=np.int64), records["origin"].astype(np.int64),
                                records["seq"].astype(np.int64))[0]

    def _fresh_keys(self, dst: np.ndarray, origin: np.ndarray, seq: np.ndarray,
                    span: tuple[int, int] | None = None) -> tuple[np.ndarray, ...]:
        """The first copies, among records delivered in this order, never seen before by their receiver.

        Returns their indices (in no particular order), then, for each (receiver, origin) pair whose newest
        copy here is among them, that copy's index, the pair's index in the gamma-ball arrays and its seq,
        in pair order; updates the anti-replay windows. The copies are sorted by (pair, seq, arrival) with
        one sort of packed 64-bit keys where they fit (a lexsort otherwise), and each pair's are taken in
        increasing seq, each checked against the window as it was before the batch (the first copy of a
        seq leads); ``span``: the range of pairs they can belong to.
        """
        own = origin == dst                             # a record never comes back to its origin: such
        n = len(dst)                                    # copies sort last and are cut off
        kept = n - int(np.count_nonzero(own))
        if not kept:
            return (np.zeros(0, np.int64),) * 4
        pair = self._pairs(dst * self.num_agents + origin, span)
        p0, s0 = int(pair.min()), int(seq.min())
        pair_bits, seq_bits, index_bits = (int(pair.max()) - p0).bit_length(), (int(seq.max()) - s0).bit_length(), \
            n.bit_length()
        if pair_bits + seq_bits + index_bits <= 62:
            packed = pair - p0
            packed <<= seq_bits + index_bits
            packed |= (seq - s0) << index_bits
            packed |= np.arange(n)
            packed[own] = _LAST
            packed.sort()
            packed = packed[:kept]
            first = packed & ((1 << index_bits) - 1)
            packed >>= index_bits                       # (pair, seq) as one number
            lead = packed[1:] != packed[:-1]            # the first copy of each (pair, seq) leads, the
            if not lead.all():                          # other copies are duplicates
                lead = np.flatnonzero(np.append(True, lead))
                packed, first = packed[lead], first[lead]
            p, seq = packed >> seq_bits, (packed & ((1 << seq_bits) - 1)) + s0
            p += p0
        else:
            pair[own] = _LAST
            first = np.lexsort((np.arange(n), seq, pair))[:kept]
            p, seq = pair[first], seq[first]
            lead = (p[1:] != p[:-1]) | (seq[1:] != seq[:-1])
            if not lead.all():
                lead = np.flatnonzero(np.append(True, lead))
                p, seq, first = p[lead], seq[lead], first[lead]
        change = np.append(p[1:] != p[:-1], True)
        ends = np.flatnonzero(change) + 1               # one run per pair
        runs = np.append(0, ends[:-1])
        high, mask = self._high[p], self._mask[p]
        offset = high - seq                             # >= 0: at or below the pair's newest seq so far
        behind = np.flatnonzero(offset >= 0)
        if len(behind):
            back = offset[behind]
            seen = (back >= WINDOW) | ((mask[behind] >> np.minimum(back, WINDOW - 1).astype(np.uint64)) & _ONE == _ONE)
            behind = behind[seen]
        # advance each pair's window to its newest seq in this batch (p sorted, seq sorted within p) and set
        # the bits of the fresh seqs (one OR per pair); a uint64 shifted left by 64 or more is 0 in numpy
        last = ends - 1
        up, old = p[last], high[last]
        new = np.maximum(old, seq[last])
        mask = mask[last] << (new - old).view(np.uint64)
        self._high[up] = new
        bits = _ONE << (np.repeat(new, ends - runs) - seq if len(up) < len(p) else new - seq).view(np.uint64)
        if len(behind):
            bits[behind] = 0
        if len(up) < len(p):  # the OR of a run's bits (distinct powers of two) is their sum: a difference of
            bits = np.cumsum(bits)  # running sums, exact modulo 2**64
            bits = bits[last] - np.append(np.uint64(0), bits[last[:-1]])
        mask |= bits
        self._mask[up] = mask
        if not len(behind):
            return first, first[last], up, seq[last]
        fresh = np.ones(len(p), dtype=bool)
        fresh[behind] = False
        top = fresh[last]  # a pair whose newest copy here was seen before has nothing above its newest seq
        return first[fresh], first[last[top]], up[top], seq[last[top]]

    def _pairs(self, key: np.ndarray, span: tuple[int, int] | None = None) -> np.ndarray:
        """Index in the gamma-ball arrays of the pairs ``key = receiver * M + origin`` (every pair that can talk
        has one; ``span``: the range of pairs to search)."""
        if self._pair_of is not None:
            pair = self._pair_of[key]
            if len(pair) and pair.min() < 0:
                raise ProtocolError(f"flooding {self.kind!r}: a record reached a node beyond gamma = {self.gamma} hops")
            return pair.astype(np.int64)
        lo, hi = span or (0, len(self._pair_key))
        pair = np.searchsorted(self._pair_key[lo:hi], key) + lo
        if len(pair) and (pair.max() >= hi or np.any(self._pair_key[pair] != key)):
            raise ProtocolError(f"flooding {self.kind!r}: a record reached a node beyond gamma = {self.gamma} hops")
        return pair

    def _latest_state(self, pairs: int) -> None:
        """The latest table: one row per pair of the gamma-balls, the newest record as received (seq -1 and
        created nan: none yet), and the terms of the sums, one row per element and one column per pair."""
        self._table = np.zeros(pairs, dtype=self.dtype)
        self._table["seq"] = -1
        self._table["created"] = np.nan
        self._latest_seq = np.full(pairs, -1, dtype=np.int64)  # the table's seq column, contiguous (checked often)
        fields = self._value_dtype.fields
        self._sum_columns: dict[str, slice] = {}
        width = 0
        for name, spec in self.sum_spec.items():
            size = max(int(np.prod(fields[column][0].shape, dtype=np.int64)) for column in spec)
            self._sum_columns[name] = slice(width, width + size)
            width += size
        self._terms = np.zeros((width, pairs))  # column-major: the sums run along contiguous rows
        self._receivers = np.flatnonzero(np.diff(self._ball_ptr))  # receivers with a non-empty ball

    def _update_latest(self, blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]], base: np.ndarray) -> None:
        """Put the newest fresh record of each pair in the latest table (``base[rows]``), where newer.

        ``blocks``: (receivers, pairs, rows) of such records, block by block of whole receivers, in
        pair order. The records are gathered and scattered as raw rows; the sums are updated by
        differences (receiver by receiver) when few entries change, else summed afresh over the whole
        table (in steady state every origin publishes once per tick and every pair changes).
        """
        changed = sum(len(block[1]) for block in blocks)
        if not changed:
            return
        few = changed * 4 < len(self._ball_origin)
        raw = np.dtype((np.void, self.dtype.itemsize))
        table = self._table.view(raw)
        told = []  # for on_latest: (receivers, pairs, previous, records) per block
        for dst, pair, rows in blocks:
            if not len(pair):
                continue
            records = take(base, rows)
            if self.on_latest is not None:
                told.append((dst, pair, take(self._table, pair), records))
            if few and self.sum_spec:
                old = np.take(self._terms, pair, axis=1)
            table[pair] = records.view(raw)
            self._latest_seq[pair] = records["seq"]
            if not self.sum_spec:
                continue
            terms = self._terms_of(records)
            for row, values in zip(self._terms, terms, strict=True):  # one flat scatter per row (faster)
                row[pair] = values
            if few:
                runs = np.flatnonzero(np.append(True, dst[1:] != dst[:-1]))   # receivers in increasing order
                self._add_sums(dst[runs], np.add.reduceat(terms - old, runs, axis=1), add=True)
        if self.sum_spec and not few:
            self._add_sums(self._receivers, np.add.reduceat(self._terms, self._ball_ptr[self._receivers], axis=1))
        if told:
            dst, pair, previous, records = (np.concatenate(part) for part in zip(*told, strict=True))
            self.on_latest(dst, self._ball_origin[pair], *({name: x[name] for name in self.value_names}
                                                           for x in (previous, records)))

    def _terms_of(self, records: np.ndarray) -> np.ndarray:
        """The terms of every sum for ``records``, one row per element and one column per record (a column of
        one element broadcasts over the other's in a product)."""
        terms = np.empty((len(self._terms), len(records)))
        for name, spec in self.sum_spec.items():
            columns = [records[column].reshape(len(records), -1).T for column in spec]
            terms[self._sum_columns[name]] = columns[0] if len(spec) == 1 else columns[0] * columns[1]
        return terms

    def _add_sums(self, receivers: np.ndarray, summed: np.ndarray, add: bool = False) -> None:
        """Set (with ``add``: increase) the sums of ``receivers`` to the columns of ``summed`` (terms x receivers)."""
        for name, columns in self._sum_columns.items():
            total = self.sums[name]
            part = summed[columns].T.reshape((len(receivers),) + total.shape[1:])
            if add:
                total[receivers] += part
            else:
                total[receivers] = part

    def _forget_latest(self, agent: int, lo: int, hi: int) -> None:
        """Empty the latest table of ``agent`` (its pairs ``lo:hi``) and its sums."""
        had = np.flatnonzero(self._latest_seq[lo:hi] >= 0) + lo
        previous = take(self._table, had) if self.on_latest is not None and len(had) else None
        self._table[lo:hi] = np.zeros(1, dtype=self.dtype)
        self._table["seq"][lo:hi] = -1
        self._table["created"][lo:hi] = np.nan
        self._latest_seq[lo:hi] = -1
        self._terms[:, lo:hi] = 0
        for total in self.sums.values():
            total[agent] = 0  # every term of its sums is gone
        if previous is not None:
            self.on_latest(np.full(len(had), agent), self._ball_origin[had],
                           *({name: x[name] for name in self.value_names} for x in (previous, np.zeros_like(previous))))
