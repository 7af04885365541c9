"""FedUCB on realistic timelines (issue 24): synchronisation on netsim.comm.transport (RFC 6298 timers, no
fixed deadline), failure suspicion, the adversary on uploads, syncs and replies, per-agent jittered
clocks, and the blocked context draw of the one-clock step against its plain reference."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from protocols.feducb.linucb import LinUCBState
from tests.test_feducb import BASE
from tests.test_feducb_p2p import BASE as P2P

DELAY = {"model": "exponential", "mean": 1.0}


def central(*, agents=4, horizon=200, loss=0.0, faults=None, adversary=None, clock=None, **protocol):
    doc = copy.deepcopy(BASE)
    doc["network"].update({"agents": agents, "loss": loss, "server_delay": DELAY})
    doc["protocol"].update(protocol)
    doc["run"]["horizon"] = horizon
    for key, value in (("faults", faults), ("adversary", adversary), ("clock", clock)):
        if value is not None:
            doc[key] = value
    return S.from_dict(doc)


def run(sc, seed=5):
    sim = Simulation(sc, trial_sequence(seed, 0))
    return sim, sim.run().row


def balanced(row):
    return row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]


# ---------------------------------------------------------------------- transport
@pytest.mark.parametrize("seed", [1, 2])
def test_under_loss_every_round_waits_for_every_upload(seed):
    """Loss 0.3 on exponential server delays (mean 1 slot), nobody crashes: requests, calls, uploads and
    syncs are retransmitted until they get through, so every round closes with all M uploads and no
    message is given up. (The former fixed 20-slot deadline closed rounds without the uploads lost on the
    way, and a lost request or sync was only asked for again 20 slots later.)"""
    sim = Simulation(central(loss=0.3), trial_sequence(seed, 0))
    closed = []
    close = sim.protocol._close_round

    def spy():
        closed.append(len(sim.protocol.uploads))
        close()

    sim.protocol.start()
    sim.protocol._close_round = spy
    sim.protocol.start = lambda: None
    row = sim.run().row
    assert len(closed) >= 5 and closed == [4] * len(closed)
    links = sim.protocol.links
    assert sum(link.counts["retransmitted"] for link in links) > 0
    assert sum(link.counts["abandoned"] for link in links) == 0 and not sim.protocol.suspected.any()
    assert row["sent_feducb-upload-ack"] > 0 and "sent_feducb-call-ack" not in row  # the upload answers the call
    assert balanced(row)


def test_no_loss_means_plain_datagrams():
    """Delays without loss, outage or crash lose nothing: the four kinds go as plain datagrams (no
    acknowledgement kinds), exactly the messages of Alg. 1."""
    sim, row = run(central())
    assert not any(kind.endswith("-ack") for kind in sim.metrics.messages)
    rounds = row["rounds"]  # closed; the last one may still be open at the end
    assert 4 * rounds <= row["sent_feducb-upload"] <= 4 * (rounds + 1) and row["sent_feducb-sync"] >= 4 * rounds


def test_an_agent_that_never_comes_back_is_suspected_and_rounds_go_on():
    """Agent 2 crashes at t = 40 for good (mt: a round per trial when all answer). Its call is given up
    after ``give_up`` transmissions, it is suspected, and later rounds still call it but no longer wait
    for it: rounds keep closing after the crash (the controller has no other way to know it is gone)."""
    faults = {"crashes": [{"node": 2, "start": 40.0}]}
    sim = Simulation(central(faults=faults), trial_sequence(3, 0))
    rounds = []
    sim.every(1.0, lambda now: rounds.append(sim.metrics.rounds))
    row = sim.run().row
    assert row["status"] == "ok" and balanced(row)
    assert sim.protocol.suspected.tolist() == [False, False, True, False]
    assert sim.protocol.calls.counts["abandoned"] == 1  # later calls to it are cancelled when their round closes
    assert rounds[-1] - rounds[60] >= 12  # about one every 8 slots (the 20-slot deadline allowed 7 at most)
    assert sim.bandit.pulls[2] == 40


def test_timer_keys_are_checked():
    with pytest.raises(InputError) as info:
        central(rto_min=5.0, rto_initial=3.0)
    assert info.value.key == "protocol.rto_min"


# ---------------------------------------------------------------------- adversary
ADVERSARY = {"byzantine": 0.3, "corruption": 1.0}


def p2p(**sections):
    doc = copy.deepcopy(P2P)
    doc["run"]["horizon"] = 40
    doc.update(sections)
    return S.from_dict(doc)


@pytest.mark.parametrize("build", [lambda **kw: central(horizon=80, **kw), p2p], ids=["feducb", "feducb-p2p"])
def test_byzantine_agents_corrupt_the_statistics(build):
    """byzantine 0.3, corruption 1 (Q = Bernoulli(0): every value of a liar's uploads or replies reads 0):
    messages are corrupted and the run differs from the clean one on the same seed."""
    _, clean = run(build())
    sim, lied = run(build(adversary=ADVERSARY))
    assert clean["messages_corrupted"] == 0 < lied["messages_corrupted"]
    assert lied["group_regret"] != clean["group_regret"]


def test_a_corrupted_gram_matrix_stays_symmetric():
    """A link that corrupts every sync with Q = N(0, 1): each agent's S after a sync is symmetric and
    differs from the honest controller's sum."""
    sim, row = run(central(horizon=20, adversary={"link_corruption": 1.0,
                                                 "distribution": {"model": "normal", "mean": 0.0, "sigma": 1.0}}))
    assert row["messages_corrupted"] > 0
    S_ = sim.protocol.state.S
    assert np.array_equal(S_, np.swapaxes(S_, 1, 2))
    assert not np.allclose(S_[0], sim.protocol.last_sync[1])


# ---------------------------------------------------------------------- clocks
def test_jitter_gives_every_agent_its_own_clock():
    """clock.jitter = 0.5: every agent plays T trials at its own jittered instants (one context draw
    per agent and tick), which changes the run; feducb-p2p refuses jitter with one line."""
    sim, row = run(central(horizon=60, clock={"jitter": 0.5}))
    _, plain = run(central(horizon=60))
    assert sim.bandit.pulls.tolist() == [60] * 4
    assert row["group_regret"] != plain["group_regret"]
    with pytest.raises(InputError) as info:
        p2p(clock={"jitter": 0.5})
    assert info.value.key == "clock.jitter"


def test_p2p_refuses_a_server_delay():
    """feducb-p2p has no server node: a server delay would change nothing, so it is refused with one line."""
    with pytest.raises(InputError) as info:
        p2p(network={**P2P["network"], "server_delay": {"model": "constant", "value": 2.0}})
    assert info.value.key == "network.server_delay"


# ---------------------------------------------------------------------- the one-clock step
def test_choosing_by_blocks_is_choosing_at_once():
    """LinUCBState.choose on slices of learners gives the choice of one call on all of them, bit for bit."""
    rng = np.random.default_rng(2)
    state = LinUCBState(12, 5, s0=3.0, shift_w=1.0)
    for _ in range(20):
        x = rng.normal(size=(12, 5))
        state.update(x / np.linalg.norm(x, axis=1, keepdims=True), rng.random(12))
    contexts, beta = rng.normal(size=(12, 30, 5)), rng.random(12) * 3
    whole = state.choose(contexts, beta)
    parts = [state.choose(contexts[a:a + 5], beta[a:a + 5], slice(a, a + 5)) for a in range(0, 12, 5)]
    assert np.array_equal(np.concatenate(parts), whole)
    assert math.isfinite(float(beta.sum()))
