"""The per-copy loops of LOCAL flooding's receive path, compiled with numba (``netsim.comm.heard``).

A batch of delivered record copies is handled one copy at a time, as a node would: each copy's pair
(receiver, origin) is found in the receiver's gamma-ball, checked against that pair's anti-replay
window and, where fresh, noted for forwarding, for ``on_receive`` and for the latest table. A plain
loop over the copies touches each one once; the same rules as array passes cost about 25 numpy
passes per copy (sorts, gathers, scatters), 4-5x the CPU time at M = 10,000 (``docs/performance.md``).

The loops are compiled on first use (``cache=True``: the machine code is kept in ``__pycache__`` and
loaded by later processes) and do no floating-point arithmetic other than copies and the difference
of two terms, so their results are bit for bit those of the same rules in numpy; the sums over the
latest table stay ``np.add.reduceat`` calls in :mod:`netsim.comm.heard`. This module is imported
only by the message path (realistic mode), so paper-mode runs never load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from netsim.comm.sequencing import WINDOW

_ONE = np.uint64(1)


@njit(cache=True)
def receive(dst, start, size, arrival, origin, seq, life, ball_ptr, ball_origin, high, mask,  # noqa: PLR0913
            winner, where, heard_dst, heard_row, moved_dst, moved_row, change_dst, change_pair,
            change_row):  # pragma: no cover (compiled)
    """Take the copies of a batch, receiver by receiver, each receiver's in delivery order.

    Message ``i`` (receiver ``dst[i]``, grouped by receiver) carries the rows ``start[i]:start[i] +
    size[i]`` of the batch's records (columns ``origin``, ``seq``, ``life``); its first copy is the
    ``arrival[i]``-th of the batch in delivery order. A copy back at its origin is dropped; else its
    pair is the position of its origin in the receiver's ball (``ball_origin[ball_ptr[d]:ball_ptr[d +
    1]]``), read from ``where`` (one entry per node, the receiver's ball written into it first: a
    lookup in the processor's cache, where a bisection costs ~3x), and it is fresh when the pair's
    window accepts its seq (as
    :meth:`netsim.comm.sequencing.ReplayWindow.accept`: newer than the newest seen, or at most 63
    behind it and not seen). For each fresh copy: ``heard_dst/heard_row[arrival]`` (when ``heard_row``
    has one entry per copy), ``moved_*`` (when ``life >= 1``, in this order) and, when ``winner`` has one
    entry per pair (-1) and the seq is the newest seen (above the window's, hence above the latest-table
    entry's: that entry is the newest fresh record, ``high`` its seq), the pair's winner (its row);
    after each receiver, its pairs with a winner go to ``change_*`` in pair order.

    Returns ``(fresh copies, moved, changes)``; fresh copies is ``-1 - i`` when message ``i`` carries a
    record from beyond the receiver's ball (nothing after it is handled).
    """
    report = len(heard_row) > 0
    latest = len(winner) > 0
    kept = 0
    moved = 0
    changes = 0
    n = len(dst)
    i = 0
    while i < n:
        d = dst[i]
        lo = ball_ptr[d]
        hi = ball_ptr[d + 1]
        j = i
        while j < n and dst[j] == d:
            j += 1
        for p in range(lo, hi):
            where[ball_origin[p]] = p
        for k in range(i, j):
            r0 = start[k]
            for c in range(size[k]):
                r = r0 + c
                o = origin[r]
                if o == d:
                    continue
                a = where[o]  # from this receiver's ball, or an older entry (checked)
                if a < lo or a >= hi or ball_origin[a] != o:
                    return -1 - k, moved, changes
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
    return kept, moved, changes


@njit(cache=True)
def replace(pair, row, records, table, floats, spec, terms, diffs):  # pragma: no cover (compiled)
    """Latest-table entries ``pair[c]`` become the records ``row[c]``: raw rows (``records`` into ``table``,
    bytes) and terms of the sums (into column ``pair[c]`` of ``terms``).

    Term ``e`` of a record is ``floats[row, spec[e, 0]]``, times ``floats[row, spec[e, 1]]`` where that is
    not -1 (``floats``: the summed columns of ``records`` as float64). Where ``diffs`` has one column per
    change, the new term less the old goes to it.
    """
    width = terms.shape[0]
    few = diffs.shape[1] > 0
    size = records.shape[1]
    for c in range(len(pair)):
        p = pair[c]
        r = row[c]
        for b in range(size):  # a byte loop: ~3x faster than a slice assignment here
            table[p, b] = records[r, b]
        for e in range(width):
            new = floats[r, spec[e, 0]]
            if spec[e, 1] >= 0:
                new = new * floats[r, spec[e, 1]]
            if few:
                diffs[e, c] = new - terms[e, p]
            terms[e, p] = new
