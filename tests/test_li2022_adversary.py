"""li2022 under an [adversary] (issue 24): what is corrupted, who uses a corrupted copy, and the
cohorts of DDP-MAB agents that end up disagreeing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netsim.comm.corruption import Lie
from netsim.comm.handshake import bits, ids
from netsim.engine import scenario as S
from netsim.engine.distributions import Distribution
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from netsim.experiment.testing import MessageSpy
from protocols.li2022.epochs import pooled_mean
from protocols.li2022.gis import Flood
from protocols.li2022.sac import SinkTree
from protocols.li2022.uploads import lie_about_record
from tests.test_li2022_transport import build

LIARS = {"adversary.byzantine": 0.3, "adversary.corruption": 1.0}
Q = Distribution("constant", {"value": 9.0})


def run(sc: S.Scenario) -> tuple[Simulation, dict]:
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0))
    return sim, sim.run().row


@pytest.mark.parametrize("protocol, sets", [
    ("cdp-mab", {}),
    ("ddp-mab", {}),
    ("hdp-mab", {}),
    ("hdp-mab", {"protocol.sac_routing": "tree"}),
])
def test_byzantine_agents_corrupt_and_change_the_run(protocol, sets):
    """byzantine = 0.3, corruption = 1 on the reliability bases: messages are corrupted (0 before issue 24)
    and the run differs from the clean one; every agent still pulls exactly once per slot."""
    clean_sim, clean = run(build(protocol, **sets))
    sim, row = run(build(protocol, **sets, **LIARS))
    assert clean["messages_corrupted"] == 0 and row["messages_corrupted"] > 0
    assert row["group_regret"] != clean["group_regret"]
    assert [h[2].tolist() for h in sim.protocol.history] != [h[2].tolist() for h in clean_sim.protocol.history]
    assert (sim.bandit.pulls == sim.horizon).all()
    kinds = {m for m, c in sim.metrics.messages.items() if c.corrupted}
    assert kinds <= set(sim.protocol.corruptible)


def test_a_receiver_of_a_corrupted_record_uses_it_and_the_others_the_clean_one():
    """DDP-MAB on a ring of 8, byzantine agents 0 and 4 (corruption 0.5, they also lie about records they
    relay) and corrupting links (0.05). Reference model from the messages themselves: agent i's copy of
    record j is the values of the first DATA that brought j to i (its sender's copy, the table's row
    when the DATA carries none). At the end of round 1 every agent's copies are exactly those, some
    agents hold corrupted copies and others clean ones of the same record, and each agent's aggregate
    is the pooled mean of its own copies."""
    sc = S.load("li2022-fig10-ring").with_(**{
        "network.agents": 8, "bandit.arms": 4, "run.horizon": 3000, "run.checkpoints": 2,
        "adversary.agents": [0, 4], "adversary.corruption": 0.5, "adversary.relay": True,
        "adversary.link_corruption": 0.05})
    sim = Simulation(sc, trial_sequence(1, 0))
    spy = MessageSpy(kinds=["gis-data"])
    spy.attach(sim)
    proto = sim.protocol
    seen: dict = {}
    synchronised = proto._synchronised

    def record():
        if not seen:  # round 1
            flood = proto.flood
            common = flood.common()
            seen["views"] = {i: flood.view(i, common) for i in range(8)}
            seen["common"], seen["table"] = common, flood.table.copy()
        synchronised()

    proto._synchronised = record
    sim.run()
    first: dict[tuple[int, int], np.ndarray] = {}
    for event in spy.events:
        if event.event != "deliver" or event.message.payload[0] != 1:  # round 1 (handshake tag 1)
            continue
        message = event.message
        _, keys, _, values = message.payload
        for row, key in enumerate(ids(keys).tolist()):
            if (message.dst, key) not in first:
                first[(message.dst, key)] = seen["table"][key] if values is None else np.asarray(values[0][row])
    table, common = seen["table"], seen["common"]
    assert len(common) == 8
    forged = clean = 0
    for i in range(8):
        means, _ = seen["views"][i]
        for row, key in enumerate(common.tolist()):
            expected = table[key] if key == i else first[(i, key)]
            np.testing.assert_array_equal(means[row], expected)
            if key != i:
                forged += not np.array_equal(expected, table[key])
                clean += np.array_equal(expected, table[key])
    assert forged > 0 and clean > 0
    sets, aggregates = proto.history[0][1], proto.history[0][2]
    assert sets.ndim == 2  # precondition (seed 1): the agents disagree after round 1, one aggregate each
    for i in range(8):
        means, counts = seen["views"][i]
        np.testing.assert_allclose(aggregates[i], pooled_mean(means, counts), rtol=0, atol=1e-12)


def test_disagreeing_agents_form_cohorts_that_pull_once_per_slot():
    """DDP-MAB on a ring of 20 with byzantine agents: agents that aggregate different copies end with
    different active sets (several cohorts); each cohort explores its own arms, the rounds wait for the
    slowest, and every agent pulls exactly once per slot until T (no slot skipped or pulled twice)."""
    sc = S.load("li2022-fig10-ring").with_(**{"network.agents": 20, "bandit.arms": 10, "run.horizon": 20000,
                                              "run.checkpoints": 10, "adversary.byzantine": 0.3,
                                              "adversary.corruption": 0.3})
    sim, row = run(sc)
    proto = sim.protocol
    assert len(proto.cohorts) > 1
    members = np.concatenate([c.members(20) for c in proto.cohorts])
    assert sorted(members.tolist()) == list(range(20))  # a partition of the agents
    assert (sim.bandit.pulls == sim.horizon).all()
    assert any(h[1].ndim == 2 for h in proto.history)
    finals = [c.final_arm for c in proto.cohorts]
    assert row["identified_arm"] in finals and 0.0 <= row["correct"] <= 1.0
    sizes = {arm: sum(len(c.members(20)) for c in proto.cohorts if c.final_arm == arm) for arm in set(finals)}
    assert sizes[row["identified_arm"]] == max(sizes.values())  # the arm most agents pull
    assert row["correct"] == pytest.approx(sizes.get(sim.bandit.best_arm, 0) / 20)
    assert not math.isnan(row["active_arms"])


def test_a_byzantine_sender_lies_about_its_own_record_unless_relaying():
    """The rules of the three corruptible payloads: a byzantine sender (relay false) replaces values of its
    own record only; a corrupting link (relay true) any record's; counts are never touched."""
    table = np.arange(12.0).reshape(3, 4)
    counts = np.array([5, 6, 7])

    class FakeFlood:
        def view(self, node, keys):
            return table[keys].copy(), counts[keys].copy()

    def lie(sender, relay):
        return Lie(rng=np.random.default_rng(0), probability=1.0, q=Q, sender=sender, relay=relay)

    payload = (1, bits([0, 2]), 3, None)
    _, keys, answers, (means, kept) = Flood.rewrite_data(FakeFlood(), payload, lie(2, False))
    assert keys == bits([0, 2]) and answers == 3 and kept.tolist() == [5, 7]
    assert means[0].tolist() == table[0].tolist() and means[1].tolist() == [9.0] * 4
    assert Flood.rewrite_data(FakeFlood(), (1, bits([0, 1]), 3, None), lie(2, False)) == (1, bits([0, 1]), 3, None)
    _, _, _, (means, _) = Flood.rewrite_data(FakeFlood(), payload, lie(2, True))
    assert (means == 9.0).all()
    hop = (1, (0, 2), table[[0, 2]])
    _, _, values = SinkTree.rewrite_hop(hop, lie(0, False))
    assert values[0].tolist() == [9.0] * 4 and values[1].tolist() == table[2].tolist()
    upload = (4, 0, (table[1], 12))
    new, hits = lie_about_record(upload, sender=1, rng=np.random.default_rng(0), probability=1.0, q=Q, relay=False)
    assert hits == 4 and new[2][0].tolist() == [9.0] * 4 and new[2][1] == 12 and new[:2] == (4, 0)
    empty = (4, 0, (None, 0, 0))
    assert lie_about_record(empty, sender=1, rng=np.random.default_rng(0), probability=1.0, q=Q, relay=False) == (
        empty, 0)
