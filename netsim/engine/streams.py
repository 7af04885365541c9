"""Named, independent random streams derived from one ``SeedSequence`` per trial.

Every component receives a ``numpy.random.Generator`` it did not create. A stream is
identified by a purpose (``"rewards"``, ``"network"``, ``"privacy"``, ...) and an optional
index (an agent id). The stream for ``(purpose, index)`` depends only on the trial's seed
sequence and that name, so adding a new consumer of randomness never changes the draws of
an existing one.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

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

    def __init__(self, seed_sequence: np.random.SeedSequence, shared: SharedDraws | None = None):
        self.seed_sequence = seed_sequence
        self.shared = shared

    def draw(self, rng: np.random.Generator, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(rng, *args)``, made once for the trials run together that share this call (:class:`SharedDraws`).

        ``fn`` must be a pure function of the generator's state and ``args`` (hashable values, e.g.
        tuples, or arrays), and its callers must not write into what it returns (shared results are
        read-only). A trial run alone calls ``fn`` as it is.
        """
        if self.shared is None:
            return fn(rng, *args)
        return self.shared.draw(rng, fn, args)

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


class SharedDraws:
    """Draws made once for several trials that run together in lockstep (``netsim.engine.sim.run_lockstep``).

    Trials of the same seed (variants of a study that differ in a protocol key, say) start their
    streams in the same state; while they make the same calls, they draw the same numbers. A draw is
    keyed by the function, the generator's state before it and the arguments: the first trial to make
    it computes it and keeps the result and the generator's state after it; another trial that makes
    the same call from the same state gets the same (read-only) result and its generator is moved to
    that state, exactly as if it had drawn itself. A call that differs in anything is drawn anew, so
    sharing never changes a trial's numbers. Only the draws of the latest instant are kept
    (:meth:`forget`), so memory stays one instant's draws per distinct call.
    """

    def __init__(self) -> None:
        self._memo: dict[tuple, tuple[Any, dict]] = {}
        self.hits = 0
        self.misses = 0

    def draw(self, rng: np.random.Generator, fn: Callable[..., Any], args: tuple) -> Any:
        state = rng.bit_generator.state
        key = (fn, _flat(state), *(_frozen(a) for a in args))
        kept = self._memo.get(key)
        if kept is not None:
            self.hits += 1
            result, after = kept
            rng.bit_generator.state = after
            return result
        self.misses += 1
        result = fn(rng, *args)
        _read_only(result)
        self._memo[key] = (result, rng.bit_generator.state)
        return result

    def forget(self) -> None:
        """Drop the kept draws (the trials have moved past the instant they were made at)."""
        self._memo.clear()


def _flat(state: dict) -> tuple:
    """A generator's state (a dict of values and dicts, in the generator's own order) as a hashable tuple."""
    return tuple((k, _flat(v) if isinstance(v, dict) else v) for k, v in state.items())


def _frozen(value: Any) -> Any:
    """An argument as a hashable key: an array by dtype, shape and bytes, any other value as it is."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _read_only(result: Any) -> None:
    for value in result if isinstance(result, tuple) else (result,):
        if isinstance(value, np.ndarray):
            value.flags.writeable = False


def trial_sequence(seed: int, trial: int, point: tuple[int, ...] = ()) -> np.random.SeedSequence:
    """The ``SeedSequence`` of trial ``trial`` of a run seeded with ``seed``.

    ``point`` distinguishes the points of a parameter sweep so that every (point, trial)
    unit has its own, reproducible stream whatever order units run in.
    """
    return np.random.SeedSequence(int(seed), spawn_key=tuple(point) + (int(trial),))


class GroupedDraws:
    """Draws of one law from one generator per group (a trial of a lockstep run), read in blocks.

    ``draw(generator, count)`` returns ``count`` draws of the law (e.g. ``lambda g, k: g.random(k)``);
    it must consume the generator draw by draw, so that the values do not depend on how the draws are
    cut into calls (numpy's ``random``, ``laplace``, ``standard_normal`` do). :meth:`take` then gives each
    group the very values it would get drawing them one call at a time, while a call serves every group.

    Parameters
    ----------
    generators:
        One generator per group (group g draws from ``generators[g]`` only).
    draw:
        ``draw(generator, count) -> array of count values``.
    block:
        Values drawn per group at a time.
    """

    def __init__(self, generators: list[np.random.Generator], draw: Callable[[np.random.Generator, int], np.ndarray],
                 *, block: int = 4096):
        self.generators = list(generators)
        self.draw = draw
        self.block = int(block)
        self._pool = np.empty((len(self.generators), self.block))
        self._at = np.full(len(self.generators), self.block, dtype=np.int64)
        self.taken = np.zeros(len(self.generators), dtype=np.int64)  # values handed out, per group

    def take(self, groups: np.ndarray) -> np.ndarray:
        """One value for each entry of ``groups`` (group ids in non-decreasing order): the j-th entry of
        group g gets g's next value, in entry order."""
        groups = np.asarray(groups, dtype=np.int64)
        counts = np.bincount(groups, minlength=len(self.generators))
        if counts.max(initial=0) > self.block:  # more than a block at once: every group refills a larger block
            self._grow(int(counts.max()))
        for g in np.flatnonzero(self._at + counts > self.block):
            self._refill(int(g), self._pool[g, self._at[g]:].copy())
        rank = np.arange(len(groups)) - (np.cumsum(counts) - counts)[groups]
        values = self._pool[groups, self._at[groups] + rank]
        self._at += counts
        self.taken += counts
        return values

    def take_rows(self, groups: np.ndarray, count: int) -> np.ndarray:
        """``count`` values for each of ``groups`` (distinct group ids, any order): a len(groups) x count array whose
        row j holds the next ``count`` values of group ``groups[j]``, those :meth:`take` would give it."""
        groups = np.asarray(groups, dtype=np.int64)
        if count > self.block:
            self._grow(count)
        for g in groups[self._at[groups] + count > self.block]:
            self._refill(int(g), self._pool[g, self._at[g]:].copy())
        at = self._at[groups]
        if len(groups) and (at == at[0]).all():  # groups that always draw together: one slice of the pool
            values = self._pool[groups, at[0]:at[0] + count]
        else:
            values = self._pool[groups[:, None], at[:, None] + np.arange(count)]
        self._at[groups] += count
        self.taken[groups] += count
        return values

    def _grow(self, block: int) -> None:
        """Blocks of ``block`` values: every group keeps what is left of its block and draws the rest."""
        lefts = [self._pool[g, self._at[g]:].copy() for g in range(len(self.generators))]
        self.block = block
        self._pool = np.empty((len(self.generators), self.block))
        for g, left in enumerate(lefts):
            self._refill(g, left)

    def _refill(self, g: int, left: np.ndarray) -> None:
        """Group g's pool: the values ``left`` of its previous block, then fresh ones."""
        self._pool[g, :len(left)] = left
        self._pool[g, len(left):] = self.draw(self.generators[g], self.block - len(left))
        self._at[g] = 0
