"""Bandit environments: exact-law sums, regret books, stream discipline."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from netsim.bandits import BernoulliBandit, GaussianBandit, HeterogeneousBandit, LinearBandit, TabularBandit
from netsim.engine.params import validate
from netsim.engine.streams import Streams


def make(cls, agents=2, seed=0, **options):
    return cls(validate(options, cls.fields), agents, Streams(np.random.SeedSequence(seed)))


def test_bernoulli_sum_of_n_is_binomial():
    env = make(BernoulliBandit, agents=1, arms=2, means=[0.3, 0.6])
    n = 40
    draws = np.array([env.pull(0, 0, n) for _ in range(4000)])
    # chi-square goodness of fit against Binomial(40, 0.3), bins with expected count >= 5 (fixed seed)
    support = np.arange(n + 1)
    expected = stats.binom.pmf(support, n, 0.3) * len(draws)
    keep = expected >= 5
    observed = np.bincount(draws.astype(int), minlength=n + 1)
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 0.001


def test_bernoulli_sum_matches_sum_of_single_pulls_in_distribution():
    single = make(BernoulliBandit, agents=1, seed=1, arms=2, means=[0.45, 0.6])
    summed = make(BernoulliBandit, agents=1, seed=2, arms=2, means=[0.45, 0.6])
    a = np.array([sum(single.pull(0, 0) for _ in range(25)) for _ in range(1500)])
    b = np.array([summed.pull(0, 0, 25) for _ in range(1500)])
    assert stats.ks_2samp(a, b).pvalue > 0.001
    assert single.pulls[0] == summed.pulls[0] == 25 * 1500


def test_gaussian_sum_law():
    env = make(GaussianBandit, agents=1, arms=2, means=[1.0, 2.0], sigma=0.5)
    draws = np.array([env.pull(0, 1, 9) for _ in range(3000)])
    # exactly N(18, 9 * 0.25)
    assert stats.kstest(draws, stats.norm(18.0, 1.5).cdf).pvalue > 0.001


def test_regret_uses_global_gaps_and_counts_pulls():
    env = make(BernoulliBandit, agents=3, arms=3, means=[0.2, 0.9, 0.5])
    env.pull_many(np.array([0, 1, 2, 0]), np.array([0, 1, 2, 2]), np.array([1, 5, 2, 3]))
    assert np.allclose(env.regret, [0.7 + 3 * 0.4, 0.0, 2 * 0.4])
    assert list(env.pulls) == [4, 5, 2]


def test_heterogeneous_regret_against_average_of_local_means():
    env = make(HeterogeneousBandit, agents=2, arms=2, local_means=[[0.9, 0.1], [0.0, 0.6]])
    assert np.allclose(env.means, [0.45, 0.35]) and env.best_arm == 0
    env.pull(0, 1)
    env.pull(1, 0)  # agent 1's local best is arm 1, but arm 0 is globally best
    assert np.allclose(env.regret, [0.1, 0.0])


def test_every_pull_consumes_one_uniform_regardless_of_batching():
    a = make(BernoulliBandit, agents=3, seed=7, arms=2, means=[0.5, 0.5])
    b = make(BernoulliBandit, agents=3, seed=7, arms=2, means=[0.5, 0.5])
    agents = np.array([0, 1, 2, 1, 1, 0] * 100)
    batched = np.concatenate([a.pull_many(agents[i:i + 6], np.zeros(6, int)) for i in range(0, 600, 6)])
    single = np.array([b.pull(int(x), 0) for x in agents])
    assert np.array_equal(batched, single)


def test_common_random_numbers_across_arms():
    """Agent i's j-th pull uses the same uniform whatever arm: rewards are monotone in the mean."""
    low = make(BernoulliBandit, agents=1, seed=3, arms=2, means=[0.2, 0.7])
    high = make(BernoulliBandit, agents=1, seed=3, arms=2, means=[0.2, 0.7])
    r_low = np.array([low.pull(0, 0) for _ in range(500)])
    r_high = np.array([high.pull(0, 1) for _ in range(500)])
    assert np.all(r_low <= r_high)


