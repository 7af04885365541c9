"""Private and byzantine-proof cooperative UCB over the LOCAL protocol (Dubey & Pentland, AAMAS 2020).

Protocols
    ``dubey2020a-private``    Private Multi-Agent UCB: Alg. 2 on the group estimates of Alg. 1,
                              messages <m, t, gamma, noisy means, counts> (Eq. 6).
    ``dubey2020a-byzantine``  Byzantine-proof Multi-Agent UCB: Alg. 3 with the trimmed mean of
                              Definition 4.1, messages <m, t, gamma, A_{m,t}, X_{m,t}> (Eq. 7).
    ``dp-ucb-int``            Baseline: DP-UCB-INT (Tossou & Dimitrakakis 2016) on every agent in
                              isolation. Isolated UCB1 is the existing ``ucb1`` protocol.

Messages travel with :class:`netsim.flooding.Flooding` (the LOCAL protocol, Sec. 2): each
agent publishes one record per trial, records are forwarded gamma hops, one engine message
per link per trial. Agent m therefore holds the message agent m' created d(m, m') trials
ago, for every m' within gamma hops (Eq. 4).

Trials and time. Trial t = 1, 2, ... is the tick at simulated time (t - 1) * period; all
agents act in the same tick (one vectorised clock). In its tick an agent chooses with what it
holds, pulls, updates its own statistics, publishes its record and the flush sends it.

gamma. ``gamma`` is an integer >= 0, or ``"diameter"`` (the diameter D of the sampled agent
graph), or ``"half-diameter"`` = max(1, floor(D / 2)) (Sec. 5: "gamma = diameter(G)/2"; the
paper does not say how D/2 is made an integer: we truncate, as integer division does, and keep
at least one hop). Erdős–Rényi G(200, 0.1) graphs have D = 3, so half-diameter gives gamma = 1.
The resolved value is reported as the ``gamma`` column of trials.csv.

Byzantine agents are decided by the engine's ``[adversary]`` section (who lies, with which
probability epsilon, which law Q, whether relays lie too). The protocol only declares how
its records are corrupted (``network.corruptible``): the reward column of a record is
replaced by a draw of Q, once per record and forwarding, the same for every link.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
from scipy.sparse import csgraph

from netsim import params as P
from netsim.errors import InputError
from netsim.flooding import Flooding
from netsim.protocol import Protocol
from netsim.registry import register_protocol
from protocols.privacy.interval import IntervalMechanism
from protocols.robust import SampleHistogram

GAMMA_WORDS = ("half-diameter", "diameter")


def _gamma_field() -> P.Field:
    return P.either(P.integer(low=0), P.choice(GAMMA_WORDS), default="half-diameter",
                    doc="message life in hops: an integer >= 0, 'diameter', or 'half-diameter' = max(1, floor(D/2))")


def resolve_gamma(value: int | str, graph: nx.Graph) -> int:
    """The integer life of messages for ``value`` on ``graph`` (see module docstring)."""
    if isinstance(value, int):
        return value
    distances = csgraph.shortest_path(nx.to_scipy_sparse_array(graph, nodelist=sorted(graph)), unweighted=True)
    finite = distances[np.isfinite(distances)]
    diameter = int(finite.max(initial=0))  # largest eccentricity within a component
    if value == "diameter":
        return diameter
    return max(1, diameter // 2)


def _epsilon_field() -> P.Field:
    return P.real(0.1, low=0.0, low_open=True, high=1.0, allow_inf=True,
                  doc="privacy parameter of the interval mechanism, in (0, 1]; inf = no privacy")


def _v_field() -> P.Field:
    return P.real(1.1, low=1.0, high=1.5, low_open=True, high_open=True,
                  doc="privacy rate v in (1, 1.5): Laplace scale n^(v/2-1) (Alg. 1 line 7)")


# ---------------------------------------------------------------------- pure decision rules
def private_group_estimates(own_sums: np.ndarray, own_counts: np.ndarray, table_means: np.ndarray,
                            table_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Alg. 1 lines 22-33: N_k = n_k + sum_{m'} a'_k and mu_k = (s_k + sum_{m'} a'_k x'_k) / N_k.

    ``own_*`` are (agents, K); ``table_*`` (agents, origins, K) hold the latest message of each
    origin (zero counts where none arrived).
    """
    counts = own_counts + table_counts.sum(axis=1)
    sums = own_sums + np.einsum("mok,mok->mk", table_counts, table_means)
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums / counts, counts


