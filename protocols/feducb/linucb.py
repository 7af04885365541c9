"""The learning state and pure rules of FedUCB (Dubey & Pentland 2020, Alg. 1): per-agent OFUL
statistics with rank-one updates, the synchronisation threshold D of each communication mode,
the log-det trigger (line 12), Prop. 1's communication bound and the protocols' shared keys.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netsim.comm import TIMER_FIELDS
from netsim.comm import params as P
from protocols.privacy.gaussian_tree import FedUCBCalibration

MODES = ("mlogt", "m1.5", "mt")


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
    logdet_w, logdet_s = np.asarray(logdet_w), np.asarray(logdet_s)
    if np.isfinite(logdet_s).all():
        return logdet_w - logdet_s > D / dt
    with np.errstate(invalid="ignore"):  # -inf - -inf: a statistic a lie made singular (no trigger then)
        return logdet_w - logdet_s > D / dt


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
        self.s0 = s0
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

    def reset(self, rows: np.ndarray) -> None:
        """``rows`` start afresh as at Alg. 1 line 1 (S = s0 I, no data, dt = 0): a learner that lost its state."""
        fresh = LinUCBState(len(rows), self.d, s0=self.s0[rows], shift_w=self.shift[rows])
        for name in ("S", "s", "U", "u", "Q", "u_tilde", "v_inv", "logdet_s", "logdet_v", "logdet_w", "dt"):
            getattr(self, name)[rows] = getattr(fresh, name)
        if self.shift_w:
            self.w_inv[rows] = fresh.w_inv

    def choose(self, contexts: np.ndarray, beta: np.ndarray, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Alg. 1 lines 6-8: argmax over the K contexts (rows x K x d) of <x, theta_hat> + beta ||x||_{V^-1}.

        ``rows``: the learners (an index array or a slice; ``None``: all).
        """
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
        self.v_inv[rows] = _inverse(V)
        self.logdet_v[rows] = np.linalg.slogdet(V)[1]
        self.logdet_s[rows] = np.linalg.slogdet(S)[1]
        self.u_tilde[rows] = s + self.u[rows]
        if self.shift_w:
            W = V + self.shift[rows, None, None] * np.eye(self.d)
            self.w_inv[rows] = _inverse(W)
            self.logdet_w[rows] = np.linalg.slogdet(W)[1]
        else:
            self.logdet_w[rows] = self.logdet_v[rows]
        self.dt[rows] = 0


def _inverse(V: np.ndarray) -> np.ndarray:
    """Batched V^-1; the pseudo-inverse where a lie about the statistics made V singular (no honest V is)."""
    try:
        return np.linalg.inv(V)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(V, hermitian=True)


def _rank_one(inv: np.ndarray, logdet: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sherman-Morrison: (A + x x^T)^-1 = A^-1 - A^-1 x x^T A^-1 / (1 + x^T A^-1 x); log det += log1p(x^T A^-1 x)."""
    ax = np.einsum("aij,aj->ai", inv, x)
    q = np.einsum("ai,ai->a", x, ax)
    inv = inv - ax[:, :, None] * ax[:, None, :] / (1.0 + q)[:, None, None]
    if q.min(initial=0.0) > -1.0:
        return inv, logdet + np.log1p(q)
    with np.errstate(invalid="ignore"):  # q <= -1 only for a V that a lie made indefinite: log det is then nan
        return inv, logdet + np.log1p(q)


FIELDS = {
    "epsilon": P.real(1.0, low=0.0, low_open=True, allow_inf=True, doc="privacy budget epsilon (inf = non-private)",
                      label="privacy level ε", unit=""),
    "delta": P.real(0.1, low=0.0, high=1.0, low_open=True, high_open=True, doc="privacy delta (Sec. 4.4: 0.1)",
                    label="privacy δ", unit=""),
    "alpha": P.real(0.1, low=0.0, high=1.0, low_open=True, high_open=True,
                    doc="failure probability of the confidence set (Defs. 2-3)",
                    label="confidence failure probability α", unit=""),
    "L": P.real(1.0, low=0.0, low_open=True, doc="bound on ||x|| (Sec. 4.4: L = 1)",
                label="context norm bound L", unit=""),
    "S": P.real(1.0, low=0.0, low_open=True, doc="bound on ||theta|| (Sec. 4.4: S = 1)",
                label="parameter norm bound S", unit=""),
    "sigma": P.real(0.5, low=0.0, doc="sub-Gaussian constant of the reward noise (Bernoulli: 1/2)",
                    label="noise constant σ", unit=""),
    "lam": P.real(1.0, low=0.0, low_open=True, doc="ridge rho_min = rho_max when epsilon = inf",
                  label="ridge λ", unit=""),
    "beta_scale": P.real(1.0, low=0.0, doc="multiplies beta of Prop. 2 (1 = theory; scenarios document their value)",
                         label="β scale", unit=""),
    "communication": P.choice(MODES, "mlogt", doc="Experiment 2 mode: m1.5, mlogt or mt (sets D)",
                              label="communication mode"),
    "threshold": P.either(P.choice(("auto",)), P.real(low=0.0, high=math.inf), default="auto",
                          doc="explicit synchronisation threshold D >= 0 (overrides communication)",
                          label="synchronisation threshold D", unit=""),
    **TIMER_FIELDS,
    "give_up": P.integer(4, low=1, doc="requests of one synchronisation exchange without an answer after which the "
                                       "silent agents are suspected down and not waited for (feducb: calls of a round; "
                                       "feducb-p2p: requests of an estimator)",
                         label="requests before suspecting an agent", unit=""),
}


def statistics_bytes(scenario: Any, *, learners: float, slots: float) -> float:
    """Bytes of the (d+1) x (d+1) statistics of ``learners`` OFUL learners: the arrays of :class:`LinUCBState`
    and the temporaries of an update (about 8), and the tree sums of the privatiser (log2 T of them)."""
    d = scenario.bandit["dimension"] + 1
    return 8.0 * d * d * learners * (8 + math.log2(slots + 2))


def trials_of(sim: Any) -> int:
    """T: number of clock ticks before the horizon."""
    return max(1, math.ceil(sim.horizon / sim.clock_period))


def calibration_for(params: Any, *, dimension: int, agents: int, releases: int) -> FedUCBCalibration:
    return FedUCBCalibration(epsilon=params["epsilon"], delta=params["delta"], alpha=params["alpha"],
                             dimension=dimension, agents=agents, releases=releases, L=params["L"], S=params["S"],
                             sigma=params["sigma"], lam=params["lam"])


#: trials.csv columns of both FedUCB protocols (feducb-p2p adds its own)
COLUMNS = {
    "threshold_D": P.column("synchronisation threshold D", doc="the log-det threshold D in force"),
    "sync_requests": P.column("synchronisations asked", doc="synchronisation requests sent"),
    "tree_depth": P.column("tree depth", doc="depth of the binary-tree counter"),
    "rho_min": P.column("ρ_min", doc="smallest regulariser of the privatized Gram matrix"),
    "rho_max": P.column("ρ_max", doc="largest regulariser of the privatized Gram matrix"),
    "kappa": P.column("κ", doc="the noise bound κ of the calibration"),
    "epsilon_spent": P.column("privacy loss spent ε", doc="the ε the released statistics spent"),
    "comm_bound_prop1": P.column("communication bound (Prop. 1)", doc="the paper's bound on the synchronisations"),
}
