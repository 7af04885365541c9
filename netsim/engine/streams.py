"""Named, independent random streams derived from one ``SeedSequence`` per trial.

Every component receives a ``numpy.random.Generator`` it did not create. A stream is
identified by a purpose (``"rewards"``, ``"network"``, ``"privacy"``, ...) and an optional
index (an agent id). The stream for ``(purpose, index)`` depends only on the trial's seed
sequence and that name, so adding a new consumer of randomness never changes the draws of
an existing one.
"""

from __future__ import annotations

import zlib

import numpy as np


def _purpose_key(purpose: str) -> int:
    return zlib.crc32(purpose.encode("utf-8"))


class Streams:
    """Factory of named generators for one trial.

    Parameters
    ----------
    seed_sequence:
        The trial's ``SeedSequence`` (spawned from the run's seed by the runner).

    Examples
    --------
    >>> s = Streams(np.random.SeedSequence(1))
    >>> a = s.for_("rewards", 3).random()
    >>> b = Streams(np.random.SeedSequence(1)).for_("rewards", 3).random()
    >>> a == b
    True
    """

    def __init__(self, seed_sequence: np.random.SeedSequence):
        self.seed_sequence = seed_sequence

    def sequence(self, purpose: str, index: int | None = None) -> np.random.SeedSequence:
        """The child ``SeedSequence`` named by ``purpose`` and ``index``."""
        key = (_purpose_key(purpose),) if index is None else (_purpose_key(purpose), int(index) + 1)
        root = self.seed_sequence
        return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + key)

    def for_(self, purpose: str, index: int | None = None) -> np.random.Generator:
        """A fresh generator for ``purpose`` (and ``index``); same name, same draws."""
        return np.random.Generator(np.random.PCG64(self.sequence(purpose, index)))

    def many(self, purpose: str, count: int) -> list[np.random.Generator]:
        """Generators for indices ``0 .. count-1`` of ``purpose``."""
        return [self.for_(purpose, i) for i in range(count)]


def trial_sequence(seed: int, trial: int, point: tuple[int, ...] = ()) -> np.random.SeedSequence:
    """The ``SeedSequence`` of trial ``trial`` of a run seeded with ``seed``.

    ``point`` distinguishes the points of a parameter sweep so that every (point, trial)
    unit has its own, reproducible stream whatever order units run in.
    """
    return np.random.SeedSequence(int(seed), spawn_key=tuple(point) + (int(trial),))
