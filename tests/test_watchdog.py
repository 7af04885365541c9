"""The watchdog: a trial without progress is ended and recorded as failed, the others complete."""

from __future__ import annotations

import pandas as pd
import pytest

from netsim.comm.protocol import Protocol
from netsim.engine import params as P
from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.registry import protocols
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from netsim.experiment.results import write_results
from netsim.experiment.runner import run_scenario
from tests.conftest import scenario_dict


class Stuck(Protocol):
    """Test protocol: pulls every tick until ``stuck_at``, then (on odd trials only, if asked) stops
    pulling and sending while its clock keeps ticking, or spins in zero simulated time."""

    name = "test-stuck"
    servers = None
    fields = {
        "stuck_at": P.real(5.0, low=0.0),
        "odd_only": P.boolean(False),
        "how": P.choice(("silent", "spin"), "silent"),
    }

    def start(self):
        sim = self.sim
        self.stuck = not self.params["odd_only"] or sim.trial % 2 == 1
        sim.every(1.0, self.tick)

    def tick(self, now):
        if self.stuck and now >= self.params["stuck_at"]:
            if self.params["how"] == "spin":
                self.spin()
            return
        self.sim.bandit.pull(0, 0)

    def spin(self):  # an event loop that never lets simulated time advance
        self.sim.call_at(self.sim.now, self.spin)


protocols._items.setdefault(Stuck.name, Stuck)


def stuck(run=None, **protocol):
    return S.from_dict(scenario_dict(protocol={"name": Stuck.name, **protocol},
                                     run={"horizon": 1000, "checkpoints": 4, "seed": 2, **(run or {})}))


def test_watchdog_ends_a_silent_trial_as_failed():
    sim = Simulation(stuck({"watchdog": 10}), trial_sequence(2, 0))
    row = sim.run().row
    assert row["status"] == "failed"
    assert row["failure"].startswith("watchdog: no pull and no delivery for 10 time units")
    # last pull at 4; checks at 0, 10, 20: the one at 10 sees progress, the one at 20 none
    assert row["end_time"] == 20.0
    assert sim.bandit.pulls[0] == 5


def test_watchdog_off_by_default_and_quiet_when_progressing():
    row = Simulation(stuck(), trial_sequence(2, 0)).run().row
    assert row["status"] == "ok" and row["failure"] == "none" and row["end_time"] == 1000.0
    row = Simulation(stuck({"watchdog": 3}, stuck_at=2000.0), trial_sequence(2, 0)).run().row
    assert row["status"] == "ok" and row["end_time"] == 1000.0


def test_wall_budget_ends_a_zero_time_loop():
    # The protocol spins forever at t = 5 without advancing simulated time, so the budget is
    # always exceeded, however fast the machine: the test checks the recorded reason, not a time.
    row = Simulation(stuck({"wall_budget": 0.3}, how="spin"), trial_sequence(2, 0)).run().row
    reason = "budget of 0.3 s exceeded (t = 5)"
    assert row["status"] == "failed"
    assert reason in row["failure"]


def test_runner_keeps_the_other_trials(tmp_path):
    sc = stuck({"watchdog": 10, "trials": 4}, odd_only=True)
    results = run_scenario(sc, executor="serial", progress=False)
    write_results(tmp_path, sc, results)
    table = pd.read_csv(tmp_path / "trials.csv")
    assert list(table["trial"]) == [0, 1, 2, 3]
    assert list(table["status"]) == ["ok", "failed", "ok", "failed"]
    assert list(table["end_time"]) == [1000.0, 20.0, 1000.0, 20.0]
    assert table["failure"][0] == "none" and "watchdog" in table["failure"][1]
    assert not table.isna().any().any()


def test_watchdog_keys_validated_and_kept_out_of_resolved_form_when_off():
    with pytest.raises(InputError, match=r"run\.watchdog.*>= 0"):
        stuck({"watchdog": -1})
    assert "watchdog" not in stuck().as_dict()["run"]
    assert stuck({"watchdog": 5}).as_dict()["run"]["watchdog"] == 5.0
