"""Tests of the rio2023 family: formulas against the paper, exact-law event simulation against
the round-by-round reference, failure rate, vote corruption rate and the paper's claims."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence
from protocols.rio2023 import rules as R
from protocols.rio2023.paths import ActivationClock, RewardPaths

PROBLEM1 = [0.7, 0.5, 0.3] + [0.1] * 7


def scenario(protocol: str, *, agents: int = 4, means=None, kind: str = "bernoulli", delay: float = 0.0,
             **params) -> S.Scenario:
    bandit = {"kind": kind, "arms": len(means or PROBLEM1), "means": list(means or PROBLEM1)}
    if kind == "gaussian":
        bandit["sigma"] = 0.5
    return S.from_dict({
        "name": "rio2023-test",
        "bandit": bandit,
        "network": {"topology": "ring", "agents": agents, "servers": 1,
                    # independent-se sends nothing: no delay to give it
                    **({} if protocol == "independent-se" else {"delay": {"model": "constant", "value": delay}})},
        "protocol": {"name": protocol, **params},
        "run": {"horizon": 1e12, "seed": 1, "checkpoints": 1},
    })


def rows(sc: S.Scenario, seeds) -> list[dict]:
    return [run_trial(sc, trial_sequence(2023, i), i).row for i in seeds]


def column(sc: S.Scenario, seeds, key: str = "sample_complexity") -> np.ndarray:
    return np.array([r[key] for r in rows(sc, seeds)], dtype=float)


# ---------------------------------------------------------------------- formulas
def test_eta_xi_matches_prop_5_1_by_hand():
    assert R.eta_xi(0.9, 0.0, 10) == pytest.approx(0.9)
    assert R.eta_xi(0.9, 0.05, 10) == pytest.approx(1 - 0.1 / 0.95**9)
    assert R.eta_xi(0.9, 0.1, 10) == pytest.approx(1 - 0.1 / 0.9**9)
    assert R.eta_xi(0.5, 0.5, 10) == 0.0                     # the max(0, .) clause


def test_voting_thresholds_by_hand():
    assert R.voting_threshold(0.05, 0.5) == 5                # DP-MASE, beta = 0.5 (appendix C.3)
    assert R.voting_threshold(0.05, 0.9) == 29               # Feraud et al., eta = 0.9
    assert R.voting_threshold(0.05, R.eta_xi(0.9, 0.05, 10)) == 18
    assert R.voting_threshold(0.05, R.eta_xi(0.9, 0.1, 10)) == 11


@settings(max_examples=200, deadline=None)
@given(eta=st.floats(0.01, 0.99), xi=st.floats(0.0, 0.5), k=st.integers(2, 20), delta=st.floats(0.001, 0.5))
def test_eta_xi_and_threshold_properties(eta, xi, k, delta):
    e = R.eta_xi(eta, xi, k)
    assert 0.0 <= e <= eta + 1e-12
    # Eq. (12): apparent privacy (1 - eta_xi)(1 - xi)^(K-1) equals 1 - eta whenever eta_xi > 0
    if e > 0:
        assert (1 - e) * (1 - xi) ** (k - 1) == pytest.approx(1 - eta)
        m = R.voting_threshold(delta, e)
        assert e**m <= delta * (1 + 1e-9)                     # Prop. 4.2 / 5.2: p^M <= delta
        assert m == 0 or e ** (m - 1) > delta * (1 - 1e-9)   # and M is the smallest such integer


def test_epoch_length_and_radii_match_sec_4_2_and_appendix_alg_4():
    # R(1), K = 10, eps = 0.1, beta = 0.5: max(32 log(160) / (1/4), 8 log(80) / (0.1 / 2))
    assert R.epoch_length(1, 10, 0.1, 0.5) == math.ceil(max(128 * math.log(160), 160 * math.log(80)))
    # R(3), |K^n| = 3, eps = 0.25: max(32 * 64 log(8*3*9/0.5), 8 * 8 log(4*3*9/0.5) / 0.25)
    assert R.epoch_length(3, 3, 0.25, 0.5) == math.ceil(max(2048 * math.log(432), 256 * math.log(216)))
    # eps = inf drops the privacy term
    assert R.epoch_length(2, 4, math.inf, 0.5) == math.ceil(512 * math.log(8 * 4 * 4 / 0.5))
    length = R.epoch_length(2, 5, 0.05, 0.3)
    h, c = R.dp_radii(2, 5, length, 0.05, 0.3)
    assert h == pytest.approx(math.sqrt(math.log(8 * 5 * 4 / 0.3) / (2 * length)))
    assert c == pytest.approx(math.log(4 * 5 * 4 / 0.3) / (0.05 * length))


def test_epochs_are_numbered_from_one():
    """Decision 1: e = 0 would put log(0) into R, h and c."""
    with pytest.raises(ValueError):
        R.epoch_length(0, 10, 0.1, 0.5)


def test_epoch_length_decreases_the_dp_share_as_epsilon_grows():
    lengths = [R.epoch_length(1, 10, eps, 0.5) for eps in (0.05, 0.1, 0.25, math.inf)]
    assert lengths == sorted(lengths, reverse=True)


def test_dp_local_elimination_rule():
    noisy = np.array([0.7, 0.5, 0.3, 0.69])
    active = np.array([True, True, True, False])
    out = R.dp_local_elimination(noisy, active, h=0.05, c=0.025)       # 2(h + c) = 0.15
    assert out.tolist() == [False, True, True, False]
    out = R.dp_local_elimination(noisy, active, h=0.1, c=0.0)          # strict '>' at gap 0.2
    assert out.tolist() == [False, False, True, False]


def test_se_local_elimination_rule_is_ge_on_the_radius():
    t = 100
    radius = math.sqrt(math.log(3 * t * t / 0.5) / t)
    sums = np.array([[80.0, 80.0 - 200 * radius, 80.0 - 200 * radius + 1e-6]])
    out = R.se_local_elimination(sums, np.ones((1, 3), bool), np.array([t]), 3, 0.5)
    assert out.tolist() == [[False, True, False]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=2, max_size=8), st.integers(1, 400), st.floats(0.01, 0.99),
       st.data())
def test_scalar_se_rule_equals_the_vectorised_rule(values, t, failure, data):
    sums = np.array(values, dtype=float)
    active = np.array(data.draw(st.lists(st.booleans(), min_size=len(sums), max_size=len(sums))))
    if not active.any():
        return
    expected = np.flatnonzero(R.se_local_elimination(sums, active, np.array([t]), len(sums), failure)[0])
    got = R.se_eliminated(sums, np.flatnonzero(active), t, len(sums), failure)
    assert np.array_equal(np.sort(got), expected)


def test_agent_weights():
    w = R.agent_weights(4, "zipf", exponent=0.8, offset=1.0)
    expected = np.array([2.0, 3.0, 4.0, 5.0]) ** -0.8
    assert np.allclose(w, expected / expected.sum())
    assert np.allclose(R.agent_weights(5, "uniform"), 0.2)


# ---------------------------------------------------------------------- exact-law machinery
def test_reward_paths_find_the_first_crossing_of_their_own_draws():
    """next_crossing agrees with a brute-force scan of the per-step sums of single pulls (pull_many on a
    twin bandit: the same uniforms, step by step), and move_to returns the sums there."""
    from netsim.bandits.stochastic import BernoulliBandit
    from netsim.engine.streams import Streams

    opts = {"arms": 4, "means": [0.8, 0.5, 0.45, 0.2], "low": 0.0, "high": 1.0}
    for seed in range(5):
        bandit = BernoulliBandit(opts, 1, Streams(np.random.SeedSequence(seed)))
        twin = BernoulliBandit(opts, 1, Streams(np.random.SeedSequence(seed)))
        paths = RewardPaths(bandit, 1, 4, 0.3, block=16, max_block=64)
        active = np.ones(4, bool)
        step = paths.next_crossing(0, active)
        drawn = int(paths.end[0])
        rewards = twin.pull_many(np.zeros(4 * drawn, int), np.tile(np.arange(4), drawn))
        sums = np.cumsum(rewards.reshape(drawn, 4), axis=0)
        steps = np.arange(1, drawn + 1)
        hit = R.se_local_elimination(sums, np.ones((drawn, 4), bool), steps, 4, 0.3).any(axis=1)
        assert step == int(steps[np.argmax(hit)])
        assert np.array_equal(paths.move_to(0, step, active), sums[step - 1])


def banked(paths: RewardPaths, agent: int, arms: np.ndarray) -> np.ndarray:
    """The banked sums of ``arms`` at steps t + 1 .. end (one row per step)."""
    t, rows = int(paths.t[agent]), []
    for first, drawn, walk in paths.bank[agent]:
        cols = walk[np.searchsorted(drawn, arms), max(t + 1 - first, 0):]
        rows.append(cols.T)
    return np.concatenate(rows)


def test_reward_paths_keep_their_checks_when_interrupted_and_arms_leave():
    """An agent interrupted before its crossing (a global elimination reaches it) and losing arms keeps the
    steps already checked (a step where no arm of a set meets the condition has none in a subset); every
    crossing must still be the first one of the banked walk over the arms still active."""
    from netsim.bandits.stochastic import BernoulliBandit
    from netsim.engine.streams import Streams

    opts = {"arms": 6, "means": [0.8, 0.7, 0.6, 0.5, 0.4, 0.3], "low": 0.0, "high": 1.0}
    rng = np.random.default_rng(3)
    crossings = 0
    for seed in range(6):
        bandit = BernoulliBandit(opts, 1, Streams(np.random.SeedSequence(seed)))
        paths = RewardPaths(bandit, 1, 6, 0.3, block=16, max_block=64)
        active = np.ones(6, bool)
        while active.sum() >= 2:
            step = paths.next_crossing(0, active)
            arms = np.flatnonzero(active)
            walk = banked(paths, 0, arms)
            t = int(paths.t[0])
            steps = np.arange(t + 1, t + 1 + len(walk))
            hit = np.flatnonzero(walk.max(axis=1) - walk.min(axis=1) >= R.se_bound(steps, 6, 0.3))
            assert step == steps[hit[0]]
            crossings += 1
            stop = int(rng.integers(t + 1, step + 1))          # interrupted at or before the crossing
            sums = paths.move_to(0, stop, active)
            assert np.array_equal(sums[arms], walk[stop - t - 1]) and np.isnan(sums[~active]).all()
            active[arms[int(rng.integers(len(arms)))]] = False
    assert crossings >= 25


def test_activation_clock_counts_are_multinomial():
    """Rounds up to a scheduled event: E[count of agent m] = p_m / p_n x (c - 1) plus the event."""
    rates = np.array([0.5, 0.3, 0.2])
    totals = []
    for seed in range(3000):
        clock = ActivationClock(rates, np.random.default_rng(seed))
        for a in range(3):
            clock.schedule(a, 0.0, 1_000_000)             # far away: only agent 0 matters below
        clock.schedule(0, 0.0, 10)
        t = clock.event_time[0]
        clock.last_step[0] = 10
        totals.append(clock.rounds(np.array([False, True, True]), t))
    # Rounds until agent 0's 10th activation: 10 + NegBin(10, 0.5) -> mean 20, var 20
    assert np.mean(totals) == pytest.approx(20.0, abs=0.25)
    assert np.var(totals) == pytest.approx(20.0, rel=0.1)


def test_activation_clock_interrupt_matches_a_direct_poisson_simulation():
    """Beta/Binomial bridge: given the c-th activation is after tau, the count of activations in
    (0, tau] and the first activation after tau have the law of a directly simulated Poisson
    process conditioned on the same event (two-sample KS, fixed seeds)."""
    rate, c, tau, n = 0.2, 6, 20.0, 6000
    clock = ActivationClock(np.full(n, rate), np.random.default_rng(1))
    for agent in range(n):
        clock.schedule(agent, 0.0, c)
    late = np.flatnonzero(clock.event_time > tau)
    clock.interrupt(late, tau)
    bridged_count = clock.event_step[late] - 1
    bridged_wait = clock.event_time[late] - tau
    points = np.cumsum(np.random.default_rng(2).exponential(1.0 / rate, (3 * n, 40)), axis=1)
    points = points[points[:, c - 1] > tau]
    direct_count = (points <= tau).sum(axis=1)
    direct_wait = points[np.arange(len(points)), direct_count] - tau
    assert stats.ks_2samp(bridged_wait, direct_wait).pvalue > 0.01
    assert np.mean(bridged_count) == pytest.approx(np.mean(direct_count), abs=0.1)
    assert stats.chisquare(np.bincount(bridged_count, minlength=c)[:c],
                           np.bincount(direct_count, minlength=c)[:c] * len(bridged_count) / len(direct_count)
                           ).pvalue > 0.01


# ---------------------------------------------------------------------- events vs rounds (two-sample)
@pytest.mark.parametrize("protocol, params, means, agents, runs", [
    ("corrupted-elimination", {"eta": 0.5, "xi": 0.2, "delta": 0.3}, [0.9, 0.2, 0.1], 3, 60),
    ("corrupted-elimination", {"eta": 0.5, "xi": 0.2, "delta": 0.3, "agent_distribution": "zipf",
                               "zipf_exponent": 0.8}, [0.9, 0.2, 0.1], 3, 60),
    ("dp-mase", {"epsilon": 1.0, "beta": 0.9, "delta": 0.9}, [0.9, 0.1], 2, 50),
])
def test_event_simulation_matches_round_by_round_in_distribution(protocol, params, means, agents, runs):
    """Two-sample KS test on the sample complexity (fixed seeds, alpha = 0.01): exact-law events
    vs the round-by-round reference (the latter costs ~0.3 ms per round, hence small cases).
    Power: with 50-60 runs per side the KS critical distance is 1.63 sqrt(2 / 60) = 0.30, so only
    shifts of about 0.8 standard deviation are caught with power 0.9; the 300-run test on the
    instance of issue 19's bug 1 (tests/test_rio2023_exactness.py) guards the smaller shifts."""
    fast = column(scenario(protocol, agents=agents, means=means, simulation="events", **params), range(runs))
    slow = column(scenario(protocol, agents=agents, means=means, simulation="rounds", **params),
                  range(500, 500 + runs))
    assert stats.ks_2samp(fast, slow).pvalue > 0.01


