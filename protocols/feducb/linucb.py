"""The learning state and pure rules of FedUCB (Dubey & Pentland 2020, Alg. 1): per-agent OFUL
statistics with rank-one updates, the synchronisation threshold D of each communication mode,
the log-det trigger (line 12), Prop. 1's communication bound and the protocols' shared keys.
"""

from __future__ import annotations

import math
from functools import cache
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
    statistic, ``Q`` (A, d+1, d+1) the statistic still to privatise (the local data since the last
    upload; ``U`` and ``u`` are its blocks), ``v_inv`` and ``logdet_v`` for V = S + U_total, ``w_inv``
    and ``logdet_w`` for W = V + shift_w I (the trigger's matrix), ``logdet_s``, ``u_tilde`` = s + u_total
    and ``dt`` the trials since the last synchronisation. V^-1 and W^-1 are stacked in ``inv``
    (2, A, d, d; one matrix when shift_w = 0, then W = V) so that one batched rank-one step updates both.
    """

    def __init__(self, learners: int, dimension: int, *, s0: float | np.ndarray, shift_w: float | np.ndarray):
        A, d = learners, dimension
        self.d = d
        s0 = np.broadcast_to(np.asarray(s0, dtype=float), (A,)).copy()
        self.shift = np.broadcast_to(np.asarray(shift_w, dtype=float), (A,)).copy()
        self.shift_w = bool(np.any(self.shift))
        self.s0 = s0
        self.S = s0[:, None, None] * np.eye(d)
        self.s = np.zeros((A, d))
        self.Q = np.zeros((A, d + 1, d + 1))
        self.u_tilde = np.zeros((A, d))
        self.logdet_s = d * np.log(s0)
        regularisers = (s0, s0 + self.shift) if self.shift_w else (s0,)
        self.inv = np.stack([np.eye(d) / r[:, None, None] for r in regularisers])
        self.logdet = np.stack([d * np.log(r) for r in regularisers])
        self.dt = np.zeros(A, dtype=np.int64)

    # views: V^-1, W^-1 (W = V without shift), their log dets, and the blocks U, u of Q
    v_inv = property(lambda self: self.inv[0])
    w_inv = property(lambda self: self.inv[-1])
    logdet_v = property(lambda self: self.logdet[0])
    logdet_w = property(lambda self: self.logdet[-1])
    U = property(lambda self: self.Q[:, :-1, :-1])
    u = property(lambda self: self.Q[:, :-1, -1])

    @classmethod
    def stack(cls, states: list[LinUCBState]) -> LinUCBState:
        """One state holding the learners of ``states`` one after the other (a lockstep driver steps them with
        one call); each of ``states`` then reads and writes its own rows of it (its arrays become views).
        The states must have the same dimension and both or neither track W (``shift_w``)."""
        first = states[0]
        if any(st.d != first.d or st.shift_w != first.shift_w for st in states):
            raise ValueError("stacked OFUL states need one dimension and one trigger matrix layout")
        group = cls.__new__(cls)
        group.d, group.shift_w = first.d, first.shift_w
        for name in _ROWS:
            setattr(group, name, np.concatenate([getattr(st, name) for st in states]))
        group.inv = np.concatenate([st.inv for st in states], axis=1)
        group.logdet = np.concatenate([st.logdet for st in states], axis=1)
        start = 0
        for st in states:
            rows = slice(start, start + len(st.dt))
            start = rows.stop
            for name in _ROWS:
                setattr(st, name, getattr(group, name)[rows])
            st.inv, st.logdet = group.inv[:, rows], group.logdet[:, rows]
        return group

    def reset(self, rows: np.ndarray) -> None:
        """``rows`` start afresh as at Alg. 1 line 1 (S = s0 I, no data, dt = 0): a learner that lost its state."""
        fresh = LinUCBState(len(rows), self.d, s0=self.s0[rows], shift_w=self.shift[rows])
        for name in ("S", "s", "Q", "u_tilde", "logdet_s", "dt"):
            getattr(self, name)[rows] = getattr(fresh, name)
        self.inv[:, rows] = fresh.inv
        self.logdet[:, rows] = fresh.logdet

    def choose(self, contexts: np.ndarray, beta: np.ndarray, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Alg. 1 lines 6-8: argmax over the K contexts (rows x K x d) of <x, theta_hat> + beta ||x||_{V^-1}.

        ``rows``: the learners (an index array or a slice; ``None``: all). The products run on each
        learner's d x K matrix ``contexts[a].T`` (rows contiguous for the gapped contexts of
        :class:`~netsim.bandits.linear.LinearBandit`): one batched matrix product for V^-1 X, one for
        theta_hat^T X; the widths and the argmax in one compiled pass (:func:`protocols.feducb._kernels.ucb_argmax`,
        the floats of ``sqrt(maximum((V^-1 X * X).sum(axis=1), 0)) * beta + mean``).

        ``contexts`` may be those of C learners when the rows are B x C learners (B stacked trials that observe
        the same contexts, :meth:`stack`): learner b C + a reads those of a, through broadcast products whose
        every matrix product is the one of that learner alone.
        """
        sel = slice(None) if rows is None else rows
        v_inv = self.v_inv[sel]
        xt = contexts.transpose(0, 2, 1)  # (C, d, K)
        theta = np.matmul(v_inv, self.u_tilde[sel][:, :, None])  # (A, d, 1)
        learners, (c, d, k) = len(v_inv), xt.shape
        if learners == c:
            mean = np.matmul(theta.transpose(0, 2, 1), xt)[:, 0, :]
            projected = np.matmul(v_inv, xt)  # V^-1 x for every context
        else:  # B = A / C trials on the same contexts
            mean = np.matmul(theta.reshape(-1, c, 1, d), xt).reshape(learners, k)
            projected = np.matmul(v_inv.reshape(-1, c, d, d), xt).reshape(learners, d, k)
        arms = np.empty(learners, dtype=np.int64)
        xd = np.ascontiguousarray(contexts.transpose(2, 0, 1))  # (d, C, K): the gapped contexts' own array
        _kernels().ucb_argmax(projected, xd, np.asarray(beta, dtype=float), mean, np.empty(mean.shape), arms)
        return arms

    def update(self, x: np.ndarray, y: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Alg. 1 lines 10-11 with Sherman-Morrison for V^-1 (and W^-1) and the determinant lemma."""
        sel = slice(None) if rows is None else rows
        z = np.concatenate([x, y[:, None]], axis=1)
        if rows is None:  # line 11 (Q += z z^T); its blocks are line 10's U and u
            _kernels().add_outer(self.Q, z)
        else:
            q = self.Q[sel]
            _kernels().add_outer(q, z)
            self.Q[sel] = q
        self.u_tilde[sel] += x * y[:, None]
        if rows is None:
            _rank_one(self.inv, self.logdet, x)
        else:
            inv, logdet = np.ascontiguousarray(self.inv[:, sel]), self.logdet[:, sel]
            _rank_one(inv, logdet, x)
            self.inv[:, sel], self.logdet[:, sel] = inv, logdet

    def take_statistic(self, rows: np.ndarray | slice) -> np.ndarray:
        """Q of ``rows`` (an index array or a slice) for the privatizer; resets Q (so the local (U, u) since the
        upload)."""
        q = self.Q[rows].copy()
        self.Q[rows] = 0.0
        return q

    def synchronise(self, rows: np.ndarray, S: np.ndarray, s: np.ndarray) -> None:
        """Alg. 1 line 20: S_i <- S, s_i <- s; V = S + U (data since the upload), dt <- 0."""
        self.S[rows] = S
        self.s[rows] = s
        shift = self.shift[rows]
        same = S.ndim == 2 and not self.Q[rows].any() and (shift == shift[0]).all()
        if same:  # no data since the upload (paper mode) and one shift: V = S and W are the same for every row
            V, shift = S[None], shift[:1]
        else:
            V = S + self.U[rows]
        self.inv[0, rows] = _inverse(V)
        logdet_v = np.linalg.slogdet(V)[1]
        self.logdet[0, rows] = logdet_v
        self.logdet_s[rows] = logdet_v[0] if same else np.linalg.slogdet(S)[1]  # V = S: one factorisation
        self.u_tilde[rows] = s + self.u[rows]
        if self.shift_w:
            W = V + shift[:, None, None] * np.eye(self.d)
            self.inv[1, rows] = _inverse(W)
            self.logdet[1, rows] = np.linalg.slogdet(W)[1]
        self.dt[rows] = 0


_ROWS = ("s0", "shift", "S", "s", "Q", "u_tilde", "logdet_s", "dt")  # LinUCBState's arrays indexed by learner first


@cache
def _kernels() -> Any:
    """The compiled loops (:mod:`protocols.feducb._kernels`), imported on first use (numba's start-up is not
    paid by commands that never step a learner)."""
    import protocols.feducb._kernels

    return protocols.feducb._kernels


def _inverse(V: np.ndarray) -> np.ndarray:
    """Batched V^-1; the pseudo-inverse where a lie about the statistics made V singular (no honest V is)."""
    try:
        return np.linalg.inv(V)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(V, hermitian=True)


def _rank_one(inv: np.ndarray, logdet: np.ndarray, x: np.ndarray) -> None:
    """Sherman-Morrison in place: (A + x x^T)^-1 = A^-1 - A^-1 x x^T A^-1 / (1 + x^T A^-1 x), and the
    determinant lemma: log det += log1p(x^T A^-1 x).

    ``inv`` (..., n, d, d) and ``logdet`` (..., n) for n vectors ``x`` (n, d); leading axes (V and W) share them.
    """
    ax = np.matmul(inv, x[:, :, None])  # (..., n, d, 1)
    q = np.matmul(x[:, None, :], ax)[..., 0, 0]
    shape = inv.shape
    assert inv.flags.c_contiguous  # the flattened view below is inv itself (LinUCBState's stacks are)
    # inv -= ax * (ax^T / (1 + q)), compiled (protocols.feducb._kernels.rank_one: the same floats)
    _kernels().rank_one(inv.reshape(-1, *shape[-3:]), ax.reshape(-1, *shape[-3:-1]), q.reshape(-1, shape[-3]))
    if q.min(initial=0.0) > -1.0:
        logdet += np.log1p(q)
        return
    with np.errstate(invalid="ignore"):  # q <= -1 only for a V that a lie made indefinite: log det is then nan
        logdet += np.log1p(q)


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
