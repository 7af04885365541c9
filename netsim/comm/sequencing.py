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

Both keep plain Python dicts (the window one map per sender, from receiver to the pair's state), so the
memory is proportional to the pairs that actually talk (a protocol on 10,000 agents that only hears its
neighbours pays for its edges). :meth:`ReplayWindow.accept_each` (many senders to one receiver) and
:meth:`ReplayWindow.newest_each` (one sender to many receivers) check a group of messages in one call, in
turn, exactly as the single calls would.
"""

from __future__ import annotations

from itertools import repeat

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
        if len(set(senders)) == len(senders):  # distinct senders: one lookup and one store each, without a loop
            out = list(map(numbers.get, senders, repeat(0)))
            numbers.update(zip(senders, map((1).__add__, out)))
            return out
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
    """Per (receiver, sender) memory of the sequence numbers seen (see the module docstring).

    Kept as one map per sender from receiver to the pair's ``[high, mask]`` (updated in place), so that the
    checks of one sender's message to many receivers (:meth:`newest_each`) or of many senders' messages to one
    receiver (:meth:`accept_each`) take one lookup per pair and build no key.
    """

    __slots__ = ("_pairs",)

    def __init__(self) -> None:
        self._pairs: dict[int, dict[int, list[int]]] = {}  # sender -> receiver -> [high, mask]

    def accept(self, receiver: int, sender: int, seq: int) -> bool:
        """True the first time ``seq`` from ``sender`` reaches ``receiver`` (and remember it)."""
        return self.accept_each(receiver, (sender,), (seq,))[0]

    def accept_each(self, receiver: int, senders: list[int], seqs: list[int]) -> list[bool]:
        """:meth:`accept` of ``seqs[j]`` from ``senders[j]`` at ``receiver`` for each j in turn (the messages of
        many senders to one receiver, e.g. the requests of a round)."""
        pairs, out = self._pairs, []
        for sender, seq in zip(senders, seqs, strict=True):
            by = pairs.get(sender)
            if by is None:
                by = pairs[sender] = {}
            state = by.get(receiver)
            if state is None:
                by[receiver] = [seq, 1]
                out.append(True)
                continue
            high = state[0]
            if seq > high:
                shift = seq - high
                state[1] = ((state[1] << shift) | 1) & _FULL if shift < WINDOW else 1
                state[0] = seq
                out.append(True)
                continue
            offset = high - seq
            if offset >= WINDOW or (state[1] >> offset) & 1:
                out.append(False)
                continue
            state[1] |= 1 << offset
            out.append(True)
        return out

    def newest(self, receiver: int, sender: int, seq: int) -> bool:
        """True when ``seq`` is above every number from ``sender`` seen at ``receiver`` (and remember it).

        For state-carrying messages: a reordered older message (or a duplicate) answers False,
        so it never overwrites newer information.
        """
        return bool(self.newest_each((receiver,), sender, seq))

    def newest_each(self, receivers: list[int], sender: int, seq: int) -> list[int]:
        """The ``receivers`` for which :meth:`newest` of ``seq`` from ``sender`` is true, called for each in turn
        (one message to many receivers, e.g. the destinations of a multicast)."""
        by = self._pairs.get(sender)
        if by is None:
            by = self._pairs[sender] = {}
        fresh = []
        for receiver in receivers:
            state = by.get(receiver)
            if state is None:
                by[receiver] = [seq, 1]
            elif seq > state[0]:  # accept's newer-than-seen branch
                shift = seq - state[0]
                state[1] = ((state[1] << shift) | 1) & _FULL if shift < WINDOW else 1
                state[0] = seq
            else:
                continue
            fresh.append(receiver)
        return fresh

    def forget(self, receiver: int) -> None:
        """``receiver`` lost its state (crash with ``state = "lost"``): it remembers no sender."""
        for by in self._pairs.values():
            by.pop(receiver, None)
