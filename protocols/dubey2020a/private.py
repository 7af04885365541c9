"""Private Multi-Agent UCB (dubey2020a Alg. 1 + Alg. 2) over the LOCAL protocol.
"""

from __future__ import annotations

import numpy as np

from netsim.comm import Flooding, Lie, register_protocol, rewriting
from protocols.dubey2020a.rules import (
    COLUMNS,
    epsilon_field,
    gamma_field,
    record_counts_field,
    resolve_gamma,
    ucb_choice,
    v_field,
)
from protocols.dubey2020a.trials import Trials, check_record_counts, forget_own, init_own, own_update, paired_counts


@register_protocol
class PrivateMultiAgentUCB(Trials):
    """Private Multi-Agent UCB (Alg. 2) with the private message-passing protocol (Alg. 1).

    Every trial each agent publishes <m, t, gamma, released means (K), counts (K)> (Eq. 6):
    the means are those of the interval mechanism (noise added at the source, Remark 2), the
    counts are its current pull counts (Alg. 1 line 13; ``record_counts = "released"``: the
    counts at release), and an arm is absent (count 0) until its first release
    (:func:`~protocols.dubey2020a.trials.paired_counts`). It estimates each arm from its own exact
    sums plus the latest message of every agent it hears (lines 22-33).
    """

    name = "dubey2020a-private"
    columns = {k: COLUMNS[k] for k in ("gamma", "epsilon_spent", "releases", "records_forwarded", "records_duplicate")}
    description = "Private Multi-Agent UCB (Alg. 1-2): interval mechanism + LOCAL messages with life gamma"
    fields = {"epsilon": epsilon_field(), "v": v_field(), "gamma": gamma_field(),
              "record_counts": record_counts_field()}
    kind = "dubey2020a-means"
    corruptible = (kind,)
    relays = True

    @classmethod
    def check(cls, scenario) -> None:
        super().check(scenario)
        check_record_counts(cls, scenario)

    def setup(self) -> None:
        init_own(self)
        self.gamma = resolve_gamma(self.params["gamma"], self.sim.network.agent_graph)
        values = [("mean", "f8", (self.k,)), ("count", "f8", (self.k,))]
        # deferred: deliveries are handled in one batch at the start of the next trial (below);
        # sums over the latest-message table: sum_{m'} a'_k and sum_{m'} a'_k x'_k (Alg. 1 l. 26-27);
        # synchronous: one flush per trial, so paper-mode runs take the sparse-product hops
        self.flood = Flooding(self.sim, self.kind, self.gamma, values, deferred=True, synchronous=True,
                              sums={"count": "count", "sum": ("count", "mean")})
        self.sim.network.corruptible(self.kind, rewriting(self._lie))

    @staticmethod
    def _lie(payload: np.ndarray, lie: Lie) -> np.ndarray:
        """Where the statistics of a flush sit: each mean and count of the records the sender lies about.

        A byzantine sender lies about its own records (``origin == sender``), and with
        ``adversary.relay`` about every record it forwards; a corrupting link about every record.
        Each of the 2K values of such a record is replaced independently (:class:`netsim.comm.corruption.Lie`).
        """
        rows = np.ones(len(payload), dtype=bool) if lie.relay else payload["origin"] == lie.sender
        mean, count = lie(payload["mean"][rows]), lie(payload["count"][rows])
        if not lie.hits:
            return payload
        out = payload.copy()
        out["mean"][rows], out["count"][rows] = mean, count
        return out

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
            self.flood.publish(active, {"mean": self.released[active], "count": paired_counts(self, active)})
        else:
            self.flood.publish(active, {"mean": self.released, "count": paired_counts(self)})
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