# ---------------------------------------------------------------------- correctness and votes
def test_failure_rate_at_most_delta_on_problem_1():
    """DP-MASE (eps = 0.25) and CORRUPTED ELIMINATION (xi = 0.1), N = 64, 80 seeds each: at most 9
    failures. At the claimed rate delta = 0.05 that fails with probability P(Bin(80, .05) > 9) = 0.008;
    against a true rate of 0.2 (4 delta) it passes with probability P(Bin(80, .2) <= 9) = 0.02, i.e.
    power 0.98. docs/protocols/rio2023.md reports a 200-seed run (0 failures)."""
    assert stats.binom.sf(9, 80, 0.05) < 0.01 and stats.binom.cdf(9, 80, 0.2) < 0.05
    dp = column(scenario("dp-mase", agents=64, epsilon=0.25), range(80), "correct")
    ce = column(scenario("corrupted-elimination", agents=64, eta=0.9, xi=0.1), range(80), "correct")
    assert (1 - dp).sum() <= 9
    assert (1 - ce).sum() <= 9


def test_votes_are_corrupted_at_rate_xi():
    """CORRUPTED ELIMINATION with xi = 0.3 corrupts each local vote with probability xi, independently
    (Alg. 3, the mask nu ~ B(1 - xi) of Eq. 11): the algorithm's own corruption, not the network's (a vote
    the network drops is retransmitted, tests/test_rio2023_realistic.py). These 6 seeds of N = 64 cast
    n = 952 votes (fixed by the seeds; the test asks n > 600). It accepts |corrupted - xi n| < 4 sd of
    Binomial(n, xi): a false alarm has probability 6e-5. Power at n = 952 against a rate of 0.2 or 0.4:
    the bound 4 x 14.1 = 57 lies 3.1 (0.2) and 2.5 (0.4) of the alternative's sd inside its mean (95 away),
    so either is caught with probability > 0.99 (0.999 and 0.994)."""
    xi = 0.3
    out = rows(scenario("corrupted-elimination", agents=64, eta=0.99, xi=xi), range(6))
    sent = sum(r["votes_sent"] for r in out)
    lost = sum(r["votes_corrupted"] for r in out)
    total = sent + lost
    assert total == sum(r["local_eliminations"] for r in out)
    assert total > 600
    assert abs(lost - xi * total) < 4 * math.sqrt(total * xi * (1 - xi))
    assert all(r["sent_vote"] == r["votes_sent"] for r in out)