def ucb_choice(means: np.ndarray, counts: np.ndarray, t: int, round_robin: int) -> np.ndarray:
    """Alg. 2: arm t mod K while t <= K ceil(1/eps), then argmax mu_k + sqrt(2 ln t / N_k)."""
    agents, k = means.shape
    if t <= round_robin:
        return np.full(agents, t % k, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        index = means + np.sqrt(2.0 * math.log(t) / counts)
    index = np.where(counts > 0, index, np.inf)
    return np.argmax(index, axis=1)


def byzantine_choice(means: np.ndarray, sizes: np.ndarray, t: int, *, epsilon: float, sigma: float) -> np.ndarray:
    """Alg. 3 lines 4-11: arm t for t <= K (0-based t - 1), then argmax of
    mu_R + sigma sqrt(eps) + sqrt(sigma ln(1/delta) / |S|) with delta = 1/t^2."""
    agents, k = means.shape
    if t <= k:
        return np.full(agents, t - 1, dtype=np.int64)
    log_inv_delta = 2.0 * math.log(t)
    with np.errstate(divide="ignore", invalid="ignore"):
        index = means + sigma * math.sqrt(epsilon) + np.sqrt(sigma * log_inv_delta / sizes)
    index = np.where(sizes > 0, index, np.inf)
    return np.argmax(index, axis=1)


# ---------------------------------------------------------------------- protocols
class _Trials(Protocol):
    """One vectorised clock; trial t = tick index + 1."""

    requires_connected = True
    bandit_kinds = ("bernoulli",)  # rewards in [0, 1]: sensitivity 1/n of a mean (Lemma 3.5)

    @classmethod
    def check(cls, scenario) -> None:
        if scenario.clock["jitter"] > 0:
            raise InputError(f"protocol {cls.name!r} runs synchronous trials; accepted: clock.jitter = 0",
                             key="clock.jitter")

    def start(self) -> None:
        sim = self.sim
        self.m, self.k = sim.num_agents, sim.bandit.num_arms
        self.agents = np.arange(self.m)
        self.t = 0
        self.setup()
        sim.every(sim.clock_period, self._tick)

    def _tick(self, now: float) -> None:
        self.t += 1
        self.step(self.t)

    def setup(self) -> None:
        raise NotImplementedError

    def step(self, t: int) -> None:
        raise NotImplementedError


@register_protocol
class IsolatedDPUCBInt(_Trials):
    """DP-UCB-INT (Tossou & Dimitrakakis 2016, Alg. 3) on every agent alone.

    Round-robin for t <= K f, f = ceil(1/eps); the mean of an arm is replaced by a fresh noisy
    release (interval mechanism) whenever its count reaches a multiple of f, and the agent plays
    argmax released_mean_k + sqrt(2 ln t / n_k) with its current counts.
    """

    name = "dp-ucb-int"
    description = "DP-UCB-INT (interval mechanism) on every agent in isolation (baseline)"
    requires_connected = False
    fields = {"epsilon": _epsilon_field(), "v": _v_field()}

    def setup(self) -> None:
        self.mechanism = IntervalMechanism(epsilon=self.params["epsilon"], v=self.params["v"])
        self.rng = self.sim.streams.for_("privacy")
        self.counts = np.zeros((self.m, self.k))
        self.sums = np.zeros((self.m, self.k))
        self.released = np.zeros((self.m, self.k))
        self.releases = 0

    def step(self, t: int) -> None:
        arms = ucb_choice(self.released, self.counts, t, self.k * self.mechanism.interval)
        rewards = self.sim.bandit.pull_many(self.agents, arms)
        _own_update(self, arms, rewards)

    def results(self) -> dict[str, float]:
        return {"epsilon_spent": float(np.max(self.mechanism.spent(self.counts.astype(np.int64)))),
                "releases": self.releases}


def _own_update(proto, arms: np.ndarray, rewards: np.ndarray) -> None:
    """Alg. 1 lines 3-12: update own sums and counts; release the pulled arm's mean at interval points."""
    a = proto.agents
    proto.counts[a, arms] += 1
    proto.sums[a, arms] += rewards
    n = proto.counts[a, arms]
    hit = proto.mechanism.is_release(n.astype(np.int64))
    if np.any(hit):
        who, arm = a[hit], arms[hit]
        proto.released[who, arm] = proto.mechanism.release(proto.sums[who, arm], proto.counts[who, arm], proto.rng)
        proto.releases += int(hit.sum())


@register_protocol
class PrivateMultiAgentUCB(_Trials):
    """Private Multi-Agent UCB (Alg. 2) with the private message-passing protocol (Alg. 1).

    Every trial each agent publishes <m, t, gamma, released means (K), counts (K)> (Eq. 6):
    the means are those of the interval mechanism (noise added at the source, Remark 2), the
    counts are its current pull counts (Alg. 1 line 13). It estimates each arm from its own exact
    sums plus the latest message of every agent it hears (lines 22-33).
    """

    name = "dubey2020a-private"
    description = "Private Multi-Agent UCB (Alg. 1-2): interval mechanism + LOCAL messages with life gamma"
    fields = {"epsilon": _epsilon_field(), "v": _v_field(), "gamma": _gamma_field()}
    kind = "dubey2020a-means"

    def setup(self) -> None:
        self.mechanism = IntervalMechanism(epsilon=self.params["epsilon"], v=self.params["v"])
        self.rng = self.sim.streams.for_("privacy")
        self.gamma = resolve_gamma(self.params["gamma"], self.sim.network.agent_graph)
        self.counts = np.zeros((self.m, self.k))
        self.sums = np.zeros((self.m, self.k))
        self.released = np.zeros((self.m, self.k))
        self.releases = 0
        values = [("mean", "f8", (self.k,)), ("count", "f8", (self.k,))]
        # deferred: deliveries are handled in one batch at the start of the next trial (below)
        self.flood = Flooding(self.sim, self.kind, self.gamma, values, on_latest=self._latest_changed, deferred=True)
        # running sums over the latest-message table: sum_{m'} a'_k and sum_{m'} a'_k x'_k (Alg. 1 l. 26-27)
        self.heard_counts = np.zeros((self.m, self.k))
        self.heard_sums = np.zeros((self.m, self.k))

    def _latest_changed(self, dst, origin, previous, records) -> None:
        d_count = records["count"] - previous["count"]
        d_sum = records["count"] * records["mean"] - previous["count"] * previous["mean"]
        for k in range(self.k):
            self.heard_counts[:, k] += np.bincount(dst, weights=d_count[:, k], minlength=self.m)
            self.heard_sums[:, k] += np.bincount(dst, weights=d_sum[:, k], minlength=self.m)

    def estimates(self) -> tuple[np.ndarray, np.ndarray]:
        """Group means and counts of Alg. 1 lines 22-33 (running sums over the latest-message table)."""
        counts = self.counts + self.heard_counts
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self.sums + self.heard_sums) / counts, counts

    def step(self, t: int) -> None:
        self.flood.process()  # messages delivered since the last trial (Alg. 1 l. 18-21)
        round_robin = self.k * self.mechanism.interval
        if t <= round_robin:
            arms = ucb_choice(self.sums, self.counts, t, round_robin)
        else:
            means, counts = self.estimates()
            arms = ucb_choice(means, counts, t, round_robin)
        rewards = self.sim.bandit.pull_many(self.agents, arms)
        _own_update(self, arms, rewards)
        self.flood.publish(self.agents, {"mean": self.released, "count": self.counts})
        self.flood.flush()

    def results(self) -> dict[str, float]:
        return {
            "gamma": self.gamma,
            "epsilon_spent": float(np.max(self.mechanism.spent(self.counts.astype(np.int64)))),
            "releases": self.releases,
            "records_forwarded": self.flood.records_forwarded,
            "records_duplicate": self.flood.duplicates,
        }


