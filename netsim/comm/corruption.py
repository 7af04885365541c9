"""How a byzantine sender or a corrupting link lies about reward statistics: one rule for every protocol.

The engine decides *who* lies and *when* (``[adversary]``: byzantine agents corrupt at the
source, links in transit; :class:`netsim.engine.messages.Adversary`); the protocol only says *where*
the reward statistics sit in the payload of each message kind it declares in
``Protocol.corruptible``. This module joins the two: :func:`rewriting` turns a protocol's
``rewrite(payload, lie)`` into the engine's :class:`~netsim.engine.messages.Corruptor`, and the
:class:`Lie` it passes is the single implementation of the lie itself:

    each value of a statistic (a sum, a mean, a count, a theta, a vote, an entry of a Gram
    matrix) is, independently with the scenario's probability ``corruption``, replaced by a
    draw of the scenario's distribution Q (``adversary.distribution``).

Draws come from the trial's ``adversary`` stream: for each array the rewrite passes, first one
uniform per value (who is replaced), then one draw of Q per replaced value. A symmetric matrix
(``symmetric=True``: a Gram matrix, whose lower triangle a receiver could otherwise check
against the upper one) is corrupted on its upper triangle and mirrored. A payload without any
replaced value is returned unchanged (the very object), so the engine counts a message
corrupted only when a value changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from netsim.engine.distributions import Distribution


class Lie:
    """The lie applied to the statistics of one payload (one call of the corruptor)."""

    __slots__ = ("rng", "probability", "q", "sender", "relay", "hits")

    def __init__(self, *, rng: np.random.Generator, probability: float, q: Distribution, sender: int, relay: bool):
        self.rng, self.probability, self.q = rng, probability, q
        self.sender, self.relay = sender, relay
        self.hits = 0  #: values replaced so far in this payload

    def __call__(self, values: Any, *, symmetric: bool = False) -> Any:
        """``values`` (a number or an array) with each value replaced by a draw of Q w.p. ``probability``.

        Returns the input itself when nothing is replaced, else a new float array (or float).
        ``symmetric``: ``values`` is a stack of symmetric matrices (last two axes); the upper
        triangle is corrupted and mirrored.
        """
        array = np.asarray(values, dtype=float)
        if symmetric:
            if array.ndim < 2 or array.shape[-1] != array.shape[-2]:
                raise ValueError(f"symmetric lie on an array of shape {array.shape}; accepted: square matrices")
            upper = np.triu(np.ones(array.shape[-2:], dtype=bool))
            hit = np.zeros(array.shape, dtype=bool)
            hit[..., upper] = self.rng.random(array[..., upper].shape) < self.probability
        else:
            hit = self.rng.random(array.shape) < self.probability
        n = int(hit.sum())
        if not n:
            return values
        out = array.copy()
        out[hit] = np.asarray(self.q.sample(self.rng, n), dtype=float)
        if symmetric:
            lower = np.swapaxes(hit, -1, -2) & ~hit
            out[lower] = np.swapaxes(out, -1, -2)[lower]
        self.hits += n
        return out if out.ndim else float(out)


Rewrite = Callable[[Any, Lie], Any]


def rewriting(rewrite: Rewrite) -> Callable[..., tuple[Any, int]]:
    """The engine corruptor of a message kind whose statistics ``rewrite(payload, lie)`` passes through ``lie``.

    ``rewrite`` returns the payload rebuilt from what ``lie`` returned for each statistic (the
    other fields as they were); it must not change the payload it was given.
    """

    def corrupt(payload: Any, *, sender: int, rng: np.random.Generator, probability: float, q: Distribution,
                relay: bool) -> tuple[Any, int]:
        lie = Lie(rng=rng, probability=probability, q=q, sender=sender, relay=relay)
        new = rewrite(payload, lie)
        return (new, lie.hits) if lie.hits else (payload, 0)

    return corrupt
