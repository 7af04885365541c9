"""Laplace and Gaussian mechanisms as objects (validated parameters, stated variance).

:func:`laplace_noise` is the one place a Laplace variate is drawn in the bundled protocols:
:class:`LaplaceMechanism`, the binary-tree counter and the interval mechanism all call it (a
test searches the sources).
"""

from __future__ import annotations

import math

import numpy as np


def _positive(name: str, value: float, *, allow_inf: bool = False) -> float:
    value = float(value)
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        accepted = "a number > 0" + (" or inf" if allow_inf else "")
        raise ValueError(f"{name} = {value!r}; accepted: {accepted}")
    return value


def laplace_noise(rng: np.random.Generator, scale: float | np.ndarray,
                  size: int | tuple[int, ...] | None = None) -> float | np.ndarray:
    """Laplace(0, b) draws with b = ``scale`` (a number, or an array broadcast against ``size``).

    One uniform of ``rng`` per draw (numpy's inversion method), so a caller's stream advances by
    exactly the number of draws.
    """
    return rng.laplace(0.0, scale, size)


class LaplaceMechanism:
    """Adds Laplace(0, b) noise with b = sensitivity / epsilon (epsilon-DP for that sensitivity).

    ``epsilon = inf`` means no privacy: the mechanism returns its input unchanged and
    draws nothing from ``rng``.
    """

    def __init__(self, *, epsilon: float, sensitivity: float = 1.0):
        self.epsilon = _positive("epsilon", epsilon, allow_inf=True)
        self.sensitivity = _positive("sensitivity", sensitivity)

    @property
    def scale(self) -> float:
        """b = sensitivity / epsilon (0 when epsilon is infinite)."""
        return 0.0 if math.isinf(self.epsilon) else self.sensitivity / self.epsilon

    @property
    def variance(self) -> float:
        """2 b^2."""
        return 2.0 * self.scale**2

    def randomise(self, value: float | np.ndarray, rng: np.random.Generator) -> float | np.ndarray:
        if self.scale == 0.0:
            return value
        return value + laplace_noise(rng, self.scale, np.shape(value) or None)


class GaussianMechanism:
    """Adds N(0, sigma^2) noise with an explicitly given ``sigma`` (calibration lives with the caller)."""

    def __init__(self, *, sigma: float):
        self.sigma = float(sigma)
        if math.isnan(self.sigma) or self.sigma < 0:
            raise ValueError(f"sigma = {sigma!r}; accepted: a number >= 0")

    @property
    def variance(self) -> float:
        return self.sigma**2

    def randomise(self, value: float | np.ndarray, rng: np.random.Generator) -> float | np.ndarray:
        if self.sigma == 0.0:
            return value
        return value + rng.normal(0.0, self.sigma, np.shape(value) or None)
