"""Centralized FedUCB under duplication, reordering and crashes (issue 15; rules in the module docstring)."""

import copy
import math

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from tests.test_feducb import BASE


def build(*, agents=4, horizon=200, communication="mt", epsilon=math.inf, server_delay=None, faults=None):
    doc = copy.deepcopy(BASE)
    doc["network"]["agents"] = agents
    if server_delay is not None:
        doc["network"]["server_delay"] = server_delay
    doc["protocol"].update({"communication": communication, "epsilon": epsilon})
    doc["run"]["horizon"] = horizon
    if faults is not None:
        doc["faults"] = faults
    return S.from_dict(doc)


def simulate(sc, seed=7, probes=()):
    sim = Simulation(sc, trial_sequence(seed, 0))
    seen = {}
    for t in probes:
        sim.call_at(t, lambda t=t: seen.__setitem__(t, sim.bandit.pulls.copy()))
    return sim, sim.run().row, seen


def check_books(sim, row):
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]
    assert sum(c.in_flight for c in sim.metrics.messages.values()) == sim.network.in_flight


# ---------------------------------------------------------------------- duplication and reordering
@pytest.mark.parametrize("epsilon", [math.inf, 1000.0])
def test_duplicates_change_nothing_in_paper_mode(epsilon):
    """Zero server delay: a copy arrives with its original and is dropped by its sequence number;
    every agent privatises exactly once per round (a duplicated call used to make it release a second
    time), so regret and rounds equal the duplicate-free run's."""
    for seed in (1, 2, 3):
        _, clean, _ = simulate(build(epsilon=epsilon), seed)
        sim, dup, _ = simulate(build(epsilon=epsilon, faults={"duplication": 0.2}), seed)
        assert dup["duplicated"] > 0
        assert (dup["group_regret"], dup["rounds"]) == (clean["group_regret"], clean["rounds"])
        assert sim.protocol.privatizer.rounds.tolist() == [dup["rounds"]] * 4
        check_books(sim, dup)


def test_duplicates_with_server_delays_match_within_tolerance():
    """Exponential server delays (mean 1 slot): a copy can overtake its original, which only makes
    a round end a little earlier. Paired over 12 seeds (common random numbers), the mean change of
    group regret is within 5 % of the duplicate-free mean. Measured: paired differences have a
    standard deviation of 0.4 (m1.5) to 1.6 (mt) against a regret of about 15-19, i.e. a standard
    error of 0.1-0.5 over 12 seeds, so a systematic change above ~1 (5 %) would show; the observed
    mean change is about -0.3 (duplicates act like a slightly shorter delay).

    Error rates (normal approximation of the mean of 12 paired differences, standard error at most 0.46):
    the tolerance is at least 3 standard errors, so with no effect the test fails with probability at
    most 0.003; an effect of 12 % of the regret (about 2.0) exceeds the tolerance (at most 1.4) by 1.3
    standard errors or more: power at least 0.90 (the -54 % of duplicates taken as news: power 1)."""
    delay = {"model": "exponential", "mean": 1.0}
    clean, dup = [], []
    for seed in range(12):
        clean.append(simulate(build(server_delay=delay), seed)[1]["group_regret"])
        sim, row, _ = simulate(build(server_delay=delay, faults={"duplication": 0.2}), seed)
        check_books(sim, row)
        dup.append(row["group_regret"])
        # one release per call answered: the uploads sent (copies excluded) equal the tree releases
        uploads = sim.metrics.messages["feducb-upload"]
        assert sim.protocol.privatizer.rounds.sum() <= uploads.sent
    clean, dup = np.array(clean), np.array(dup)
    # tolerance: 5 % of the mean, or three standard errors of the paired differences when the
    # pairing is looser than that (two-sided alpha ~ 0.003 under normality): with sampled delays a
    # copy that overtakes its original shifts every later message onto other delay draws
    diff = dup - clean
    tolerance = max(0.05 * clean.mean(), 3 * diff.std(ddof=1) / np.sqrt(len(diff)))
    assert abs(diff.mean()) <= tolerance


def test_late_syncs_never_overwrite_newer_ones():
    """Reordering with Exp(mean 20) hold-backs: an agent's last applied round never goes back, and
    its S is always the one of the round it applied. (Nothing is lost, so a round waits for every
    upload, held back or not, as Alg. 1 does: about one round per 40 slots here.)"""
    sc = build(horizon=400, server_delay={"model": "exponential", "mean": 0.5},
               faults={"reorder": 0.3, "reorder_delay": {"model": "exponential", "mean": 20.0}})
    sim = Simulation(sc, trial_sequence(7, 0))
    history = []
    sim.every(1.0, lambda now: history.append(sim.protocol.synced.copy()))
    row = sim.run().row
    assert row["reordered"] > 0 and row["rounds"] >= 5
    steps = np.diff(np.array(history), axis=0)
    assert (steps >= 0).all()
    check_books(sim, row)


