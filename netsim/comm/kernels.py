"""The per-copy loops of LOCAL flooding's receive path, compiled with numba (``netsim.comm.heard``).

A batch of delivered record copies is handled one copy at a time, as a node would: each copy's pair
(receiver, origin) is found in the receiver's gamma-ball, checked against that pair's anti-replay
window and, where fresh, noted for forwarding, for ``on_receive`` and for the latest table. A plain
loop over the copies touches each one once; the same rules as array passes cost about 25 numpy
passes per copy (sorts, gathers, scatters), 4-5x the CPU time at M = 10,000 (``docs/performance.md``).

The loops are compiled on first use (``cache=True``: the machine code is kept in ``__pycache__`` and
loaded by later processes) and do no floating-point arithmetic other than copies, the product of two
columns, the difference of two terms and the sums over the latest table, added in the order
``np.add.reduceat`` adds them (:func:`_segment`, :func:`_pairwise`), so their results are bit for bit
those of the same rules in numpy. This module is imported only by the message path (realistic mode),
so paper-mode runs never load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from netsim.comm.sequencing import WINDOW

_ONE = np.uint64(1)
RUN = 16  # a receiver's messages are sorted by due time in runs of this many, then merged (_by_due)


@njit(cache=True)
def receive(dst, start, size, due, arrival, origin, seq, life, ball_ptr, ball_origin, high, mask,  # noqa: PLR0913
            winner, where, order, scratch, count, heard_dst, heard_row, moved_dst, moved_row, change_dst, change_pair,
            change_row, latest_args):  # pragma: no cover (compiled)
    """Take the copies of a batch, receiver by receiver, each receiver's in delivery order.

    Message ``i`` (receiver ``dst[i]``, due at ``due[i]``, in list order) carries the rows ``start[i]:start[i]
    + size[i]`` of the batch's records (columns ``origin``, ``seq``, ``life``); its first copy is the
    ``arrival[i]``-th of the batch in delivery order (read only when ``heard_row`` has one entry per copy).
    The messages are first put in ``order`` by receiver (a counting sort; ``count``: one entry per node
    and one more), then each receiver's by due time (:func:`_by_due`; ``scratch``: as long as
    ``order``), both stable: receiver by receiver, each receiver's in delivery order (the stable sort by
    due time of the list).

    A copy back at its origin is dropped; else its pair is the position of its origin in the receiver's
    ball (``ball_origin[ball_ptr[d]:ball_ptr[d + 1]]``), read from ``where`` (one entry per node, the
    receiver's ball written into it first: a lookup in the processor's cache, where a bisection costs
    ~3x), and it is fresh when the pair's window accepts its seq (as
    :meth:`netsim.comm.sequencing.ReplayWindow.accept`: newer than the newest seen, or at most 63
    behind it and not seen). For each fresh copy: ``heard_dst/heard_row[arrival]`` (when ``heard_row``
    has one entry per copy), ``moved_*`` (when ``life >= 1``, in this order) and, when ``winner`` has one
    entry per pair (-1) and the seq is the newest seen (above the window's, hence above the latest-table
    entry's: that entry is the newest fresh record, ``high`` its seq), the pair's winner (its row);
    after each receiver, its pairs with a winner go to ``change_*`` in pair order.

    ``latest_args`` (the arguments of :func:`replace` after ``dst, pair, row``), when its ``receivers``
    are not empty: where at least a quarter of the pairs change (the case in which :func:`replace` sums
    afresh), the changes are applied to the latest table here, in the same call; else left to the caller.

    Returns ``(fresh copies, moved, changes, applied)``; fresh copies is ``-1 - i`` when message ``i``
    carries a record from beyond the receiver's ball (nothing after it is handled).
    """
    report = len(heard_row) > 0
    latest = len(winner) > 0
    kept = 0
    moved = 0
    changes = 0
    n = len(dst)
    count[:] = 0
    for k in range(n):
        count[dst[k] + 1] += 1
    for d in range(1, len(count)):
        count[d] += count[d - 1]
    for k in range(n):
        order[count[dst[k]]] = k
        count[dst[k]] += 1   # count[d]: the end of receiver d's messages in order
    i = 0
    while i < n:
        d = dst[order[i]]
        lo = ball_ptr[d]
        hi = ball_ptr[d + 1]
        j = count[d]
        _by_due(order, i, j, due, scratch)
        for p in range(lo, hi):
            where[ball_origin[p]] = p
        for q in range(i, j):
            k = order[q]
            r0 = start[k]
            for c in range(size[k]):
                r = r0 + c
                o = origin[r]
                if o == d:
                    continue
                a = where[o]  # from this receiver's ball, or an older entry (checked)
                if a < lo or a >= hi or ball_origin[a] != o:
                    return -1 - k, moved, changes, False
                s = seq[r]
                h = high[a]
                if s > h:
                    if s - h < WINDOW:
                        mask[a] = (mask[a] << np.uint64(s - h)) | _ONE
                    else:
                        mask[a] = _ONE
                    high[a] = s
                    if latest:
                        winner[a] = r  # the first copy of the newest seq
                else:
                    back = np.uint64(h - s)
                    if h - s >= WINDOW or (mask[a] >> back) & _ONE:
                        continue
                    mask[a] |= _ONE << back
                kept += 1
                if report:
                    heard_dst[arrival[k] + c] = d
                    heard_row[arrival[k] + c] = r
                if life[r] >= 1:
                    moved_dst[moved] = d
                    moved_row[moved] = r
                    moved += 1
        if latest:
            for p in range(lo, hi):
                if winner[p] >= 0:
                    change_dst[changes] = d
                    change_pair[changes] = p
                    change_row[changes] = winner[p]
                    changes += 1
                    winner[p] = -1
        i = j
    records, table, floats, values, copy, spec, diffs, receivers, summed = latest_args
    if len(receivers) == 0 or changes * 4 < len(ball_origin):
        return kept, moved, changes, False
    replace(change_dst[:changes], change_pair[:changes], change_row[:changes], records, table, floats, values, copy,
            spec, diffs, ball_ptr, receivers, summed)
    return kept, moved, changes, True


@njit(cache=True)
def _by_due(order, lo, hi, due, scratch):  # pragma: no cover (compiled)
    """Sort ``order[lo:hi]`` (message indices) by ``due``, stably; ``scratch``: room for ``hi - lo`` entries.

    Nothing to do where they are in order already (constant delays); else insertion sorts of runs of
    :data:`RUN` entries merged pairwise (a bottom-up merge sort: a receiver with many messages costs n log n).
    """
    ordered = True
    for q in range(lo + 1, hi):
        if due[order[q]] < due[order[q - 1]]:
            ordered = False
            break
    if ordered:
        return
    for a in range(lo, hi, RUN):
        for q in range(a + 1, min(a + RUN, hi)):
            k = order[q]
            x = due[k]
            p = q - 1
            while p >= a and due[order[p]] > x:
                order[p + 1] = order[p]
                p -= 1
            order[p + 1] = k
    width = RUN
    while width < hi - lo:
        for a in range(lo, hi, 2 * width):
            m = min(a + width, hi)
            b = min(a + 2 * width, hi)
            x, y = a, m
            for o in range(a - lo, b - lo):
                if y < b and (x >= m or due[order[y]] < due[order[x]]):
                    scratch[o] = order[y]
                    y += 1
                else:
                    scratch[o] = order[x]
                    x += 1
        for q in range(lo, hi):
            order[q] = scratch[q - lo]
        width *= 2


@njit(cache=True)
def gather(records, raw, start, stop, at, out, origin, seq, life, first):  # noqa: PLR0913  # pragma: no cover (compiled)
    """Join the rows of one payload that some message carries (``records``; ``raw``: the same rows as words).

    Message ``i`` carries the rows ``start[i]:stop[i]``; the rows any message carries are copied in row
    order to ``out[at:]`` (words), their ``origin``, ``seq`` and ``life`` to those arrays (same places:
    the receive loop reads only those, and apart they stay in the processor's cache), and ``first[i]``
    becomes the place of message ``i``'s first row (``at`` for an empty message). Returns the end of the
    copied rows.
    """
    n = len(records)
    cover = np.zeros(n + 1, dtype=np.int64)  # messages carrying each row, as differences
    for i in range(len(start)):
        if stop[i] > start[i]:
            cover[start[i]] += 1
            cover[stop[i]] -= 1
    carried = 0
    k = at
    for r in range(n):
        carried += cover[r]
        if carried > 0:
            for w in range(raw.shape[1]):
                out[k, w] = raw[r, w]
            origin[k] = records[r].origin
            seq[k] = records[r].seq
            life[k] = records[r].life
            cover[r] = k  # row r's place, read back below
            k += 1
    for i in range(len(start)):
        first[i] = cover[start[i]] if stop[i] > start[i] else at
    return k


@njit(cache=True)
def replace(dst, pair, row, records, table, floats, values, copy, spec, diffs, ball_ptr, receivers,  # noqa: PLR0913
            summed):  # pragma: no cover (compiled)
    """Latest-table entries ``pair[c]`` (of receiver ``dst[c]``, grouped by receiver in increasing order) become
    the records ``row[c]``, and the running sums follow.

    The raw rows go from ``records`` into ``table`` (bytes or 8-byte words); ``values`` holds each entry's
    summed columns as float64 (``floats`` for the records): the table itself seen as float64 or, with
    ``copy``, a side array into which ``floats[row]`` is copied. Term ``e`` of an entry is
    ``values[pair, spec[e, 0]]``, times ``values[pair, spec[e, 1]]`` where that is not -1. Where ``diffs``
    has one column per change, the new term less the old goes to it (the caller sums those per
    receiver). Else, for each receiver ``receivers[i]`` (increasing; every receiver of a change among
    them) once its entries are replaced, ``summed[i, e]`` becomes the sum of term ``e`` over its ball,
    added as ``np.add.reduceat`` adds a segment (:func:`_segment`, every term at once): the same sums,
    bit for bit, as summing a table of terms, without keeping that table.
    """
    width = spec.shape[0]
    few = diffs.shape[1] > 0
    n = len(pair)
    if few:
        for c in range(n):
            p = pair[c]
            for e in range(width):
                diffs[e, c] = -_term(values, spec[e, 0], spec[e, 1], p)
            _put(p, row[c], records, table, floats, values, copy)
            for e in range(width):
                diffs[e, c] += _term(values, spec[e, 0], spec[e, 1], p)
        return
    acc = np.empty((8, width))
    right = np.empty((64, width))       # one row per level of halving (below 64 for any array numpy can hold)
    c = 0
    for i in range(len(receivers)):
        d = receivers[i]
        while c < n and dst[c] == d:
            _put(pair[c], row[c], records, table, floats, values, copy)
            c += 1
        if len(summed):
            _segment(values, spec, ball_ptr[d], ball_ptr[d + 1] - ball_ptr[d], summed[i], acc, right)


@njit(cache=True, inline="always")
def _put(p, r, records, table, floats, values, copy):  # pragma: no cover (compiled)
    """Entry ``p`` of the latest table becomes record ``r`` (raw words, and its float64 values with ``copy``)."""
    for b in range(records.shape[1]):  # a loop: ~3x faster than a slice assignment here
        table[p, b] = records[r, b]
    if copy:
        for f in range(values.shape[1]):
            values[p, f] = floats[r, f]


@njit(cache=True, inline="always")
def _term(values, a, b, p):  # pragma: no cover (compiled)
    """Column ``a`` of entry ``p``, times column ``b`` where ``b >= 0``."""
    if b >= 0:
        return values[p, a] * values[p, b]
    return values[p, a]


@njit(cache=True)
def _segment(values, spec, lo, n, out, acc, right):  # pragma: no cover (compiled)
    """``out[e]``: the sum of term ``e`` (:func:`_term`) of entries ``lo:lo + n`` (n >= 1) as ``np.add.reduceat``
    takes a segment: the first term plus the pairwise sum of the others (:func:`_pairwise`; ``acc``,
    ``right``: its scratch)."""
    for e in range(len(out)):
        out[e] = _term(values, spec[e, 0], spec[e, 1], lo)
    if n > 1:
        _pairwise(values, spec, lo + 1, n - 1, right[0], acc, right[1:])
        for e in range(len(out)):
            out[e] += right[0, e]


@njit(cache=True)
def _pairwise(values, spec, lo, n, out, acc, right):  # pragma: no cover (compiled)
    """``out[e]``: numpy's pairwise summation of term ``e`` of entries ``lo:lo + n``, operation for operation,
    for every term at once (numpy's ``pairwise_sum``, ``loops_utils.h.src``: below 8 terms one after
    another from -0.0; up to 128 eight running sums combined as a tree, then the rest; above, the
    halves, cut at a multiple of 8). ``acc``: 8 rows of scratch; ``right``: one row per level of halving
    below this one."""
    width = len(out)
    if n < 8:
        for e in range(width):
            out[e] = -0.0
        for p in range(lo, lo + n):
            for e in range(width):
                out[e] += _term(values, spec[e, 0], spec[e, 1], p)
        return
    if n <= 128:
        for j in range(8):
            for e in range(width):
                acc[j, e] = _term(values, spec[e, 0], spec[e, 1], lo + j)
        i = 8
        while i < n - n % 8:
            for j in range(8):
                for e in range(width):
                    acc[j, e] += _term(values, spec[e, 0], spec[e, 1], lo + i + j)
            i += 8
        for e in range(width):
            low = (acc[0, e] + acc[1, e]) + (acc[2, e] + acc[3, e])
            out[e] = low + ((acc[4, e] + acc[5, e]) + (acc[6, e] + acc[7, e]))
        for p in range(lo + i, lo + n):
            for e in range(width):
                out[e] += _term(values, spec[e, 0], spec[e, 1], p)
        return
    half = n // 2
    half -= half % 8
    _pairwise(values, spec, lo, half, out, acc, right)
    _pairwise(values, spec, lo + half, n - half, right[0], acc, right[1:])
    for e in range(width):
        out[e] += right[0, e]
