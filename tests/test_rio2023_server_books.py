"""Issue 15, server crashes of the rio2023 voting protocols: besides stalling the votes (tests/test_rio2023_faults.py),
the trial ends ok with every message accounted for (sent = delivered + dropped + in flight), and the agents'
pull counts keep growing while only the coordinator is down."""

from __future__ import annotations

import pytest

from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from tests.test_rio2023_faults import load

# An easy instance (3 arms, means 0.9, 0.4, 0.1; 2,600-8,000 rounds), the coordinator down while votes are sent
EASY = ["bandit.arms=3", "bandit.means=[0.9, 0.4, 0.1]"]
WINDOWS = {"mase": (800, 2000), "corrupted-elimination": (800, 2000), "feraud2019": (800, 2000),
           "dp-mase": (6000, 7900)}


@pytest.mark.parametrize("state", ["kept", "lost"])
@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_coordinator_crash_books_balance(name, state):
    down, up = WINDOWS[name]
    sc = load(name, "protocol.simulation='rounds'", *EASY, f"faults.crashes=[{{node=16, start={down}, end={up}}}]",
              f"faults.state='{state}'")
    sim = Simulation(sc, trial_sequence(1, 0))
    pulls = {}
    for when in (down + 0.5, up - 0.5):
        sim.call_at(when, lambda when=when: pulls.__setitem__(when, sim.bandit.pulls.sum()))
    row = sim.run().row
    assert row["status"] == "ok" and row["correct"] == 1
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]
    assert row["dropped_crashed"] > 0
    assert pulls[up - 0.5] > pulls[down + 0.5]  # the agents went on sampling