@register_protocol
class ByzantineProofMultiAgentUCB(_Trials):
    """Byzantine-proof Multi-Agent UCB (Alg. 3).

    Every trial each agent publishes <m, t, gamma, A_{m,t}, X_{m,t}> (Eq. 7) and adds its own
    reward and every new reward it receives to its sample set S_k of the arm (lines 14, 27); it
    estimates each arm with the trimmed mean of Definition 4.1 at delta = 1/t^2 (line 8).
    ``epsilon`` is the contamination level the agents assume (they assume every agent may be
    byzantine, Sec. 4.2); who actually lies is the engine's [adversary] section.
    """

    name = "dubey2020a-byzantine"
    description = "Byzantine-proof Multi-Agent UCB (Alg. 3): trimmed means of all rewards heard within gamma hops"
    fields = {
        "epsilon": P.real(1e-3, low=0.0, high=0.5, high_open=True,
                          doc="contamination level eps assumed by the estimator, in [0, 0.5)"),
        "sigma": P.real(0.5, low=0.0, low_open=True,
                        doc="sigma of Theorem 4.2 / Alg. 3 line 9 (1/2 bounds the std of a [0, 1] reward)"),
        "gamma": _gamma_field(),
    }
    kind = "dubey2020a-rewards"

    def setup(self) -> None:
        self.gamma = resolve_gamma(self.params["gamma"], self.sim.network.agent_graph)
        self.samples = SampleHistogram(self.m * self.k)
        self.records_corrupted = 0
        self.flood = Flooding(self.sim, self.kind, self.gamma, [("arm", "i4"), ("reward", "f8")],
                              on_receive=self._received, latest=False, deferred=True)
        self.sim.network.corruptible(self.kind, self.flood.corruptor("reward", records_corrupted=self._count))

    def _count(self, n: int) -> None:
        self.records_corrupted += n

    def _received(self, dst: np.ndarray, records: np.ndarray) -> None:
        self.samples.add(dst * self.k + records["arm"], records["reward"])  # Alg. 3 lines 26-28

    def step(self, t: int) -> None:
        self.flood.process()  # messages delivered since the last trial (Alg. 3 l. 22-28)
        if t <= self.k:
            arms = np.full(self.m, t - 1, dtype=np.int64)
        else:
            means = self.samples.trimmed_means(self.params["epsilon"], 1.0 / t**2).reshape(self.m, self.k)
            sizes = self.samples.sizes.reshape(self.m, self.k)
            arms = byzantine_choice(means, sizes, t, epsilon=self.params["epsilon"], sigma=self.params["sigma"])
        rewards = self.sim.bandit.pull_many(self.agents, arms)
        self.samples.add(self.agents * self.k + arms, rewards)  # line 14
        self.flood.publish(self.agents, {"arm": arms, "reward": rewards})  # line 16
        self.flood.flush()

    def results(self) -> dict[str, float]:
        return {
            "gamma": self.gamma,
            "records_corrupted": self.records_corrupted,
            "records_forwarded": self.flood.records_forwarded,
            "records_duplicate": self.flood.duplicates,
        }