def test_votes_and_eliminations_are_engine_messages():
    r = rows(scenario("dp-mase", agents=16, epsilon=0.25), [0])[0]
    assert r["sent_vote"] == r["votes_sent"] > 0
    assert r["sent_eliminate"] > 0
    assert r["global_eliminations"] == 9 and r["identified_arm"] == 0


def test_delays_are_allowed_and_slow_things_down():
    """DP-MASE, N = 64, the same 4 seeds with zero delay and with a constant delay of 5,000 rounds on
    every vote and elimination. A delayed global elimination reaches the agents later, so they keep
    sampling arms the coordinator has already removed: the sample complexity grows, and the run ends
    at least one delay later (the deciding vote crosses a link; measured: exactly 5,000 later on each
    seed). Measured: 39,452-39,648 without delay
    (spread 200 across seeds), 41,917-42,304 with it (paired differences 2,270-2,840). The test asks
    for a paired increase of more than 1,000 on every seed, 5 times the whole zero-delay spread:
    a delay law that the protocol ignored (difference 0) fails it on every seed."""
    quick = rows(scenario("dp-mase", agents=64, epsilon=0.25), range(4))
    slow = rows(scenario("dp-mase", agents=64, epsilon=0.25, delay=5000.0), range(4))
    gain = np.array([s["sample_complexity"] - q["sample_complexity"] for q, s in zip(quick, slow)])
    assert np.all(gain > 1000)
    assert all(s["end_time"] >= q["end_time"] + 5000.0 - 1e-6 for q, s in zip(quick, slow))
    assert all(r["correct"] == 1 and r["deadlock"] == 0 for r in quick + slow)


