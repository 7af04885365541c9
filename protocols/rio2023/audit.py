"""Privacy-audit target of rio2023: the DP-MASE epoch release (Alg. 2 with appendix Alg. 4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from protocols.privacy.audit import AuditTarget, register
from protocols.privacy.mechanisms import LaplaceMechanism
from protocols.rio2023.rules import dp_local_elimination, dp_radii, epoch_length


def mase_setup(params: Mapping[str, Any]) -> tuple[int, float, float, float]:
    eps, beta, arms = params["epsilon"], params["beta"], params["arms"]
    length = epoch_length(1, arms, eps, beta)
    h, c = dp_radii(1, arms, length, eps, beta)
    return length, h, c, 1.0 / (eps * length)


def _mase(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: 1 when the agent votes against arm 0 (the message of Alg. 2 line 11), else 0."""
    eps, arms = params["epsilon"], params["arms"]
    length, h, c, scale = mase_setup(params)
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
    source="rio2023 Def. 3.6, Prop. 4.1 (DP-MASE is eps-DP for communications)",
    sample=_mase, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"beta": 0.5, "arms": 2, "gap": 3.0}))
