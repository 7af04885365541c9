"""dubey2020a-private against its independent plain-numpy reference (issue 24, item 3).

``benchmarks/dubey2020a_reference.py`` rewrites Alg. 1 + Alg. 2 without netsim code: a loop over
trials in which agent m reads the latest record of agent m' created delay * d(m, m') trials ago.
Fed netsim's own random streams it must make netsim's every choice; fed its own draws it is the
yardstick for what the algorithm does under delay, netsim aside.

What is pinned:

* exactness: same streams, same arms for every agent at every trial and the same regret, for
  both ``record_counts``, unit and constant longer per-hop delays, and at the acceptance setting;
* the fall of regret with delay is the algorithm's: in the reference (no netsim code, independent
  draws) delay 6 gives lower regret than delay 1 with ``record_counts = "released"``, and the fall
  needs the privacy noise (with the releases exact, the same schedule, delay does not lower regret)
  and draws whose persistence depends on the agents' choices (with releases on a fixed clock the
  fall goes);
* so issue 24's acceptance line ("regret with constant delay 6 is not below the delay-1 run
  beyond its paired 95 % interval", >= 12 seeds) cannot hold for Alg. 1 as the paper writes it.
  It is pinned by its negation with stated power (below), not as written: with 12 seeds the line's
  own interval excludes 0 only with probability about 0.6 (noncentrality 0.74 sqrt(12) = 2.6
  against t 2.2), so a 12-seed check passes or fails with the seeds. At netsim's seeds (run.seed
  2020) it fails: ``python -m benchmarks.dubey2020a_delay`` (docs/protocols/dubey2020a.md).

Statistics (40 independent instances of the acceptance setting, one-sided paired t tests at
alpha = 0.01). Measured on 40 other instances (seeds [2020, 0..39], ``python -m
benchmarks.dubey2020a_delay``): fall -166 [-237, -94] with a paired sd of about 224, so the design's
power is about 0.99 (noncentrality 166 / 224 sqrt(40) = 4.7 against the critical t 2.43); the
contrast "fall with noise minus change without" about -178 with a similar sd, and "change with
releases on a clock minus fall" about +167 (sd about 205): power above 0.99 for both.
The instances here are seeds [24, 0..39] (fall -140 [-210, -70], p = 1e-4; without noise +10
[-4, +24]; contrast p = 7e-5; releases on a clock -10 [-26, +7], clock minus fall p = 6e-4). About
22 CPU s for the 240 reference runs.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy import stats

from benchmarks import dubey2020a_reference as ref
from netsim.engine import scenario as S
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from tests.test_dubey2020a import scenario

ALPHA = 0.01
INSTANCES = 40
HORIZON = 1500


def netsim_and_reference(sc, trial: int) -> tuple[np.ndarray, float, ref.Run]:
    """Run one netsim trial of ``sc`` and the reference fed the same graph, means and streams.

    Returns netsim's arms (T x M, read by a spy on the bandit), its group regret and the reference's run.
    """
    horizon, m = int(sc.run["horizon"]), int(sc.network["agents"])
    sim = Simulation(sc, trial_sequence(sc.run["seed"], trial))
    adjacency = nx.to_numpy_array(sim.network.agent_graph, nodelist=range(m)) > 0
    means = sim.bandit.means.copy()
    # the bandit's uniforms (BanditEnvironment: one per pull, in (0, 1) by adding 2^-54) and the privacy stream
    uniforms = np.stack([sim.streams.for_("rewards", i).random(horizon) + 2.0**-54 for i in range(m)])
    noise = sim.streams.for_("privacy")
    arms = []
    pull_many = sim.bandit.pull_many

    def spy(agents, chosen):
        arms.append(np.array(chosen))
        return pull_many(agents, chosen)

    sim.bandit.pull_many = spy
    sim.run()
    gamma = sc.protocol["gamma"]
    gamma = ref.half_diameter(adjacency) if gamma == "half-diameter" else gamma
    lags = ref.hop_lags(adjacency, gamma, int(sc.network["delay"]["value"]))
    run = ref.simulate(lags, means, horizon, epsilon=sc.protocol["epsilon"], v=sc.protocol["v"],
                       record_counts=sc.protocol["record_counts"], uniforms=uniforms, noise=noise)
    return np.array(arms), float(sim.bandit.regret.sum()), run


@pytest.mark.parametrize("record_counts", ["current", "released"])
@pytest.mark.parametrize("delay", [1.0, 3.0])
def test_netsim_makes_the_references_choices(record_counts, delay):
    sc = scenario({"name": "dubey2020a-private", "epsilon": 0.25, "gamma": 2, "record_counts": record_counts},
                  agents=12, horizon=200, seed=5, p=0.3, delay=delay)
    arms, regret, run = netsim_and_reference(sc, 0)
    assert len({tuple(row) for row in arms}) > 1  # the agents do not all play one arm: the check has teeth
    assert np.array_equal(arms, run.arms)
    assert regret == run.group_regret


@pytest.mark.parametrize("delay", [1.0, 6.0])
def test_netsim_equals_the_reference_at_the_acceptance_setting(delay):
    sc = S.load("dubey2020a-fig1a", {"network.agents": 30, "network.p": 0.1, "run.horizon": HORIZON,
                                     "network.delay": delay, "protocol.record_counts": "released"})
    arms, regret, run = netsim_and_reference(sc, 1)
    assert np.array_equal(arms, run.arms)
    assert regret == run.group_regret


@pytest.fixture(scope="module")
def reference_regrets() -> dict[str, np.ndarray]:
    """Group regret of the reference on INSTANCES independent draws at delay 1 and 6: Alg. 1 ("noise"), its
    releases exact ("exact"), and releases on a fixed clock ("clock", the reference's laboratory variant)."""
    out: dict[str, list[float]] = {}
    for i in range(INSTANCES):
        adjacency, means, uniforms, noise = ref.draw_instance(np.random.default_rng([24, i]), 30, 0.1, 5, HORIZON)
        gamma = ref.half_diameter(adjacency)
        state = noise.bit_generator.state
        for delay in (1, 6):
            for variant in ("noise", "exact", "clock"):
                noise.bit_generator.state = state
                run = ref.simulate(ref.hop_lags(adjacency, gamma, delay), means, HORIZON, epsilon=0.1, v=1.1,
                                   record_counts="released", uniforms=uniforms,
                                   noise=None if variant == "exact" else noise,
                                   refresh="clock" if variant == "clock" else "pulls")
                out.setdefault(f"{variant} {delay}", []).append(run.group_regret)
    return {key: np.array(values) for key, values in out.items()}


def test_regret_falls_with_delay_in_the_reference(reference_regrets):
    fall = reference_regrets["noise 6"] - reference_regrets["noise 1"]
    assert stats.ttest_1samp(fall, 0.0, alternative="less").pvalue < ALPHA


def test_the_fall_needs_the_privacy_noise(reference_regrets):
    fall = reference_regrets["noise 6"] - reference_regrets["noise 1"]
    exact = reference_regrets["exact 6"] - reference_regrets["exact 1"]
    assert stats.ttest_1samp(fall - exact, 0.0, alternative="less").pvalue < ALPHA
    # with exact releases delay does not lower regret: the paired mean is not below 0 beyond its 99 % interval
    half = stats.t.ppf(1 - ALPHA / 2, len(exact) - 1) * exact.std(ddof=1) / np.sqrt(len(exact))
    assert exact.mean() + half >= 0


def test_the_fall_needs_draws_that_persist_as_long_as_the_agents_choices_keep_them(reference_regrets):
    # mechanism: under Alg. 1 a draw stays until its owner's next f pulls of the arm, which the draw itself
    # influences through the other agents; released on a fixed clock (every f trials) it stays f trials
    # whatever it is, and the fall goes (benchmark: +1 [-17, +19] against -166 [-237, -94])
    fall = reference_regrets["noise 6"] - reference_regrets["noise 1"]
    clock = reference_regrets["clock 6"] - reference_regrets["clock 1"]
    assert stats.ttest_1samp(clock - fall, 0.0, alternative="greater").pvalue < ALPHA
