"""CENTRAL baseline of rio2023 (Sec. 6): one successive elimination on every reward, pooled at once.
"""

from __future__ import annotations

import numpy as np

from netsim.comm import register_protocol
from protocols.rio2023.bai import COMMON, MultiAgentBAI
from protocols.rio2023.paths import RewardPaths
from protocols.rio2023.rules import se_local_elimination


@register_protocol
class Central(MultiAgentBAI):
    """CENTRAL baseline (Sec. 6): every reward pooled at once, i.e. one SUCCESSIVE ELIMINATION
    with confidence 1 - delta on the global set; each round samples every arm of K once."""

    name = "central-se"
    description = "rio2023 baseline CENTRAL: one successive elimination on pooled rewards"
    fields = COMMON
    voting = False
    corruptible = ()  # the pooling is the paper's idealised full communication: no message carries a statistic

    def local_failure(self) -> float:
        return self.params["delta"]

    def threshold(self) -> int:
        return 0

    def reset_learner(self, agent: int) -> None:
        """The pooled learner lives at the server: an agent losing its state loses nothing."""

    def start_events(self) -> None:
        # The pooled learner's local step is the round index: walk its path to |K| = 1 at once.
        paths = RewardPaths(self.sim.bandit, 1, self.K, self.local_failure(), reward_stream=lambda n: 0)
        active = self.global_set
        while active.sum() > 1:
            step = paths.next_crossing(0, active)
            sums = paths.move_to(0, step, active)
            eliminated = se_local_elimination(sums, active, np.array([step]), self.K, self.local_failure())[0]
            active &= ~eliminated
            self.local_eliminations += int(eliminated.sum())
        self.sim.call_at(float(step), lambda: self._finish_central(int(step)))

    def _finish_central(self, rounds: int) -> None:
        self.finished = True
        self.identified = int(np.flatnonzero(self.global_set)[0])
        self.sample_complexity = rounds
        self.sim.stop("identified")

    def round_activation(self, agent: int, now: float) -> None:
        # Round mode: the active agent's pulls (one per arm of its K^n = K) feed the pooled learner,
        # which lives at the server: while it is down the samples cannot reach it and are lost.
        if self._up is not None and not self._up[self.server]:
            self.sums[agent] = 0.0
            return
        if agent != 0:
            self.sums[0] += self.sums[agent]
            self.sums[agent] = 0.0
        step = self.rounds_done
        eliminated = se_local_elimination(self.sums[0], self.global_set, np.array([step]), self.K,
                                          self.local_failure())[0]
        if eliminated.any():
            self.global_set &= ~eliminated
            self.active[:] = self.global_set
            self.local_eliminations += int(eliminated.sum())
            if self.global_set.sum() <= 1:
                self._finish(int(np.flatnonzero(self.global_set)[0]), "identified")
