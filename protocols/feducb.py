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

import math
from typing import Any

import numpy as np

from netsim import params as P
from netsim.protocol import Protocol
from netsim.registry import register_protocol
from protocols.privacy.gaussian_tree import FedUCBCalibration, GaussianTreePrivatizer

MODES = ("mlogt", "m1.5", "mt")


# ---------------------------------------------------------------------- pure rules
def threshold_for(mode: str, *, horizon: int, dimension: int, agents: int, rho_min: float, rho_max: float,
                  L: float = 1.0) -> float:
    """Synchronisation threshold D of each communication mode (module docstring, Experiment 2)."""
    T, d, M = horizon, dimension, agents
    if mode == "mlogt":  # Thm. 1
        return 2.0 * T * d / (math.log(rho_max / rho_min + T * L**2 / (d * rho_min)) + 1.0)
    if mode == "m1.5":  # Wang et al. 2019 (ref. [48]), Remark 1
        return T * math.log(M * T) / (d * M)
    if mode == "mt":
        return 0.0
    raise ValueError(f"communication = {mode!r}; accepted: {', '.join(MODES)}")


def communication_bound(D: float, *, horizon: int, dimension: int, rho_min: float, rho_max: float,
                        L: float = 1.0) -> float:
    """Prop. 1: n <= 2 sqrt((d T / D) log(rho_max/rho_min + T L^2/(d rho_min))) + 4 (inf when D = 0)."""
    if D <= 0:
        return math.inf
    T, d = horizon, dimension
    return 2.0 * math.sqrt(d * T / D * math.log(rho_max / rho_min + T * L**2 / (d * rho_min))) + 4.0


def sync_trigger(logdet_w: np.ndarray, logdet_s: np.ndarray, dt: np.ndarray, D: float) -> np.ndarray:
    """Alg. 1 line 12: log det(V + x x^T + M(rho_max - rho_min) I) - log det S > D / dt (strict; dt >= 1)."""
    dt = np.asarray(dt, dtype=float)
    return np.asarray(logdet_w) - np.asarray(logdet_s) > D / dt


