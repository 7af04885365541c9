"""Rio, Barlier, Colin & Soare (ICML 2023), "Multi-Agent Best Arm Identification with Private
Communications": MASE (Alg. 1), DP-MASE (Alg. 2 + appendix Alg. 4), CORRUPTED ELIMINATION
(Alg. 3 + appendix Alg. 4), Feraud et al. (2019) (CORRUPTED ELIMINATION with xi = 0), and the
baselines CENTRAL (one pooled successive elimination) and INDEPENDENT (Sec. 6).

Setting (Sec. 3): N agents share one K-armed bandit; one agent per round, drawn from
``P_N(t)`` (Assumptions 3.2-3.3), samples every arm of its local active set ``K^n``. Agents
vote against arms they eliminate locally by sending the arm index to a coordinator
(Assumption 3.4), which removes arm k from the global set ``K`` when ``lambda_k > M`` and tells
the agents, who drop it from ``K^n`` when the algorithm says (Alg. 2 line 18: at the end of the
agent's epoch; Alg. 3 line 12: at the agent's next activation). The run ends when ``|K| = 1``;
``sample_complexity`` is the number of rounds (iterations of the while loop).

Engine wiring: the coordinator is the scenario's single server node; votes are ``"vote"``
messages (payload: arm index) agent -> server and eliminations ``"eliminate"`` messages
server -> every agent still in ``N(t)``, both over engine links (delays and losses apply and
are counted). Agents that are done (``|K^n| <= 1``) leave ``N(t)``.

Two simulation modes (protocol key ``simulation``):

* ``"events"`` (default): only epoch ends / local steps where an elimination can happen /
  activations that apply a global elimination are simulated, at exactly sampled times; see
  :mod:`protocols.rio2023_paths` for the derivation (Poissonised rounds, Gamma waiting times,
  binomial/beta bridges, Binomial epoch sums, per-step reward blocks). The cost grows
  with epochs and votes, not with rounds. Engine time is Poissonised round time.
* ``"rounds"``: the reference, one engine tick per round (engine time = round index), the
  active agent drawn from ``P_N(t)`` and one pull per active arm. With zero delays both modes
  give the same law of every result (tested with a two-sample test).

Decisions (see also :mod:`protocols.rio2023_rules`):

* An agent leaves ``N(t)`` when ``|K^n| <= 1`` (the paper writes ``= 1``; a set emptied by
  synchronisation would otherwise keep a useless agent forever).
* Alg. 2 computes the next R(e) (line 17) before synchronising ``K^n`` (line 18), and Alg. 3
  synchronises after the local elimination and the done test: followed literally.
* CORRUPTED ELIMINATION: a corrupted vote (``nu = 0``) is simply not sent (the message
  ``lambda_k nu_k = 0`` carries nothing); it is counted in ``votes_corrupted``.
* If every agent leaves while ``|K| > 1`` the run stops (``deadlock = 1``) and the identified
  arm is the remaining arm with the fewest votes.
* INDEPENDENT: every agent runs successive elimination with confidence ``1 - delta`` and no
  communication; the run ends when every agent is done and the identified arm is the most
  frequent answer (``agents_correct`` gives the fraction of agents that found the best arm).
* CENTRAL: one successive elimination on all rewards pooled (confidence ``1 - delta``), each
  round sampling every arm of ``K``; its pulls are booked on agent 0's reward stream.
* DP-MASE accepts Bernoulli arms only: its Laplace sensitivity 1/R(e) assumes rewards in
  [0, 1] (Definition 3.1). The successive-elimination protocols accept Gaussian arms too
  (Problem 2 of appendix C.1).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from netsim import params as P
from netsim.errors import InputError
from netsim.protocol import Protocol
from netsim.registry import register_protocol
from protocols.privacy.mechanisms import LaplaceMechanism
from protocols.rio2023_paths import ActivationClock, RewardPaths
from protocols.rio2023_rules import (
    agent_weights,
    dp_local_elimination,
    dp_radii,
    epoch_length,
    eta_xi,
    se_eliminated,
    se_local_elimination,
    voting_threshold,
)

COMMON = {
    "delta": P.real(0.05, low=0.0, high=1.0, low_open=True, high_open=True,
                    doc="global failure probability delta (Sec. 6: 0.05)"),
    "agent_distribution": P.choice(("uniform", "zipf"), "uniform",
                                   doc="P_N: uniform, or zipf P(n) ∝ (n + offset)^-exponent (appendix C.4)"),
    "zipf_exponent": P.real(0.8, low=0.0, low_open=True, doc="gamma of the zipf P_N (appendix C.4: 0.8)"),
    "zipf_offset": P.real(0.0, low=0.0, doc="alpha of the zipf P_N (appendix C.4)"),
    "simulation": P.choice(("events", "rounds"), "events",
                           doc="'events': exact-law epoch/elimination events; 'rounds': round by round"),
    "tolerance": P.real(0.0, low=0.0, doc="epsilon of 'epsilon-optimal' used for the `correct` column"),
}


def _check_probability_open(value: float, key: str) -> None:
    if not 0.0 < value < 1.0:
        raise InputError(f"got {value!r}; expected a number > 0 and < 1", key=key)


class _MultiAgentBAI(Protocol):
    """Shared state and wiring of the rio2023 family (see module docstring)."""

    servers = 1
    bandit_kinds = ("bernoulli", "gaussian")
    voting = True

    # ---------------------------------------------------------------- per-protocol hooks
    def local_failure(self) -> float:
        raise NotImplementedError

    def threshold(self) -> int:
        return voting_threshold(self.params["delta"], self.local_failure())

    # ---------------------------------------------------------------- setup
    def start(self) -> None:
        sim = self.sim
        self.N = sim.num_agents
        self.K = sim.bandit.num_arms
        self.server = sim.servers[0].id
        self.weights = agent_weights(self.N, self.params["agent_distribution"], self.params["zipf_exponent"],
                                     self.params["zipf_offset"])
        self.M = self.threshold()
        self.failure = self.local_failure()
        self.active = np.ones((self.N, self.K), dtype=bool)       # K^n
        self.told = np.zeros((self.N, self.K), dtype=bool)        # global eliminations delivered to n
        self.in_play = np.ones(self.N, dtype=bool)                # N(t)
        self.answer = np.full(self.N, -1)
        self.global_set = np.ones(self.K, dtype=bool)             # K
        self.votes = np.zeros(self.K, dtype=np.int64)             # lambda_k (delivered)
        self.votes_sent = 0
        self.votes_corrupted = 0
        self.local_eliminations = 0
        self.finished = False
        self.deadlock = 0
        self.identified = -1
        self.sample_complexity = -1
        self.timing_rng = sim.streams.for_("sampling")
        self.noise_rng = sim.streams.for_("privacy")
        self.events_mode = self.params["simulation"] == "events"
        net = sim.network
        net.subscribe_batch("vote", self._on_votes)
        net.subscribe_batch("eliminate", self._on_eliminations)
        if self.events_mode:
            self.clock = ActivationClock(self.weights, self.timing_rng)
            self.start_events()
        else:
            self.t_local = np.zeros(self.N, dtype=np.int64)
            self.sums = np.zeros((self.N, self.K))
            self.rounds_done = 0
            self._cum = np.cumsum(self.weights)
            self.start_rounds()
            sim.every(1.0, self._round, start=1.0)

    def start_events(self) -> None:
        raise NotImplementedError

    def start_rounds(self) -> None:
        pass

    # ---------------------------------------------------------------- round-by-round reference
    def _draw_active(self) -> int:
        u = self.timing_rng.random() * self._cum[-1]
        return int(min(np.searchsorted(self._cum, u, side="right"), self.N - 1))

    def _round(self, now: float) -> None:
        if self.finished:
            return
        self.rounds_done += 1
        n = self._draw_active()
        arms = np.flatnonzero(self.active[n])
        if len(arms):
            self.sums[n, arms] += self.sim.bandit.pull_many(np.full(len(arms), n), arms, 1)
        self.t_local[n] += 1
        self.round_activation(n, now)

    def round_activation(self, agent: int, now: float) -> None:
        raise NotImplementedError

    def _leave_rounds(self, agent: int) -> None:
        self.in_play[agent] = False
        w = self.weights * self.in_play
        self._cum = np.cumsum(w)

    # ---------------------------------------------------------------- voting and the coordinator
    def cast(self, agent: int, arms: np.ndarray) -> None:
        """Alg. 1-3: agent votes against each arm of ``arms`` (one message per arm)."""
        self.local_eliminations += len(arms)
        if not self.voting:
            return
        keep = self.keep_votes(len(arms))
        self.votes_corrupted += int(len(arms) - keep.sum())
        for k in arms[keep]:
            self.votes_sent += 1
            self.sim.network.send(agent, self.server, "vote", int(k))

    def keep_votes(self, count: int) -> np.ndarray:
        return np.ones(count, dtype=bool)

    def _on_votes(self, messages) -> None:
        for msg in messages:
            if self.finished:
                return
            k = msg.payload
            self.votes[k] += 1
            if self.global_set[k] and self.votes[k] > self.M:          # Alg. 1 line 12, Alg. 2 line 20
                self.global_set[k] = False
                if self.global_set.sum() == 1:
                    self._finish(int(np.flatnonzero(self.global_set)[0]), "identified")
                    return
                for agent in np.flatnonzero(self.in_play):
                    self.sim.network.send(self.server, int(agent), "eliminate", int(k))

    def _on_eliminations(self, messages) -> None:
        touched = []
        for msg in messages:
            self.told[msg.dst, msg.payload] = True
            touched.append(msg.dst)
        if self.events_mode and not self.finished:
            self.on_told(np.unique(np.array(touched, dtype=np.int64)))

    def on_told(self, agents: np.ndarray) -> None:
        """Event mode: agents just learnt of a global elimination."""

    def leave(self, agent: int, now: float) -> None:
        """Agent is done: it leaves N(t) (Alg. 2 line 13, Alg. 3 line 11)."""
        arms = np.flatnonzero(self.active[agent])
        self.answer[agent] = arms[0] if len(arms) else -1
        if self.events_mode:
            self.in_play[agent] = False
        else:
            self._leave_rounds(agent)
        if not self.in_play.any() and not self.finished:
            self.all_left(now)

    def all_left(self, now: float) -> None:
        left = np.flatnonzero(self.global_set)
        self.deadlock = 1
        self._finish(int(left[np.argmin(self.votes[left])]), "no active agent left")

    def _finish(self, arm: int, reason: str) -> None:
        self.finished = True
        self.identified = arm
        if self.events_mode:
            self.sample_complexity = self.clock.rounds(self.in_play, self.sim.now)
        else:
            self.sample_complexity = self.rounds_done
        self.sim.stop(reason)

    # ---------------------------------------------------------------- results
    def results(self) -> dict[str, Any]:
        means = self.sim.bandit.means
        best = float(means.max())
        ok = self.identified >= 0 and means[self.identified] >= best - self.params["tolerance"] - 1e-12
        answered = self.answer[self.answer >= 0]
        if self.events_mode:
            simulated = self.sample_complexity if self.finished else self.clock.rounds(self.in_play, self.sim.now)
        else:
            simulated = self.rounds_done
        return {
            "sample_complexity": self.sample_complexity,
            "rounds_simulated": simulated,
            "identified_arm": self.identified,
            "correct": int(bool(ok)),
            "votes_sent": self.votes_sent,
            "votes_corrupted": self.votes_corrupted,
            "local_eliminations": self.local_eliminations,
            "global_eliminations": int(self.K - self.global_set.sum()),
            "vote_threshold": self.M,
            "agents_done": int((~self.in_play).sum()),
            "agents_correct": float(np.mean(means[answered] >= best - self.params["tolerance"] - 1e-12))
            if len(answered) else float("nan"),
            "deadlock": self.deadlock,
        }


# ====================================================================== successive elimination family
class _SuccessiveElimination(_MultiAgentBAI):
    """MASE / CORRUPTED ELIMINATION / INDEPENDENT: local successive elimination at every step
    (CE appendix Alg. 4), votes through the coordinator."""

    # ---------------------------------------------------------------- event mode
    def start_events(self) -> None:
        self.paths = RewardPaths(self.sim.bandit, self.N, self.K, self.local_failure())
        self.paths.prefill(np.arange(self.N), self.active, 128)
        for n in range(self.N):
            self._plan(n, 0.0)

    def _plan(self, n: int, now: float) -> None:
        if self.active[n].sum() <= 1:
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
        if self.active[n].sum() <= 1:                                      # line 10
            self.leave(n, now)
            return
        self.active[n] &= ~self.told[n]                                    # line 12 (synchronise)


@register_protocol
class CorruptedElimination(_SuccessiveElimination):
    """CORRUPTED ELIMINATION (Alg. 3): local SE with failure eta_xi (Prop. 5.1), votes kept w.p. 1 - xi."""

    name = "corrupted-elimination"
    description = "rio2023 CORRUPTED ELIMINATION: (eps, eta)-private multi-agent BAI with corrupted votes"
    fields: ClassVar[dict[str, P.Field]] = {
        **COMMON,
        "eta": P.real(0.9, low=0.0, high=1.0, low_open=True, high_open=True,
                      doc="apparent privacy level eta (Sec. 6.3: 0.9)"),
        "xi": P.real(0.0, low=0.0, high=1.0, high_open=True,
                     doc="vote corruption probability xi (Sec. 6.3: 0, 0.05, 0.1)"),
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
        **COMMON,
        "beta": P.real(0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                       doc="failure probability of each agent's successive elimination"),
        "threshold": P.either(P.choice(("auto",)), P.integer(low=0), default="auto",
                              doc="voting threshold M ('auto': ceil(log delta / log beta))"),
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

    def local_failure(self) -> float:
        return self.params["delta"]

    def threshold(self) -> int:
        return 0

    def all_left(self, now: float) -> None:
        answers = self.answer[self.answer >= 0]
        arm = int(np.bincount(answers, minlength=self.K).argmax()) if len(answers) else -1
        self._finish(arm, "every agent done")


# ====================================================================== DP-MASE
@register_protocol
class DPMASE(_MultiAgentBAI):
    """DP-MASE (Alg. 2) with the DP local elimination of appendix Alg. 4."""

    name = "dp-mase"
    description = "rio2023 DP-MASE: multi-agent successive elimination with eps-DP communications"
    bandit_kinds = ("bernoulli",)
    fields: ClassVar[dict[str, P.Field]] = {
        **COMMON,
        "epsilon": P.real(0.1, low=0.0, low_open=True, allow_inf=True,
                          doc="privacy level eps (Sec. 6.2: 0.05, 0.1, 0.25); inf = no noise"),
        "beta": P.real(0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                       doc="local failure probability beta (appendix C.3: 0.5)"),
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


# ====================================================================== CENTRAL
@register_protocol
class Central(_MultiAgentBAI):
    """CENTRAL baseline (Sec. 6): every reward pooled at once, i.e. one SUCCESSIVE ELIMINATION
    with confidence 1 - delta on the global set; each round samples every arm of K once."""

    name = "central-se"
    description = "rio2023 baseline CENTRAL: one successive elimination on pooled rewards"
    fields = COMMON
    voting = False

    def local_failure(self) -> float:
        return self.params["delta"]

    def threshold(self) -> int:
        return 0

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
        # Round mode: the active agent's pulls (one per arm of its K^n = K) feed the pooled learner.
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
