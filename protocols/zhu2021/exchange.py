"""Atomic pairwise averaging over lossy, delayed links for realistic-mode Gossip_UCB / Fed_UCB.

Alg. 1 line 20 averages the two endpoints of the activated link *instantly*:
theta_i, theta_j <- (theta_i + theta_j) / 2. On a network with delays, applying on arrival the
correction (theta_j(s) - theta_i(s)) / 2 computed from values sent at activation time s uses a
stale difference; when several exchanges of one node overlap, their corrections add up and
overshoot, and theta diverges (measured on K3 with a constant delay of 3 ticks: max|theta| 9e79).
A reply lost after its sender applied its half breaks sum_i theta_i = sum_i X~_i for good.

This module is the push-pull averaging of Boyd, Ghosh, Prabhakar & Shah ("Randomized gossip
algorithms", IEEE Trans. Inf. Theory 52(6), 2006) made atomic on asynchronous, lossy links. The
responder applies its half and sends the initiator's half, the *transfer*, in a reply that is
delivered reliably and applied exactly once, so no half is ever lost or doubled:

1. Link (u, v) fired at time s and u is the end that opens (the protocol picks either end with
   probability 1/2). Unless u has an exchange open, it opens exchange number k (per-sender
   numbers with incarnations, :class:`netsim.comm.sequencing.Sequencer`) and sends the request
   ``zhu2021-theta`` = (k, a), a = theta_u(s), on a :class:`netsim.comm.transport.Transport` whose
   answer is its acknowledgement: it is retransmitted on the RFC 6298 timer of the pair (u, v)
   until the reply arrives, at most ``ATTEMPTS`` times in all; then u gives up and closes k.
   Copies are handed to v once, whatever loss, duplication and reordering did.
2. v receives (k, a) at r. A request numbered at or below the newest v took from u is stale (u
   gave up on it and has moved on) and is ignored. Otherwise, with b = theta_v(r), v applies its
   half, theta_v <- theta_v + (a - b) / 2 = (a + b) / 2, and replies (k, d) with the transfer
   d = -(a - b) / 2 (``zhu2021-theta-reply``) on a second transport that retransmits it until u
   acknowledges it (no give-up) and hands it over once. A copy of a request v already answered
   says that the reply was lost: v sends it again at once (:meth:`Transport.resend`, RFC 5681's
   fast retransmit) instead of waiting for its own timer.
3. u applies every transfer it receives, theta_u <- theta_u + d, whenever it arrives, and closes
   k if k is still open (the reply acknowledges the request). A reply to an exchange u gave up on
   (*late*) is applied all the same: v has moved, so u must too. A reply owed to an earlier
   incarnation of u (u lost its state since) is ignored: that state is gone.
4. While its own exchange k is open, a node answers (step 2) at most one request; further ones
   are refused, reply (k', None), which moves nothing and closes the asker's exchange. One answer
   keeps every value a convex combination: if v, open with a = theta_v sent to w, answers u's a_u,
   then gets w's transfer (b_w - a) / 2, it ends at (a_u + b_w) / 2 (plus its own increments)
   while u holds (a_u + a) / 2 and w (a + b_w) / 2, a doubly stochastic mixing of the three
   values; a second answer would give a its weight -1/4. (Refusing every request while open, as
   the previous version did, wasted about a third of the exchanges on K3 with unit-mean delays.)

Timers (:class:`netsim.comm.transport.RetransmitTimer`, one for both transports, keyed by the ordered
pair: the round trip u -> v -> u whichever message measures it): the protocol keys
``rto_initial``, ``rto_min`` and ``rto_max`` (:data:`netsim.comm.transport.TIMER_FIELDS`, in clock
periods); attempt a of a request waits RTO 2^a (at most ``rto_max``), and every new exchange
starts again from the RTO (the backoff serves only the exchange that earned it). Samples come
from acknowledged replies that were sent once (Karn's rule); a reply is not used as a sample of
its request's round trip, because it may itself have been retransmitted and the sample would
then include v's timeout.

Invariants (``tests/test_zhu2021_realistic.py``):

* **Mass.** Let T(t) be the sum of the transfers sent and not yet applied (in flight, or waiting in
  the reply transport's queue) at time t. After every event (tick, delivery, timeout),
  sum_i theta_i + T = sum_i X~_i (Eq. (9) with the mass in flight counted), under any delay law,
  loss, duplication and reordering, up to rounding (each half is applied as computed: the two
  halves of an exchange are exact negatives). :meth:`PairwiseExchange.in_transit` gives T; it is
  the simulator's book of what the network carries, not something any node knows. Only a node
  losing its state (crash with ``state = "lost"``) removes mass: its theta is reset, and
  transfers owed to its earlier life are dropped. With no reply in flight, T = 0 and this is
  Eq. (9) itself.
* **Line 20.** With zero delay and no loss steps 1-3 happen at the instant s and give both
  endpoints (a + b) / 2 (up to the last bit: a + (b - a) / 2 and b + (a - b) / 2): Alg. 1
  line 20 applied at s.
* **Range.** An exchange closed by its reply, with at most one answer given while open (step 4),
  applies a convex combination of existing values, so it cannot leave their range; only a late
  reply applies a stale difference. Tests check max_i |theta_i(t)| <= max_i |theta_i(0)|
  + 2 sum_{tau <= t} max_i |X~_i(tau) - X~_i(tau - 1)|.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from netsim.comm import INCARNATION, Lie, Message, RetransmitTimer, Sequencer, Transport, rewriting

REQUEST = "zhu2021-theta"
REPLY = "zhu2021-theta-reply"
ATTEMPTS = 4        # transmissions of a request before its exchange is given up
#: what :attr:`PairwiseExchange.counts` counts (``trials.csv`` columns ``exchanges_<name>``)
EXCHANGE_COUNTS = ("started", "completed", "refused", "retransmitted", "abandoned", "late", "ignored")


def _lie_about_statistics(payload: tuple[int, Any], lie: Lie) -> tuple[int, Any]:
    """A request carries theta_u, a reply the transfer d (or None, a refusal): both are statistics."""
    number, values = payload
    return payload if values is None else (number, lie(values))


class PairwiseExchange:
    """The exchange above for ``sim.num_agents`` nodes whose values are rows of width ``width``.

    Parameters
    ----------
    sim:
        The running simulation.
    width:
        Length of a node's value (the number of arms).
    value:
        ``value(i)``: node i's current row (read only).
    move:
        ``move(i, by)``: add ``by`` to node i's row.
    timer:
        The RFC 6298 timer of both transports (the protocol keys ``rto_initial``, ``rto_min``,
        ``rto_max``: :func:`netsim.comm.transport.timer_from`).
    up:
        ``sim.faults.up`` when nodes may crash (a crashed node retransmits nothing), else ``None``.
    """

    def __init__(self, sim: Any, *, width: int, value: Callable[[int], np.ndarray],
                 move: Callable[[int, np.ndarray], None], timer: RetransmitTimer,
                 up: np.ndarray | None = None) -> None:
        n = sim.num_agents
        self.sim, self.width, self.value, self.move = sim, width, value, move
        self.open = np.full(n, -1, dtype=np.int64)     # number of the exchange a node has open (-1: none)
        self.answered = np.zeros(n, dtype=bool)         # it answered a request while that exchange was open
        self.request_seq = np.zeros(n, dtype=np.int64)  # its request's transport number
        self.peer = np.zeros(n, dtype=np.int64)
        self.incarnation = np.zeros(n, dtype=np.int64)
        self.newest: dict[tuple[int, int], int] = {}   # (v, u) -> newest request number v took from u
        self.transit: dict[tuple[int, int], np.ndarray] = {}   # (u, k) -> transfer owed to u (book only)
        self.numbers = Sequencer()
        self.counts = dict.fromkeys(EXCHANGE_COUNTS, 0)
        self.timer = timer
        self.requests = Transport(sim, REQUEST, self._on_requests, timer=self.timer, attempts=ATTEMPTS,
                                  on_give_up=self._given_up, up=up, acknowledge=False,
                                  on_duplicate=self._asked_again)
        self.replies = Transport(sim, REPLY, self._on_replies, timer=self.timer, up=up)

    def corruptible(self) -> None:
        """Let an adversary rewrite the statistics of requests (theta) and replies (transfers)."""
        corrupt = rewriting(_lie_about_statistics)
        self.requests.corruptible(corrupt)
        self.replies.corruptible(corrupt)

    # ------------------------------------------------------------------ initiator
    def begin(self, u: int, v: int) -> None:
        """Link (u, v) fired: u opens an exchange with v unless it has one open."""
        if self.open[u] >= 0:
            return
        number = self.numbers.next(u)
        self.open[u], self.peer[u] = number, v
        self.counts["started"] += 1
        self.request_seq[u] = self.requests.send(u, v, (number, self.value(u).copy()), size=self.width)

    def _given_up(self, u: int, v: int, payload: tuple[int, np.ndarray]) -> None:
        if self.open[u] == payload[0]:
            self.open[u], self.answered[u] = -1, False
            self.counts["abandoned"] += 1

    def _on_replies(self, messages: list[Message]) -> None:
        for msg in messages:
            u, v = msg.dst, msg.src
            number, transfer = msg.payload
            if number // INCARNATION < self.incarnation[u]:
                self.counts["ignored"] += 1       # owed to u's earlier life, which is gone
                continue
            current = self.open[u] == number
            if transfer is None:
                self.counts["refused"] += 1
            else:
                self.move(u, transfer)
                self.transit.pop((u, number), None)
                self.counts["completed"] += 1
                self.counts["late"] += not current
            if current:
                self.open[u], self.answered[u] = -1, False
                self.requests.answered(u, v, int(self.request_seq[u]), sample=False)

    # ------------------------------------------------------------------ responder
    def _on_requests(self, messages: list[Message]) -> None:
        for msg in messages:
            v, u = msg.dst, msg.src
            number, a = msg.payload
            if number <= self.newest.get((v, u), -1):
                self.counts["ignored"] += 1       # u gave up on it and has moved on
                continue
            self.newest[v, u] = number
            if self.open[v] >= 0:
                if self.answered[v]:
                    self.replies.send(v, u, (number, None), size=0)
                    continue
                self.answered[v] = True
            half = 0.5 * (a - self.value(v))
            self.move(v, half)
            transfer = -half
            self.transit[u, number] = transfer
            self.replies.send(v, u, (number, transfer), size=self.width)

    def _asked_again(self, msg: Message) -> None:
        """A copy of a request v already took: its reply was lost, or is late; send it again now."""
        v, u = msg.dst, msg.src
        if msg.payload[0] == self.newest.get((v, u)):
            self.replies.resend(v, u)

    # ------------------------------------------------------------------ books
    def in_transit(self) -> np.ndarray:
        """T: the sum of the transfers sent and not yet applied (the mass in flight, per arm)."""
        total = np.zeros(self.width)
        for transfer in self.transit.values():
            total += transfer
        return total

    def results(self) -> dict[str, int]:
        """The counts, with the retransmissions of both transports."""
        retransmitted = self.requests.counts["retransmitted"] + self.replies.counts["retransmitted"]
        return {**self.counts, "retransmitted": retransmitted}

    def forget(self, node: int) -> None:
        """``node`` lost its state: nothing open, a new incarnation, nothing remembered, a fresh RTO."""
        self.open[node], self.answered[node] = -1, False
        self.numbers.restart(node)
        self.incarnation[node] += 1
        for key in [k for k in self.newest if k[0] == node]:
            del self.newest[key]
        for key in [k for k in self.transit if k[0] == node]:
            del self.transit[key]
        self.requests.forget(node)
        self.replies.forget(node)
        for peer in self.sim.network.agent_neighbors(node):
            self.timer.forget((node, peer))
