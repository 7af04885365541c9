"""Privacy-audit targets: one per privacy mechanism of the bundled families (``netsim audit``).

Each target runs the family's own mechanism code on a pair of neighbouring inputs, as the
paper's privacy definition states them, and returns one statistic per trial for
:func:`protocols.privacy.audit.run_audit`. Where the output has several coordinates the
statistic is the privacy-loss (log-likelihood-ratio) random variable of the coordinates that
depend on the differing record, so that threshold events on it are the most powerful ones.
The machinery and the estimator are in :mod:`protocols.privacy.audit`; the method, the
neighbouring inputs and the measured table are in ``docs/privacy-audit.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import optimize, stats

from netsim.registry import audit_targets
from protocols.feducb import LinUCBState, sync_trigger
from protocols.li2022_rounds import EpochSchedule, PrivateMeans
from protocols.privacy.audit import AuditTarget
from protocols.privacy.gaussian_tree import FedUCBCalibration, GaussianTreePrivatizer
from protocols.privacy.interval import IntervalMechanism
from protocols.privacy.mechanisms import LaplaceMechanism
from protocols.privacy.tree import BinaryTreeCounter
from protocols.rio2023_rules import dp_local_elimination, dp_radii, epoch_length


def register(target: AuditTarget) -> AuditTarget:
    audit_targets.register(target.name)(target)
    return target


def laplace_loss(y: np.ndarray, mean_d: np.ndarray | float, mean_n: np.ndarray | float,
                 scale: np.ndarray | float) -> np.ndarray:
    """Privacy loss log p_D(y) / p_D'(y) of Laplace outputs, summed over the last axis.

    Rounded to 9 decimals: the loss takes its extreme values on whole intervals of y, where
    floating-point rounding would otherwise split ties at random and bias threshold events.
    """
    loss = (np.abs(y - mean_n) - np.abs(y - mean_d)) / scale
    return np.round(loss.sum(axis=-1) if np.ndim(loss) > 1 else loss, 9)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact eps(delta) of a Gaussian mechanism whose privacy loss is N(mu^2/2, mu^2) (Balle & Wang 2018)."""
    def excess(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    if excess(0.0) <= 0:
        return 0.0
    high = 1.0
    while excess(high) > 0:
        high *= 2.0
    return float(optimize.brentq(excess, 0.0, high))


# ====================================================================== Laplace
def _laplace(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    mechanism = LaplaceMechanism(epsilon=params["epsilon"], sensitivity=params["sensitivity"])
    value = params["sensitivity"] if neighbour else 0.0
    return mechanism.randomise(np.full(trials, value), rng)


LAPLACE = register(AuditTarget(
    name="laplace",
    description="Laplace mechanism x + Lap(sensitivity / eps) (protocols/privacy/mechanisms.py)",
    neighbours="a real query with sensitivity s = 1: D gives f = 0, D' gives f = s",
    source="Dwork & Roth 2014, Thm. 3.6: eps-DP",
    sample=_laplace, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"sensitivity": 1.0}, exact=lambda p: p["epsilon"]))


# ====================================================================== binary-tree counter (zhu2021)
def _tree(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    horizon = params["horizon"]
    counter = BinaryTreeCounter(epsilon=params["epsilon"], horizon=horizon, shape=(trials,), rng=rng)
    releases = np.empty((trials, horizon))
    for t in range(1, horizon + 1):
        x = 1.0 if (neighbour and t == 1) else 0.0
        releases[:, t - 1] = counter.release(slice(None), t, np.full(trials, x))
    # x(1) lies in the nodes (j, 1) covering (0, 2^j]; each is release(2^j) - release(0) = release(2^j).
    nodes = releases[:, [2**j - 1 for j in range(counter.levels) if 2**j <= horizon]]
    return laplace_loss(nodes, 0.0, 1.0, counter.scale)


TREE = register(AuditTarget(
    name="binary-tree",
    description="binary-tree continual counter, zhu2021 Alg. 2+3 (protocols/privacy/tree.py), all H releases",
    neighbours="streams x(1..H) in [0,1] differing at one time: D = (0,...,0), D' = (1,0,...,0); H = 15",
    source="zhu2021 Def. 1 (adjacent streams differ at one t), Fed_UCB eps-DP",
    sample=_tree, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"horizon": 15}, exact=lambda p: p["epsilon"]))


# ====================================================================== interval mechanism (dubey2020a)
def _interval(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    mechanism = IntervalMechanism(epsilon=params["epsilon"], v=params["v"])
    counts = mechanism.point(np.arange(1, params["releases"] + 1)).astype(float)
    sums = np.full((trials, len(counts)), 1.0 if neighbour else 0.0)   # the first reward is in every mean
    out = mechanism.release(sums, np.broadcast_to(counts, sums.shape), rng)
    return laplace_loss(out, 0.0, 1.0 / counts, mechanism.scale(counts))


def _interval_claim(params: Mapping[str, Any]) -> tuple[float, float]:
    mechanism = IntervalMechanism(epsilon=params["epsilon"], v=params["v"])
    return float(mechanism.spent(mechanism.point(params["releases"]))), 0.0


INTERVAL = register(AuditTarget(
    name="interval",
    description="interval mechanism (DP-UCB-INT), dubey2020a Alg. 1 (protocols/privacy/interval.py), 3 releases",
    neighbours="one arm's reward history in [0,1] differing in one sample: D = all 0, D' = first reward 1; "
               "the mean is released at counts f, 2f, 3f (f = ceil(1/eps)); claim = IntervalMechanism.spent",
    source="dubey2020a Def. 3.1, Lemma 3.5 (n^(-v/2) per release), basic composition",
    sample=_interval, claim=_interval_claim, epsilon=1.0, epsilon_range=(0.0, 1.0),
    defaults={"v": 1.1, "releases": 3}, exact=lambda p: _interval_claim(p)[0]))


# ====================================================================== CDP-MAB message (li2022)
def _cdp(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    arms, agents = params["arms"], params["agents"]
    schedule = EpochSchedule(arms=arms, horizon=params["horizon"], participants=agents, epsilon=params["epsilon"])
    state = PrivateMeans(trials, arms)              # one row per trial: the audited agent's messages
    active = np.ones(arms, dtype=bool)
    plan = schedule.plan(1, arms, 0)
    # as CDPMAB._end_exploration: Lap(1 / (N eps [S(r) - S(r-1)])) on the per-epoch means (Alg. 1 line 9)
    mechanism = LaplaceMechanism(epsilon=agents * params["epsilon"], sensitivity=1.0 / plan.pulls)
    assert math.isclose(mechanism.scale, plan.noise_scale)
    sums = np.zeros((trials, arms))
    if neighbour:
        sums[:, 0] = 1.0                            # one reward of arm 0 in epoch 1: 0 -> 1
    state.update(sums, active, plan, mechanism.randomise(np.zeros((trials, arms)), rng))
    message = state.private[:, 0]                   # ybar_{i,0}(1), uploaded in round 1
    # later messages ybar(r) mix ybar(1) with fresh noisy means of other rewards: post-processing,
    # so the privacy loss of the whole message sequence is that of ybar(1) alone.
    return laplace_loss(message, 0.0, 1.0 / plan.pulls, plan.noise_scale)


CDP = register(AuditTarget(
    name="cdp-mab",
    description="CDP-MAB message ybar (li2022 Alg. 1 lines 8-10), Laplace 1/(M eps [S(r)-S(r-1)]), M = 5",
    neighbours="one agent's reward streams differing in one reward of one arm (0 vs 1) in epoch 1 "
               "(li2022 proof of Thm. 1); claim M eps",
    source="li2022 Thm. 1/2: CDP-MAB is M eps-DP",
    sample=_cdp, claim=lambda p: (p["agents"] * p["epsilon"], 0.0), epsilon=0.2,
    defaults={"agents": 5, "arms": 2, "horizon": 10_000}, exact=lambda p: p["agents"] * p["epsilon"]))


# ====================================================================== DP-MASE local elimination (rio2023)
def _mase_setup(params: Mapping[str, Any]) -> tuple[int, float, float, float]:
    eps, beta, arms = params["epsilon"], params["beta"], params["arms"]
    length = epoch_length(1, arms, eps, beta)
    h, c = dp_radii(1, arms, length, eps, beta)
    return length, h, c, 1.0 / (eps * length)


def _mase(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: 1 when the agent votes against arm 0 (the message of Alg. 2 line 11), else 0."""
    eps, arms = params["epsilon"], params["arms"]
    length, h, c, scale = _mase_setup(params)
    # empirical sums of epoch 1: arm 0 at mean 1/2; the other arms 2(h + c) - gap * scale above it,
    # so that a vote against arm 0 is a tail event of arm 0's noise.
    base = length // 2
    other = base + math.ceil(length * (2.0 * (h + c) - params["gap"] * scale))
    sums = np.full(arms, float(other))
    sums[0] = base - (1.0 if neighbour else 0.0)    # one reward of arm 0: 1 (D) vs 0 (D')
    mechanism = LaplaceMechanism(epsilon=eps, sensitivity=1.0 / length)   # Alg. 4 line 6
    noisy = mechanism.randomise(np.broadcast_to(sums / length, (trials, arms)), rng)
    active = np.ones(arms, dtype=bool)
    votes = np.fromiter((dp_local_elimination(row, active, h, c)[0] for row in noisy), dtype=float, count=trials)
    return votes


MASE = register(AuditTarget(
    name="dp-mase",
    description="DP-MASE local elimination, rio2023 Alg. 2 + appendix Alg. 4: the vote sent after epoch 1",
    neighbours="reward sets differing in one reward (rio2023 Def. 3.6): one epoch-1 reward of arm 0 is 1 (D) "
               "or 0 (D'); 2 arms, the vote against arm 0 is the audited message",
    source="rio2023 Def. 3.6, Thm. 4.1 (DP-MASE is eps-DP for communications)",
    sample=_mase, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"beta": 0.5, "arms": 2, "gap": 3.0}))


# ====================================================================== FedUCB privatizer (dubey2020)
def _fed_calibration(params: Mapping[str, Any]) -> FedUCBCalibration:
    return FedUCBCalibration(epsilon=params["epsilon"], delta=params["delta"], alpha=0.1, dimension=params["d"],
                             agents=params["agents"], releases=params["releases"])


# z = [x y]: D has x = e1, y = 1 at round 1, D' has x = -e1, y = 1 (both of norm^2 L^2 + 1 = 2,
# orthogonal: z z^T - z' z'^T has the largest Frobenius norm, 2 sqrt 2, all in entry (0, d) and (d, 0)).
def _privatizer(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    cal = _fed_calibration(params)
    d = cal.dimension
    privatizer = GaussianTreePrivatizer(cal, [rng] * trials)   # one stream per trial, draws in sequence
    z = np.zeros(d + 1)
    z[0], z[d] = (-1.0 if neighbour else 1.0), 1.0
    first = np.broadcast_to(np.outer(z, z), (trials, d + 1, d + 1))
    background = np.zeros((trials, d + 1, d + 1))
    statistic = np.zeros(trials)
    for r in range(1, cal.releases + 1):
        out = privatizer.release(first if r == 1 else background)
        if r & (r - 1) == 0:                        # release 2^k = the node (k, 1) holding round 1 alone
            statistic += out[:, 0, d]               # the only upper-triangle entry that differs
    return statistic                                # linear in the privacy loss (Gaussian noise)


def _privatizer_exact(params: Mapping[str, Any]) -> float:
    cal = _fed_calibration(params)
    nodes = sum(1 for r in range(1, cal.releases + 1) if r & (r - 1) == 0)
    mu = math.sqrt(nodes) * 2.0 / cal.noise_std     # shift 2 in an entry of variance sigma_N^2, per node
    return gaussian_epsilon(mu, params["delta"])


PRIVATIZER = register(AuditTarget(
    name="feducb-privatizer",
    description="FedUCB PRIVATIZER (dubey2020 Alg. 2) on a fixed schedule of 4 releases, d = 2",
    neighbours="t-neighbouring sequences (dubey2020 Def. 1): round 1 holds (x, y) = (e1, 1) in D, (-e1, 1) in D'; "
               "other rounds empty; releases 1..4 observed",
    source="dubey2020 Def. 1, Alg. 2, Thm. on privacy: (eps, delta)",
    sample=_privatizer, claim=lambda p: (p["epsilon"], p["delta"]), epsilon=1.0,
    defaults={"delta": 0.1, "d": 2, "agents": 2, "releases": 4}, exact=_privatizer_exact))


def _sync_setup(params: Mapping[str, Any]) -> tuple[FedUCBCalibration, float]:
    """Threshold D with D / t0 strictly between the trigger statistic of D and of D' at round t0."""
    cal = _fed_calibration(params)
    state = _sync_run(cal, 2, np.array([1.0, 0.0]), params["t0"], None)
    low, high = sorted(state.logdet_w - state.logdet_s)
    return cal, params["t0"] * 0.5 * (low + high)


def _sync_run(cal: FedUCBCalibration, learners: int, first_scale: np.ndarray, rounds: int, D: float | None):
    M, d = cal.agents, cal.dimension
    state = LinUCBState(learners, d, s0=M * cal.rho_min, shift_w=M * (cal.rho_max - cal.rho_min))
    state.first_sync = np.zeros(learners, dtype=np.int64)
    for t in range(1, rounds + 1):
        x = np.zeros((learners, d))
        x[:, 0] = first_scale if t == 1 else 1.0    # round 1: e1 (D) or 0 (D'); later rounds: e1
        state.update(x, np.where(x[:, 0] > 0, 1.0, 0.0))
        state.dt += 1
        if D is not None:
            fire = sync_trigger(state.logdet_w, state.logdet_s, state.dt, D) & (state.first_sync == 0)
            state.first_sync[fire] = t
    return state


def _sync(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: the round of the agent's first synchronisation request (0 = none within 2 t0 rounds)."""
    cal, D = _sync_setup(params)
    state = _sync_run(cal, trials, np.full(trials, 0.0 if neighbour else 1.0), 2 * params["t0"], D)
    return state.first_sync.astype(float)


SYNC = register(AuditTarget(
    name="feducb-sync",
    description="FedUCB messages incl. the synchronisation trigger of dubey2020 Alg. 1 line 12 (d = 2, M = 2)",
    neighbours="t-neighbouring sequences: round 1 holds x = e1 (D) or x = 0 (D'), every later round x = e1; "
               "threshold D (protocol key 'threshold') set so that D / t0 lies between the two trigger values",
    source="dubey2020 Def. 1 and Alg. 1 line 12 (trigger on non-private local data)",
    sample=_sync, claim=lambda p: (p["epsilon"], p["delta"]), epsilon=1.0,
    defaults={"delta": 0.1, "d": 2, "agents": 2, "releases": 4, "t0": 10}, exact=lambda p: math.inf))
