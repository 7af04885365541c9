"""Privacy-audit targets of the shared mechanisms (Laplace, binary tree, interval) for ``netsim audit``;
each family registers the targets of its own release paths in its ``audit`` module.

Each target runs the family's own mechanism code on a pair of neighbouring inputs, as the
paper's privacy definition states them, and returns one statistic per trial for
:func:`protocols.privacy.audit.run_audit`. Where the output has several coordinates the
statistic is the privacy-loss (log-likelihood-ratio) random variable of the coordinates that
depend on the differing record, so that threshold events on it are the most powerful ones.
The machinery and the estimator are in :mod:`protocols.privacy.audit`; the method, the
neighbouring inputs and the measured table are in ``docs/privacy-audit.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from protocols.privacy.audit import AuditTarget, laplace_loss, register
from protocols.privacy.interval import IntervalMechanism
from protocols.privacy.mechanisms import LaplaceMechanism
from protocols.privacy.tree import BinaryTreeCounter


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