class LinUCBState:
    """OFUL statistics of a batch of learners with V = S + U (Alg. 1 lines 4-11), vectorised.

    Attributes (A = number of learners): ``S`` (A, d, d) and ``s`` (A, d) the synchronised
    statistic, ``U``, ``u`` the local data since the last upload, ``Q`` (A, d+1, d+1) the
    statistic still to privatise, ``v_inv`` and ``logdet_v`` for V = S + U_total, ``w_inv`` and
    ``logdet_w`` for W = V + shift_w I (the trigger's matrix), ``logdet_s``, ``u_tilde`` = s + u_total
    and ``dt`` the trials since the last synchronisation.
    """

    def __init__(self, learners: int, dimension: int, *, s0: float | np.ndarray, shift_w: float | np.ndarray):
        A, d = learners, dimension
        self.d = d
        s0 = np.broadcast_to(np.asarray(s0, dtype=float), (A,)).copy()
        self.shift = np.broadcast_to(np.asarray(shift_w, dtype=float), (A,)).copy()
        self.shift_w = bool(np.any(self.shift))
        eye = np.eye(d)
        self.S = s0[:, None, None] * eye
        self.s = np.zeros((A, d))
        self.U = np.zeros((A, d, d))
        self.u = np.zeros((A, d))
        self.Q = np.zeros((A, d + 1, d + 1))
        self.u_tilde = np.zeros((A, d))
        self.v_inv = eye / s0[:, None, None]
        self.logdet_s = d * np.log(s0)
        self.logdet_v = self.logdet_s.copy()
        self.w_inv = eye / (s0 + self.shift)[:, None, None] if self.shift_w else self.v_inv
        self.logdet_w = d * np.log(s0 + self.shift)
        self.dt = np.zeros(A, dtype=np.int64)

    def choose(self, contexts: np.ndarray, beta: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Alg. 1 lines 6-8: argmax over the K contexts (rows x K x d) of <x, theta_hat> + beta ||x||_{V^-1}."""
        sel = slice(None) if rows is None else rows
        v_inv = self.v_inv[sel]
        theta = np.matmul(v_inv, self.u_tilde[sel][:, :, None])  # (A, d, 1)
        mean = np.matmul(contexts, theta)[:, :, 0]
        projected = np.matmul(contexts, v_inv)  # V^-1 is symmetric: x^T V^-1 = (V^-1 x)^T
        width = np.sqrt(np.maximum(np.einsum("akd,akd->ak", projected, contexts), 0.0))
        return np.argmax(mean + np.asarray(beta)[:, None] * width, axis=1)

    def update(self, x: np.ndarray, y: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Alg. 1 lines 10-11 with Sherman-Morrison for V^-1 (and W^-1) and the determinant lemma."""
        sel = slice(None) if rows is None else rows
        self.U[sel] += x[:, :, None] * x[:, None, :]
        self.u[sel] += x * y[:, None]
        self.u_tilde[sel] += x * y[:, None]
        z = np.concatenate([x, y[:, None]], axis=1)
        self.Q[sel] += z[:, :, None] * z[:, None, :]
        self.v_inv[sel], self.logdet_v[sel] = _rank_one(self.v_inv[sel], self.logdet_v[sel], x)
        if self.shift_w:
            self.w_inv[sel], self.logdet_w[sel] = _rank_one(self.w_inv[sel], self.logdet_w[sel], x)
        else:
            self.logdet_w[sel] = self.logdet_v[sel]

    def take_statistic(self, rows: np.ndarray) -> np.ndarray:
        """Q of ``rows`` for the privatizer; resets Q and the local (U, u) since the upload."""
        q = self.Q[rows].copy()
        self.Q[rows] = 0.0
        self.U[rows] = 0.0
        self.u[rows] = 0.0
        return q

    def synchronise(self, rows: np.ndarray, S: np.ndarray, s: np.ndarray) -> None:
        """Alg. 1 line 20: S_i <- S, s_i <- s; V = S + U (data since the upload), dt <- 0."""
        self.S[rows] = S
        self.s[rows] = s
        V = S + self.U[rows]
        self.v_inv[rows] = np.linalg.inv(V)
        self.logdet_v[rows] = np.linalg.slogdet(V)[1]
        self.logdet_s[rows] = np.linalg.slogdet(S)[1]
        self.u_tilde[rows] = s + self.u[rows]
        if self.shift_w:
            W = V + self.shift[rows, None, None] * np.eye(self.d)
            self.w_inv[rows] = np.linalg.inv(W)
            self.logdet_w[rows] = np.linalg.slogdet(W)[1]
        else:
            self.logdet_w[rows] = self.logdet_v[rows]
        self.dt[rows] = 0


def _rank_one(inv: np.ndarray, logdet: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sherman-Morrison: (A + x x^T)^-1 = A^-1 - A^-1 x x^T A^-1 / (1 + x^T A^-1 x); log det += log1p(x^T A^-1 x)."""
    ax = np.einsum("aij,aj->ai", inv, x)
    q = np.einsum("ai,ai->a", x, ax)
    inv = inv - ax[:, :, None] * ax[:, None, :] / (1.0 + q)[:, None, None]
    return inv, logdet + np.log1p(q)


# ---------------------------------------------------------------------- shared parameters
FIELDS = {
    "epsilon": P.real(1.0, low=0.0, low_open=True, allow_inf=True, doc="privacy budget epsilon (inf = non-private)"),
    "delta": P.real(0.1, low=0.0, high=1.0, low_open=True, high_open=True, doc="privacy delta (Sec. 4.4: 0.1)"),
    "alpha": P.real(0.1, low=0.0, high=1.0, low_open=True, high_open=True,
                    doc="failure probability of the confidence set (Defs. 2-3)"),
    "L": P.real(1.0, low=0.0, low_open=True, doc="bound on ||x|| (Sec. 4.4: L = 1)"),
    "S": P.real(1.0, low=0.0, low_open=True, doc="bound on ||theta|| (Sec. 4.4: S = 1)"),
    "sigma": P.real(0.5, low=0.0, doc="sub-Gaussian constant of the reward noise (Bernoulli: 1/2)"),
    "lam": P.real(1.0, low=0.0, low_open=True, doc="ridge rho_min = rho_max when epsilon = inf"),
    "beta_scale": P.real(1.0, low=0.0, doc="multiplies beta of Prop. 2 (1 = theory; scenarios document their value)"),
    "communication": P.choice(MODES, "mlogt", doc="Experiment 2 mode: m1.5, mlogt or mt (sets D)"),
    "threshold": P.either(P.choice(("auto",)), P.real(low=0.0), default="auto",
                          doc="explicit synchronisation threshold D >= 0 (overrides communication)"),
}


def trials_of(sim: Any) -> int:
    """T: number of clock ticks before the horizon."""
    return max(1, math.ceil(sim.horizon / sim.clock_period))


def calibration_for(params: Any, *, dimension: int, agents: int, releases: int) -> FedUCBCalibration:
    return FedUCBCalibration(epsilon=params["epsilon"], delta=params["delta"], alpha=params["alpha"],
                             dimension=dimension, agents=agents, releases=releases, L=params["L"], S=params["S"],
                             sigma=params["sigma"], lam=params["lam"])


# ---------------------------------------------------------------------- engine wiring
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
