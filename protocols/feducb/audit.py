"""Privacy-audit targets of FedUCB: the PRIVATIZER (Alg. 2) and a synchronisation sequence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from protocols.feducb.linucb import LinUCBState, sync_trigger
from protocols.privacy.audit import AuditTarget, gaussian_epsilon, register
from protocols.privacy.gaussian_tree import FedUCBCalibration, GaussianTreePrivatizer


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


def first_round_epsilon(cal: FedUCBCalibration, delta: float) -> float:
    """The exact (eps, delta) loss of round 1's statistic over ``cal.releases`` tree releases: round 1
    sits in the nodes released at 1, 2, 4, ...; neighbouring (x, y) = (e1, 1) and (-e1, 1) shift one
    entry by 2 in each, against Gaussian noise of standard deviation ``cal.noise_std`` per node."""
    nodes = sum(1 for r in range(1, cal.releases + 1) if r & (r - 1) == 0)
    return gaussian_epsilon(math.sqrt(nodes) * 2.0 / cal.noise_std, delta)


def _privatizer_exact(params: Mapping[str, Any]) -> float:
    return first_round_epsilon(_fed_calibration(params), params["delta"])


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
