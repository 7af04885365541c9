"""DP-UCB-INT (Tossou & Dimitrakakis 2016, Alg. 3) on every agent in isolation: dubey2020a's baseline.
"""

from __future__ import annotations

import numpy as np

from netsim.registry import register_protocol
from protocols.dubey2020a.rules import COLUMNS, epsilon_field, ucb_choice, v_field
from protocols.dubey2020a.trials import Trials, forget_own, own_update
from protocols.privacy.interval import IntervalMechanism


@register_protocol
class IsolatedDPUCBInt(Trials):
    """DP-UCB-INT (Tossou & Dimitrakakis 2016, Alg. 3) on every agent alone.

    Round-robin for t <= K f, f = ceil(1/eps); the mean of an arm is replaced by a fresh noisy
    release (interval mechanism) whenever its count reaches a multiple of f, and the agent plays
    argmax released_mean_k + sqrt(2 ln t / n_k) with its current counts.
    """

    name = "dp-ucb-int"
    columns = {k: COLUMNS[k] for k in ("epsilon_spent", "releases")}
    description = "DP-UCB-INT (interval mechanism) on every agent in isolation (baseline)"
    requires_connected = False
    fields = {"epsilon": epsilon_field(), "v": v_field()}

    def setup(self) -> None:
        self.mechanism = IntervalMechanism(epsilon=self.params["epsilon"], v=self.params["v"])
        self.rng = self.sim.streams.for_("privacy")
        self.counts = np.zeros((self.m, self.k))
        self.sums = np.zeros((self.m, self.k))
        self.released = np.zeros((self.m, self.k))
        self.releases = 0

    def step(self, t: int) -> None:
        arms = ucb_choice(self.released, self.counts, t, self.k * self.mechanism.interval)
        active = self.active()
        if len(active) < self.m:
            arms = arms[active]
        rewards = self.sim.bandit.pull_many(active, arms)
        own_update(self, arms, rewards, active)

    def reset(self, agents: np.ndarray) -> None:
        forget_own(self, agents)

    def results(self) -> dict[str, float]:
        return {"epsilon_spent": float(np.max(self.mechanism.spent(self.counts.astype(np.int64)))),
                "releases": self.releases}
