"""Link delays drawn in blocks: :class:`Delays`, the endless delays of one law (for the network).

A network keeps one :class:`Delays` per delay law, all on the ``delays`` stream; a block of :data:`BLOCK`
delays is one numpy call, and taking delays one by one or several at once gives the same draws.
"""

from __future__ import annotations

import numpy as np

from netsim.engine.distributions import Distribution

BLOCK = 4096  # delays drawn at once per law


class Delays:
    """Endless delays of one law, drawn :data:`BLOCK` at a time (one numpy call per block).

    The delays not taken yet are ``array[at:]``; a block is drawn only when a delay past the
    previous one is asked for, so the draws from the ``delays`` stream are the same whether delays
    are taken one by one or several at once. ``block`` is the same block as a list of floats, made
    when a delay of the block is first taken one by one (array users never pay for it); the
    network's plain send path reads ``block`` and ``at`` itself when a send's delays are all in the
    listed block: it saves a call per send.
    """

    __slots__ = ("law", "rng", "block", "array", "at", "low")

    def __init__(self, law: Distribution, rng: np.random.Generator):
        self.law, self.rng = law, rng
        self.block: list[float] = []
        self.array = np.empty(0)  # the same block as an array
        self.at = 0
        self.low = 0.0  # the smallest delay of the block (a lower bound of any taken from it)

    def take(self, count: int) -> list[float]:
        """The next ``count`` delays."""
        start = self.at
        stop = start + count
        block = self._listed()
        if stop <= len(block):
            self.at = stop
            return block[start:stop]
        out = block[start:]
        while True:
            self._draw()
            block = self._listed()
            need = count - len(out)
            if need <= BLOCK:
                self.at = need
                return out + block[:need]
            out += block

    def take_array(self, count: int) -> np.ndarray:
        """The next ``count`` delays as an array (the same draws as :meth:`take`)."""
        start = self.at
        stop = start + count
        if stop <= len(self.array):
            self.at = stop
            return self.array[start:stop]
        parts = [self.array[start:]]
        need = count - len(parts[0])
        while need > BLOCK:
            self._draw()
            parts.append(self.array)
            need -= BLOCK
        self._draw()
        self.at = need
        parts.append(self.array[:need])
        return np.concatenate(parts)

    def _draw(self) -> None:
        self.array = self.law.sample(self.rng, BLOCK)
        self.block = []  # made from the array when a delay is first taken as a float (_listed)
        self.low = float(self.array.min())

    def _listed(self) -> list[float]:
        """The current block as a list (array users, ``take_array``, never pay for it)."""
        if len(self.block) != len(self.array):
            self.block = self.array.tolist()
        return self.block

    def next(self) -> float:
        """The next delay."""
        at = self.at
        if at < len(self.block):
            self.at = at + 1
            return self.block[at]
        return self.take(1)[0]