# ---------------------------------------------------------------------- the paper's claims (fixed seeds)
def test_sample_complexity_grows_with_n_but_slower_than_independent():
    """N = 32 against 128, 2 seeds. Measured over 10 seeds: CE (xi = 0.05) 52.2k +- 2.0k and 174.4k +- 5.2k,
    INDEPENDENT 65.4k +- 1.9k and 260.3k +- 2.5k, DP-MASE at eps = 0.25 20.1k +- 0.2k and 77.9k +- 0.5k
    (growth 122k and 58k against 195k). Every gap is over 20 standard deviations of a mean of 2, so each
    comparison holds with probability above 1 - 1e-9. (DP-MASE at eps = 0.1 is bimodal at small N,
    77.5k +- 29.0k at N = 32, and is not used: 2 seeds of it could land either way.)"""
    seeds = range(2)
    for protocol, params in (("corrupted-elimination", {"xi": 0.05}), ("dp-mase", {"epsilon": 0.25})):
        small = column(scenario(protocol, agents=32, **params), seeds).mean()
        large = column(scenario(protocol, agents=128, **params), seeds).mean()
        ind_small = column(scenario("independent-se", agents=32), seeds).mean()
        ind_large = column(scenario("independent-se", agents=128), seeds).mean()
        assert large > small
        assert large - small < ind_large - ind_small


