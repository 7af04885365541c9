"""Linear contextual bandit: each trial an agent sees K context vectors and pulls one.

The expected reward of context x is <x, theta>. Before pulling, a protocol calls
:meth:`LinearBandit.observe` to receive the contexts of the current trial; ``pull_many``
then refers to the row index of the chosen context. Regret per pull is
max_k <x_k, theta> - <x_a, theta> for that agent's current contexts.

Contexts (``contexts = "sphere"``): K i.i.d. vectors uniform on the unit sphere, drawn
from the ``("contexts",)`` stream; theta is uniform in the unit ball (``("means",)`` stream).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import special

from netsim import params as P
from netsim.bandits.base import BanditEnvironment
from netsim.registry import bandits
from netsim.streams import Streams


def unit_ball(rng: np.random.Generator, d: int) -> np.ndarray:
    """A point uniform in the d-dimensional unit ball."""
    direction = rng.normal(size=d)
    return direction / np.linalg.norm(direction) * rng.random() ** (1.0 / d)


@bandits.register("linear")
class LinearBandit(BanditEnvironment):
    """Linear contextual arms with Bernoulli or Gaussian rewards."""

    kind = "linear"
    description = "linear contextual bandit: K contexts per trial, reward <x, theta> + noise"
    fields = {
        "dimension": P.integer(10, low=1, doc="context dimension d"),
        "arms": P.integer(10, low=2, doc="contexts offered per trial K"),
        "contexts": P.choice(("sphere",), "sphere", doc="how the K contexts of a trial are drawn"),
        "noise": P.choice(("bernoulli", "gaussian"), "gaussian", doc="reward law around <x, theta>"),
        "sigma": P.real(0.1, low=0.0, doc="Gaussian noise standard deviation"),
    }

    @classmethod
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        return None

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        self.dimension = options["dimension"]
        self.theta = unit_ball(streams.for_("means"), self.dimension)
        self._context_rng = streams.for_("contexts")
        self.current = np.zeros((num_agents, options["arms"], self.dimension))
        self._values = np.zeros((num_agents, options["arms"]))
        # Placeholder so that num_arms works before the first observation.
        self.local_means = np.zeros((num_agents, options["arms"]))

    def _draw(self, count: int) -> np.ndarray:
        x = self._context_rng.normal(size=(count, self.options["arms"], self.dimension))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    def observe(self, agents: np.ndarray) -> np.ndarray:
        """Draw and return the contexts (len(agents) x K x d) of the next trial of ``agents``."""
        agents = np.asarray(agents, dtype=np.int64)
        x = self._draw(len(agents))
        self.current[agents] = x
        self._values[agents] = x @ self.theta
        return x

    def expected(self, agents: np.ndarray) -> np.ndarray:
        """<x_k, theta> for the current contexts of ``agents``."""
        return self._values[np.asarray(agents, dtype=np.int64)]

    def _pull_gaps(self, agents, arms):
        values = self._values[agents]
        return values.max(axis=1) - values[np.arange(len(agents)), arms]

    def _rewards(self, agents, arms, n, u):
        mean = self._values[agents, arms]
        if self.options["noise"] == "bernoulli":
            return (u < np.clip(mean, 0.0, 1.0)).astype(float)
        return mean + self.options["sigma"] * special.ndtri(u)

    def summary(self) -> dict[str, Any]:
        return {"arms": self.options["arms"], "dimension": self.dimension, "theta": self.theta.round(6).tolist()}
