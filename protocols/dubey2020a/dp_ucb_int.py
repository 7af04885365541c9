"""DP-UCB-INT (Tossou & Dimitrakakis 2016, Alg. 3) on every agent in isolation: dubey2020a's baseline.
"""

from __future__ import annotations

import numpy as np

from netsim.comm import register_protocol
from protocols.dubey2020a.rules import COLUMNS, epsilon_field, record_counts_field, ucb_choice, v_field
from protocols.dubey2020a.trials import Trials, check_record_counts, forget_own, init_own, own_update, paired_counts


@register_protocol
class IsolatedDPUCBInt(Trials):
    """DP-UCB-INT (Tossou & Dimitrakakis 2016, Alg. 3) on every agent alone.

    Round-robin for t <= K f, f = ceil(1/eps); the mean of an arm is replaced by a fresh noisy
    release (interval mechanism) whenever its count reaches a multiple of f, and the agent plays
    argmax released_mean_k + sqrt(2 ln t / n_k). ``record_counts`` picks n_k as for the
    multi-agent protocol's records (:func:`~protocols.dubey2020a.trials.paired_counts`):
    ``"current"`` (default, as DP-UCB-INT is usually written: the current count), ``"released"``
    (the count at the mean's release, so the bonus is the width of the mean it is added to). An
    arm never released has n_k = 0 (index +inf): it only happens to an agent that restarted with
    its state lost, after the round-robin.
    """

    name = "dp-ucb-int"
    columns = {k: COLUMNS[k] for k in ("epsilon_spent", "releases")}
    description = "DP-UCB-INT (interval mechanism) on every agent in isolation (baseline)"
    requires_connected = False
    sends = False
    fields = {"epsilon": epsilon_field(), "v": v_field(), "record_counts": record_counts_field()}

    @classmethod
    def check(cls, scenario) -> None:
        super().check(scenario)
        check_record_counts(cls, scenario)

    def setup(self) -> None:
        init_own(self)

    def step(self, t: int) -> None:
        arms = ucb_choice(self.released, paired_counts(self), t, self.k * self.mechanism.interval)
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
