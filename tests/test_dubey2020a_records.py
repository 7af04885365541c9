"""dubey2020a records (issue 24, items 3-4): which count goes with a released mean
(``protocol.record_counts``), arms absent until their first release, and the adversary on the
private protocol's records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netsim.comm.flooding import Flooding
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation, run_trial
from netsim.engine.streams import trial_sequence
from protocols.dubey2020a import dp_ucb_int, trials
from tests.test_dubey2020a import scenario

K = 5


def expected_counts(pulls: np.ndarray, f: int, mode: str) -> np.ndarray:
    """Independent of the code: releases happen at counts f, 2f, ... (DP-UCB-INT's interval), so the
    count at the last release is f floor(n / f); an arm with n < f has never been released."""
    at_release = f * np.floor(pulls / f)
    return at_release if mode == "released" else np.where(pulls >= f, pulls, 0.0)


def pull_log(sim: Simulation) -> np.ndarray:
    """Counts of the pulls made so far, kept by a spy on the bandit (not by the protocol)."""
    pulls = np.zeros((sim.num_agents, sim.bandit.num_arms))
    original = sim.bandit.pull_many

    def spy(agents, arms):
        np.add.at(pulls, (np.asarray(agents), np.asarray(arms)), 1)
        return original(agents, arms)

    sim.bandit.pull_many = spy
    return pulls


@pytest.mark.parametrize("mode", ["current", "released"])
def test_each_record_pairs_a_released_mean_with_the_chosen_count(mode, monkeypatch):
    sc = scenario({"name": "dubey2020a-private", "epsilon": 0.25, "gamma": 2, "record_counts": mode},
                  agents=6, topology="ring", horizon=60)
    sim = Simulation(sc, trial_sequence(3, 0))
    pulls = pull_log(sim)
    seen = []
    original = Flooding.publish

    def publish(self, agents, values):
        seen.append((pulls[agents].copy(), np.array(values["count"]), np.array(values["mean"])))
        return original(self, agents, values)

    monkeypatch.setattr(Flooding, "publish", publish)
    sim.run()
    assert len(seen) == 60
    for n, count, mean in seen:
        assert np.array_equal(count, expected_counts(n, 4, mode))  # f = ceil(1 / 0.25) = 4
        assert np.all(mean[n < 4] == 0)  # no release yet: the initial 0, carried with count 0
    # both kinds of arm occur: before and after a first release, and (released) between releases
    counts = np.concatenate([c for _, c, _ in seen])
    pulled = np.concatenate([n for n, _, _ in seen])
    assert np.any(pulled[counts == 0] > 0)
    if mode == "released":
        assert np.any(counts[(counts > 0)] < pulled[counts > 0])


@pytest.mark.parametrize("mode", ["current", "released"])
def test_dp_ucb_int_index_uses_the_chosen_count(mode, monkeypatch):
    sc = scenario({"name": "dp-ucb-int", "epsilon": 0.25, "record_counts": mode}, agents=4, horizon=80)
    sim = Simulation(sc, trial_sequence(5, 0))
    pulls = pull_log(sim)
    given = []
    original = dp_ucb_int.ucb_choice

    def choice(means, counts, t, round_robin):
        if t > round_robin:
            given.append((pulls.copy(), np.array(counts)))
        return original(means, counts, t, round_robin)

    monkeypatch.setattr(dp_ucb_int, "ucb_choice", choice)
    sim.run()
    assert len(given) == 80 - K * 4
    for n, counts in given:
        assert np.array_equal(counts, expected_counts(n, 4, mode))
    if mode == "released":
        assert any(np.any(c != n) for n, c in given)


def test_absent_arms_leave_paper_mode_at_gamma_one_unchanged_and_change_gamma_two(monkeypatch):
    """At gamma = 1 the first UCB trial (t = K f + 1) reads records of trial K f, where every arm has
    just been released: Eq. 6 with its literal zero means gives the same run. At gamma = 2 a
    record of trial K f - 1 (arm 0 one pull short of its release) is read too: the runs differ."""
    def regrets(gamma: int, literal: bool) -> list[float]:
        if literal:  # Eq. 6 without the absence rule: the current count of every arm, released or not
            monkeypatch.setattr(trials, "paired_counts", lambda proto, agents=slice(None): proto.counts[agents])
            monkeypatch.setattr("protocols.dubey2020a.private.paired_counts",
                                lambda proto, agents=slice(None): proto.counts[agents])
        else:
            monkeypatch.undo()
        sc = scenario({"name": "dubey2020a-private", "epsilon": 0.5, "gamma": gamma}, agents=8, topology="ring",
                      horizon=80)
        return [run_trial(sc, trial_sequence(11, i), i).row["group_regret"] for i in range(2)]

    assert regrets(1, literal=True) == regrets(1, literal=False)
    assert regrets(2, literal=True) != regrets(2, literal=False)


@pytest.mark.parametrize("name", ["dubey2020a-private", "dp-ucb-int"])
def test_released_counts_refused_without_privacy(name):
    with pytest.raises(InputError) as info:
        scenario({"name": name, "epsilon": math.inf, "record_counts": "released"}, agents=4)
    assert info.value.key == "protocol.record_counts"
    with pytest.raises(InputError) as info:
        scenario({"name": name, "record_counts": "stale"}, agents=4)
    assert info.value.key == "protocol.record_counts"


# ---------------------------------------------------------------------- adversary on the private protocol
def test_private_records_are_corrupted_and_counted():
    protocol = {"name": "dubey2020a-private", "epsilon": 0.5, "gamma": 1}
    clean = scenario(protocol, agents=6, topology="ring", horizon=60)
    liars = scenario(protocol, agents=6, topology="ring", horizon=60,
                     adversary={"agents": [0], "corruption": 1.0, "distribution": {"model": "constant", "value": 0.25}})
    a = run_trial(clean, trial_sequence(1, 0), 0).row
    sim = Simulation(liars, trial_sequence(1, 0))
    b = sim.run().row
    # agent 0 lies about every value of its own record, once per trial, to its 2 ring neighbours
    assert a["messages_corrupted"] == 0 and b["messages_corrupted"] == 2 * 60
    assert b["group_regret"] != a["group_regret"]
    table = sim.protocol.flood.latest_values
    assert np.all(table["mean"][1, 0] == 0.25) and np.all(table["count"][1, 0] == 0.25)
    assert not np.any(table["count"][1, 2] == 0.25)  # an honest neighbour's record is untouched


def test_relay_needs_a_relaying_life_and_changes_the_run():
    adversary = {"agents": [0], "corruption": 1.0, "relay": True, "distribution": {"model": "constant", "value": 0.25}}
    with pytest.raises(InputError) as info:
        scenario({"name": "dubey2020a-private", "epsilon": 0.5, "gamma": 1}, agents=6, topology="ring",
                 adversary=adversary)
    assert info.value.key == "adversary.relay"
    protocol = {"name": "dubey2020a-private", "epsilon": 0.5, "gamma": 2}
    relayed = scenario(protocol, agents=6, topology="ring", horizon=60, adversary=adversary)
    source = scenario(protocol, agents=6, topology="ring", horizon=60, adversary={**adversary, "relay": False})
    sim = Simulation(relayed, trial_sequence(1, 0))
    sim.run()
    # with relay, agent 0 also rewrites the records of agent 1 it forwards to agent 5 (two hops away)
    assert np.all(sim.protocol.flood.latest_values["count"][5, 1] == 0.25)
    assert run_trial(source, trial_sequence(1, 0), 0).row != run_trial(relayed, trial_sequence(1, 0), 0).row
