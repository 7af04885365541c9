"""The compiled loops of LOCAL flooding's receive path (``netsim.comm.kernels``) against plain models.

Joining a batch (``heard._messages``): every message's rows are the rows of its payload it carries; the
joined rows are, payload after payload in order of first appearance and in row order within each, the
rows some message carries, each once (``kernels.gather``), or every row of each payload (whole payloads
copied at once); the header columns are those of the joined rows. By default whole payloads are
joined where they hold no more rows than the messages carry copies.

The latest table's running sums (``kernels.replace``) against a table of terms summed by numpy: the
compiled pass reads each entry's terms from the table rows and adds them in the order of
``np.add.reduceat`` (a segment's first term plus numpy's pairwise sum of the rest), without a table of
terms. The plain model here keeps that table: one column per pair, written for every replaced entry,
and takes the sums as the former implementation did: ``np.add.reduceat`` of the new terms less the old
added per receiver when fewer than a quarter of the pairs change, else ``np.add.reduceat`` over every
receiver's ball. The sums must agree bit for bit (same additions in the same order), for balls of
fewer than 8 entries, 8 to 128 and more than 128 (the three cases of numpy's pairwise summation),
for summed columns the table holds as float64 (read in place) and as other types or at offsets that
are not a multiple of 8 (copied as float64 beside the table), rows copied as 8-byte words or bytes.
Values span twelve decades with some -0.0, so another order of additions would change some of the
last bits.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.flooding import Flooding
from netsim.comm.heard import WHOLE_ROWS, _messages
from netsim.engine.messages import Message, Multicast
from tests.test_dubey2020a_flooding import make_sim

#: (value columns, sums): float64 columns summed in place, and int32 / float32 ones copied as float64
CASES = {
    "float64": ([("x", "f8", (2,)), ("w", "f8")], {"x": "x", "xw": ("x", "w")}),
    "other types": ([("k", "i4"), ("y", "f4", (3,))], {"k": "k", "yk": ("y", "k")}),
    "rows of 36 bytes": ([("k", "i4"), ("z", "f8")], {"z": "z", "kz": ("k", "z")}),  # copied byte by byte
}


def values(rng, dtype, n):
    """``n`` rows of random values for the value columns of ``dtype`` (wide magnitudes, some -0.0)."""
    out = {}
    for name in dtype.names:
        base, shape = dtype.fields[name][0].base, dtype.fields[name][0].shape
        if base.kind == "i":
            out[name] = rng.integers(-1000, 1000, (n, *shape)).astype(base)
        else:
            x = rng.standard_normal((n, *shape)) * 10.0 ** rng.integers(-6, 7, (n, *shape))
            x[rng.random(x.shape) < 0.05] = -0.0
            out[name] = x.astype(base)
    return {name: v.reshape(n) if v.shape[1:] == (1,) else v for name, v in out.items()}


def terms(records, spec):
    """The terms of a sum for each record, float64, one row per element: (elements, records)."""
    first = records[spec[0]].astype(np.float64).reshape(len(records), -1)
    if len(spec) == 2:
        first = first * records[spec[1]].astype(np.float64).reshape(len(records), -1)
    return first.T.copy()


@pytest.mark.parametrize("case", list(CASES))
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_sums_equal_a_table_of_terms_summed_by_numpy(case, seed):
    rng = np.random.default_rng(seed)
    columns, sums = CASES[case]
    sim = make_sim(topology="barabasi_albert", agents=400, seed=1, m=1)  # a tree with hubs
    flood = Flooding(sim, "flood", 2, columns, deferred=True, sums=sums)
    ptr, origin = flood._ball_ptr, flood._ball_origin
    sizes = np.diff(ptr)
    assert (sizes[sizes > 0] < 8).any() and ((sizes >= 8) & (sizes <= 128)).any() and (sizes > 128).any()
    pairs = len(origin)
    receivers = np.flatnonzero(sizes)
    table = {name: np.zeros((terms(flood.records([0]), spec).shape[0], pairs)) for name, spec in flood.sum_spec.items()}
    expected = {name: np.zeros_like(total) for name, total in flood.sums.items()}
    value_dtype = np.dtype(columns)
    for share in rng.permutation([0.02, 0.1, 0.6, 1.0]):
        pair = np.sort(rng.choice(pairs, size=max(1, int(share * pairs)), replace=False))
        dst = np.searchsorted(ptr, pair, side="right") - 1
        placed = flood.records(origin[pair], values(rng, value_dtype, len(pair)))  # the record of each pair
        placed["seq"] = rng.integers(0, 100, len(pair))
        shuffle = rng.permutation(len(pair))
        base, rows = placed[shuffle], np.argsort(shuffle)    # the batch's rows in another order
        flood._update_latest(dst, pair, rows, base)
        assert placed.tobytes() == flood._table[pair].tobytes()  # entries replaced by the records, as received
        few = len(pair) * 4 < pairs
        runs = np.flatnonzero(np.append(True, dst[1:] != dst[:-1]))
        for name, spec in flood.sum_spec.items():
            new = terms(placed, spec)
            diffs = new - table[name][:, pair]
            table[name][:, pair] = new
            if few:
                part = np.add.reduceat(diffs, runs, axis=1).T
                expected[name][dst[runs]] += part.reshape((len(runs),) + expected[name].shape[1:])
            else:
                part = np.add.reduceat(table[name], ptr[receivers], axis=1).T
                expected[name][receivers] = part.reshape((len(receivers),) + expected[name].shape[1:])
            assert expected[name].tobytes() == flood.sums[name].tobytes(), (name, "few" if few else "all")


def space(rows, dtype):
    """Fresh arrays for ``_messages`` (as ``Receiving._joined`` gives), filled with garbage."""
    return (np.frombuffer(np.random.default_rng(0).bytes(rows * dtype.itemsize), dtype=dtype).copy(),
            np.full(rows, -7, np.int32), np.full(rows, -7, np.int64), np.full(rows, -7, np.int32))


@pytest.mark.parametrize("columns", [CASES["float64"][0], CASES["rows of 36 bytes"][0]])
@pytest.mark.parametrize("whole", [False, True, None])
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_joined_rows_are_the_rows_carried_each_once(columns, whole, seed):
    rng = np.random.default_rng(seed)
    sim = make_sim(agents=6, seed=1)
    flood = Flooding(sim, "flood", 2, columns, deferred=True)
    payloads = []
    for _ in range(int(rng.integers(1, 4))):
        n = int(rng.integers(0, 30))
        rec = flood.records(rng.integers(0, 6, n), values(rng, np.dtype(columns), n))
        rec["seq"] = rng.integers(0, 2**40, n)
        rec["life"] = rng.integers(0, 3, n)
        payloads.append(rec)
    items, carried = [], []  # carried: each message's (payload, rows) in list order
    for _ in range(int(rng.integers(1, 6))):
        p = int(rng.integers(len(payloads)))
        rec = payloads[p]
        if rng.random() < 0.3:  # a single Message: its whole payload
            items.append(Message("flood", 0, int(rng.integers(6)), rec, 0.0, float(rng.random()), len(rec)))
            carried.append((p, np.arange(len(rec))))
            continue
        k = int(rng.integers(1, 5))
        start = rng.integers(0, len(rec) + 1, k)
        stop = np.minimum(start + rng.integers(0, 8, k), len(rec))
        items.append(Multicast("flood", np.zeros(k, np.int64), rng.integers(0, 6, k), start, stop, rec, 0.0,
                               rng.random(k)))
        carried += [(p, np.arange(a, b)) for a, b in zip(start, stop, strict=True)]
    dst, first, end, due, base, origin, seq, life = _messages(items, space, whole)
    assert len(dst) == len(first) == len(end) == len(due) == len(carried)
    # the plain model: the carried (or all) rows of each payload, payloads in order of first appearance
    order = list(dict.fromkeys(p for p, _ in carried))
    if whole is None:
        whole = sum(len(payloads[p]) for p in order) <= min(sum(len(rows) for _, rows in carried), WHOLE_ROWS)
    joined = [(p, r) for p in order for r in (range(len(payloads[p])) if whole else
                                              sorted({int(r) for q, rows in carried if q == p for r in rows}))]
    assert base.tobytes() == b"".join(payloads[p][r].tobytes() for p, r in joined)
    for (p, rows), a, b in zip(carried, first, end, strict=True):
        assert b - a == len(rows)
        if len(rows):
            assert base[a:b].tobytes() == payloads[p][rows].tobytes()
    assert origin.tolist() == base["origin"].tolist() and seq.tolist() == base["seq"].tolist()
    assert life.tolist() == base["life"].tolist()
