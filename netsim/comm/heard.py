"""The receive side of LOCAL flooding: a batch of delivered messages as array work, no object per message.

Part of :class:`netsim.comm.flooding.Flooding` (its base class; see that module's docstring,
"Duplicates" and "Latest message per origin", and ``docs/engine.md``). A batch (what a deferred
reader collects at a tick, or what a record reader gets at an instant) is handled as:

1. its messages as arrays (receiver, first row, row end, due time) over the rows they carry, in list
   order; their payloads joined once (:func:`_messages`: whole payloads side by side with one
   ``np.concatenate`` where they hold no more rows than the batch has copies, else each carried row once,
   :func:`netsim.comm.kernels.gather`);
2. one compiled call (:func:`netsim.comm.kernels.receive`) for the rest: the messages grouped by
   receiver (a counting sort) and each receiver's put in delivery order (a stable sort by due time);
   the record copies one at a time, receiver by receiver: a copy back at its origin is dropped; else
   its pair (receiver, origin) is found in the receiver's gamma-ball and its seq checked against the
   pair's anti-replay window (the newest seq and a 64-bit mask, as
   :class:`netsim.comm.sequencing.ReplayWindow`); a fresh copy is queued for forwarding if it has
   life left, reported if asked, and, where its seq is above the latest-table entry's, becomes the
   pair's candidate;
3. each pair's candidate (the first copy of the highest fresh seq) replaces the latest-table entry:
   the table holds the record as received, one raw row per pair, and the sums' terms are read from
   its rows; the sums are updated by differences when few entries change, else summed afresh over
   each receiver's ball, in both cases in the order of additions of ``np.add.reduceat`` over a table
   of terms (:func:`netsim.comm.kernels.replace`: one pass, no table of terms kept). Summed afresh
   (in steady state every origin publishes once per tick and every pair changes), this happens in the
   same compiled call as step 2 where nobody is told of the changes (``on_latest``);
4. what is reported (``on_receive``) is put back in delivery order; what is forwarded is queued
   receiver by receiver (delivery order within each), the order a flush sends it in.

At M = 200 (dubey2020a Fig. 1(a), about 4,000 copies per tick) the fixed cost of each numpy call is
what a tick costs, hence one compiled call for steps 2-3 and one ``np.concatenate`` for step 1.

Every rule is per receiver, so taking the receivers one after another is the delivery order as far
as any rule can tell, and a receiver's arrays (its ball, windows, latest entries: a few kB) stay in
the processor's cache while its copies are handled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.engine.errors import ProtocolError
from netsim.engine.held import stable_order

HEADER = [("origin", "i4"), ("seq", "i8"), ("created", "f8"), ("life", "i4")]  # a record's first columns
WHOLE_ROWS = 1 << 16  # _messages joins whole payloads up to this many rows (above, only the carried rows)
LARGE_BATCH = 1 << 15  # Receiving._process: a batch of more messages is sorted by numpy, its table changed apart


def take(records: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``records[index]`` for a structured array, ~10x faster: rows are gathered as opaque bytes."""
    return records.view(np.dtype((np.void, records.dtype.itemsize)))[index].view(records.dtype)


