"""The synchronous trial clock shared by the dubey2020a protocols, and the own-statistics update
with interval-mechanism releases (Alg. 1 lines 3-12).
"""

from __future__ import annotations

import numpy as np

from netsim.errors import InputError
from netsim.protocol import Protocol


class Trials(Protocol):
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


def own_update(proto, arms: np.ndarray, rewards: np.ndarray) -> None:
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