def test_large_batches_grow_the_buffer_without_changing_the_stream():
    a = make(GaussianBandit, agents=2, seed=5, arms=2, means=[0.0, 1.0])
    b = make(GaussianBandit, agents=2, seed=5, arms=2, means=[0.0, 1.0])
    big = a.pull_many(np.zeros(1000, int), np.zeros(1000, int))
    small = np.array([b.pull(0, 0) for _ in range(1000)])
    assert np.allclose(big, small)


@pytest.mark.parametrize("cls, options", [
    (BernoulliBandit, {"arms": 4, "means": [0.8, 0.5, 0.45, 0.2]}),
    (GaussianBandit, {"arms": 4, "means": [1.0, 0.5, 0.0, -1.0], "sigma": 0.5}),
    (HeterogeneousBandit, {"arms": 4, "local_means": [[0.9, 0.1, 0.5, 0.3], [0.2, 0.6, 0.4, 0.7]]}),
])
def test_pull_walk_is_pull_many_step_by_step(cls, options):
    """pull_walk gives the running sums of the rewards pull_many gives for the same pulls (same uniforms,
    step-major), books the same regret (to the bit) and pulls, and leaves the stream where pull_many would:
    a walk longer than the buffer, an empty one and pull_many calls in between."""
    walked, pulled = make(cls, seed=4, **options), make(cls, seed=4, **options)
    for agent, arms, steps in ((1, [0, 2, 3], 5), (1, [1, 3], 300), (0, [0, 1, 2, 3], 70), (1, [2], 0), (1, [1], 9)):
        arms = np.array(arms)
        walk = walked.pull_walk(agent, arms, steps)
        rewards = pulled.pull_many(np.full(steps * len(arms), agent), np.tile(arms, steps), 1)
        assert walk.shape == (len(arms), steps) and walk.flags.c_contiguous
        assert np.array_equal(walk, np.cumsum(rewards.reshape(steps, len(arms)), axis=0).T)
        assert np.array_equal(walked.regret, pulled.regret) and np.array_equal(walked.pulls, pulled.pulls)
        between, first = np.array([agent, 1 - agent, agent]), arms[:1].repeat(3)
        assert np.array_equal(walked.pull_many(between, first), pulled.pull_many(between, first))


@pytest.mark.parametrize("cls, options", [
    (BernoulliBandit, {"arms": 4, "means": [0.8, 0.5, 0.45, 0.2]}),
    (GaussianBandit, {"arms": 4, "means": [1.0, 0.5, 0.0, -1.0], "sigma": 0.5}),
    (HeterogeneousBandit, {"arms": 4, "local_means": [[0.9, 0.1, 0.5, 0.3], [0.2, 0.6, 0.4, 0.7],
                                                       [0.5, 0.5, 0.1, 0.0]]}),
])
def test_pull_walks_is_pull_many_agent_by_agent(cls, options):
    """pull_walks(agents, arms, steps)[i] is what pull_many gives agents[i] for the same pulls (step-major),
    as running sums, agents in any order, with the same regret (to the bit) and pulls afterwards, across a
    buffer refill; repeated agents are refused."""
    walked, pulled = make(cls, agents=3, seed=6, **options), make(cls, agents=3, seed=6, **options)
    for agents, arms, steps in (([2, 0, 1], [0, 1, 2, 3], 40), ([1, 2], [1, 3], 300), ([0], [2], 7), ([2, 0], [0], 0)):
        arms = np.array(arms)
        walks = walked.pull_walks(np.array(agents), arms, steps)
        assert walks.shape == (len(agents), len(arms), steps)
        for walk, agent in zip(walks, agents):
            rewards = pulled.pull_many(np.full(steps * len(arms), agent), np.tile(arms, steps), 1)
            assert np.array_equal(walk, np.cumsum(rewards.reshape(steps, len(arms)), axis=0).T)
        assert np.array_equal(walked.regret, pulled.regret) and np.array_equal(walked.pulls, pulled.pulls)
    with pytest.raises(ValueError, match="distinct agents"):
        walked.pull_walks(np.array([1, 1]), np.array([0]), 2)