def _messages(items: list, space: Any, whole: bool | None = None) -> tuple[np.ndarray, ...]:
    """(receivers, first rows, row ends, due times, joined payloads, origin, seq, life) of delivered items, in
    list order.

    Items are :class:`~netsim.engine.network.Multicast` records (rows ``start:stop`` of their payload) or
    single Messages (their whole payload); consecutive Messages are gathered in plain lists. The joined
    payloads hold the distinct payloads (in order of first appearance) side by side, each message a range
    of their rows, and their header columns ``origin``, ``seq``, ``life`` (what the receive loop reads).
    ``whole``: every row of each payload, copied as raw rows at once (one ``np.concatenate``); else only the
    rows some message carries, each once, in row order within each payload: a flight's payload comes with
    every batch that has one of its messages, and where delays are long against the period most of its
    rows are carried by none of them. One compiled pass per payload (:func:`netsim.comm.kernels.gather`)
    then finds those rows and copies them (as 8-byte words where the rows allow it). By default
    (``None``), whole payloads where they hold no more rows than the messages carry copies (their rows
    are then about all carried) and at most :data:`WHOLE_ROWS` (a batch that small pays the fixed cost
    of a call per payload; a larger one, e.g. M = 10,000, is faster with only the carried rows
    touched), else the carried rows. Either way the messages read the same rows. The header columns are
    views of the joined rows where whole payloads are joined, else copied apart by the compiled pass (the
    receive loop reads them copy after copy: apart, they stay in the processor's cache at M = 10,000).
    ``space(rows, dtype)``: arrays of that many rows for the joined payloads and the three columns
    (:meth:`Receiving._joined`).
    """
    index: dict[int, int] = {}  # payload -> its place in chunks
    chunks: list[np.ndarray] = []
    offsets: list[int] = []     # each payload's first row in the whole payloads side by side
    rows = 0
    dsts, starts, stops, dues, which, counts = [], [], [], [], [], []
    single: list[list] = [[], [], [], []]  # a run of single Messages: dst, start, stop, due

    def close() -> None:
        if single[0]:
            for out, values in zip((dsts, starts, stops, dues), single, strict=True):
                out.append(np.array(values))
                values.clear()

    for item in items:
        payload = item.payload
        at = index.get(id(payload))
        if at is None:
            at = index[id(payload)] = len(chunks)
            chunks.append(payload)
            offsets.append(rows)
            rows += len(payload)
        if hasattr(item, "start"):
            close()
            dsts.append(item.dst)
            starts.append(item.start)
            stops.append(item.stop)
            due = item.due_at
            dues.append(due if isinstance(due, np.ndarray) else np.full(len(item.dst), due))
            counts.append(len(item.dst))
        else:
            for values, value in zip(single, (item.dst, 0, len(payload), item.due_at), strict=True):
                values.append(value)
            counts.append(1)
        which.append(at)
    close()
    start, stop = (np.concatenate(x).astype(np.int64, copy=False) for x in (starts, stops))
    dst = np.concatenate(dsts).astype(np.int64, copy=False)
    due = np.concatenate(dues).astype(float, copy=False)
    size = stop - start
    dtype = chunks[0].dtype
    bound = rows  # at most every row of every payload (pages never written are never touched)
    if whole is None:
        whole = bound <= min(int(size.sum()), WHOLE_ROWS)
    base, origin, seq, life = space(bound, dtype)
    if whole:
        raw = np.dtype((np.void, dtype.itemsize))
        np.concatenate([c.view(raw) for c in chunks], out=base.view(raw))
        first = start + np.repeat([offsets[at] for at in which], counts)
        return dst, first, first + size, due, base, base["origin"], base["seq"], base["life"]
    chunk = np.repeat(which, counts)
    unit = np.dtype(np.uint64 if dtype.itemsize % 8 == 0 else np.uint8)  # rows copied as 8-byte words where they can
    width = dtype.itemsize // unit.itemsize
    first = np.empty(len(start), dtype=np.int64)
    if len(chunks) == 1:
        groups = [np.arange(len(start))]
    else:  # the messages of each payload, payloads in order of first appearance
        order = np.argsort(chunk, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(chunk[order])) + 1)
    rows = 0
    for messages in groups:
        records = np.ascontiguousarray(chunks[int(chunk[messages[0]])])
        placed = np.empty(len(messages), dtype=np.int64)
        rows = _kernels().gather(records, records.view(unit).reshape(len(records), width), start[messages],
                                 stop[messages], rows, base.view(unit).reshape(bound, width), origin, seq, life, placed)
        first[messages] = placed
    return dst, first, first + size, due, base[:rows], origin[:rows], seq[:rows], life[:rows]


def _by_receiver(dst: np.ndarray, due: np.ndarray) -> np.ndarray:
    """The messages (receivers ``dst``, due times ``due``) grouped by receiver, each receiver's in delivery
    order: the stable sort by due time, then the stable sort by receiver
    (:func:`~netsim.engine.held.stable_order`), the order :func:`netsim.comm.kernels.receive` puts them in."""
    order = stable_order(due)
    return order[stable_order(dst[order])]


def _kernels():
    """The compiled loops (:mod:`netsim.comm.kernels`), imported on first use: only the message path (realistic
    mode) loads numba."""
    import netsim.comm.kernels
    return netsim.comm.kernels


