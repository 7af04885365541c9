"""Byzantine-proof Multi-Agent UCB (dubey2020a Alg. 3): trimmed means (Def. 4.1) of every reward heard.
"""

from __future__ import annotations

import numpy as np

from netsim.comm import Flooding, register_protocol
from netsim.comm import params as P
from protocols.dubey2020a.rules import COLUMNS, byzantine_choice, gamma_field, resolve_gamma
from protocols.dubey2020a.trials import Trials
from protocols.robust import SampleSets


@register_protocol
class ByzantineProofMultiAgentUCB(Trials):
    """Byzantine-proof Multi-Agent UCB (Alg. 3).

    Every trial each agent publishes <m, t, gamma, A_{m,t}, X_{m,t}> (Eq. 7) and adds its own
    reward and every new reward it receives to its sample set S_k of the arm (lines 14, 27); it
    estimates each arm with the trimmed mean of Definition 4.1 at delta = 1/t^2 (line 8).
    ``epsilon`` is the contamination level the agents assume (they assume every agent may be
    byzantine, Sec. 4.2); who actually lies is the engine's [adversary] section.
    """

    name = "dubey2020a-byzantine"
    columns = {k: COLUMNS[k] for k in ("gamma", "records_corrupted", "records_forwarded", "records_duplicate")}
    description = "Byzantine-proof Multi-Agent UCB (Alg. 3): trimmed means of all rewards heard within gamma hops"
    fields = {
        "epsilon": P.real(1e-3, low=0.0, high=0.5, high_open=True,
                          doc="contamination level eps assumed by the estimator, in [0, 0.5)",
                          label="contamination level ε", unit=""),
        "sigma": P.real(0.5, low=0.0, low_open=True,
                        doc="sigma of Theorem 4.2 / Alg. 3 line 9 (1/2 bounds the std of a [0, 1] reward)",
                        label="reward scale σ", unit=""),
        "gamma": gamma_field(),
    }
    kind = "dubey2020a-rewards"
    corruptible = (kind,)
    relays = True

    def setup(self) -> None:
        self.gamma = resolve_gamma(self.params["gamma"], self.sim.network.agent_graph)
        self.samples = SampleSets(self.m * self.k)
        self.records_corrupted = 0
        # every new record in arrival order (the X/Y split of Def. 4.1); synchronous: one process, publish
        # and flush per trial, so paper-mode runs take the sparse-product hops, in the message path's order
        self.flood = Flooding(self.sim, self.kind, self.gamma, [("arm", "i4"), ("reward", "f8")],
                              on_receive=self._received, latest=False, deferred=True, synchronous=True)
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
        active = self.active()
        if len(active) < self.m:
            arms = arms[active]
        rewards = self.sim.bandit.pull_many(active, arms)
        self.samples.add(active * self.k + arms, rewards)  # line 14
        self.flood.publish(active, {"arm": arms, "reward": rewards})  # line 16
        self.flood.flush()

    def reset(self, agents: np.ndarray) -> None:
        self.samples.clear((agents[:, None] * self.k + np.arange(self.k)).ravel())
        self.flood.forget(agents)

    def results(self) -> dict[str, float]:
        return {
            "gamma": self.gamma,
            "records_corrupted": self.records_corrupted,
            "records_forwarded": self.flood.records_forwarded,
            "records_duplicate": self.flood.duplicates,
        }
