"""rio2023 on realistic timelines (issue 24): votes, eliminations and rejoins on netsim.comm.transport (a
vote the network drops is late, not lost), the adversary on votes, and the keys these protocols refuse."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from benchmarks import reliability
from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

# the reliability table's base instances (N = 16); N = 40 where M = 18 or 29 would exceed 16 voters
VOTING = {"mase": [], "dp-mase": [], "corrupted-elimination": ["network.agents=40"],
          "feraud2019": ["network.agents=40"]}
SILENT = ("central-se", "independent-se")


def load(name: str, *extra: str) -> S.Scenario:
    return reliability._load(name, [*VOTING.get(name, []), *extra])


def run(sc, trial=0, seed=11):
    sim = Simulation(sc, trial_sequence(seed, trial), trial=trial)
    return sim, sim.run().row


def test_votes_dropped_by_the_network_are_late_not_lost():
    """The deadlock instance of tests/test_rio2023_exactness.py (CE, eta = 0.9, xi = 0.1, N = 16, K = 10,
    M = 11: a run deadlocks unless every suboptimal arm gets more than 11 of its 16 votes, each kept with
    probability 1 - xi; theory 0.143) with loss 0.3 on every message. Votes are retransmitted until
    acknowledged, so only xi removes votes and the deadlock rate stays at theory: over 100 runs it must lie
    in [0.04, 0.25] (P = 0.002 under Bin(100, 0.143)). A vote lost with its message (the former datagrams)
    survives with probability 0.63: P(Bin(16, 0.63) <= 11) = 0.73, a deadlock rate of 1 - 0.27^9 = 1.000,
    outside the interval with certainty. No vote is ever given up."""
    runs, theory = 100, 1 - (1 - stats.binom.cdf(11, 16, 0.9)) ** 9
    low, high = 4, 25
    assert stats.binom.cdf(low - 1, runs, theory) + stats.binom.sf(high, runs, theory) < 0.003
    sc = S.load("rio2023-fig1-right-xi0.1", ["network.agents=16", "network.loss=0.3"])
    deadlocks, abandoned, retransmitted = 0, 0, 0
    for trial in range(runs):
        sim, row = run(sc, trial)
        deadlocks += row["deadlock"]
        abandoned += sim.protocol.vote_link.counts["abandoned"]
        retransmitted += sim.protocol.vote_link.counts["retransmitted"]
    assert low <= deadlocks <= high and abandoned == 0 and retransmitted > 0
    assert math.isclose(theory, 0.143, abs_tol=5e-4)


def test_without_loss_votes_are_plain_datagrams():
    """Paper mode (and delays, duplication, reordering): exactly the algorithm's messages, no acknowledgement."""
    sim, row = run(load("dp-mase"))
    assert row["sent_vote"] == row["votes_sent"] > 0 and not any(k.endswith("-ack") for k in sim.metrics.messages)


@pytest.mark.parametrize("name", sorted(VOTING))
def test_byzantine_votes_change_the_run(name):
    """byzantine 0.3, corruption 1: every vote of a liar reads Q = Bernoulli(0), i.e. withheld; votes are
    corrupted and the run differs from the clean one on the same seed."""
    _, clean = run(load(name))
    _, lied = run(load(name, "adversary.byzantine=0.3", "adversary.corruption=1"))
    assert clean["messages_corrupted"] == 0 < lied["messages_corrupted"]
    assert lied["sample_complexity"] != clean["sample_complexity"]


def test_a_vote_worth_many_voters_eliminates_at_once():
    """Q = constant 30 > M: the first vote a liar sends removes its arm from K by itself (the coordinator adds
    what it reads to lambda_k): with 5 liars of 16 the run ends sooner than the clean one (DP-MASE, M = 5)."""
    _, clean = run(load("dp-mase"))
    _, lied = run(load("dp-mase", "adversary.byzantine=0.3", "adversary.corruption=1",
                       "adversary.distribution={model='constant', value=30}"))
    assert lied["messages_corrupted"] > 0 and lied["sample_complexity"] < clean["sample_complexity"]


@pytest.mark.parametrize("name", SILENT)
def test_baselines_send_nothing_an_adversary_could_corrupt(name):
    with pytest.raises(InputError) as info:
        load(name, "adversary.byzantine=0.3", "adversary.corruption=1")
    assert info.value.key == "adversary.byzantine"


@pytest.mark.parametrize("name", [*sorted(VOTING), *SILENT])
@pytest.mark.parametrize("key, value", [("clock.jitter", "0.2"), ("clock.period", "2.0")])
def test_clock_keys_are_refused(name, key, value):
    """Rounds are the time unit and one agent per round is drawn from P_N: no agent clock to jitter."""
    with pytest.raises(InputError) as info:
        load(name, f"{key}={value}")
    assert info.value.key == key


def test_timer_keys_are_checked():
    with pytest.raises(InputError) as info:
        S.load("rio2023-fig1-right-xi0.05", ["protocol.rto_max=2.0"])
    assert info.value.key == "protocol.rto_max"
    assert np.isfinite(S.load("rio2023-fig1-right-xi0.05", ["protocol.give_up=3"]).protocol["give_up"])
