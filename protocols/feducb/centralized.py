"""Centralized FedUCB: differentially private federated linear UCB (Dubey & Pentland, NeurIPS 2020).

Paper: "Differentially-Private Federated Linear Bandits", Alg. 1 (CENTRALIZED FEDUCB), Alg. 2
(PRIVATIZER, :mod:`protocols.privacy.gaussian_tree`), Props. 1, 2, 4, Thm. 1, Remark 1, Sec. 4.4.

Each agent i runs OFUL (Abbasi-Yadkori et al. 2011) on V_i = S_i + U_i and u~_i = s_i + u_i
(Alg. 1 line 4), where (S, s) is the privatised group statistic of the last synchronisation
and (U_i, u_i) the agent's own data since then. It plays
argmax_x <x, theta_hat> + beta ||x||_{V^-1} with theta_hat = V^-1 u~ (Alg. 1 lines 6-8, Eq. 3)
and beta from Prop. 2 (:meth:`FedUCBCalibration.beta`).

Synchronisation (Alg. 1 lines 12-21): after its update, agent i asks for a synchronisation when

    log det(V_i + x x^T + M (rho_max - rho_min) I) - log det(S_i) > D / dt_i        (line 12)

Then every agent privatises its statistic Q_i (Alg. 1 line 11) with its own tree (Alg. 2),
uploads (U_hat_i, u_hat_i) to the controller, which returns S = sum_i U_hat_i, s = sum_i
u_hat_i to all (lines 16-20); U_i, u_i, Q_i and dt_i are reset (lines 21, 24).

Decisions where the text is garbled or silent (each pinned by a test):

* dt_i counts the trials since the last synchronisation *including the current one* (it is
  incremented before the test; Wang et al. 2019 write (t - t_last) log det ratio > D). With the
  literal order (increment after the test) D / 0 would forbid synchronising two trials in a
  row, and the O(MT) mode (D = 0, synchronise every trial) would be impossible.
* The test is strict (>). With D = 0 it fires whenever the left side is positive, which it is
  after every non-zero action, so D = 0 synchronises every trial.
* One synchronisation is a real round trip through the server node (``servers = 1``): each
  triggering agent sends ``feducb-request``; the controller (ignoring requests while a round is
  open) sends ``feducb-call`` to every agent; each agent privatises and sends ``feducb-upload``;
  when all M uploads are in, the controller sends ``feducb-sync`` (S, s) to every agent and the
  round is counted in ``rounds``. With zero server delay (the paper's setting) all of it
  happens within the trial that triggered it. With delays, agents keep playing meanwhile:
  data observed after an agent's upload stay in its local (U, u) when (S, s) arrives.
* Communication modes of Experiment 2 (``communication``; T = horizon in trials):
  ``"mlogt"``  D = 2 T d / (log(rho_max/rho_min + T L^2/(d rho_min)) + 1)  (Thm. 1, O(M log T));
  ``"m1.5"``   D = T log(M T) / (d M)  (the DisLinUCB threshold of Wang et al. 2019, ref. [48],
  which Remark 1 follows for O(M^1.5 d^3) communication);
  ``"mt"``     D = 0 (synchronise every trial, O(M T)).
  ``threshold`` (a number >= 0) overrides D.
* The tree depth uses n = T releases (Remark 4: the number of rounds is not fixed a priori).
* Ties in the UCB argmax go to the lowest row index (numpy argmax).
* ``beta_scale`` multiplies beta (default 1 = Prop. 2 exactly). The bundled scenarios use 0.1
  and say why in ``scaled`` (docs/protocols/feducb.md, "Scaling").
* Private runs: right after a synchronisation the trigger's left side already holds about
  d log(1 + M (rho_max - rho_min) / lambda(S)) ~ d log 2 from the shift alone, so with the large
  Thm. 1 threshold (``mlogt``) a private run synchronises rarely; this is the rule as printed.

Linear algebra: V^-1 is kept by Sherman-Morrison rank-one updates and log det V by the
matrix-determinant lemma (log det(V + x x^T) = log det V + log(1 + x^T V^-1 x)), batched over
agents. When rho_max > rho_min the trigger's W = V + M(rho_max - rho_min) I is tracked the same
way. At each synchronisation V and W are rebuilt from S (one batched inverse / slogdet).
"""

from __future__ import annotations

import numpy as np

from netsim.protocol import Protocol
from netsim.registry import register_protocol
from protocols.feducb.linucb import (
    FIELDS,
    LinUCBState,
    calibration_for,
    communication_bound,
    sync_trigger,
    threshold_for,
    trials_of,
)
from protocols.privacy.gaussian_tree import GaussianTreePrivatizer