class Receiving:
    """The batch path of :class:`~netsim.comm.flooding.Flooding` (which sets the state it uses)."""

    _ball_ptr: np.ndarray
    _ball_origin: np.ndarray
    _high: np.ndarray
    _mask: np.ndarray
    _table: np.ndarray
    _values: np.ndarray
    sums: dict[str, np.ndarray]
    on_receive: Any
    on_latest: Any

    def _process(self, items: list) -> None:
        """Handle delivered messages: :class:`~netsim.engine.network.Multicast` records or single Messages.

        A record's ``due_at`` is one time or one per message (held deliveries, ``netsim.engine.held``); the
        messages are taken in delivery order, the stable sort by due time of the items' messages in
        list order. Messages of one flush share their payload array, so the distinct payloads are
        joined once, the rows some message carries (:func:`_messages`), and each message becomes a
        range of row indices; no Python object per message.

        The messages are then grouped by receiver (delivery order kept within each: by the compiled loop,
        or by numpy's sorts before it for a batch of more than :data:`LARGE_BATCH` messages) and their copies
        taken one at a time by the compiled loop :func:`netsim.comm.kernels.receive`: every rule is per
        receiver (duplicates, windows, latest table), so this is the delivery order as far as any rule
        can tell. What is reported (``on_receive``) is put back in delivery order; what is forwarded is
        queued receiver by receiver, the order a flush sends it in.
        """
        dst, start, stop, due, base, origin, seq, life = _messages(items, self._joined)
        sizes = stop - start
        total = int(sizes.sum())
        self.records_received += total
        if not total:
            return
        n = len(dst)
        report = self.on_receive is not None
        latest = self.keep_latest
        arrival = self._none
        if report:  # delivery index of each message's first copy (messages in list order)
            arrival = np.cumsum(sizes) - sizes
            if n > 1 and np.any(due[1:] < due[:-1]):
                order = stable_order(due)
                arrival[order] = np.cumsum(sizes[order]) - sizes[order]
        large = n > LARGE_BATCH
        if large:  # put in order here, by numpy's sorts: the compiled loop then reads its arrays in order
            order = _by_receiver(dst, due)
            dst, start, sizes, due = dst[order], start[order], sizes[order], due[order]
            if report:
                arrival = arrival[order]
        order, spare, moved_dst, moved_row, *rest = self._scratch(max(total, n), 4 + 2 * report + 3 * latest)
        heard_dst, heard_row = rest[:2] if report else (self._none,) * 2
        change = rest[2 * report:] if latest else [self._none] * 3
        heard_row.fill(-1)
        kept, moved, changed, applied = _kernels().receive(
            dst, start, sizes, due, arrival, origin, seq, life, self._ball_ptr, self._ball_origin, self._high,
            self._mask, self._winner if latest else self._none, self._where, order, spare, self._count,
            heard_dst, heard_row, moved_dst, moved_row, *change,
            self._no_latest if large else self._latest_args(base))
        if kept < 0:
            raise ProtocolError(f"flooding {self.kind!r}: a record reached node {int(dst[-1 - kept])} from beyond "
                                f"gamma = {self.gamma} hops")
        self.duplicates += total - kept
        if not kept:
            return
        # out of the scratch and the joined rows before any callback
        forward = (moved_dst[:moved].copy(), take(base, moved_row[:moved]))
        if report:
            heard = np.flatnonzero(heard_row >= 0)
            heard = (heard_dst[heard], take(base, heard_row[heard]))
        if applied:
            if len(self._term_spec):
                self._add_sums(self._receivers, self._summed.T)
        elif changed:
            self._update_latest(*(part[:changed] for part in change), base)
        if report:
            self.on_receive(*heard)
        if moved:
            self._queue(*forward)
            if self.relay == "on_receipt":
                self.flush()

    def _latest_args(self, base: np.ndarray) -> tuple:
        """The arguments with which :func:`netsim.comm.kernels.receive` applies the latest table's changes itself
        (:func:`netsim.comm.kernels.replace`'s after ``dst, pair, row``): where the table is kept, nobody is told
        of its changes (``on_latest``) and rows are copied as 8-byte words; else empty ones (left to
        :meth:`_update_latest`)."""
        if self._words is None:
            return self._no_latest
        rows = base.view(np.uint64).reshape(len(base), -1)  # base: a view of Receiving._joined's array (aligned)
        return (rows, self._words, rows.view(np.float64) if self._direct else self._floats(base), self._values,
                not self._direct, self._term_spec, self._no_diffs, self._receivers, self._summed)

    def _joined(self, rows: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Room for ``rows`` joined record rows and their ``origin``, ``seq``, ``life``: views of arrays kept between
        batches (fresh ones each batch would cost their page faults again, ~40 % of the join at M = 10,000)."""
        if len(self._rows) < rows:
            size = rows + rows // 4
            self._rows = np.empty(size, dtype=dtype)
            self._heads = (np.empty(size, np.int32), np.empty(size, np.int64), np.empty(size, np.int32))
        return self._rows[:rows], *(column[:rows] for column in self._heads)

    def _scratch(self, size: int, count: int) -> list[np.ndarray]:
        """``count`` int64 arrays of ``size`` entries: views of one buffer kept between batches (a fresh one
        each batch would cost its page faults again)."""
        if self._buffer.size < size * count:
            self._buffer = np.empty(size * count, dtype=np.int64)
        return [self._buffer[i * size:(i + 1) * size] for i in range(count)]

    def _latest_state(self, pairs: int) -> None:
        """The latest table: one row per pair of the gamma-balls, the newest record as received (seq -1 and
        created nan: none yet). The sums' terms are read from it: its summed columns seen as float64 where
        they allow it (``_direct``), else copied side by side (as float64) into ``_values``."""
        self._table = np.zeros(pairs, dtype=self.dtype)
        self._table["seq"] = -1
        self._table["created"] = np.nan
        self._winner = np.full(pairs, -1, dtype=np.int64)      # scratch of the compiled loop: a batch's newest row
        fields = self._value_dtype.fields
        self._sum_columns: dict[str, slice] = {}
        width = 0
        for name, spec in self.sum_spec.items():
            size = max(int(np.prod(fields[column][0].shape, dtype=np.int64)) for column in spec)
            self._sum_columns[name] = slice(width, width + size)
            width += size
        self._receivers = np.flatnonzero(np.diff(self._ball_ptr))  # receivers with a non-empty ball
        # where the compiled loop reads each term's factors: float columns of a record row (seen as float64
        # where the summed columns allow it, else copied side by side: Receiving._floats)
        summed = list(dict.fromkeys(column for spec in self.sum_spec.values() for column in spec))
        self._direct = self.dtype.itemsize % 8 == 0 and self._table.ctypes.data % 8 == 0 and all(
            fields[column][0].base == np.float64 and self.dtype.fields[column][1] % 8 == 0 for column in summed)
        at, self._float_columns = 0, {}
        for column in summed:
            self._float_columns[column] = self.dtype.fields[column][1] // 8 if self._direct else at
            at += int(np.prod(fields[column][0].shape, dtype=np.int64))
        self._float_width = at
        self._values = (self._table.view(np.float64).reshape(pairs, self.dtype.itemsize // 8) if self._direct
                        else np.zeros((pairs, at)))
        spec = np.full((width, 2), -1, dtype=np.int64)
        for name, columns in self.sum_spec.items():
            for e in range(self._sum_columns[name].start, self._sum_columns[name].stop):
                for i, column in enumerate(columns):
                    one = int(np.prod(fields[column][0].shape, dtype=np.int64)) == 1  # broadcasts in a product
                    spec[e, i] = self._float_columns[column] + (0 if one else e - self._sum_columns[name].start)
        self._term_spec = spec
        self._summed = np.empty((len(self._receivers) if width else 0, width))  # the sums receive() takes afresh
        self._no_diffs = np.empty((width, 0))
        # the table as 8-byte words, where receive() can apply its changes itself (Receiving._latest_args)
        words = self.dtype.itemsize % 8 == 0 and self.on_latest is None
        self._words = self._table.view(np.uint64).reshape(pairs, -1) if words else None

    def _update_latest(self, dst: np.ndarray, pair: np.ndarray, rows: np.ndarray, base: np.ndarray) -> None:
        """Put the newest fresh record of each pair in the latest table (``base[rows]``), where newer.

        ``dst, pair, rows``: the receivers, pairs and rows of such records, receiver by receiver in pair
        order. One compiled pass (:func:`netsim.comm.kernels.replace`) replaces the table's rows (raw
        bytes) and updates the sums: by differences (the new terms less the old, summed receiver by
        receiver with ``np.add.reduceat``) when few entries change, else summed afresh over each
        receiver's ball right after its entries are replaced (in steady state every origin publishes
        once per tick and every pair changes), in ``np.add.reduceat``'s order of additions: the sums
        are bit for bit those of a table of terms summed with numpy.
        """
        few = len(pair) * 4 < len(self._ball_origin)
        told = None
        if self.on_latest is not None:
            told = (dst.copy(), self._ball_origin[pair], take(self._table, pair), take(base, rows))
        width = len(self._term_spec)
        diffs = np.empty((width, len(pair) if few and width else 0))
        summed = np.empty((len(self._receivers) if width and not few else 0, width))
        # rows copied as 8-byte words where both arrays allow it (~1.5x faster than bytes), else as bytes
        words = self.dtype.itemsize % 8 == 0 and base.ctypes.data % 8 == 0 and self._table.ctypes.data % 8 == 0
        unit = np.uint64 if words else np.uint8
        _kernels().replace(dst, pair, rows, base.view(unit).reshape(len(base), -1),
                           self._table.view(unit).reshape(len(self._table), -1), self._floats(base),
                           self._values, not self._direct, self._term_spec, diffs, self._ball_ptr, self._receivers,
                           summed)
        if width:
            if few:
                runs = np.flatnonzero(np.append(True, dst[1:] != dst[:-1]))   # receivers in increasing order
                self._add_sums(dst[runs], np.add.reduceat(diffs, runs, axis=1), add=True)
            else:
                self._add_sums(self._receivers, summed.T)
        if told is not None:
            dst, origin, previous, records = told
            self.on_latest(dst, origin, *({name: x[name] for name in self.value_names} for x in (previous, records)))

    def _floats(self, records: np.ndarray) -> np.ndarray:
        """The summed columns of ``records`` as float64 rows: the records themselves seen as float64 where they
        allow it (``_direct``), else those columns copied side by side (as float64)."""
        n = len(records)
        if self._direct:
            out = records.view(np.uint8).reshape(n, self.dtype.itemsize)
            if out.ctypes.data % 8:  # an unaligned buffer: copied to an aligned one
                out = out.copy()
            return out.view(np.float64)
        out = np.empty((n, self._float_width))
        for column, at in self._float_columns.items():
            values = records[column].reshape(n, -1)
            out[:, at:at + values.shape[1]] = values
        return out

    def _add_sums(self, receivers: np.ndarray, summed: np.ndarray, add: bool = False) -> None:
        """Set (with ``add``: increase) the sums of ``receivers`` to the columns of ``summed`` (terms x receivers)."""
        every = len(receivers) == self.num_agents  # increasing distinct agents: all of them
        for name, columns in self._sum_columns.items():
            total = self.sums[name]
            part = summed[columns].T.reshape((len(receivers),) + total.shape[1:])
            if every:
                if add:
                    total += part
                else:
                    total[...] = part
            elif add:
                total[receivers] += part
            else:
                total[receivers] = part

    def _forget_latest(self, agent: int, lo: int, hi: int) -> None:
        """Empty the latest table of ``agent`` (its pairs ``lo:hi``) and its sums."""
        had = np.flatnonzero(self._high[lo:hi] >= 0) + lo  # the table's seq is its window's newest
        previous = take(self._table, had) if self.on_latest is not None and len(had) else None
        self._table[lo:hi] = np.zeros(1, dtype=self.dtype)
        self._table["seq"][lo:hi] = -1
        self._table["created"][lo:hi] = np.nan
        if not self._direct:
            self._values[lo:hi] = 0
        for total in self.sums.values():
            total[agent] = 0  # every term of its sums is gone
        if previous is not None:
            self.on_latest(np.full(len(had), agent), self._ball_origin[had],
                           *({name: x[name] for name in self.value_names} for x in (previous, np.zeros_like(previous))))
