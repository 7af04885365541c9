"""The receive side of LOCAL flooding: a batch of delivered messages as array work, no object per message.

Part of :class:`netsim.comm.flooding.Flooding` (its base class; see that module's docstring,
"Duplicates" and "Latest message per origin", and ``docs/engine.md``). A batch (what a deferred
reader collects at a tick, or what a record reader gets at an instant) is handled as:

1. its messages as arrays (receiver, first row, row end, due time) over the rows they carry, joined
   once as raw rows, put in delivery order (a stable sort by due time), then grouped by receiver
   (delivery order kept within each);
2. the record copies one at a time, receiver by receiver, by a compiled loop
   (:func:`netsim.comm.kernels.receive`): a copy back at its origin is dropped; else its pair
   (receiver, origin) is found by bisection in the receiver's gamma-ball (sorted origins) and its
   seq checked against the pair's anti-replay window (the newest seq and a 64-bit mask, as
   :class:`netsim.comm.sequencing.ReplayWindow`); a fresh copy is queued for forwarding if it has
   life left, reported if asked, and, where its seq is above the latest-table entry's, becomes the
   pair's candidate;
3. each pair's candidate (the first copy of the highest fresh seq) replaces the latest-table entry:
   the table holds the record as received, one raw row per pair, and the sums' terms are read from
   its rows; the sums are updated by differences when few entries change, else summed afresh over
   each receiver's ball, in both cases in the order of additions of ``np.add.reduceat`` over a table
   of terms (:func:`netsim.comm.kernels.replace`: one pass, no table of terms kept);
4. what is reported (``on_receive``) is put back in delivery order; what is forwarded is queued
   receiver by receiver (delivery order within each), the order a flush sends it in.

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
        joined once and each message becomes a range of row indices (joining raw bytes is ~50x
        faster than np.concatenate on structured arrays); no Python object per message.

        The messages are then grouped by receiver (delivery order kept within each) and their copies
        taken one at a time by the compiled loop :func:`netsim.comm.kernels.receive`: every rule is per
        receiver (duplicates, windows, latest table), so this is the delivery order as far as any rule
        can tell. What is reported (``on_receive``) is put back in delivery order; what is forwarded is
        queued receiver by receiver, the order a flush sends it in.
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
        kernels = _kernels()
        report = self.on_receive is not None
        latest = self.keep_latest
        moved_dst, moved_row, *rest = self._scratch(total, 2 + 2 * report + 3 * latest)
        heard_dst, heard_row = rest[:2] if report else (self._none,) * 2
        change = rest[2 * report:] if latest else [self._none] * 3
        heard_row.fill(-1)
        # the header columns the loop reads, contiguous (a record row is ~100 bytes; these are 16)
        origin, seq, life = (np.ascontiguousarray(base[name]) for name in ("origin", "seq", "life"))
        kept, moved, changed = kernels.receive(
            dst, start, sizes, arrival, origin, seq, life, self._ball_ptr, self._ball_origin, self._high, self._mask,
            self._winner if latest else self._none, self._where,
            heard_dst, heard_row, moved_dst, moved_row, *change)
        if kept < 0:
            raise ProtocolError(f"flooding {self.kind!r}: a record reached node {int(dst[-1 - kept])} from beyond "
                                f"gamma = {self.gamma} hops")
        self.duplicates += total - kept
        if not kept:
            return
        forward = (moved_dst[:moved].copy(), take(base, moved_row[:moved]))  # out of the scratch before any callback
        if changed:
            self._update_latest(*(part[:changed] for part in change), base)
        if report:
            heard = np.flatnonzero(heard_row >= 0)
            self.on_receive(heard_dst[heard], take(base, heard_row[heard]))
        if moved:
            self._queue(*forward)
            if self.relay == "on_receipt":
                self.flush()

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
        size = self.dtype.itemsize
        _kernels().replace(dst, pair, rows, base.view(np.uint8).reshape(len(base), size),
                           self._table.view(np.uint8).reshape(len(self._table), size), self._floats(base),
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
        for name, columns in self._sum_columns.items():
            total = self.sums[name]
            part = summed[columns].T.reshape((len(receivers),) + total.shape[1:])
            if add:
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
