"""Privacy-audit target of li2022: the CDP-MAB message ybar (Alg. 1 lines 8-10).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from protocols.li2022.epochs import EpochSchedule, PrivateMeans
from protocols.privacy.audit import AuditTarget, laplace_loss, register
from protocols.privacy.mechanisms import LaplaceMechanism


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