# ---------------------------------------------------------------------- crashes
@pytest.mark.parametrize("state", ["kept", "lost"])
def test_agent_crash_and_restart(state):
    """Agent 1 is down during [50, 120): it plays no trial then (T - 70 pulls in all, none while
    down), the rounds go on without it (closed at the deadline), and after its restart it catches
    up: at the end every agent holds the same S."""
    start, end = 50.0, 120.0
    faults = {"crashes": [{"node": 1, "start": start, "end": end}], "state": state}
    sim, row, seen = simulate(build(faults=faults), probes=(start, end - 0.5))
    assert row["status"] == "ok"
    check_books(sim, row)
    assert seen[start][1] == seen[end - 0.5][1]
    assert sim.bandit.pulls.tolist() == [200, 200 - 70, 200, 200]
    assert row["rounds"] > 100
    S_ = sim.protocol.state.S
    for i in range(1, 4):
        np.testing.assert_array_equal(S_[i], S_[0])
    if state == "lost":
        assert sim.protocol.incarnation.tolist() == [0, 1, 0, 0]


def test_lost_agent_keeps_its_former_data_in_the_group_statistic():
    """Non-private, one round per trial: after agent 1 restarts without its state, the group's S
    still holds M lam I plus every x x^T ever observed (the controller keeps the data of its former
    incarnation), as in the crash-free identity S = M lam I + sum x x^T."""
    faults = {"crashes": [{"node": 1, "start": 50.0, "end": 60.0}], "state": "lost"}
    sc = build(faults=faults, horizon=100)
    sim = Simulation(sc, trial_sequence(7, 0))
    sim.protocol.start()
    xs = []
    state = sim.protocol.state
    original = state.update

    def record(x, y, rows=None):
        xs.append(x.copy())
        original(x, y, rows)

    state.update = record
    sim.protocol.start = lambda: None
    sim.run()
    X = np.concatenate(xs)
    np.testing.assert_allclose(state.S[0], 4 * np.eye(3) + X.T @ X, rtol=1e-10)


@pytest.mark.parametrize("state", ["kept", "lost"])
def test_server_crash_stalls_synchronisation_until_restart(state):
    """The controller (node 4) is down during [40, 90): no round completes then, every agent plays
    every trial, and synchronisation resumes after the restart."""
    faults = {"crashes": [{"node": 4, "start": 40.0, "end": 90.0}], "state": state}
    sc = build(faults=faults)
    sim = Simulation(sc, trial_sequence(7, 0))
    rounds = []
    sim.every(1.0, lambda now: rounds.append(sim.metrics.rounds))
    row = sim.run().row
    assert row["status"] == "ok"
    check_books(sim, row)
    assert (sim.bandit.pulls == 200).all()
    assert rounds[41] == rounds[89]  # nothing completes while the controller is down
    assert rounds[-1] > rounds[89] + 50  # mt: about one round per trial again
    assert row["dropped_crashed"] > 0


# ---------------------------------------------------------------------- paper mode's stacked round against the loop
def _outcome(sc, seed):
    """The run's row and the bytes of every learner's statistics and of the controller's last (S, s)."""
    sim = Simulation(sc, trial_sequence(seed, 0))
    row = sim.run().row
    state, sync = sim.protocol.state, sim.protocol.last_sync
    return row, [a.tobytes() for a in (state.S, state.s, state.inv, state.logdet, state.u_tilde, *sync[1:])]


@pytest.mark.parametrize("epsilon", [math.inf, 1000.0])
@pytest.mark.parametrize("how", [
    {},
    {"faults": {"duplication": 0.3}},
    {"server_delay": {"model": "exponential", "mean": 0.5}, "faults": {"duplication": 0.2, "reorder": 0.2}},
    {"server_delay": {"model": "exponential", "mean": 0.5},
     "faults": {"crashes": [{"node": 1, "start": 40, "end": 90}], "state": "lost"}},
])
def test_stacked_uploads_are_the_loop_over_uploads(monkeypatch, epsilon, how):
    """A round whose uploads arrive as one group from every agent, the very payloads of one call, is held and summed
    as the stacks they are rows of (CentralizedFedUCB._hold_stacked), and a run in which no agent restarted without its
    state books a round's uploads as the agents' latest at once; with both shortcuts switched off every upload goes
    through the loops (the plain reference). Same rows, per-agent and per-slot results, bit for bit, with and
    without privacy, in paper mode, with duplicated messages, and with server delays, reordering and a crash."""
    from protocols.feducb.centralized import CentralizedFedUCB

    sc = build(agents=5, horizon=150, epsilon=epsilon, **how)
    taken = []
    shortcut = CentralizedFedUCB._hold_stacked

    def counted(self, uploads):
        held = shortcut(self, uploads)
        taken.append(held)
        return held

    monkeypatch.setattr(CentralizedFedUCB, "_hold_stacked", counted)
    fast = _outcome(sc, 3)
    monkeypatch.setattr(CentralizedFedUCB, "_hold_stacked", lambda self, uploads: False)
    start = CentralizedFedUCB.start

    def restarted_somewhere(self):  # a tree of a restarted agent that is no agent: _close_round's loop, every round
        start(self)
        self.reborn[-1] = None

    monkeypatch.setattr(CentralizedFedUCB, "start", restarted_somewhere)
    plain = _outcome(sc, 3)
    assert fast == plain
    if not how:  # paper mode: every round takes the shortcut
        assert all(taken) and len(taken) == fast[0]["rounds"] > 100
