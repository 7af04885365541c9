"""Private Multi-Agent UCB (dubey2020a Alg. 1 + Alg. 2) over the LOCAL protocol.
"""

from __future__ import annotations

import numpy as np

from netsim.flooding import Flooding
from netsim.registry import register_protocol
from protocols.dubey2020a.rules import COLUMNS, epsilon_field, gamma_field, resolve_gamma, ucb_choice, v_field
from protocols.dubey2020a.trials import Trials, forget_own, own_update
from protocols.privacy.interval import IntervalMechanism


@register_protocol
class PrivateMultiAgentUCB(Trials):
    """Private Multi-Agent UCB (Alg. 2) with the private message-passing protocol (Alg. 1).

    Every trial each agent publishes <m, t, gamma, released means (K), counts (K)> (Eq. 6):
    the means are those of the interval mechanism (noise added at the source, Remark 2), the
    counts are its current pull counts (Alg. 1 line 13). It estimates each arm from its own exact
    sums plus the latest message of every agent it hears (lines 22-33).
    """

    name = "dubey2020a-private"
    columns = {k: COLUMNS[k] for k in ("gamma", "epsilon_spent", "releases", "records_forwarded", "records_duplicate")}
    description = "Private Multi-Agent UCB (Alg. 1-2): interval mechanism + LOCAL messages with life gamma"
    fields = {"epsilon": epsilon_field(), "v": v_field(), "gamma": gamma_field()}
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
        # deferred: deliveries are handled in one batch at the start of the next trial (below);
        # sums over the latest-message table: sum_{m'} a'_k and sum_{m'} a'_k x'_k (Alg. 1 l. 26-27);
        # synchronous: one flush per trial, so paper-mode runs take the sparse-product hops
        self.flood = Flooding(self.sim, self.kind, self.gamma, values, deferred=True, synchronous=True,
                              sums={"count": "count", "sum": ("count", "mean")})

    @property
    def heard_counts(self) -> np.ndarray:
        return self.flood.sums["count"]

    @property
    def heard_sums(self) -> np.ndarray:
        return self.flood.sums["sum"]

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
        active = self.active()
        if len(active) < self.m:
            arms = arms[active]
        rewards = self.sim.bandit.pull_many(active, arms)
        own_update(self, arms, rewards, active)
        if len(active) < self.m:
            self.flood.publish(active, {"mean": self.released[active], "count": self.counts[active]})
        else:
            self.flood.publish(active, {"mean": self.released, "count": self.counts})
        self.flood.flush()

    def reset(self, agents: np.ndarray) -> None:
        forget_own(self, agents)
        self.flood.forget(agents)  # their heard records leave the running sums

    def results(self) -> dict[str, float]:
        return {
            "gamma": self.gamma,
            "epsilon_spent": float(np.max(self.mechanism.spent(self.counts.astype(np.int64)))),
            "releases": self.releases,
            "records_forwarded": self.flood.records_forwarded,
            "records_duplicate": self.flood.duplicates,
        }
