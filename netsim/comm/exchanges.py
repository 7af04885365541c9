"""Requests repeated on RFC 6298 timers until their answer arrives: the answer is the acknowledgement.

For exchanges that :class:`netsim.comm.transport.Transport` does not fit: the requester rebuilds each
repeat (a REQ asks again only for the records still missing; an ADV is settled by a REQ or by the
neighbour's own ADV; a server's recall is answered by the upload, the first request being
implicit), the receiver answers every copy of a request (nothing is filtered), and no
acknowledgement message is sent. The timers are the engine's one implementation
(:class:`~netsim.comm.transport.RetransmitTimer` for the RTO, :class:`~netsim.comm.transport.Timers` for the
deadlines); see :mod:`netsim.comm.transport` for the rules. Used by :mod:`netsim.comm.handshake` and
li2022's uploads; it knows nothing about bandits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from netsim.comm.transport import RetransmitTimer, Timers


class Exchanges:
    """Requests repeated on RFC 6298 timers until their answer arrives (see the module docstring).

    One exchange per ordered pair (requester, peer), open from the first :meth:`transmit` until
    :meth:`answered` with ``done=True`` or :meth:`close`. While it is open the pair has one timer
    (RFC 6298 (5.1)-(5.6)): started by a transmission when it is not running, restarted by an
    answer that leaves the exchange open, and on expiry the backoff grows by one and the owner's
    ``repeat(src, dst)`` is called: it sends the request again (calling :meth:`transmit`, which
    starts the backed-off timer) and returns True, or returns False when nothing is wanted any more
    (the exchange closes). A requester that is down (``up[src]`` false) repeats nothing: its expired
    timer waits one RTO and looks again, without backing off.

    Parameters
    ----------
    sim:
        The running :class:`~netsim.engine.sim.Simulation`.
    timer:
        The :class:`RetransmitTimer` (keys ``(src, dst)``; it may be shared with transports).
    repeat:
        ``repeat(src, dst) -> bool`` (see above).
    up:
        Boolean array over nodes, true while a node runs (``sim.faults.up``); ``None``: always up.
    """

    def __init__(self, sim: Any, timer: RetransmitTimer, repeat: Callable[[int, int], bool], *,
                 up: np.ndarray | None = None):
        self.sim, self.timer, self.repeat, self.up = sim, timer, repeat, up
        self._timers = Timers(sim, self._expired)
        self._sent: dict[tuple[int, int], dict[int, float]] = {}   # open exchange -> {number: time sent}
        self._backoff: dict[tuple[int, int], int] = {}
        self._number = 0
        self.transmissions = 0   #: requests sent (first transmissions and repeats)
        self.repeats = 0         #: requests sent again after an expiry

    def transmit(self, src: int, dst: int) -> int:
        """A request from ``src`` to ``dst`` leaves now: returns the number its answer will echo.

        Opens the pair's exchange if needed and starts its timer if it is not running (5.1).
        """
        pair = (src, dst)
        self._number += 1
        sent = self._sent.get(pair)
        if sent is None:
            sent = self._sent[pair] = {}
        sent[self._number] = self.sim.now
        self.transmissions += 1
        if not self._timers.running(pair):
            self._start(pair)
        return self._number

    def answered(self, src: int, dst: int, number: int | None = None, *, done: bool) -> None:
        """The answer of ``dst`` to ``src``'s transmission ``number`` arrived at ``src`` (``None``: an
        answer naming no transmission).

        A numbered answer to an open exchange measures that transmission's round trip and ends the
        backoff. ``done``: nothing is wanted any more, the exchange closes (5.2); otherwise the
        timer restarts (5.3) when the answer was a measurement.
        """
        pair = (src, dst)
        sent = self._sent.get(pair)
        if sent is None:
            return  # no open exchange: a late or repeated answer
        at = sent.pop(number, None) if number is not None else None
        if at is not None:
            self.timer.sample(pair, self.sim.now - at)
            self._backoff.pop(pair, None)
        if done:
            self.close(src, dst)
        elif at is not None:
            self._start(pair)

    def is_open(self, src: int, dst: int) -> bool:
        """Whether ``src`` waits for an answer of ``dst``."""
        return (src, dst) in self._sent

    def close(self, src: int, dst: int) -> None:
        """End the exchange of the pair (nothing more is repeated)."""
        pair = (src, dst)
        self._sent.pop(pair, None)
        self._backoff.pop(pair, None)
        self._timers.stop(pair)

    def forget(self, nodes: Iterable[int]) -> None:
        """Close every exchange whose requester is in ``nodes``."""
        gone = set(nodes)
        for pair in [p for p in self._sent if p[0] in gone]:
            self.close(*pair)

    def clear(self) -> None:
        """Close every exchange."""
        for pair in list(self._sent):
            self.close(*pair)

    def __len__(self) -> int:
        """Open exchanges."""
        return len(self._sent)

    def _start(self, pair: tuple[int, int]) -> None:
        self._timers.start(pair, self.timer.rto(pair, self._backoff.get(pair, 0)))

    def _expired(self, pair: tuple[int, int]) -> None:
        if pair not in self._sent:
            return
        src, dst = pair
        if self.up is not None and not self.up[src]:
            self._start(pair)  # a crashed requester looks again one RTO later, without backing off
            return
        self._backoff[pair] = self._backoff.get(pair, 0) + 1          # (5.5)
        before = self.transmissions
        if not self.repeat(src, dst):
            self.close(src, dst)
            return
        self.repeats += self.transmissions - before
        if pair in self._sent and not self._timers.running(pair):
            self._start(pair)                                          # (5.6)
