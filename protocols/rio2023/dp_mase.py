"""DP-MASE (rio2023 Alg. 2) with the DP local elimination of appendix Alg. 4.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from netsim.comm import params as P
from netsim.comm import register_protocol
from protocols.privacy.mechanisms import LaplaceMechanism
from protocols.rio2023.bai import VOTING, MultiAgentBAI
from protocols.rio2023.rules import dp_local_elimination, dp_radii, epoch_length


@register_protocol
class DPMASE(MultiAgentBAI):
    """DP-MASE (Alg. 2) with the DP local elimination of appendix Alg. 4."""

    name = "dp-mase"
    columns = {**MultiAgentBAI.columns, "epsilon": P.column("privacy level ε", doc="the run's ε"),
               "max_epoch": P.column("last epoch", doc="the largest epoch an agent reached")}
    description = "rio2023 DP-MASE: multi-agent successive elimination with eps-DP communications"
    bandit_kinds = ("bernoulli",)
    fields: ClassVar[dict[str, P.Field]] = {
        **VOTING,
        "epsilon": P.real(0.1, low=0.0, low_open=True, allow_inf=True,
                          doc="privacy level eps (Sec. 6.2: 0.05, 0.1, 0.25); inf = no noise",
                          label="privacy level ε", unit=""),
        "beta": P.real(0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                       doc="local failure probability beta (appendix C.3: 0.5)",
                       label="local failure probability β", unit=""),
    }

    def local_failure(self) -> float:
        return self.params["beta"]

    def _setup_epochs(self) -> None:
        self.epoch = np.ones(self.N, dtype=np.int64)                     # decision 1: e starts at 1
        first = epoch_length(1, self.K, self.params["epsilon"], self.params["beta"])
        self.length = np.full(self.N, first, dtype=np.int64)             # R(e^n)

    def start_events(self) -> None:
        self._setup_epochs()
        for n in range(self.N):
            self._call(n, self.clock.schedule(n, 0.0, int(self.length[n])))

    def start_rounds(self) -> None:
        self._setup_epochs()
        self.r = np.zeros(self.N, dtype=np.int64)

    def _call(self, n: int, when: float) -> None:
        version = int(self.clock.version[n])
        self.sim.call_at(when, lambda: self._fire(n, version))

    def _fire(self, n: int, version: int) -> None:
        if self.finished or version != self.clock.version[n]:
            return
        arms = np.flatnonzero(self.active[n])
        length = int(self.length[n])
        sums = np.zeros(self.K)
        if len(arms):                                                     # Alg. 2 line 6, R(e) times
            sums[arms] = self.sim.bandit.pull_many(np.full(len(arms), n), arms, length)
        self.clock.last_step[n] = self.clock.event_step[n]
        self.epoch_end(n, sums, self.sim.now)
        if self.in_play[n] and not self.finished:
            self._call(n, self.clock.schedule(n, self.sim.now, int(self.length[n])))

    def reset_learner(self, agent: int) -> None:
        super().reset_learner(agent)
        self.epoch[agent] = 1
        self.length[agent] = epoch_length(1, self.K, self.params["epsilon"], self.params["beta"])
        self.r[agent] = 0

    def round_activation(self, agent: int, now: float) -> None:
        self.r[agent] += 1                                                # Alg. 2 line 7
        if self.r[agent] == self.length[agent]:                           # line 8
            self.epoch_end(agent, self.sums[agent].copy(), now)
            self.sums[agent] = 0.0                                        # line 16 (reset)
            self.r[agent] = 0

    def epoch_end(self, n: int, sums: np.ndarray, now: float) -> None:
        """Alg. 2 lines 9-18 with appendix Alg. 4 (DP-MASE Local Elimination)."""
        eps, beta = self.params["epsilon"], self.params["beta"]
        e, length = int(self.epoch[n]), int(self.length[n])
        active = self.active[n]
        size = int(active.sum())
        if size >= 2:
            mechanism = LaplaceMechanism(epsilon=eps, sensitivity=1.0 / length)   # Lap(1/(eps R(e))), line 6
            noisy = mechanism.randomise(sums / length, self.noise_rng)
            h, c = dp_radii(e, size, length, eps, beta)                    # lines 4-5
            eliminated = dp_local_elimination(noisy, active, h, c)         # lines 7-9
            if eliminated.any():
                self.active[n] &= ~eliminated                              # Alg. 2 line 10
                self.cast(n, np.flatnonzero(eliminated))                  # line 11
        if self.active[n].sum() <= 1:                                      # line 12
            self.leave(n, now)
            return
        self.epoch[n] = e + 1                                              # line 15
        self.length[n] = epoch_length(e + 1, int(self.active[n].sum()), eps, beta)   # line 17
        self.active[n] &= ~self.told[n]                                    # line 18 (synchronise)

    def results(self) -> dict[str, Any]:
        out = super().results()
        out["epsilon"] = self.params["epsilon"]
        out["max_epoch"] = int(self.epoch.max()) if hasattr(self, "epoch") else 0
        return out