def test_dp_mase_sample_complexity_grows_as_epsilon_falls():
    """N = 64, 30 seeds per eps, one-sided Mann-Whitney at alpha = 0.01: eps = 0.25 needs fewer rounds
    than eps = 0.1 and than eps = 0.05. Measured: 39.5k +- 0.3k, bimodal 45.9k (median) / 100k+, 87.8k
    +- 0.6k: the samples separate completely (p = 1.5e-11), so the power is essentially 1. The order of
    0.1 against 0.05 is not asserted at N = 64: the bimodal eps = 0.1 has the same mean as 0.05
    (docs/protocols/rio2023.md), which 3 lucky seeds used to hide."""
    seeds = range(30)
    rounds = {eps: column(scenario("dp-mase", agents=64, epsilon=eps), seeds) for eps in (0.25, 0.1, 0.05)}
    for slower in (0.1, 0.05):
        assert stats.mannwhitneyu(rounds[0.25], rounds[slower], alternative="less").pvalue < 0.01


def test_corruption_beats_feraud_at_the_same_apparent_privacy():
    """N = 64, eta = 0.9: CORRUPTED ELIMINATION with xi = 0.1 (M = 11) needs fewer rounds than Feraud et al.
    (xi = 0, M = 29). Measured over 10 seeds (docs table): 92,416 and 100,486 with 95 % half-widths 2,713
    and 1,939, i.e. sd about 3,800 and 2,700. One-sided Welch t-test at alpha = 0.01 with 8 seeds each: the
    expected t is 8,070 / 1,650 = 4.9 against a critical value of about 2.65, power about 0.97."""
    seeds = range(8)
    xi0 = column(scenario("feraud2019", agents=64, eta=0.9), seeds)
    xi1 = column(scenario("corrupted-elimination", agents=64, eta=0.9, xi=0.1), seeds)
    assert stats.ttest_ind(xi1, xi0, equal_var=False, alternative="less").pvalue < 0.01


