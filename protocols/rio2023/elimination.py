"""Successive-elimination protocols of rio2023: MASE (Alg. 1), CORRUPTED ELIMINATION (Alg. 3 +
appendix Alg. 4), Feraud et al. (2019) and the INDEPENDENT baseline.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from netsim.comm import InputError, register_protocol
from netsim.comm import params as P
from protocols.rio2023.bai import COMMON, VOTING, MultiAgentBAI
from protocols.rio2023.paths import RewardPaths
from protocols.rio2023.rules import eta_xi, se_eliminated


class _SuccessiveElimination(MultiAgentBAI):
    """MASE / CORRUPTED ELIMINATION / INDEPENDENT: local successive elimination at every step
    (CE appendix Alg. 4), votes through the coordinator."""

    # ---------------------------------------------------------------- event mode
    def start_events(self) -> None:
        self.paths = RewardPaths(self.sim.bandit, self.N, self.K, self.local_failure())
        self.paths.prefill(np.arange(self.N), 128)
        for n in range(self.N):
            self._plan(n, 0.0)

    def _plan(self, n: int, now: float) -> None:
        if np.count_nonzero(self.active[n]) <= 1:
            steps = 1                          # leaves at its next activation (Alg. 3 line 10)
        else:
            steps = self.paths.next_crossing(n, self.active[n]) - int(self.paths.t[n])
        when = self.clock.schedule(n, now, steps)
        self._call(n, when)

    def _call(self, n: int, when: float) -> None:
        version = int(self.clock.version[n])
        self.sim.call_at(when, lambda: self._fire(n, version))

    def _fire(self, n: int, version: int) -> None:
        if self.finished or version != self.clock.version[n] or not self.in_play[n]:
            return
        now = self.sim.now
        step = int(self.clock.event_step[n])
        sums = self.paths.move_to(n, step, self.active[n])
        self.clock.last_step[n] = step
        self.activation(n, sums, step, now)
        if self.in_play[n] and not self.finished:
            self._plan(n, now)

    def on_told(self, agents: np.ndarray) -> None:
        affected = agents[self.in_play[agents] & (self.active[agents] & self.told[agents]).any(axis=1)]
        for n in self.clock.interrupt(affected, self.sim.now):
            self._call(int(n), float(self.clock.event_time[n]))

    # ---------------------------------------------------------------- round mode
    def round_activation(self, agent: int, now: float) -> None:
        self.activation(agent, self.sums[agent], int(self.t_local[agent]), now)

    # ---------------------------------------------------------------- Alg. 3 lines 6-12
    def activation(self, n: int, sums: np.ndarray, step: int, now: float) -> None:
        eliminated = se_eliminated(sums, np.flatnonzero(self.active[n]), step, self.K, self.failure)   # CE Alg. 4
        if len(eliminated):
            self.active[n, eliminated] = False                             # line 8
            self.cast(n, eliminated)                                      # line 9
        if np.count_nonzero(self.active[n]) <= 1:                          # line 10
            self.leave(n, now)
            return
        self.active[n] &= ~self.told[n]                                    # line 12 (synchronise)


@register_protocol
class CorruptedElimination(_SuccessiveElimination):
    """CORRUPTED ELIMINATION (Alg. 3): local SE with failure eta_xi (Prop. 5.1), votes kept w.p. 1 - xi."""

    name = "corrupted-elimination"
    columns = {**MultiAgentBAI.columns,
               "eta_xi": P.column("vote flip probability η·ξ",
                                  doc="probability that a vote reaches the server flipped")}
    description = "rio2023 CORRUPTED ELIMINATION: (eps, eta)-private multi-agent BAI with corrupted votes"
    fields: ClassVar[dict[str, P.Field]] = {
        **VOTING,
        "eta": P.real(0.9, low=0.0, high=1.0, low_open=True, high_open=True,
                      doc="apparent privacy level eta (Sec. 6.3: 0.9)", label="apparent privacy level η", unit=""),
        "xi": P.real(0.0, low=0.0, high=1.0, high_open=True,
                     doc="vote corruption probability xi (Sec. 6.3: 0, 0.05, 0.1)",
                     label="vote corruption probability ξ", unit=""),
    }

    @classmethod
    def check(cls, scenario) -> None:
        super().check(scenario)
        p = scenario.protocol
        k = scenario.bandit["arms"]
        if eta_xi(p["eta"], p.get("xi", 0.0), k) <= 0.0:
            limit = 1.0 - (1.0 - p["eta"]) ** (1.0 / (k - 1))
            raise InputError(f"eta_xi = max(0, 1 - (1 - eta)/(1 - xi)^(K-1)) is 0; accepted: xi < {limit:.6g} "
                             f"for eta = {p['eta']} and K = {k}", key="protocol.xi")

    def local_failure(self) -> float:
        return eta_xi(self.params["eta"], self.params.get("xi", 0.0), self.sim.bandit.num_arms)

    def keep_votes(self, count: int) -> np.ndarray:
        xi = self.params.get("xi", 0.0)
        if xi == 0.0:
            return np.ones(count, dtype=bool)
        return self.noise_rng.random(count) >= xi                         # nu_k ~ B(1 - xi), CE Alg. 4 line 7

    def results(self) -> dict[str, Any]:
        out = super().results()
        out["eta_xi"] = self.local_failure()
        return out


@register_protocol
class Feraud2019(CorruptedElimination):
    """Feraud, Alami & Laroche (2019) as described in Sec. 5.1: CORRUPTED ELIMINATION with xi = 0."""

    name = "feraud2019"
    description = "Feraud et al. 2019 decentralized elimination (rio2023 CE with xi = 0)"
    fields: ClassVar[dict[str, P.Field]] = {k: v for k, v in CorruptedElimination.fields.items() if k != "xi"}


@register_protocol
class MASE(_SuccessiveElimination):
    """MASE (Alg. 1) with SUCCESSIVE ELIMINATION as the local routine (local failure beta)."""

    name = "mase"
    description = "rio2023 Alg. 1: multi-agent successive elimination with voting"
    fields: ClassVar[dict[str, P.Field]] = {
        **VOTING,
        "beta": P.real(0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                       doc="failure probability of each agent's successive elimination",
                       label="local failure probability β", unit=""),
        "threshold": P.either(P.choice(("auto",)), P.integer(low=0), default="auto",
                              doc="voting threshold M ('auto': ceil(log delta / log beta))",
                              label="voting threshold", unit=""),
    }

    def local_failure(self) -> float:
        return self.params["beta"]

    def threshold(self) -> int:
        if self.params["threshold"] == "auto":
            return super().threshold()
        return int(self.params["threshold"])


@register_protocol
class Independent(_SuccessiveElimination):
    """INDEPENDENT baseline (Sec. 6): every agent runs SE alone (confidence 1 - delta), no messages."""

    name = "independent-se"
    description = "rio2023 baseline INDEPENDENT: one successive elimination per agent, no communication"
    fields = COMMON
    voting = False
    sends = False
    corruptible = ()

    def local_failure(self) -> float:
        return self.params["delta"]

    def threshold(self) -> int:
        return 0

    def all_left(self, now: float) -> None:
        answers = self.answer[self.answer >= 0]
        arm = int(np.bincount(answers, minlength=self.K).argmax()) if len(answers) else -1
        self._finish(arm, "every agent done")