@pytest.mark.parametrize("cls, options", [
    (BernoulliBandit, {"arms": 4, "means": [0.8, 0.5, 0.45, 0.2]}),
    (GaussianBandit, {"arms": 4, "means": [1.0, 0.5, 0.0, -1.0], "sigma": 0.5}),
    (HeterogeneousBandit, {"arms": 4, "noise": "gaussian",
                           "local_means": [[0.9, 0.1, 0.5, 0.3], [0.2, 0.6, 0.4, 0.7], [0.5, 0.5, 0.1, 0.0]]}),
])
def test_pull_each_is_pull_many_of_every_agent(cls, options):
    """pull_each(arms) gives the rewards, regret (to the bit) and pull counts of pull_many(arange(N), arms),
    across buffer refills and with other pulls in between (which move the agents' cursors apart)."""
    agents = 3
    each, many = make(cls, agents=agents, seed=5, **options), make(cls, agents=agents, seed=5, **options)
    rng = np.random.default_rng(0)
    for step in range(700):
        arms = rng.integers(4, size=agents)
        assert np.array_equal(each.pull_each(arms), many.pull_many(np.arange(agents), arms))
        if step in (3, 300, 301):  # uneven use of the streams, then lockstep again
            who, arm = np.array([1, 1, 2]), np.array([0, 3, 2])
            assert np.array_equal(each.pull_many(who, arm), many.pull_many(who, arm))
        if step == 500:
            assert np.array_equal(each.pull_walk(0, np.array([1, 2]), 40), many.pull_walk(0, np.array([1, 2]), 40))
    assert np.array_equal(each.regret, many.regret) and np.array_equal(each.pulls, many.pulls)


def test_linear_contexts_and_regret():
    env = make(LinearBandit, agents=2, dimension=3, arms=4, noise="gaussian", sigma=0.1)
    x = env.observe(np.array([0, 1]))
    assert x.shape == (2, 4, 3) and np.allclose(np.linalg.norm(x, axis=-1), 1.0)
    values = x @ env.theta
    best = values.argmax(axis=1)
    env.pull_many(np.array([0, 1]), best)
    assert np.allclose(env.regret, 0.0)
    worst = values.argmin(axis=1)
    env.pull_many(np.array([0, 1]), worst)
    assert np.allclose(env.regret, values.max(axis=1) - values.min(axis=1))
    assert np.linalg.norm(env.theta) <= 1.0


def test_csv_environment(tmp_path):
    path = tmp_path / "data.csv"
    rows = ["hospital,drug,outcome"] + [f"h{h},d{d},{(h + d + i) % 2}" for h in range(2) for d in range(3)
                                        for i in range(4)]
    path.write_text("\n".join(rows) + "\n")
    env = make(TabularBandit, agents=2, file=str(path), agent_column="hospital", arm_column="drug",
               reward_column="outcome")
    assert env.num_arms == 3 and np.allclose(env.local_means, 0.5)
    total = env.pull(1, 2, 10)
    assert 0 <= total <= 10 and env.pulls[1] == 10


def test_csv_single_pulls_read_the_row_at_their_uniform(tmp_path):
    """Single pulls (one array operation) return row min(floor(u * rows), rows - 1) of the (agent, arm) group,
    u the agent's next uniform: checked against a plain loop over a twin environment's uniforms."""
    path = tmp_path / "data.csv"
    rows = ["a,k,r"] + [f"{h},{d},{(h * 7 + d * 3 + i) % 5 / 4}" for h in range(3) for d in range(2)
                        for i in range(3 + h + d)]
    path.write_text("\n".join(rows) + "\n")
    options = {"file": str(path), "agent_column": "a", "arm_column": "k", "reward_column": "r"}
    env, twin = make(TabularBandit, agents=3, seed=2, **options), make(TabularBandit, agents=3, seed=2, **options)
    agents, arms = np.array([0, 2, 1, 2, 0]), np.array([1, 0, 1, 1, 0])
    for _ in range(60):
        got = env.pull_many(agents, arms)
        u = twin._uniforms(agents)
        want = [twin._samples[a][k][min(int(x * len(twin._samples[a][k])), len(twin._samples[a][k]) - 1)]
                for a, k, x in zip(agents, arms, u, strict=True)]
        assert got.tolist() == want


def test_negative_pull_count_rejected():
    env = make(BernoulliBandit, agents=1, arms=2, means=[0.1, 0.2])
    with pytest.raises(ValueError):
        env.pull(0, 0, -1)