def test_non_uniform_agents_are_faster():
    """Appendix C.4: an unbalanced P_N (zipf, gamma = 0.8) speeds both methods up. Measured over 10 seeds:
    CE (N = 64) 96.7k +- 3.0k uniform against 75.7k +- 3.2k zipf; DP-MASE (N = 256) 174.3k +- 2.3k against
    80.4k +- 13.2k. Means of 3 seeds: the gaps are 8.3 and 12 standard deviations of the difference, power
    above 1 - 1e-9."""
    seeds = range(3)
    for protocol, agents, params in (("corrupted-elimination", 64, {"xi": 0.05}), ("dp-mase", 256, {"epsilon": 0.1})):
        uniform = column(scenario(protocol, agents=agents, **params), seeds).mean()
        zipf = column(scenario(protocol, agents=agents, agent_distribution="zipf", **params), seeds).mean()
        assert zipf < uniform


# ---------------------------------------------------------------------- input errors
def test_bad_parameters_raise_input_errors():
    with pytest.raises(InputError, match="protocol.xi"):
        scenario("corrupted-elimination", eta=0.5, xi=0.5)
    with pytest.raises(InputError, match="protocol.epsilon"):
        scenario("dp-mase", epsilon=0.0)
    with pytest.raises(InputError, match="protocol.eta"):
        scenario("corrupted-elimination", eta=1.0)
    with pytest.raises(InputError, match="bandit.kind"):
        scenario("dp-mase", kind="gaussian")
    with pytest.raises(InputError, match="network.servers"):
        S.from_dict({"name": "x", "bandit": {"kind": "bernoulli", "arms": 3, "means": [0.1, 0.2, 0.3]},
                     "network": {"topology": "ring", "agents": 4, "servers": 0},
                     "protocol": {"name": "dp-mase"}})


def test_mase_with_the_same_local_confidence_is_feraud():
    """Alg. 1 with SE of failure beta and M = ceil(log delta / log beta) is Feraud et al. (eta = beta):
    both thresholds by hand (delta = 0.05, beta = eta = 0.9: log 0.05 / log 0.9 = 28.43, so M = 29, the
    value the docs table lists for Feraud), and an explicit threshold is taken as given."""
    mase = rows(scenario("mase", agents=32, beta=0.9), [0])[0]
    feraud = rows(scenario("feraud2019", agents=32, eta=0.9), [0])[0]
    assert mase["vote_threshold"] == feraud["vote_threshold"] == math.ceil(math.log(0.05) / math.log(0.9)) == 29
    explicit = rows(scenario("mase", agents=32, beta=0.9, threshold=3), [0])[0]
    assert explicit["vote_threshold"] == 3


def test_fig2_sample_complexity_grows_with_eta_on_both_problems():
    """Appendix C.2, Fig. 2: positive correlation between sample complexity and eta (xi = 0). Measured over
    10 seeds, N = 64: Problem 1 85.7k +- 5.0k (eta = 0.5) against 100.5k +- 2.7k (0.9); Problem 2 86.8k +- 4.6k
    against 99.8k +- 3.3k. Means of 2 seeds: the gaps are 3.7 and 3.4 standard deviations of the difference,
    power above 0.999."""
    seeds = range(2)
    p2 = {"kind": "gaussian", "means": [11.0, 10.8] + [10.4] * 8}
    for extra in ({}, p2):
        low = column(scenario("feraud2019", agents=64, eta=0.5, **extra), seeds).mean()
        high = column(scenario("feraud2019", agents=64, eta=0.9, **extra), seeds).mean()
        assert low < high
