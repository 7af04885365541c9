"""Sequence numbers and replay windows: how a receiver tells a duplicate or a stale message from news.

A deployed protocol that runs over a network which may duplicate and reorder messages numbers
what each sender sends and lets each receiver remember what it has seen. This module is that
piece, for any protocol, algorithm-agnostic:

* :class:`Sequencer` (sender side) hands out per-sender numbers 0, 1, 2, ... A sender that
  restarts after losing its state starts a new *incarnation*: its numbers continue above every
  number of the previous incarnation (incarnation ``i`` uses ``i * 2**32 + k``), as a node that
  keeps a boot counter in stable storage would do, so nothing it sends afresh is mistaken for a
  duplicate of its earlier life.
* :class:`ReplayWindow` (receiver side) keeps, per (receiver, sender) pair, the highest number
  seen and a 64-bit mask of which of the 64 numbers below it were seen (the anti-replay window of
  IPsec, RFC 4303 Sec. 3.4.3). :meth:`ReplayWindow.accept` answers "first copy?" and records it;
  :meth:`ReplayWindow.newest` answers "newer than anything applied from this sender?", for state
  messages where an older copy must never overwrite newer information. A number more than 63
  below the highest seen is treated as already seen (stale), exactly as IPsec does.

Both keep plain Python dicts keyed by pair, so the memory is proportional to the pairs that
actually talk (a protocol on 10,000 agents that only hears its neighbours pays for its edges).
"""

from __future__ import annotations

WINDOW = 64
INCARNATION = 1 << 32
_FULL = (1 << WINDOW) - 1  # the window's mask, every bit set


class Sequencer:
    """Per-sender sequence numbers (see the module docstring)."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next: dict[int, int] = {}

    def next(self, sender: int) -> int:
        """The number of ``sender``'s next message (and advance)."""
        value = self._next.get(sender, 0)
        self._next[sender] = value + 1
        return value

    def next_each(self, senders: list[int]) -> list[int]:
        """:meth:`next` of each of ``senders`` in turn (a sender named twice gets two numbers)."""
        numbers = self._next
        out = []
        for sender in senders:
            value = numbers.get(sender, 0)
            numbers[sender] = value + 1
            out.append(value)
        return out

    def restart(self, sender: int) -> None:
        """``sender`` lost its state: its next number starts the next incarnation."""
        value = self._next.get(sender, 0)
        self._next[sender] = (value // INCARNATION + 1) * INCARNATION


class ReplayWindow:
    """Per (receiver, sender) memory of the sequence numbers seen (see the module docstring)."""

    __slots__ = ("_high", "_mask")

    def __init__(self) -> None:
        self._high: dict[tuple[int, int], int] = {}
        self._mask: dict[tuple[int, int], int] = {}

    def accept(self, receiver: int, sender: int, seq: int) -> bool:
        """True the first time ``seq`` from ``sender`` reaches ``receiver`` (and remember it)."""
        key = (receiver, sender)
        high = self._high.get(key)
        if high is None:
            self._high[key], self._mask[key] = seq, 1
            return True
        if seq > high:
            shift = seq - high
            self._mask[key] = ((self._mask[key] << shift) | 1) & _FULL if shift < WINDOW else 1
            self._high[key] = seq
            return True
        offset = high - seq
        if offset >= WINDOW or (self._mask[key] >> offset) & 1:
            return False
        self._mask[key] |= 1 << offset
        return True

    def newest(self, receiver: int, sender: int, seq: int) -> bool:
        """True when ``seq`` is above every number from ``sender`` seen at ``receiver`` (and remember it).

        For state-carrying messages: a reordered older message (or a duplicate) answers False,
        so it never overwrites newer information.
        """
        key = (receiver, sender)
        high = self._high.get(key)
        if high is None:
            self._high[key], self._mask[key] = seq, 1
            return True
        if seq <= high:
            return False
        shift = seq - high  # accept's newer-than-seen branch, inline (one lookup per message)
        self._mask[key] = ((self._mask[key] << shift) | 1) & _FULL if shift < WINDOW else 1
        self._high[key] = seq
        return True

    def newest_each(self, receivers: list[int], sender: int, seq: int) -> list[int]:
        """The ``receivers`` for which :meth:`newest` of ``seq`` from ``sender`` is true, called for each in turn
        (one message to many receivers, e.g. the destinations of a multicast)."""
        highs, masks, fresh = self._high, self._mask, []
        for receiver in receivers:
            key = (receiver, sender)
            high = highs.get(key)
            if high is None:
                highs[key], masks[key] = seq, 1
            elif seq > high:
                shift = seq - high
                masks[key] = ((masks[key] << shift) | 1) & _FULL if shift < WINDOW else 1
                highs[key] = seq
            else:
                continue
            fresh.append(receiver)
        return fresh

    def forget(self, receiver: int) -> None:
        """``receiver`` lost its state (crash with ``state = "lost"``): it remembers no sender."""
        for key in [k for k in self._high if k[0] == receiver]:
            del self._high[key], self._mask[key]