@register_protocol
class CentralizedFedUCB(Protocol):
    """Alg. 1 with a controller node; see the module docstring."""

    name = "feducb"
    description = "centralized FedUCB (dubey2020 Alg. 1): private federated OFUL with log-det synchronisation"
    fields = FIELDS
    servers = 1
    bandit_kinds = ("linear",)
    # Faults (docs/faults.md): a duplicated call would privatise and upload the same statistic twice
    # (spending privacy twice), so duplication is rejected; lost messages (link down) leave the round
    # open and agents go on with their last synchronised statistics; crashes are rejected.
    unsupported_faults = ("duplication",)

    def start(self) -> None:
        sim = self.sim
        M = sim.num_agents
        self.d = d = sim.bandit.dimension
        self.T = trials_of(sim)
        self.cal = calibration_for(self.params, dimension=d, agents=M, releases=self.T)
        cal = self.cal
        self.D = (threshold_for(self.params["communication"], horizon=self.T, dimension=d, agents=M,
                                rho_min=cal.rho_min, rho_max=cal.rho_max, L=self.params["L"])
                  if self.params["threshold"] == "auto" else float(self.params["threshold"]))
        # Alg. 1 line 1: S = M rho_min I; trigger shift M (rho_max - rho_min).
        self.state = LinUCBState(M, d, s0=M * cal.rho_min, shift_w=M * (cal.rho_max - cal.rho_min))
        self.privatizer = GaussianTreePrivatizer(cal, [sim.streams.for_("privacy", i) for i in range(M)])
        self.server = sim.servers[0].id
        self.everyone = np.arange(M)
        self.pending = np.zeros(M, dtype=bool)  # request sent, sync not yet received
        self.round_open = False
        self.uploads: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.requests = 0
        net = sim.network
        net.subscribe_batch("feducb-request", self._on_request)
        net.subscribe_batch("feducb-call", self._on_call)
        net.subscribe_batch("feducb-upload", self._on_upload)
        net.subscribe_batch("feducb-sync", self._on_sync)
        sim.every(sim.clock_period, self.step)

    # -- agents ---------------------------------------------------------------
    def step(self, now: float) -> None:
        state, bandit = self.state, self.sim.bandit
        contexts = bandit.observe(self.everyone)
        arms = state.choose(contexts, self.params["beta_scale"] * self.cal.beta(state.logdet_v))
        rewards = bandit.pull_many(self.everyone, arms)
        x = contexts[self.everyone, arms]
        state.update(x, rewards)
        state.dt += 1
        fire = sync_trigger(state.logdet_w, state.logdet_s, state.dt, self.D) & ~self.pending
        network = self.sim.network
        for agent in np.flatnonzero(fire):
            self.pending[agent] = True
            self.requests += 1
            network.send(int(agent), self.server, "feducb-request", None)

    def _on_call(self, messages: list) -> None:
        agents = np.array([m.dst for m in messages], dtype=np.int64)
        self.pending[agents] = True
        released = self.privatizer_release(agents)
        gram, vec = self.privatizer.split(released)
        network = self.sim.network
        for j, agent in enumerate(agents):
            network.send(int(agent), self.server, "feducb-upload", (gram[j], vec[j]), size=(self.d + 1) ** 2)

    def privatizer_release(self, agents: np.ndarray) -> np.ndarray:
        """Alg. 1 line 16: privatise Q of ``agents`` (all agents release together in Alg. 1)."""
        return self.privatizer.release(self.state.take_statistic(agents), agents)

    def _on_sync(self, messages: list) -> None:
        agents = np.array([m.dst for m in messages], dtype=np.int64)
        S, s = messages[0].payload
        self.state.synchronise(agents, S, s)
        self.pending[agents] = False

    # -- controller -----------------------------------------------------------
    def _on_request(self, messages: list) -> None:
        if self.round_open:
            return
        self.round_open = True
        self.uploads = {}
        network = self.sim.network
        for agent in range(self.sim.num_agents):
            network.send(self.server, agent, "feducb-call", None)

    def _on_upload(self, messages: list) -> None:
        for m in messages:
            self.uploads[m.src] = m.payload
        if len(self.uploads) < self.sim.num_agents:
            return
        S = sum(g for g, _ in self.uploads.values())  # Alg. 1 line 18
        s = sum(v for _, v in self.uploads.values())
        self.sim.metrics.rounds += 1
        self.round_open = False
        network = self.sim.network
        for agent in range(self.sim.num_agents):
            network.send(self.server, agent, "feducb-sync", (S, s), size=self.d * (self.d + 1))

    def results(self) -> dict[str, float]:
        cal = self.cal
        return {"threshold_D": self.D, "sync_requests": self.requests, "tree_depth": cal.m,
                "rho_min": cal.rho_min, "rho_max": cal.rho_max, "kappa": cal.kappa,
                "epsilon_spent": cal.epsilon,
                "comm_bound_prop1": communication_bound(self.D, horizon=self.T, dimension=self.d,
                                                        rho_min=cal.rho_min, rho_max=cal.rho_max,
                                                        L=self.params["L"])}
