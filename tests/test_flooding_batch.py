"""The batch receive path of LOCAL flooding (``netsim.comm.heard``) against a plain model, one copy at a time.

Random batches of delivered messages (single Messages and Multicast records with per-message due
times and ties, records from every origin within gamma hops and echoes of the receiver's own,
duplicates, reordered and stale sequence numbers) go through ``Flooding._process``. The model puts
the copies in delivery order (the stable sort by due time) and takes them one at a time through
``ReplayWindow``: it reports the accepted ones in delivery order, queues those with life left for
forwarding (a flush sends them sender by sender, delivery order within each) and keeps, per pair,
the first copy of the highest accepted seq; the running sums are those of that table. Batches with a
receiver of many messages (sorted by due time in runs, then merged) and with every pair changing (the
latest table then replaced in the same compiled call) are among them, and batches taken as large ones
are (``heard.LARGE_BATCH`` and ``heard.WHOLE_ROWS`` set to 0: the carried rows joined with their header
columns apart, numpy's sorts, the table changed in a call of its own).
"""

from __future__ import annotations

from unittest import mock

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm import heard
from netsim.comm.flooding import Flooding
from netsim.comm.sequencing import ReplayWindow
from netsim.engine.errors import ProtocolError
from netsim.engine.messages import Message, Multicast
from tests.test_dubey2020a_flooding import make_sim

VALUES = [("x", "f8", (2,)), ("w", "f8")]


def plain(row) -> tuple:
    """A record row as plain numbers (its subarray as a tuple)."""
    return tuple(tuple(v.tolist()) if isinstance(v, np.ndarray) else v for v in row.tolist())


def batch(rng, flood, ball, counter, size):
    """``size`` messages as a list of items; their copies in delivery order as (dst, record)."""
    items, messages = [], []  # messages: (due, position, dst, records)
    m = flood.num_agents
    for _ in range(size):
        dst = int(rng.integers(m))
        origins = rng.choice(ball[dst], size=int(rng.integers(1, 5)))
        rec = flood.records(origins, {"x": rng.random((len(origins), 2)), "w": rng.random(len(origins))})
        step = rng.integers(-3, 2, len(origins))  # mostly new, some reordered, some beyond the window
        step[rng.random(len(origins)) < 0.05] = -70
        rec["seq"] = np.maximum(counter[origins] + step, 0)
        counter[origins] += 1
        rec["life"] = rng.integers(0, 3, len(origins))
        rec["created"] = rng.random(len(origins))
        messages.append((float(rng.integers(4)) / 2, len(messages), dst, rec))
    # the first half as one Multicast (rows of a joined payload, due times sorted), the others one by one
    cut = len(messages) // 2
    listed = sorted(messages[:cut], key=lambda message: message[:2]) + messages[cut:]
    if cut:
        part = listed[:cut]
        payload = np.concatenate([r for *_, r in part])
        stop = np.cumsum([len(r) for *_, r in part])
        start = stop - [len(r) for *_, r in part]
        items.append(Multicast("flood", np.zeros(cut, np.int64), np.array([d for _, _, d, _ in part]), start, stop,
                               payload, 0.0, np.array([due for due, *_ in part])))
    for due, _, dst, rec in listed[cut:]:
        items.append(Message("flood", 0, dst, rec, 0.0, due, len(rec)))
    order = sorted(range(len(listed)), key=lambda i: (listed[i][0], i))  # delivery: stable by due, list order
    return items, [(listed[i][2], row) for i in order for row in listed[i][3]]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), report=st.booleans(), crowded=st.booleans(), large=st.booleans())
def test_batches_match_one_copy_at_a_time(seed, report, crowded, large):
    """``crowded``: up to 300 messages on 4 agents, so that a receiver has more messages than one run of
    the compiled loop's sort by due time (``kernels.RUN``) and they are merged; and every pair changes.
    ``large``: every batch taken as a large one."""
    bound = 0 if large else heard.LARGE_BATCH
    with mock.patch.object(heard, "LARGE_BATCH", bound), mock.patch.object(heard, "WHOLE_ROWS", bound):
        check_batches(seed, report, crowded)


def check_batches(seed, report, crowded):
    rng = np.random.default_rng(seed)
    sim = make_sim(agents=4 if crowded else 9, seed=seed, p=1.0 if crowded else 0.4)
    heard_copies = []
    flood = Flooding(sim, "flood", 2, VALUES, deferred=True, sums={"x": "x", "xw": ("x", "w")},
                     on_receive=(lambda dst, rec: heard_copies.extend(zip(dst.tolist(), map(plain, rec), strict=True)))
                     if report else None)
    m = flood.num_agents
    dist = dict(nx.all_pairs_shortest_path_length(sim.network.agent_graph))
    ball = [np.array([o for o in range(m) if dist[d].get(o, 99) <= 2]) for d in range(m)]
    counter = np.zeros(m, np.int64) + 80
    window, heard_model, queued_model, table = ReplayWindow(), [], [], {}
    for _ in range(6):
        items, copies = batch(rng, flood, ball, counter, int(rng.integers(1, 300 if crowded else 25)))
        flood._process(items)
        for dst, row in copies:
            if int(row["origin"]) != dst and window.accept(dst, int(row["origin"]), int(row["seq"])):
                heard_model.append((dst, plain(row)))
                if row["life"] >= 1:
                    queued_model.append((dst, plain(row)))
                if row["seq"] > table.get((dst, int(row["origin"])), (-1,))[0]:
                    table[dst, int(row["origin"])] = (int(row["seq"]), row)
    assert heard_copies == (heard_model if report else [])
    queued = [(s, r) for senders, rec in zip(flood._outbox_from, flood._outbox, strict=True)
              for s, r in zip(senders.tolist(), map(plain, rec), strict=True)]
    assert sorted(queued, key=lambda copy: copy[0]) == sorted(queued_model, key=lambda copy: copy[0])  # stable sorts
    assert flood.duplicates == flood.records_received - len(heard_model)
    seq, x, w = flood.latest_seq, flood.latest_values["x"], flood.latest_values["w"]
    expected = np.full((m, m), -1)
    for (dst, origin), (s, row) in table.items():
        expected[dst, origin] = s
        assert x[dst, origin].tolist() == row["x"].tolist() and w[dst, origin] == row["w"]
        assert flood.latest_created[dst, origin] == row["created"]
    assert np.array_equal(seq, expected)
    np.testing.assert_allclose(flood.sums["x"], x.sum(axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(flood.sums["xw"], (x * w[..., None]).sum(axis=1), rtol=1e-12, atol=1e-12)


def test_a_record_from_beyond_gamma_is_refused():
    sim = make_sim(topology="path", agents=4)
    flood = Flooding(sim, "flood", 1, VALUES)
    rec = flood.records([0], {"x": [[0.0, 0.0]], "w": [0.0]})
    with pytest.raises(ProtocolError, match="node 2 from beyond gamma = 1"):
        flood._process([Message("flood", 1, 2, rec, 0.0, 0.0, 1)])
